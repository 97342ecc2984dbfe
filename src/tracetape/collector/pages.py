"""The collector's web pages: plain server-rendered HTML (and a few lines of JS).

* ``/``: the runs, newest first: when, steps, calls, tokens, and findings by severity; a
  filter box, and two check boxes that open the diff of the two runs ticked;
* ``/runs/{id}``: one run's timeline, step by step: each model call and tool call with its
  effect, time, tokens, arguments and output;
* ``/diff?a=&b=``: two runs side by side, aligned call by call, the first divergence marked,
  and the calls behind each finding (repeats, drift...) highlighted by severity, with the
  findings listed above.

Every value is HTML-escaped, and ``CSP`` lets only the pages' own style sheet and script run
(named by their hashes). With a token set, a page opened with ``?token=...`` sets a session
cookie (same-site, HTTP-only, signed: not the token), and later pages read it.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import html
import json
from collections.abc import Iterable, Sequence
from typing import Any
from urllib.parse import urlencode

from ..analysis import Report
from ..canonical import canonical_json
from ..record import Record, call_args

__all__ = ["CSP", "diff_page", "docs_page", "error_page", "run_page", "runs_page"]

_SEVERITY_ORDER = {"fatal": 3, "suspicious": 2, "expected": 1}

_STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1d232a;background:#f6f7f9}
header{background:#1d232a;color:#fff;padding:10px 20px;display:flex;gap:16px;align-items:center}
header a{color:#fff;text-decoration:none;font-weight:600}
main{padding:16px 20px}
table{border-collapse:collapse;background:#fff;width:100%;margin:8px 0 20px}
th,td{border-bottom:1px solid #e3e6ea;padding:5px 8px;text-align:left;vertical-align:top}
th{background:#eef0f3;font-weight:600;position:sticky;top:0}
td.num{text-align:right;font-variant-numeric:tabular-nums}
code,pre{font:12px/1.4 ui-monospace,monospace}
pre{margin:0;white-space:pre-wrap;word-break:break-word;max-height:12em;overflow:auto}
.badge{display:inline-block;border-radius:9px;padding:0 7px;font-size:12px;margin-right:3px}
.fatal{background:#fde2e1}.badge.fatal{background:#c62828;color:#fff}
.suspicious{background:#fff4d6}.badge.suspicious{background:#e6a100;color:#fff}
.expected{background:#e8f4ea}.badge.expected{background:#2e7d32;color:#fff}
tr.divergence td{border-top:3px solid #c62828}
tr.step td{background:#eef0f3;font-weight:600}
.kind-llm{color:#5b3cc4}.kind-tool{color:#0b6b8a}
.muted{color:#6b7580}
input[type=search]{padding:5px 8px;width:320px}
.badge.diverged{background:#c62828;color:#fff}
"""

_RUNS_JS = """
const boxes=[...document.querySelectorAll('input.pick')];
boxes.forEach(b=>b.addEventListener('change',()=>{
  const picked=boxes.filter(x=>x.checked).map(x=>x.value);
  const go=document.getElementById('compare');
  go.disabled=picked.length!==2;
  if(picked.length===2){go.dataset.href='/diff?a='+encodeURIComponent(picked[1])+
    '&b='+encodeURIComponent(picked[0]);}
}));
document.getElementById('compare').addEventListener('click',e=>{
  location.href=e.target.dataset.href;});
document.getElementById('filter').addEventListener('input',e=>{
  const q=e.target.value.toLowerCase();
  document.querySelectorAll('tbody tr').forEach(r=>{
    r.hidden=!r.textContent.toLowerCase().includes(q);});
});
"""


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


# The pages' Content-Security-Policy: nothing loads from anywhere, and the one style sheet and
# the one script run because their hashes are named (an injected script or style would not).
CSP = (
    f"default-src 'none'; script-src {_sha256(_RUNS_JS)}; style-src {_sha256(_STYLE)}; "
    "img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; "
    "frame-ancestors 'none'"
)


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _page(title: str, body: str, script: str = "") -> str:
    js = f"<script>{script}</script>" if script else ""
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        "<meta name=viewport content='width=device-width,initial-scale=1'>"
        f"<title>{_e(title)} · tracetape</title><style>{_STYLE}</style></head><body>"
        "<header><a href='/'>tracetape</a><span>collector</span></header>"
        f"<main>{body}</main>{js}</body></html>"
    )


def _when(seconds: float) -> str:
    return dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _badges(counts: dict[str, int]) -> str:
    parts = [
        f"<span class='badge {sev}'>{n} {sev}</span>"
        for sev, n in sorted(counts.items(), key=lambda kv: -_SEVERITY_ORDER.get(kv[0], 0))
        if n
    ]
    return "".join(parts) or "<span class=muted>none</span>"


