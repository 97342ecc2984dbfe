"""What each of the two compared runs came to: its calls, steps, tokens, cost, duration,
ending and last model answer (the report's ``summary``).

Calls, steps and tokens are the engine's (``runs``); cost, duration and the final answer are
read from the runs' records where the inputs hold them (cassettes, span and OTLP files, a
store's records; not the seed's JSONL, whose lines hold a tool call and an output digest);
the ending from the recording's trailer (``Calls.endings``).
"""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING, Any

from ..integrations.providers import answer_of, provider_of
from ..prices import cost
from ..record import Record
from .causes import brief_value
from .engine import ROW_BITS
from .records import records_at
from .report import Outcome

if TYPE_CHECKING:
    from .detectors import Context

__all__ = ["outcome", "run_facts"]

_RUNS = "SELECT side, first, calls, steps, tokens FROM runs WHERE side = $1 AND run = $2"


def outcome(ctx: Context) -> Outcome | None:
    """The outcome of the two runs ``ctx`` compares; None where either is missing."""
    db = ctx.calls
    found: list[tuple[Any, ...]] = []
    for side, run in ((1, ctx.baseline), (2, ctx.candidate)):
        rows = db.rows(_RUNS, [side, run])
        if not rows:
            return None
        found.append((run, *rows[0]))
    facts = [run_facts(ctx, first) for _, _, first, *_ in found]
    finals = _briefs(facts[0][2], facts[1][2])
    return Outcome(
        calls=(found[0][3], found[1][3]),
        steps=(found[0][4], found[1][4]),
        tokens=(found[0][5], found[1][5]),
        cost=(facts[0][0], facts[1][0]),
        duration_ms=(facts[0][1], facts[1][1]),
        ending=(db.endings.get(found[0][0]), db.endings.get(found[1][0])),
        final=finals,
        final_differs=facts[0][2] != facts[1][2],
    )


_FINAL_WIDTH = 200


def _briefs(a: str | None, b: str | None) -> tuple[str | None, str | None]:
    """Two final answers as short texts (``brief_value``); where they differ past the
    width, both cut around the first difference, so the briefs show it."""
    shown = (brief_value(a, _FINAL_WIDTH), brief_value(b, _FINAL_WIDTH))
    if a is None or b is None or a == b or shown[0] != shown[1]:
        return shown
    pairs = enumerate(zip(a, b, strict=False))
    at = next((i for i, (x, y) in pairs if x != y), min(len(a), len(b)))
    start = max(0, at - 40)
    return (
        "…" + (brief_value(a[start:], _FINAL_WIDTH - 1) or ""),
        "…" + (brief_value(b[start:], _FINAL_WIDTH - 1) or ""),
    )


def run_facts(ctx: Context, first: int) -> tuple[float | None, float | None, str | None]:
    """The cost, duration (ms) and last model answer (whole) of the run whose first call is
    at ``first``, from its records (None each where they hold none)."""
    db = ctx.calls
    files = sorted(db.starts)
    if not files:
        return None, None, None
    (ords,) = db.one(
        f"SELECT list(ord ORDER BY ord) FROM calls WHERE rf = $1 "
        f"AND (ord >> {ROW_BITS}) IN (SELECT unnest($2::BIGINT[]))",
        [first, files],
    )
    records = records_at(db, ords or [], brief=True)
    priced, total, ms, timed = Decimal(0), False, 0.0, False
    last: int | None = None
    for o in ords or []:
        rec = records.get(o)
        if rec is None:
            continue
        if rec.ms is not None:
            ms, timed = ms + rec.ms, True
        if rec.kind != "llm":
            continue
        last = o
        usage = rec.usage or {}
        tokens_in, tokens_out = usage.get("input"), usage.get("output")
        if not usage and rec.tokens is not None:
            tokens_in = rec.tokens
        prov = provider_of(rec.api)
        price, _ = cost(rec.name, tokens_in, tokens_out, prov.name if prov else None)
        if price is not None:
            priced, total = priced + price, True
    final = None
    answer: Record | None = records_at(db, [last]).get(last) if last is not None else None
    if answer is not None:
        text, calls = answer_of(answer.out, answer.api)
        final = text if text is not None else "; ".join(calls) or None
    return (float(priced) if total else None), (round(ms, 3) if timed else None), final
