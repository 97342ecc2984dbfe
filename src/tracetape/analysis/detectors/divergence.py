"""The first divergence of the two compared runs (diff only).

The baseline run and the candidate run are aligned call by call (kind, name, normalized
args: the signature); the first position where they disagree, or where one of them ends, is
the divergence: both calls and the field paths that differ. ``divergent-write`` when either
call is a write or irreversible, else ``divergence``.
"""

from __future__ import annotations

from typing import Any

from ..._enums import WRITES
from ...canonical import changed_paths
from ..report import Divergence
from . import SIDE_A, SIDE_B, Context

READS = ("calls", "runs", "sigs")
CREATES = ()
PATTERNS = ("divergence", "divergent-write")
# The report puts these first among the findings of a severity, and the text report shows
# them in a section of their own (``render``), not among the findings.
LEADS = True
APART = True

# A run's calls are those of its first call (``rf``).
_RUN = "rf = (SELECT first FROM runs WHERE side = {} AND run = {})"
_FIRST = f"""
    WITH a AS (SELECT row_number() OVER (ORDER BY ord) AS pos, sid FROM calls
               WHERE {_RUN.format("$1", "$2")}),
         b AS (SELECT row_number() OVER (ORDER BY ord) AS pos, sid FROM calls
               WHERE {_RUN.format("$3", "$4")})
    SELECT min(pos) FILTER (WHERE a.sid IS DISTINCT FROM b.sid), count(a.sid)
    FROM a FULL JOIN b USING (pos)
"""
_CALL = f"""
    SELECT c.step, c.ord, s.kind, s.name, c.sid, c.out, c.effect
    FROM (SELECT *, row_number() OVER (ORDER BY ord) AS pos FROM calls
          WHERE {_RUN.format("$1", "$2")}) c
    JOIN sigs s USING (sid) WHERE pos = $3
"""


def find(ctx: Context) -> None:
    """Set ``ctx.divergence`` and ``ctx.aligned``, and add the divergence finding."""
    if not ctx.compare:
        return
    db = ctx.calls
    a, b = (SIDE_A, ctx.baseline), (SIDE_B, ctx.candidate)
    position, calls_a = db.one(_FIRST, [*a, *b])
    if position is None:
        ctx.aligned = calls_a
        return
    ctx.aligned = position - 1
    rows = [db.rows(_CALL, [*side, position]) for side in (a, b)]
    args = db.sig_args([row[0][4] for row in rows if row])
    lines = db.lines(row[0][1] for row in rows if row)

    def call(found: list[tuple[Any, ...]], run: str | None) -> dict[str, Any] | None:
        if not found:
            return None
        step, first, kind, name, sid, out, effect = found[0]
        return {
            "run": run,
            "step": step,
            "line": lines[first],
            "kind": kind,
            "name": name,
            "args": args[sid],
            "out": out,
            "effect": effect,
        }

    ca, cb = call(rows[0], ctx.baseline), call(rows[1], ctx.candidate)
    if ca and cb:
        before = {"kind": ca["kind"], "name": ca["name"], "args": ca["args"]}
        after = {"kind": cb["kind"], "name": cb["name"], "args": cb["args"]}
        changes = changed_paths(before, after, limit=20)
    else:
        changes = []
    ctx.divergence = Divergence(position, ca, cb, changes)
    writes = any(c and c["effect"] in WRITES for c in (ca, cb))
    if ca and cb:
        what = ", ".join(c.path for c in changes[:3]) or "the call"
        text = f"{ca['name']} (step {ca['step']}) vs {cb['name']} (step {cb['step']})"
        text += f"; changed: {what}"
    elif ca:
        text = f"{ctx.candidate} ended; {ctx.baseline} goes on with {ca['name']}"
        text += f" (step {ca['step']})"
    else:
        assert cb is not None
        text = f"{ctx.baseline} ended; {ctx.candidate} goes on with {cb['name']}"
        text += f" (step {cb['step']})"
    pattern = "divergent-write" if writes else "divergence"
    ctx.count(pattern, 1)
    last = cb or ca or {}
    ctx.add(
        pattern,
        f"first divergence: call #{position}: {text}",
        last.get("run"),
        last.get("step"),
        **ctx.divergence.to_dict(),
    )
