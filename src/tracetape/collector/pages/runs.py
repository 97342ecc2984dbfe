"""The run list (``/``): runs newest first with their numbers, findings, final answer and
verdict; filters, sorting and paging."""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from typing import Any, NamedTuple
from urllib.parse import urlencode

from .frame import badges, page, when
from .markup import esc
from .steps import cost_cell


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
    paging: RunsPaging,
    previous: dict[str, str] | None = None,
) -> str:
    """The runs list: each run's row as the database keeps it (its ``summary``: numbers,
    findings and final answer, computed when its lines were stored; None while pending),
    filtered and sorted as ``paging`` says; ``previous``: run -> the run of its source
    before it, which its verdict is read against."""
    previous = previous or {}
    filters = paging.filters
    sort, order = filters.get("sort") or "last_seen", filters.get("order") or "desc"
    body_rows = [_row(r, previous.get(r["run_id"])) for r in runs]
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
        more = f"<a id=more href='{esc(_link(filters, cursor=paging.cursor))}'>older runs →</a>"
    elif paging.page is not None and paging.more:
        more = f"<a id=more href='{esc(_link(filters, page=paging.page + 1))}'>next page →</a>"
    empty = (
        "no runs match these filters"
        if any(filters.get(k) for k in ("q", "since", "until", "severity"))
        else "no runs yet: tracetape push TRACE"
    )
    body = (
        "<h1>Runs</h1>"
        f"{_filters_form(filters)}"
        "<form id=compare method=get action='/diff'><button id=compare-button type=submit>"
        "compare the two ticked runs</button></form>"
        f"<div class=scroll><table id=runs><thead><tr>{''.join(heads)}</tr></thead><tbody>"
        + ("".join(body_rows) or f"<tr class=empty><td colspan=11 class=muted>{empty}</td></tr>")
        + f"</tbody></table></div><p id=paging>{more}</p>"
    )
    return page("runs", body)


def _row(r: dict[str, Any], before: str | None) -> str:
    """One run's row (its numbers from its summary; "…" while the summary is pending)."""
    run = r["run_id"]
    s: dict[str, Any] | None = r.get("summary")
    pending = "<span class=muted title='being computed'>…</span>"
    ran = r.get("began")
    own = f"<br><span class=muted>ran {esc(when(ran))}</span>" if ran is not None else ""
    if s is None:
        latency = tokens = cost = findings = final = pending
    else:
        latency = f"{s.get('latency_ms') or 0:.0f} ms"
        tokens = esc(_tokens(s))
        cost = _cost(s)
        findings = badges(s.get("findings") or {})
        if s.get("problem"):
            findings = f"<span class=muted title='{esc(s['problem'])}'>check failed</span>"
        final = _shown(s.get("final"))
    return (
        "<tr>"
        f"<td><input type=checkbox class=pick name=run form=compare value='{esc(run)}' "
        f"aria-label='pick {esc(run)}'></td>"
        f"<td><a href='/runs/{esc(run)}'>{esc(run)}</a></td>"
        f"<td>{esc(when(r['last_seen']))}{own}</td>"
        f"<td class=num>{r['steps']}</td><td class=num>{r['events']}</td>"
        f"<td class=num>{latency}</td><td class='num tokens'>{tokens}</td>"
        f"<td class='num cost'>{cost}</td>"
        f"<td class=findings>{findings}</td>"
        f"<td class=final>{final}{_ending(r.get('ended'))}</td>"
        f"<td class=verdict>{_versus(r, before)}</td>"
        "</tr>"
    )


def _tokens(s: dict[str, Any]) -> str:
    """A run's tokens: in → out where its model answers said them, else all it recorded (a
    seed trace's ``tokens``)."""
    if s.get("tokens_in") is not None or s.get("tokens_out") is not None:
        return f"{s.get('tokens_in') or 0:,} → {s.get('tokens_out') or 0:,}"
    return f"{s.get('tokens') or 0:,}"


def _cost(s: dict[str, Any]) -> str:
    """A run's cost, from its summary (``cost_cell``)."""
    total = None if s.get("cost_text") is None else Decimal(s["cost_text"])
    return cost_cell(s.get("models") or 0, total, s.get("unpriced") or 0, s.get("tokens") or 0)


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