def runs_page(
    runs: Sequence[dict[str, Any]], findings: dict[str, dict[str, int]], nxt: str | None
) -> str:
    """The runs list (``findings``: run -> severity -> count)."""
    rows = []
    for r in runs:
        run = r["run_id"]
        rows.append(
            "<tr>"
            f"<td><input type=checkbox class=pick value='{_e(run)}' "
            f"aria-label='pick {_e(run)}'></td>"
            f"<td><a href='/runs/{_e(run)}'>{_e(run)}</a></td>"
            f"<td>{_e(_when(r['last_seen']))}</td>"
            f"<td class=num>{r['steps']}</td><td class=num>{r['events']}</td>"
            f"<td class=num>{r['tokens']}</td>"
            f"<td>{_badges(findings.get(run, {}))}</td>"
            "</tr>"
        )
    more = f"<p><a href='/?{urlencode({'cursor': nxt})}'>older runs →</a></p>" if nxt else ""
    body = (
        "<h1>Runs</h1>"
        "<p><input id=filter type=search placeholder='filter runs' aria-label='filter runs'> "
        "<button id=compare disabled>compare the two ticked runs</button></p>"
        "<table id=runs><thead><tr><th></th><th>run</th><th>last seen</th><th>steps</th>"
        "<th>calls</th><th>tokens</th><th>findings</th></tr></thead><tbody>"
        + (
            "".join(rows)
            or "<tr><td colspan=7 class=muted>no runs yet: tracetape push TRACE</td></tr>"
        )
        + f"</tbody></table>{more}"
    )
    return _page("runs", body, _RUNS_JS)


def _excerpt(value: Any, width: int = 400) -> str:
    if value is None:
        return ""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= width else text[: width - 1] + "…"


def _output(rec: Record) -> Any:
    """The recorded output, or its digest where the trace keeps only that."""
    return rec.out if rec.out is not None else rec.out_digest


def _call_cells(rec: Record | None, severity: str | None = None) -> str:
    if rec is None:
        return "<td colspan=3 class=muted>(no call)</td>"
    cls = f" class='{severity}'" if severity else ""
    out = _output(rec)
    return (
        f"<td{cls}><span class='kind-{_e(rec.kind)}'>{_e(rec.kind)}</span> "
        f"<b>{_e(rec.name or '')}</b><div class=muted>step {_e(rec.step)}"
        f"{' · ' + _e(rec.effect) if rec.effect else ''}</div></td>"
        f"<td{cls}><pre>{_e(_excerpt(call_args(rec)))}</pre></td>"
        f"<td{cls}><pre>{_e(_excerpt(out))}</pre></td>"
    )


def run_page(run: str, summary: dict[str, Any], records: Iterable[Record]) -> str:
    """One run's timeline, step by step."""
    rows, step = [], object()
    for n, rec in enumerate(records, 1):
        if rec.step != step:
            step = rec.step
            rows.append(f"<tr class=step><td colspan=6>step {_e(step)}</td></tr>")
        ms = "" if rec.ms is None else f"{rec.ms:.0f}"
        rows.append(
            f"<tr><td class=num>{n}</td>"
            f"<td><span class='kind-{_e(rec.kind)}'>{_e(rec.kind)}</span> "
            f"<b>{_e(rec.name or '')}</b>"
            f"{'<div class=muted>' + _e(rec.effect) + '</div>' if rec.effect else ''}</td>"
            f"<td class=num>{ms}</td><td class=num>{_e(rec.tokens or '')}</td>"
            f"<td><pre>{_e(_excerpt(call_args(rec)))}</pre></td>"
            f"<td><pre>{_e(_excerpt(_output(rec)))}</pre></td>"
            "</tr>"
        )
    body = (
        f"<h1>Run {_e(run)}</h1><p class=muted>{summary['events']} calls, {summary['steps']} "
        f"steps, {summary['tokens']} tokens; last seen {_e(_when(summary['last_seen']))} · "
        f"<a href='/v1/runs/{_e(run)}/check'>check (JSON)</a></p>"
        "<table id=timeline><thead><tr><th>#</th><th>call</th><th>ms</th><th>tokens</th>"
        "<th>arguments</th><th>output</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>"
    )
    return _page(f"run {run}", body)


