"""One decision as the run and diff pages show it: its head (kind, name, step, numbers),
its readable parts, its raw record one click away; a run's totals."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from decimal import Decimal
from urllib.parse import quote

import orjson
from msgspec import to_builtins as msgspec_to_builtins

from ...record import Record
from ...views import StepView
from .markup import esc
from .text import preformatted, shown


def money(view_cost: Decimal | None, priced: str) -> str:
    if view_cost is None:
        return f"<span class=muted>{esc(priced)}</span>"
    return f"${view_cost:.6f}".rstrip("0").rstrip(".") if view_cost else "$0"


def cost_cell(models: int, total: Decimal | None, unpriced: int, tokens: int) -> str:
    """A run's cost as a page shows it: the ``total`` of its priced model calls and how many
    of its ``models`` calls it could not price (``unpriced``); unknown, never $0, where no
    price covers the ``tokens`` it spent; a dash for a run without tokens or model calls."""
    if not models:
        if tokens:
            return "<span class=muted title='tokens without a priced model'>unknown</span>"
        return "<span class=muted title='no model calls'>—</span>"
    if total is None:
        return "<span class=muted>unknown</span>"
    shown = money(total, "priced")
    return shown + (f" <span class=muted>+ {unpriced} unknown</span>" if unpriced else "")


def total_cost(views: Sequence[StepView]) -> str:
    """A run's cost, from its decisions as read (``cost_cell``)."""
    models = [v for v in views if v.kind == "llm"]
    priced = [v.cost for v in models if v.cost is not None]
    total = sum(priced, Decimal(0)) if priced else None
    tokens = sum(v.tokens or 0 for v in views)
    return cost_cell(len(models), total, len(models) - len(priced), tokens)


def tokens_of(view: StepView) -> str:
    if view.tokens is None:
        return ""
    if view.tokens_out is None:
        return f"{view.tokens}"
    return f"{view.tokens_in or 0} → {view.tokens_out}"


RAW_SHOWN = 2048  # bytes of a raw record shown inline; the whole one is a link away


def raw(view: StepView, run: str | None) -> str:
    """The stored request and answer, one click away: inline up to ``RAW_SHOWN`` bytes (a
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
        link = f" · <a class=whole href='{esc(href)}'>whole record (JSON)</a>"
    if len(blob) > RAW_SHOWN:
        cut = len(blob) - RAW_SHOWN
        blob = blob[:RAW_SHOWN] + f"\n… {cut:,} more characters: open the whole record"
    return (
        f"<details class=raw><summary>raw request and answer</summary>{link}"
        f"<pre>{esc(blob)}</pre></details>"
    )


def echoes(views: Sequence[StepView]) -> dict[int, dict[str, int]]:
    """For each model call, the tool results it was fed that a tool call of the run shows
    already: view index -> part label -> the tool call's index (shown once, not twice)."""
    results: dict[str, int] = {}
    out: dict[int, dict[str, int]] = {}
    for v in views:
        if v.kind == "tool" and v.result:
            results[v.result] = v.index
        elif v.kind == "llm":
            found = {
                label: results[text]
                for label, text in labelled(v.texts())
                if label.startswith("said (tool)") and text in results
            }
            if found:
                out[v.index] = found
    return out


def happened(
    view: StepView,
    run: str | None = None,
    other: StepView | None = None,
    side: str = "a",
    *,
    echoed: Mapping[str, int] | None = None,
    anchor: str = "d",
) -> str:
    """What one decision did, as it reads: the messages fed in, the answer, the calls, the
    result; with ``other`` (its counterpart in the other run) the changed words marked. A
    tool's result the model was fed that its tool call shows already (``echoed``: label ->
    that call's index) is a link to it (``anchor``: the rows' id prefix)."""
    theirs = dict(labelled(other.texts())) if other is not None else {}
    echoed = echoed or {}
    html_parts = []
    for label, text in labelled(view.texts()):
        kind = label.split(" ", 1)[0].split("#", 1)[0]
        role = label.split("(", 1)[1].split(")", 1)[0] if "(" in label else ""
        css = f"part {kind}" + (f" role-{esc(role)}" if role else "")
        head = f"<span class=label>{esc(role or kind)}</span>"
        if label in echoed and theirs.get(label, text) == text:
            n = echoed[label]
            inner = f"<a class=echo href='#{esc(anchor)}{n}'>↑ the result of #{n}</a>"
            html_parts.append(f"<div class='{css} echo'>{head}<div class=text>{inner}</div></div>")
            continue
        inner = shown(text, theirs.get(label) if other is not None else None, side)
        mono = " mono" if kind in ("call", "result") or preformatted(text) else ""
        html_parts.append(f"<div class='{css}'>{head}<div class='text{mono}'>{inner}</div></div>")
    return "".join(html_parts) + raw(view, run)


def labelled(parts: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """Parts with labels made unique by their order (``call#2``), so two runs' steps pair
    part for part."""
    seen: dict[str, int] = {}
    out = []
    for label, text in parts:
        seen[label] = seen.get(label, 0) + 1
        out.append((label if seen[label] == 1 else f"{label}#{seen[label]}", text))
    return out


def head_cells(view: StepView) -> str:
    ms = "" if view.ms is None else f"{view.ms:.0f} ms"
    spent = money(view.cost, view.priced) if view.kind == "llm" else ""
    return (
        f"<div class=call><span class='kind kind-{esc(view.kind)}'>{esc(view.kind)}</span> "
        f"<b>{esc(view.name)}</b></div>"
        f"<div class=muted>{_where(view)}</div><div class=nums><span class=ms>{esc(ms)}</span> "
        f"<span class=tokens>{esc(tokens_of(view))}</span> <span class=cost>{spent}</span></div>"
    )


def _where(view: StepView) -> str:
    """A decision's step as its record says it (none: no step shown), and a tool call's
    effect (``read``, ``write``...: what it does to the world)."""
    parts = [] if view.step is None else [f"step {esc(view.step)}"]
    if view.kind == "tool" and view.effect:
        parts.append(esc(view.effect))
    return " · ".join(parts)


def totals(views: Sequence[StepView]) -> str:
    """A run's time, tokens (in and out where its answers said them, else all its records
    say) and cost, in one line."""
    ms = sum(v.ms or 0.0 for v in views)
    split = any(v.tokens_in is not None or v.tokens_out is not None for v in views)
    if split:
        tokens_in = sum(v.tokens_in or 0 for v in views)
        tokens_out = sum(v.tokens_out or 0 for v in views)
        tokens = f"{tokens_in} in, {tokens_out} out"
    else:
        tokens = str(sum(v.tokens or 0 for v in views))
    return (
        f"<span class=total-ms>{ms:.0f} ms</span> · tokens <span class=total-tokens>"
        f"{tokens}</span> · cost <span class=total-cost>{total_cost(views)}</span>"
    )


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
