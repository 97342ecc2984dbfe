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

Why one module: every page is built from the same few escaped parts (a step's view, its
numbers, its timeline bar, the page frame under the CSP); a page split from them would have
to import its escaping back, and an unescaped value is the one mistake a page must not make.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import html
import json
from collections.abc import Iterable, Sequence
from decimal import Decimal
from typing import Any, NamedTuple
from urllib.parse import quote, urlencode

import orjson
from msgspec import to_builtins as msgspec_to_builtins

from ..analysis import Report
from ..analysis.render import verdict_lines
from ..analysis.report import redacted
from ..canonical import canonical_json
from ..record import Record, call_args
from ..views import StepView, read_steps, word_diff

__all__ = [
    "CSP",
    "SEVERITY_ORDER",
    "RunsPaging",
    "diff_page",
    "docs_page",
    "error_page",
    "raw_record",
    "run_page",
    "runs_page",
    "timeline_svg",
]

SEVERITY_ORDER = {"fatal": 3, "suspicious": 2, "expected": 1}

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
.pair .num .badge{display:table;margin-top:3px}
table.decisions td.head{width:15em}
.part{margin:0 0 6px;display:flex;gap:8px}
.part .label{flex:0 0 5.5em;font-size:12px;color:#6b7580;text-align:right;padding-top:1px}
.part .text{white-space:pre-wrap;word-break:break-word;max-height:24em;overflow:auto;flex:1}
.part.answer .text{font-weight:500}
.part.call .text,.part.result .text{font:12px/1.4 ui-monospace,monospace}
.role-tool .label{color:#0b6b8a}
del{background:#fde2e1;color:#8e1b1b}
ins{background:#d9f2dc;color:#1b5e20;text-decoration:none}
details.raw summary,details.unchanged summary{cursor:pointer;color:#6b7580;font-size:12px}
details.raw pre{max-height:30em}
details.unchanged{background:#eef0f3;padding:4px 8px;margin:4px 0}
#diff .pair{display:grid;grid-template-columns:5em 1fr 1fr;gap:8px;background:#fff;
padding:6px;border-bottom:1px solid #e3e6ea}
#diff .pair.heads{font-weight:600;background:#eef0f3}
#diff .pair.divergence{border-top:3px solid #c62828}
.nums{font-size:12px;color:#6b7580}
.nums span{margin-right:6px}
svg.timeline{background:#fff;margin:6px 0 14px;max-width:900px;display:block}
@media (max-width:700px){
main{padding:10px}
table.decisions td{display:block;width:auto}
table.decisions td.head{width:auto;border-bottom:none}
#diff .pair{grid-template-columns:1fr}
.part{flex-direction:column;gap:0}
.part .label{text-align:left;flex:none}
.part .text{flex:none}
input[type=search]{width:100%}
}
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
        for sev, n in sorted(counts.items(), key=lambda kv: -SEVERITY_ORDER.get(kv[0], 0))
        if n
    ]
    return "".join(parts) or "<span class=muted>none</span>"


class RunsPaging(NamedTuple):
    """How the run list got here: its ``filters`` (kept by every link), the keyset
    ``cursor`` of the next page, or the ``page`` number of a sorted list and whether it has
    ``more``."""

    filters: dict[str, str | None]
    cursor: str | None
    page: int | None
    more: bool


_COLUMNS = (
    ("run", "run"),
    ("last_seen", "last seen"),
    ("steps", "steps"),
    ("calls", "calls"),
    ("latency", "latency"),
    ("tokens", "tokens"),
    ("cost", "cost"),
    ("findings", "findings"),
    ("final", "final answer"),
    ("verdict", "verdict"),
)
_DB_SORTED = frozenset({"run", "last_seen", "steps", "calls", "tokens"})


def _link(filters: dict[str, str | None], **changes: Any) -> str:
    merged = {**filters, **changes}
    return "/?" + urlencode({k: v for k, v in merged.items() if v not in (None, "")})


def _filters_form(filters: dict[str, str | None]) -> str:
    def value(name: str) -> str:
        return _e(filters.get(name) or "")

    options = "".join(
        f"<option value='{sev}'{' selected' if filters.get('severity') == sev else ''}>"
        f"{label}</option>"
        for sev, label in (("", "any findings"), ("expected", "expected or worse"),
                           ("suspicious", "suspicious or worse"), ("fatal", "fatal"))
    )  # fmt: skip
    kept = "".join(
        f"<input type=hidden name={name} value='{value(name)}'>"
        for name in ("sort", "order")
        if filters.get(name)
    )
    return (
        "<form id=filters method=get action='/'>"
        f"<input id=filter name=q type=search value='{value('q')}' placeholder='run, tool or model'"
        " aria-label='filter runs by text'> "
        f"<label>from <input name=since type=date value='{value('since')}'></label> "
        f"<label>to <input name=until type=date value='{value('until')}'></label> "
        f"<select name=severity aria-label='findings'>{options}</select> {kept}"
        "<button type=submit>filter</button></form>"
    )


def runs_page(
    runs: Sequence[dict[str, Any]],
    findings: dict[str, dict[str, int]],
    paging: RunsPaging,
    numbers: dict[str, list[StepView]] | None = None,
    previous: dict[str, str] | None = None,
) -> str:
    """The runs list (``findings``: run -> severity -> count; ``numbers``: run -> its
    decisions as read, for latency, tokens and cost; ``previous``: run -> the run of its
    source before it, which its verdict is read against), filtered and sorted as ``paging``
    says; a column the database does not hold (latency, cost) sorts this page."""
    numbers = numbers or {}
    previous = previous or {}
    filters = paging.filters
    sort, order = filters.get("sort") or "last_seen", filters.get("order") or "desc"
    rows = list(runs)
    if sort not in _DB_SORTED:
        rows.sort(key=lambda r: _sort_value(r, sort, numbers), reverse=order == "desc")
    # each run's last model answer, redacted once for the page
    finals: dict[str, str | None] = redacted(
        {r["run_id"]: _final(numbers.get(r["run_id"])) for r in rows}
    )
    body_rows = []
    for r in rows:
        run = r["run_id"]
        views = numbers.get(run)
        latency = f"{sum(v.ms or 0 for v in views):.0f} ms" if views is not None else ""
        tokens = (
            f"{sum(v.tokens_in or 0 for v in views)} → {sum(v.tokens_out or 0 for v in views)}"
            if views
            else str(r["tokens"])
        )
        cost = _total_cost(views) if views is not None else "<span class=muted>—</span>"
        body_rows.append(
            "<tr>"
            f"<td><input type=checkbox class=pick value='{_e(run)}' "
            f"aria-label='pick {_e(run)}'></td>"
            f"<td><a href='/runs/{_e(run)}'>{_e(run)}</a></td>"
            f"<td>{_e(_when(r['last_seen']))}</td>"
            f"<td class=num>{r['steps']}</td><td class=num>{r['events']}</td>"
            f"<td class=num>{latency}</td><td class='num tokens'>{_e(tokens)}</td>"
            f"<td class='num cost'>{cost}</td>"
            f"<td>{_badges(findings.get(run, {}))}</td>"
            f"<td class=final>{_shown(finals[run])}{_ending(r.get('ended'))}</td>"
            f"<td class=verdict>{_versus(r, previous.get(run))}</td>"
            "</tr>"
        )
    heads = ["<th></th>"]
    for name, label in _COLUMNS:
        if name in ("findings", "final", "verdict"):
            heads.append(f"<th>{label}</th>")
            continue
        flip = "asc" if sort == name and order == "desc" else "desc"
        arrow = (" ↓" if order == "desc" else " ↑") if sort == name else ""
        href = _link(filters, sort=name, order=flip, page=None)
        heads.append(f"<th><a class=sort href='{_e(href)}'>{label}{arrow}</a></th>")
    more = ""
    if paging.cursor:
        more = (
            f"<p><a id=more href='{_e(_link(filters, cursor=paging.cursor))}'>older runs →</a></p>"
        )
    elif paging.page is not None and paging.more:
        more = (
            f"<p><a id=more href='{_e(_link(filters, page=paging.page + 1))}'>next page →</a></p>"
        )
    empty = (
        "no runs match these filters"
        if any(filters.get(k) for k in ("q", "since", "until", "severity"))
        else "no runs yet: tracetape push TRACE"
    )
    body = (
        "<h1>Runs</h1>"
        f"{_filters_form(filters)}"
        "<p><button id=compare disabled>compare the two ticked runs</button></p>"
        f"<div class=scroll><table id=runs><thead><tr>{''.join(heads)}</tr></thead><tbody>"
        + ("".join(body_rows) or f"<tr><td colspan=11 class=muted>{empty}</td></tr>")
        + f"</tbody></table></div>{more}"
    )
    return _page("runs", body, _RUNS_JS)


def _final(views: Sequence[StepView] | None) -> str | None:
    """A run's last model answer, short (the summary ``tracetape diff`` compares)."""
    last = next((v for v in reversed(views or ()) if v.kind == "llm"), None)
    if last is None:
        return None
    return last.answer if last.answer is not None else "; ".join(last.calls)


def _shown(text: str | None) -> str:
    """A run's last model answer as its row shows it (cut to 80 characters)."""
    if text is None:
        return "<span class=muted>—</span>"
    return _e(text if len(text) <= 80 else text[:79] + "…")


def _ending(ended: str | None) -> str:
    """How a run ended, where it did not complete (a run that completed says nothing)."""
    if not ended or ended == "completed":
        return ""
    return f"<br><span class='badge fatal'>{_e(ended)}</span>"


def _versus(row: dict[str, Any], before: str | None) -> str:
    """A run's verdict against the run of its source before it, where it was computed when
    its lines were stored, and the link to that diff."""
    if before is None:
        return "<span class=muted>—</span>"
    href = "/diff?" + urlencode({"a": before, "b": row["run_id"]})
    link = f"<a class=versus href='{_e(href)}'>vs {_e(before)}</a>"
    verdict = row.get("verdict") if row.get("verdict_of") == before else None
    if not verdict:
        return link
    said, _, summary = str(verdict).partition("\n")
    return f"{link}<br><b>{_e(said)}</b><br><span class=muted>{_e(summary)}</span>"


def _sort_value(row: dict[str, Any], sort: str, numbers: dict[str, list[StepView]]) -> Any:
    views = numbers.get(row["run_id"]) or []
    if sort == "latency":
        return sum(v.ms or 0 for v in views)
    return sum((v.cost for v in views if v.cost is not None), Decimal(0))


def _money(view_cost: Decimal | None, priced: str) -> str:
    if view_cost is None:
        return f"<span class=muted>{_e(priced)}</span>"
    return f"${view_cost:.6f}".rstrip("0").rstrip(".") if view_cost else "$0"


def _total_cost(views: Sequence[StepView]) -> str:
    """A run's cost: the sum of its priced model calls, and how many it could not price."""
    models = [v for v in views if v.kind == "llm"]
    priced = [v.cost for v in models if v.cost is not None]
    if not models:
        return "$0"
    if not priced:
        return "<span class=muted>unknown</span>"
    total = _money(sum(priced, Decimal(0)), "priced")
    missing = len(models) - len(priced)
    return total + (f" <span class=muted>+ {missing} unknown</span>" if missing else "")


def _tokens(view: StepView) -> str:
    if view.tokens is None:
        return ""
    if view.tokens_out is None:
        return f"{view.tokens}"
    return f"{view.tokens_in or 0} → {view.tokens_out}"


def _marked(runs: Sequence[tuple[str, str]], side: str) -> str:
    """One side of a word diff: the words kept, and the ones this side alone has marked
    (``<del>`` on the baseline, ``<ins>`` on the candidate)."""
    out = []
    for op, text in runs:
        if op == "=":
            out.append(_e(text))
        elif op == "-" and side == "a":
            out.append(f"<del>{_e(text)}</del>")
        elif op == "+" and side == "b":
            out.append(f"<ins>{_e(text)}</ins>")
    return "".join(out)


def _text(text: str, other: str | None, side: str) -> str:
    if other is None or other == text:
        return _e(text)
    runs = word_diff(other, text) if side == "b" else word_diff(text, other)
    return _marked(runs, side)


_RAW_SHOWN = 8192  # bytes of a raw record shown inline; the whole one is a link away


def _raw(view: StepView, run: str | None) -> str:
    """The stored request and answer, one click away: inline up to ``_RAW_SHOWN`` bytes (a
    long conversation repeats every earlier message), whole at ``/runs/RUN/raw/N``."""
    try:
        blob = orjson.dumps(
            {"input": view.raw_in, "output": view.raw_out},
            option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS,
            default=str,
        ).decode()
    except TypeError:  # an integer beyond 64 bits
        blob = json.dumps(
            {"input": view.raw_in, "output": view.raw_out},
            indent=2,
            ensure_ascii=False,
            default=str,
        )
    link = ""
    if run is not None:
        href = f"/runs/{quote(run, safe='')}/raw/{view.index}"
        link = f" · <a class=whole href='{_e(href)}'>whole record (JSON)</a>"
    if len(blob) > _RAW_SHOWN:
        cut = len(blob) - _RAW_SHOWN
        blob = blob[:_RAW_SHOWN] + f"\n… {cut:,} more characters: open the whole record"
    return (
        f"<details class=raw><summary>raw request and answer</summary>{link}"
        f"<pre>{_e(blob)}</pre></details>"
    )


def _happened(
    view: StepView, run: str | None = None, other: StepView | None = None, side: str = "a"
) -> str:
    """What one decision did, as it reads: the messages fed in, the answer, the calls, the
    result; with ``other`` (its counterpart in the other run) the changed words marked."""
    theirs = dict(_labelled(other.texts())) if other is not None else {}
    html_parts = []
    for label, text in _labelled(view.texts()):
        shown = _text(text, theirs.get(label), side) if other is not None else _e(text)
        kind = label.split(" ", 1)[0].split("#", 1)[0]
        role = label.split("(", 1)[1].split(")", 1)[0] if "(" in label else ""
        css = f"part {kind}" + (f" role-{_e(role)}" if role else "")
        head = f"<span class=label>{_e(role or kind)}</span>"
        html_parts.append(f"<div class='{css}'>{head}<div class=text>{shown}</div></div>")
    return "".join(html_parts) + _raw(view, run)


def _labelled(parts: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """Parts with labels made unique by their order (``call#2``), so two runs' steps pair
    part for part."""
    seen: dict[str, int] = {}
    out = []
    for label, text in parts:
        seen[label] = seen.get(label, 0) + 1
        out.append((label if seen[label] == 1 else f"{label}#{seen[label]}", text))
    return out


_BAR = {"llm": "#5b3cc4", "tool": "#0b6b8a", "env": "#8a6d0b"}


def timeline_svg(views: Sequence[StepView], scale_ms: float | None = None, label: str = "") -> str:
    """One bar per decision, in order, each starting where the one before ended: its length
    its latency, coloured by kind, its tokens beside it (server-rendered, no script)."""
    total = sum(v.ms or 0.0 for v in views) or 1.0
    scale = 600.0 / max(scale_ms or total, 1e-9)
    row = 16
    height = row * len(views) + 4
    bars, at = [], 0.0
    for i, v in enumerate(views):
        width = max((v.ms or 0.0) * scale, 1.5)
        x, y = 8 + at * scale, 2 + i * row
        color = _BAR.get(v.kind, "#6b7580")
        title = f"#{v.index} {v.kind} {v.name} · {v.ms or 0:.0f} ms"
        note = f"{v.tokens} tok" if v.tokens is not None else ""
        bars.append(
            f"<g class='bar bar-{_e(v.kind)}'><title>{_e(title)}</title>"
            f"<rect x='{x:.1f}' y='{y}' width='{width:.1f}' height='{row - 4}' fill='{color}'/>"
            f"<text x='{x + width + 4:.1f}' y='{y + row - 6}' font-size='10' fill='#1d232a'>"
            f"{_e(note)}</text></g>"
        )
        at += v.ms or 0.0
    return (
        f"<svg class=timeline role=img aria-label='{_e(label or 'timeline')}' "
        f"viewBox='0 0 720 {height}' width='100%' preserveAspectRatio='xMinYMin meet' "
        f"xmlns='http://www.w3.org/2000/svg'>{''.join(bars)}</svg>"
    )


def _head_cells(view: StepView) -> str:
    ms = "" if view.ms is None else f"{view.ms:.0f} ms"
    money = _money(view.cost, view.priced) if view.kind == "llm" else ""
    return (
        f"<div class=call><span class='kind kind-{_e(view.kind)}'>{_e(view.kind)}</span> "
        f"<b>{_e(view.name)}</b></div>"
        f"<div class=muted>step {_e(view.step)}{' · ' + _e(view.effect) if view.effect else ''}"
        f"</div><div class=nums><span class=ms>{_e(ms)}</span> "
        f"<span class=tokens>{_e(_tokens(view))}</span> <span class=cost>{money}</span></div>"
    )


def _totals(views: Sequence[StepView]) -> str:
    ms = sum(v.ms or 0.0 for v in views)
    tokens_in = sum(v.tokens_in or 0 for v in views)
    tokens_out = sum(v.tokens_out or 0 for v in views)
    return (
        f"<span class=total-ms>{ms:.0f} ms</span> · tokens <span class=total-tokens>"
        f"{tokens_in} in, {tokens_out} out</span> · cost <span class=total-cost>"
        f"{_total_cost(views)}</span>"
    )


def run_page(run: str, summary: dict[str, Any], records: Iterable[Record]) -> str:
    """One run as a conversation, step by step, with its timeline and its numbers."""
    views = read_steps(list(records))
    rows, step = [], object()
    for v in views:
        if v.step != step:
            step = v.step
            rows.append(f"<tr class=step><td colspan=2>step {_e(step)}</td></tr>")
        rows.append(
            f"<tr class=decision id=d{v.index}><td class=head><span class=num>#{v.index}</span>"
            f"{_head_cells(v)}</td><td class=what>{_happened(v, run)}</td></tr>"
        )
    body = (
        f"<h1>Run {_e(run)}</h1><p class=muted>{summary['events']} calls, {summary['steps']} "
        f"steps · {_totals(views)} · last seen {_e(_when(summary['last_seen']))} · "
        f"<a href='/v1/runs/{_e(run)}/check'>check (JSON)</a></p>"
        f"{timeline_svg(views, label=f'timeline of {run}')}"
        "<table id=timeline class=decisions><tbody>" + "".join(rows) + "</tbody></table>"
    )
    return _page(f"run {run}", body)


def _same(x: StepView | None, y: StepView | None) -> bool:
    return x is not None and y is not None and x.kind == y.kind and x.texts() == y.texts()


def diff_page(a: str, b: str, ra: Sequence[Record], rb: Sequence[Record], report: Report) -> str:
    """Two runs aligned call by call: the first divergence on top with its field paths, the
    changed words marked, unchanged calls folded, both timelines one above the other."""
    va, vb = read_steps(ra), read_steps(rb)
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
            if SEVERITY_ORDER.get(sev, 0) > SEVERITY_ORDER.get(marks.get(key, ""), 0):
                marks[key] = sev
        where = f" (run {_e(f.run)}, step {_e(f.step)})" if f.run else ""
        items.append(
            f"<li class='finding {sev}'><span class='badge {sev}'>{sev}</span>"
            f"<b>{_e(f.pattern)}</b>: {_e(f.message)}{where}</li>"
        )
    divergence, origin = report.divergence, report.origin
    position = origin.call if origin else (divergence.position if divergence else None)
    rows: list[str] = []
    folded: list[str] = []

    def fold() -> None:
        if folded:
            n = len(folded)
            rows.append(
                f"<details class=unchanged><summary>{n} unchanged call{'s' if n > 1 else ''}"
                f"</summary>{''.join(folded)}</details>"
            )
            folded.clear()

    for i in range(max(len(va), len(vb))):
        x = va[i] if i < len(va) else None
        y = vb[i] if i < len(vb) else None
        diverged = position == i + 1
        mark_a = _mark(marks, a, ra[i] if i < len(ra) else None)
        mark_b = _mark(marks, b, rb[i] if i < len(rb) else None)
        badge = "<span class='badge diverged'>diverged</span>" if diverged else ""
        pair = (
            f"<div class='pair{' divergence' if diverged else ''}' id=p{i + 1}>"
            f"<div class=num>#{i + 1}{badge}</div>"
            f"{_side(x, y, a, 'a', mark_a)}{_side(y, x, b, 'b', mark_b)}</div>"
        )
        if _same(x, y) and not diverged and not (mark_a or mark_b):
            folded.append(pair)
            continue
        fold()
        rows.append(pair)
    fold()
    counts: dict[str, int] = {}
    for f in report.findings:
        counts[f.severity.value] = counts.get(f.severity.value, 0) + 1
    where = f"call #{position}" if position else "nowhere: the runs agree call for call"
    paths = ""
    if origin is not None and origin.changes:
        shown = "".join(
            f"<li><code>{_e(c['path'])}</code>: <del>{_e(c['before'])}</del> → "
            f"<ins>{_e(c['after'])}</ins></li>"
            for c in redacted(origin.changes[:10])
        )
        paths = f"<ul id=changed-paths>{shown}</ul>"
    verdict = ""
    lines = verdict_lines(report)
    if lines:
        verdict = (
            f"<p id=verdict><b>{_e(lines[0])}</b></p>"
            f"<pre id=verdict-details>{_e(chr(10).join(line[2:] for line in lines[1:]))}</pre>"
        )
    scale = max(sum(v.ms or 0.0 for v in va), sum(v.ms or 0.0 for v in vb), 1e-9)
    body = (
        f"<h1>Diff: <a href='/runs/{_e(a)}'>{_e(a)}</a> → <a href='/runs/{_e(b)}'>{_e(b)}</a></h1>"
        f"{verdict}"
        f"<p>Origin: <b id=first-divergence>{_e(where)}</b> · findings: {_badges(counts)}"
        f" · <a href='/v1/diff?{urlencode({'a': a, 'b': b})}'>JSON</a></p>{paths}"
        f"<ul id=findings>{''.join(items)}</ul>"
        f"<div class=timelines><p class=muted>{_e(a)} (baseline) · {_totals(va)}</p>"
        f"{timeline_svg(va, scale, f'timeline of {a}')}"
        f"<p class=muted>{_e(b)} (candidate) · {_totals(vb)}</p>"
        f"{timeline_svg(vb, scale, f'timeline of {b}')}</div>"
        f"<div id=diff><div class='pair heads'><div class=num></div><div class=side>{_e(a)} "
        f"(baseline)</div><div class=side>{_e(b)} (candidate)</div></div>{''.join(rows)}</div>"
    )
    return _page(f"diff {a} {b}", body)


def _side(
    view: StepView | None, other: StepView | None, run: str, side: str, mark: str | None
) -> str:
    if view is None:
        return "<div class='side muted'>(no call)</div>"
    cls = f"side {mark}" if mark else "side"
    return f"<div class='{cls}'>{_head_cells(view)}{_happened(view, run, other, side)}</div>"


def _mark(marks: dict[tuple[str | None, Any], str], run: str, rec: Record | None) -> str | None:
    """The severity a call is highlighted with: its run's step's, or its call's (drift)."""
    if rec is None:
        return None
    found = [marks.get((run, rec.step))]
    if any(key[0] == rec.name for key in marks):  # drift of this tool: its call's key
        found.append(marks.get((rec.name, canonical_json(call_args(rec)))))
    ranked = [m for m in found if m]
    return max(ranked, key=lambda m: SEVERITY_ORDER.get(m, 0)) if ranked else None


def raw_record(rec: Record) -> bytes:
    """One record whole, as JSON (``/runs/RUN/raw/N``)."""
    try:
        return orjson.dumps(
            msgspec_to_builtins(rec),
            option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS,
            default=str,
        )
    except TypeError:
        return json.dumps(
            msgspec_to_builtins(rec), indent=2, ensure_ascii=False, default=str
        ).encode()


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
