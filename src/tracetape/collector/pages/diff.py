"""The diff page (``/diff?a=&b=``): two runs aligned call by call under their verdict.

On top, the verdict of ``tracetape diff``: the origin (its step and call, a link to its row),
the cause, the changed values old -> new, what it explains, every independent root, and what
each run came to with the deltas (calls, steps, tokens, cost, duration, ending, final
answer). Then the findings, each a link to its row; both timelines on one scale with the
origin marked; then the calls side by side, changed words marked, unchanged calls folded."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import urlencode

from ...analysis import Report
from ...analysis.render import verdict_lines
from ...analysis.report import Finding, Outcome, redacted
from ...record import Record, call_args
from ...views import StepView, final_answer, read_steps
from .frame import SEVERITY_ORDER, badges, page
from .markup import esc
from .steps import echoes, happened, head_cells, totals
from .text import shown
from .timeline import timeline_svg


def _same(x: StepView | None, y: StepView | None) -> bool:
    return x is not None and y is not None and x.kind == y.kind and x.texts() == y.texts()


def diff_page(a: str, b: str, ra: Sequence[Record], rb: Sequence[Record], report: Report) -> str:
    """Two runs aligned call by call under their verdict (see the module docstring)."""
    va, vb = read_steps(ra), read_steps(rb)
    marks, items = _findings(report, a, b, ra, rb)
    divergence, origin = report.divergence, report.origin
    position = origin.call if origin else (divergence.position if divergence else None)
    roots = {root.call for root in report.roots[1:]}
    fed = {"a": echoes(va), "b": echoes(vb)}
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
        at = i + 1
        diverged, root = position == at, at in roots
        mark_a = marks.of(a, ra[i] if i < len(ra) else None)
        mark_b = marks.of(b, rb[i] if i < len(rb) else None)
        badge = (
            "<span class='badge diverged'>origin</span>"
            if diverged
            else "<span class='badge diverged'>root</span>"
            if root
            else ""
        )
        css = "pair divergence" if diverged else "pair root" if root else "pair"
        pair = (
            f"<div class='{css}' id=p{at}><div class=num>#{at}{badge}</div>"
            f"{_side(x, y, a, 'a', mark_a, fed['a'])}{_side(y, x, b, 'b', mark_b, fed['b'])}"
            "</div>"
        )
        if _same(x, y) and not (diverged or root or mark_a or mark_b):
            folded.append(pair)
            continue
        fold()
        rows.append(pair)
    fold()
    counts: dict[str, int] = {}
    for f in report.findings:
        counts[f.severity.value] = counts.get(f.severity.value, 0) + 1
    scale = max(sum(v.ms or 0.0 for v in va), sum(v.ms or 0.0 for v in vb), 1e-9)
    json_href = "/v1/diff?" + urlencode({"a": a, "b": b})
    body = (
        f"<h1>Diff: <a href='/runs/{esc(a)}'>{esc(a)}</a> → "
        f"<a href='/runs/{esc(b)}'>{esc(b)}</a></h1>"
        f"<section id=answer>{_verdict(report, position)}"
        f"{_outcome(report.outcome, a, b, (va, vb))}</section>"
        f"<p>findings: {badges(counts)} · <a href='{esc(json_href)}'>JSON</a></p>"
        f"<ul id=findings>{''.join(items)}</ul>"
        f"<div class=timelines><p class=muted>A: {esc(a)} (baseline) · {totals(va)}</p>"
        f"{timeline_svg(va, scale, f'timeline of {a}', anchor='p', origin=position)}"
        f"<p class=muted>B: {esc(b)} (candidate) · {totals(vb)}</p>"
        f"{timeline_svg(vb, scale, f'timeline of {b}', anchor='p', origin=position)}</div>"
        f"<div id=diff><div class='pair heads'><div class=num></div><div class=side>A: {esc(a)} "
        f"(baseline)</div><div class=side>B: {esc(b)} (candidate)</div></div>{''.join(rows)}"
        "</div>"
    )
    return page(f"diff {a} {b}", body)


def _verdict(report: Report, position: int | None) -> str:
    """The verdict: its first line, the origin as a link to its row with its cause and
    changed values, and the rest of ``tracetape diff``'s verdict lines."""
    origin = report.origin
    if position is None:
        where = "<b id=first-divergence>nowhere: the runs agree call for call</b>"
    else:
        where = f"<a id=first-divergence href='#p{position}'>call #{position}</a>"
    facts = [f"Origin: {where}"]
    if origin is not None:
        if origin.step is not None:
            facts.append(f"step {esc(origin.step)}")
        facts.append(f"cause <b class=cause>{esc(origin.cause)}</b>")
        if origin.explained:
            n = origin.explained
            facts.append(f"explains {n} later difference{'s' if n != 1 else ''}")
    paths = ""
    if origin is not None and origin.changes:
        changed = "".join(
            f"<li><code>{esc(c['path'])}</code>: <del>{esc(c['before'])}</del> → "
            f"<ins>{esc(c['after'])}</ins></li>"
            for c in redacted(origin.changes[:10])
        )
        paths = f"<ul id=changed-paths>{changed}</ul>"
    lines = verdict_lines(report)
    said = f"<p id=verdict><b>{esc(lines[0])}</b></p>" if lines else ""
    rest = chr(10).join(line[2:] for line in lines[1:])
    details = f"<pre id=verdict-details>{esc(rest)}</pre>" if lines else ""
    return f"{said}<p id=origin>{' · '.join(facts)}</p>{paths}{details}"


