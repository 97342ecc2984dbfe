"""The run list (``/``): runs newest first with their numbers, findings, final answer and
verdict; filters, sorting and paging."""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from typing import Any, NamedTuple
from urllib.parse import urlencode

from ...analysis.report import redacted
from ...views import StepView
from .frame import SCRIPT, badges, page, when
from .markup import esc
from .steps import total_cost


class RunsPaging(NamedTuple):
    """How the run list got here: its ``filters`` (kept by every link), the keyset
    ``cursor`` of the next page, or the ``page`` number of a sorted list and whether it has
    ``more``."""

    filters: dict[str, str | None]
    cursor: str | None
    page: int | None
    more: bool


COLUMNS = (
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
DB_SORTED = frozenset({"run", "last_seen", "steps", "calls", "tokens"})


def _link(filters: dict[str, str | None], **changes: Any) -> str:
    merged = {**filters, **changes}
    return "/?" + urlencode({k: v for k, v in merged.items() if v not in (None, "")})


def _filters_form(filters: dict[str, str | None]) -> str:
    def value(name: str) -> str:
        return esc(filters.get(name) or "")

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
    if sort not in DB_SORTED:
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
        cost = total_cost(views) if views is not None else "<span class=muted>—</span>"
        body_rows.append(
            "<tr>"
            f"<td><input type=checkbox class=pick value='{esc(run)}' "
            f"aria-label='pick {esc(run)}'></td>"
            f"<td><a href='/runs/{esc(run)}'>{esc(run)}</a></td>"
            f"<td>{esc(when(r['last_seen']))}</td>"
            f"<td class=num>{r['steps']}</td><td class=num>{r['events']}</td>"
            f"<td class=num>{latency}</td><td class='num tokens'>{esc(tokens)}</td>"
            f"<td class='num cost'>{cost}</td>"
            f"<td>{badges(findings.get(run, {}))}</td>"
            f"<td class=final>{_shown(finals[run])}{_ending(r.get('ended'))}</td>"
            f"<td class=verdict>{_versus(r, previous.get(run))}</td>"
            "</tr>"
        )
    heads = ["<th></th>"]
    for name, label in COLUMNS:
        if name in ("findings", "final", "verdict"):
            heads.append(f"<th>{label}</th>")
            continue
        flip = "asc" if sort == name and order == "desc" else "desc"
        arrow = (" ↓" if order == "desc" else " ↑") if sort == name else ""
        href = _link(filters, sort=name, order=flip, page=None)
        heads.append(f"<th><a class=sort href='{esc(href)}'>{label}{arrow}</a></th>")
    more = ""
    if paging.cursor:
        more = (
            f"<p><a id=more href='{esc(_link(filters, cursor=paging.cursor))}'>older runs →</a></p>"
        )
    elif paging.page is not None and paging.more:
        more = (
            f"<p><a id=more href='{esc(_link(filters, page=paging.page + 1))}'>next page →</a></p>"
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
    return page("runs", body, SCRIPT)


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
    return esc(text if len(text) <= 80 else text[:79] + "…")


def _ending(ended: str | None) -> str:
    """How a run ended, where it did not complete (a run that completed says nothing)."""
    if not ended or ended == "completed":
        return ""
    return f"<br><span class='badge fatal'>{esc(ended)}</span>"


def _versus(row: dict[str, Any], before: str | None) -> str:
    """A run's verdict against the run of its source before it, where it was computed when
    its lines were stored, and the link to that diff."""
    if before is None:
        return "<span class=muted>—</span>"
    href = "/diff?" + urlencode({"a": before, "b": row["run_id"]})
    link = f"<a class=versus href='{esc(href)}'>vs {esc(before)}</a>"
    verdict = row.get("verdict") if row.get("verdict_of") == before else None
    if not verdict:
        return link
    said, _, summary = str(verdict).partition("\n")
    return f"{link}<br><b>{esc(said)}</b><br><span class=muted>{esc(summary)}</span>"


def _sort_value(row: dict[str, Any], sort: str, numbers: dict[str, list[StepView]]) -> Any:
    views = numbers.get(row["run_id"]) or []
    if sort == "latency":
        return sum(v.ms or 0 for v in views)
    return sum((v.cost for v in views if v.cost is not None), Decimal(0))
