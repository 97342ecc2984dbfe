"""One run's page (``/runs/{id}``): its timeline and each decision, step by step."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ...record import Record
from ...views import read_steps
from .frame import page, when
from .markup import esc
from .steps import echoes, happened, head_cells, totals
from .timeline import timeline_svg


def run_page(run: str, summary: dict[str, Any], records: Iterable[Record]) -> str:
    """One run as a conversation, step by step, with its timeline and its numbers."""
    views = read_steps(list(records))
    fed = echoes(views)
    rows: list[str] = []
    step: object = object()
    for v in views:
        if v.step != step:
            step = v.step
            if v.step is not None:
                rows.append(f"<tr class=step><td colspan=2>step {esc(v.step)}</td></tr>")
        what = happened(v, run, echoed=fed.get(v.index))
        rows.append(
            f"<tr class=decision id=d{v.index}><td class=head><span class=num>#{v.index}</span>"
            f"{head_cells(v)}</td><td class=what>{what}</td></tr>"
        )
    body = (
        f"<h1>Run {esc(run)}</h1><p class=muted>{summary['events']} calls, {summary['steps']} "
        f"steps · {totals(views)} · last seen {esc(when(summary['last_seen']))} · "
        f"<a href='/v1/runs/{esc(run)}/check'>check (JSON)</a></p>"
        f"{timeline_svg(views, label=f'timeline of {run}')}"
        "<table id=timeline class=decisions><tbody>" + "".join(rows) + "</tbody></table>"
    )
    return page(f"run {run}", body)
