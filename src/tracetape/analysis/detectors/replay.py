"""Mock replay: every unique call of the candidate side replayed against a mock built from
the baseline side's recordings (diff only).

A signature called on the candidate side is *unrecorded* when the baseline never made it,
and a *mismatch* when the baseline made it but never gave one of the candidate's outputs.
``report.replay`` holds the three counts; the examples (first ten of each, in order of first
appearance) list the tool, kind and args, and for a mismatch the recorded and live outputs
(sorted, the first 16 of each).
"""

from __future__ import annotations

from typing import Any

from . import Context
from .drift import MAX_OUTPUTS

READS = ("variants", "sigs", "calls")
CREATES = ("replayed",)
PATTERNS = ("replay-mismatch", "replay-miss")
# The text report shows these in a line of their own (``render``), not among the findings.
APART = True

_PER_SIG = """
    CREATE TABLE replayed AS
    SELECT sid, bool_or(sides & 1 > 0) AS recorded,
           bool_or(sides & 2 > 0 AND sides & 1 = 0) AS unseen
    FROM variants GROUP BY sid HAVING bool_or(sides & 2 > 0)
"""


def find(ctx: Context) -> None:
    """Set ``ctx.replay`` and add the replay findings."""
    if not ctx.compare:
        return
    db = ctx.calls
    db.con.execute(_PER_SIG)
    unique, unrecorded, mismatches = db.one(
        "SELECT count(*), count(*) FILTER (WHERE NOT recorded), "
        "count(*) FILTER (WHERE recorded AND unseen) FROM replayed"
    )
    ctx.replay = {"unique": unique, "mismatches": mismatches, "unrecorded": unrecorded}
    misses = [r[0] for r in db.rows(_FIRST.format("NOT recorded"))]
    mismatched = [r[0] for r in db.rows(_FIRST.format("recorded AND unseen"))]
    sigs = {
        sid: (kind, name)
        for sid, kind, name in db.rows(
            "SELECT sid, kind, name FROM sigs WHERE sid IN (SELECT unnest($1::BIGINT[]))",
            [misses + mismatched],
        )
    }
    args = db.sig_args(misses + mismatched)

    def call(sid: int) -> dict[str, Any]:
        kind, name = sigs[sid]
        return {"tool": name, "kind": kind, "args": args[sid]}

    outs: dict[tuple[int, int], list[str]] = {}
    for sid, side, out in db.rows(
        "SELECT sid, s.side, out FROM variants, (VALUES (1), (2)) s(side) "
        "WHERE sides & s.side > 0 AND sid IN (SELECT unnest($1::BIGINT[]))",
        [mismatched],
    ):
        outs.setdefault((sid, side), []).append(str(out))
    # Where each finding shows: the candidate's first call of its first example.
    found = db.rows(
        "SELECT sid, arg_min({'ord': ord, 'step': step, 'rf': rf}, ord) FROM calls "
        "WHERE side = 2 AND sid IN (SELECT unnest($1::BIGINT[])) GROUP BY sid",
        [[sids[0] for sids in (mismatched, misses) if sids]],
    )
    firsts = {sid: first["ord"] for sid, first in found}
    steps = {first["ord"]: first["step"] for _, first in found}
    calls = ctx.positions([(first["ord"], first["rf"]) for _, first in found])

    def where(sids: list[int]) -> dict[str, Any]:
        first = firsts.get(sids[0]) if sids else None
        if first is None:
            return {"step": None, "call": None}
        return {"step": steps.get(first), "call": calls.get(first)}

    if mismatches:
        examples = [
            {
                **call(sid),
                "recorded": sorted(outs[sid, 1])[:MAX_OUTPUTS],
                "live": sorted(outs[sid, 2])[:MAX_OUTPUTS],
            }
            for sid in mismatched
        ]
        ctx.count("replay-mismatch", 1)
        ctx.add(
            "replay-mismatch",
            f"replay: {mismatches} recorded call(s) of the baseline return another output "
            "in the candidate" + _at(where(mismatched)),
            None,
            **where(mismatched),
            mismatches=mismatches,
            examples=examples,
        )
    if unrecorded:
        ctx.count("replay-miss", 1)
        ctx.add(
            "replay-miss",
            f"replay: {unrecorded} call(s) of the candidate were never recorded in the baseline"
            + _at(where(misses)),
            None,
            **where(misses),
            unrecorded=unrecorded,
            examples=[call(sid) for sid in misses],
        )
    db.con.execute("DROP TABLE replayed")


_FIRST = "SELECT sid FROM replayed WHERE {} ORDER BY sid LIMIT 10"


def _at(where: dict[str, Any]) -> str:
    if where["call"] is None:
        return ""
    step = where["step"]
    return f" (first at call #{where['call']}" + (f", step {step})" if step is not None else ")")