def diff_page(a: str, b: str, ra: Sequence[Record], rb: Sequence[Record], report: Report) -> str:
    """Two runs side by side, aligned, the divergence and the findings highlighted."""
    marks: dict[tuple[str | None, Any], str] = {}  # (run, step) or (tool, args) -> severity
    items = []
    for f in report.findings:
        sev = f.severity.value
        keys: list[tuple[str | None, Any]] = []
        if f.run is not None:
            keys.append((f.run, f.step))
        if "tool" in f.evidence and "args" in f.evidence:  # drift: the call, in both runs
            keys.append((str(f.evidence["tool"]), canonical_json(f.evidence["args"])))
        for key in keys:
            if _SEVERITY_ORDER.get(sev, 0) > _SEVERITY_ORDER.get(marks.get(key, ""), 0):
                marks[key] = sev
        where = f" (run {_e(f.run)}, step {_e(f.step)})" if f.run else ""
        items.append(
            f"<li class='finding {sev}'><span class='badge {sev}'>{sev}</span>"
            f"<b>{_e(f.pattern)}</b>: {_e(f.message)}{where}</li>"
        )
    position = report.divergence.position if report.divergence else None
    rows = []
    for i in range(max(len(ra), len(rb))):
        x = ra[i] if i < len(ra) else None
        y = rb[i] if i < len(rb) else None
        cls = " class=divergence" if position == i + 1 else ""
        mark_a, mark_b = _mark(marks, a, x), _mark(marks, b, y)
        label = "<div class='badge diverged'>diverged</div>" if cls else ""
        cells = _call_cells(x, mark_a) + _call_cells(y, mark_b)
        rows.append(f"<tr{cls}><td class=num>{i + 1}{label}</td>{cells}</tr>")
    counts: dict[str, int] = {}
    for f in report.findings:
        counts[f.severity.value] = counts.get(f.severity.value, 0) + 1
    where = f"call #{position}" if position else "nowhere: the runs agree call for call"
    body = (
        f"<h1>Diff: <a href='/runs/{_e(a)}'>{_e(a)}</a> → <a href='/runs/{_e(b)}'>{_e(b)}</a></h1>"
        f"<p>First divergence: <b id=first-divergence>{_e(where)}</b> · findings: {_badges(counts)}"
        f" · <a href='/v1/diff?{urlencode({'a': a, 'b': b})}'>JSON</a></p>"
        f"<ul id=findings>{''.join(items)}</ul>"
        "<table id=diff><thead><tr><th>#</th>"
        f"<th colspan=3>{_e(a)} (baseline)</th><th colspan=3>{_e(b)} (candidate)</th></tr>"
        "<tr><th></th><th>call</th><th>arguments</th><th>output</th><th>call</th>"
        "<th>arguments</th><th>output</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>"
    )
    return _page(f"diff {a} {b}", body)


def _mark(marks: dict[tuple[str | None, Any], str], run: str, rec: Record | None) -> str | None:
    """The severity a call is highlighted with: its run's step's, or its call's (drift)."""
    if rec is None:
        return None
    found = [marks.get((run, rec.step)), marks.get((rec.name, canonical_json(call_args(rec))))]
    ranked = [m for m in found if m]
    return max(ranked, key=lambda m: _SEVERITY_ORDER.get(m, 0)) if ranked else None


def docs_page(spec: dict[str, Any]) -> str:
    """The API reference from the OpenAPI ``spec``: each route, its parameters and summary
    (the spec itself is at ``/openapi.json``)."""
    rows = []
    for path, methods in sorted(spec.get("paths", {}).items()):
        for method, op in methods.items():
            params = ", ".join(
                f"{_e(p.get('name'))}{'' if p.get('required') else '?'}"
                for p in op.get("parameters", [])
                if p.get("in") == "query"
            )
            about = op.get("description") or op.get("summary") or ""
            rows.append(
                f"<tr><td><code>{_e(method.upper())}</code></td><td><code>{_e(path)}</code></td>"
                f"<td><code>{params}</code></td><td>{_e(about)}</td></tr>"
            )
    info = spec.get("info", {})
    body = (
        f"<h1>{_e(info.get('title', 'API'))} {_e(info.get('version', ''))}</h1>"
        "<p>Every <code>/v1</code> route needs <code>Authorization: Bearer TOKEN</code> when "
        "the collector has a token. The OpenAPI spec: <a href='/openapi.json'>openapi.json</a>."
        "</p><table id=routes><thead><tr><th>method</th><th>path</th><th>query</th>"
        "<th>what it does</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>"
    )
    return _page("API", body)


def error_page(status: int, message: str) -> str:
    """An error, as a page."""
    return _page(
        str(status), f"<h1>{status}</h1><p>{_e(message)}</p><p><a href='/'>all runs</a></p>"
    )
