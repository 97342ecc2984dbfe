"""The diff page (``/diff?a=&b=``): two runs aligned call by call under their verdict."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import urlencode

from ...analysis import Report
from ...analysis.render import verdict_lines
from ...analysis.report import redacted
from ...canonical import canonical_json
from ...record import Record, call_args
from ...views import StepView, read_steps
from .frame import SEVERITY_ORDER, badges, page
from .markup import esc
from .steps import happened, head_cells, totals
from .timeline import timeline_svg


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
        where = f" (run {esc(f.run)}, step {esc(f.step)})" if f.run else ""
        items.append(
            f"<li class='finding {sev}'><span class='badge {sev}'>{sev}</span>"
            f"<b>{esc(f.pattern)}</b>: {esc(f.message)}{where}</li>"
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
            f"<li><code>{esc(c['path'])}</code>: <del>{esc(c['before'])}</del> → "
            f"<ins>{esc(c['after'])}</ins></li>"
            for c in redacted(origin.changes[:10])
        )
        paths = f"<ul id=changed-paths>{shown}</ul>"
    verdict = ""
    lines = verdict_lines(report)
    if lines:
        verdict = (
            f"<p id=verdict><b>{esc(lines[0])}</b></p>"
            f"<pre id=verdict-details>{esc(chr(10).join(line[2:] for line in lines[1:]))}</pre>"
        )
    scale = max(sum(v.ms or 0.0 for v in va), sum(v.ms or 0.0 for v in vb), 1e-9)
    body = (
        f"<h1>Diff: <a href='/runs/{esc(a)}'>{esc(a)}</a> → "
        f"<a href='/runs/{esc(b)}'>{esc(b)}</a></h1>"
        f"{verdict}"
        f"<p>Origin: <b id=first-divergence>{esc(where)}</b> · findings: {badges(counts)}"
        f" · <a href='/v1/diff?{urlencode({'a': a, 'b': b})}'>JSON</a></p>{paths}"
        f"<ul id=findings>{''.join(items)}</ul>"
        f"<div class=timelines><p class=muted>{esc(a)} (baseline) · {totals(va)}</p>"
        f"{timeline_svg(va, scale, f'timeline of {a}')}"
        f"<p class=muted>{esc(b)} (candidate) · {totals(vb)}</p>"
        f"{timeline_svg(vb, scale, f'timeline of {b}')}</div>"
        f"<div id=diff><div class='pair heads'><div class=num></div><div class=side>{esc(a)} "
        f"(baseline)</div><div class=side>{esc(b)} (candidate)</div></div>{''.join(rows)}</div>"
    )
    return page(f"diff {a} {b}", body)


def _side(
    view: StepView | None, other: StepView | None, run: str, side: str, mark: str | None
) -> str:
    if view is None:
        return "<div class='side muted'>(no call)</div>"
    cls = f"side {mark}" if mark else "side"
    return f"<div class='{cls}'>{head_cells(view)}{happened(view, run, other, side)}</div>"


def _mark(marks: dict[tuple[str | None, Any], str], run: str, rec: Record | None) -> str | None:
    """The severity a call is highlighted with: its run's step's, or its call's (drift)."""
    if rec is None:
        return None
    found = [marks.get((run, rec.step))]
    if any(key[0] == rec.name for key in marks):  # drift of this tool: its call's key
        found.append(marks.get((rec.name, canonical_json(call_args(rec)))))
    ranked = [m for m in found if m]
    return max(ranked, key=lambda m: SEVERITY_ORDER.get(m, 0)) if ranked else None