def _delta(x: float | None, y: float | None, unit: str = "", digits: int = 0) -> str:
    if x is None or y is None:
        return "<span class=muted>—</span>"
    d = y - x
    if not d:
        return "<span class=muted>same</span>"
    pct = f" ({d / x:+.1%})" if x and abs(d / x) >= 0.001 else ""
    sign = "+" if d > 0 else "−"
    said = f"{sign}${abs(d):,.{digits}f}" if unit == "$" else f"{sign}{abs(d):,.{digits}f}{unit}"
    return f"<b>{said}</b>{pct}"


def _number(x: float | None, unit: str = "", digits: int = 0) -> str:
    if x is None:
        return "<span class=muted>unknown</span>"
    return f"${x:,.{digits}f}" if unit == "$" else f"{x:,.{digits}f}{unit}"


def _outcome(
    outcome: Outcome | None, a: str, b: str, finals: tuple[list[StepView], list[StepView]]
) -> str:
    """What each run came to, side by side, with the deltas; the final answers whole (read
    from ``finals``, each run's decisions), their changed words marked, the rest folded."""
    if outcome is None:
        return ""
    rows = []
    for label, pair, unit, digits in (
        ("calls", outcome.calls, "", 0),
        ("steps", outcome.steps, "", 0),
        ("tokens", outcome.tokens, "", 0),
        ("cost", outcome.cost, "$", 6),
        ("duration", outcome.duration_ms, " ms", 0),
    ):
        x, y = pair
        rows.append(
            f"<tr class={label}><th>{label}</th><td class=num>{_number(x, unit, digits)}</td>"
            f"<td class=num>{_number(y, unit, digits)}</td>"
            f"<td class='num delta'>{_delta(x, y, unit, digits)}</td></tr>"
        )
    ea, eb = outcome.ending
    ending = "<span class=muted>same</span>" if ea == eb else "<b>changed</b>"
    rows.append(
        f"<tr class=ending><th>ending</th><td>{esc(ea or 'unknown')}</td>"
        f"<td>{esc(eb or 'unknown')}</td><td class=delta>{ending}</td></tr>"
    )
    table = (
        f"<table id=summary><thead><tr><th></th><th>A: {esc(a)}</th><th>B: {esc(b)}</th>"
        f"<th>B − A</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )
    fa, fb = redacted([final_answer(views) for views in finals])
    said = "<b>changed</b>" if outcome.final_changed else "<span class=muted>same</span>"
    answers = (
        f"<div id=final><p class=head>final answer: {said}</p><div class=pair>"
        f"<div class='side a'><div class=who>A: {esc(a)}</div>"
        f"<div class=text>{_final(fa, fb, 'a')}</div></div>"
        f"<div class='side b'><div class=who>B: {esc(b)}</div>"
        f"<div class=text>{_final(fb, fa, 'b')}</div></div></div></div>"
    )
    return table + answers


def _final(text: str | None, other: str | None, side: str) -> str:
    if text is None:
        return "<span class=muted>none</span>"
    return shown(text, other, side)


def _findings(
    report: Report, a: str, b: str, ra: Sequence[Record], rb: Sequence[Record]
) -> tuple[_Marks, list[str]]:
    """The calls each finding highlights (``(run, step)`` or ``(tool, args)`` -> severity)
    and the findings' list items, each a link to its row."""
    marks = _Marks()
    items = []
    for f in report.findings:
        sev = f.severity.value
        if f.run is not None:
            marks.step(f.run, f.step, sev)
        drift = "tool" in f.evidence and "args" in f.evidence
        if drift:  # the call, in both runs
            marks.call(str(f.evidence["tool"]), f.evidence["args"], sev)
        links = _rows_of(f, (a, b), ra, rb, drift)
        where = f" (run {esc(f.run)}, step {esc(f.step)})" if f.run and f.step is not None else ""
        items.append(
            f"<li class='finding {sev}'><span class='badge {sev}'>{sev}</span>"
            f"<b>{esc(f.pattern)}</b>: {esc(f.message)}{where}{links}</li>"
        )
    return marks, items


def _rows_of(
    f: Finding, runs: tuple[str, str], ra: Sequence[Record], rb: Sequence[Record], drift: bool
) -> str:
    """Links to the rows a finding is about: its call, else the first call of its step, or
    (drift) the call in each run."""
    a, b = runs
    found: list[int] = []
    if f.call is not None and f.run in (a, b, None):
        found.append(int(f.call))
    elif f.run is not None and f.step is not None:
        records = ra if f.run == a else rb if f.run == b else ()
        found += [i for i, rec in enumerate(records, 1) if rec.step == f.step][:1]
    if drift:
        tool, args = f.evidence["tool"], f.evidence["args"]
        for records in (ra, rb):
            found += [
                i for i, rec in enumerate(records, 1) if rec.name == tool and call_args(rec) == args
            ][:1]
    unique = sorted(set(found))
    if not unique:
        return ""
    return " " + " ".join(f"<a class=row href='#p{n}'>call #{n}</a>" for n in unique)


def _side(  # noqa: PLR0917 - one side of a pair, as the pair reads it
    view: StepView | None,
    other: StepView | None,
    run: str,
    side: str,
    mark: str | None,
    fed: dict[int, dict[str, int]],
) -> str:
    who = f"<div class=who>{'A' if side == 'a' else 'B'}: {esc(run)}</div>"
    if view is None:
        return f"<div class='side {side} muted'>{who}(no call)</div>"
    cls = f"side {side} {mark}" if mark else f"side {side}"
    what = happened(view, run, other, side, echoed=fed.get(view.index), anchor="p")
    return f"<div class='{cls}'>{who}{head_cells(view)}{what}</div>"


class _Marks:
    """The severity each call is highlighted with: its run's step's (a finding's run and
    step), or its own (drift: a tool and its arguments, in both runs); the worst wins."""

    def __init__(self) -> None:
        self.steps: dict[tuple[str, int | None], str] = {}
        self.calls: dict[str, list[tuple[Any, str]]] = {}

    def step(self, run: str, step: int | None, sev: str) -> None:
        self.steps[run, step] = _worse(self.steps.get((run, step)), sev)

    def call(self, tool: str, args: Any, sev: str) -> None:
        self.calls.setdefault(tool, []).append((args, sev))

    def of(self, run: str, rec: Record | None) -> str | None:
        if rec is None:
            return None
        found = self.steps.get((run, rec.step))
        wanted = self.calls.get(rec.name or "")
        if wanted:  # compared as data: no canonical text of each request
            args = call_args(rec)
            for expected, sev in wanted:
                if args == expected:
                    found = _worse(found, sev)
        return found


def _worse(a: str | None, b: str) -> str:
    return b if SEVERITY_ORDER.get(b, 0) > SEVERITY_ORDER.get(a or "", 0) else a or b
