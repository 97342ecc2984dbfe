"""Repeats: the same call (same tool, same normalized args) again in one run.

For each run and signature called twice or more: ``repeat-budget`` when it ran more than
``max_repeats`` + 1 times; ``duplicate-write`` / ``duplicate-call`` when every call gave the
first call's output (a write by the first call's effect tag); ``repeat-changed-output`` when
a later call gave another output with no local write before it that explains the change (a
write to an unnamed resource, or to the call's own resource). An output change that such a
write explains is the write's echo, which ``drift`` reports. Findings follow the runs in
order, then the second call of each repeat.
"""

from __future__ import annotations

from ..._enums import WRITES
from . import Context, brief

READS = ("calls", "sigs", "runs")
CREATES = ("repeats", "repeat_found")
PATTERNS = ("duplicate-call", "duplicate-write", "repeat-changed-output", "repeat-budget")
# The seed's text report printed these first, in this order (``render.summary_lines``).
SEED_LINES = {"duplicate-call": 1, "duplicate-write": 2, "repeat-changed-output": 3}

# One hash aggregate over each run's repeated calls, no sort of them: the first call (its
# step, output, ord and effect: a struct, so that a call with no step or output is kept) and
# the second call's ord (two top-n aggregates of one value each: a top five of the calls'
# structs cost twice the time over 270,000 repeated calls), and what ``same`` and
# ``unexplained`` need of the outputs: all of a repeat's outputs are its first call's where
# their least and greatest are (or all are NULL where it is). A call with no write before it
# that explains a change is one of ``u``; the first call is among them or not, whatever its
# output: it gives its own. The steps of the first five calls are read for the examples only
# (``_STEPS``).
_REPEATS = """
    CREATE TABLE repeats AS
    SELECT run_first, sid, n, two[2] AS second, f,
           CASE WHEN f.out IS NULL THEN outs = 0
                ELSE outs = n AND lo = f.out AND hi = f.out END AS same,
           u > 0 AND CASE WHEN f.out IS NULL THEN u_outs > 0
                          ELSE u_outs < u OR u_lo <> f.out OR u_hi <> f.out END AS unexplained
    FROM (
        SELECT rf AS run_first, sid, count(*) AS n, min(ord, 2) AS two,
               arg_min({'step': step, 'out': out, 'ord': ord, 'effect': effect}, ord) AS f,
               count(out) AS outs, min(out) AS lo, max(out) AS hi,
               count(*) FILTER (WHERE NOT explained) AS u,
               count(out) FILTER (WHERE NOT explained) AS u_outs,
               min(out) FILTER (WHERE NOT explained) AS u_lo,
               max(out) FILTER (WHERE NOT explained) AS u_hi
        FROM ({facts})
        GROUP BY rf, sid)
"""
# The steps of the first five calls of the repeats of the examples (runs $1, signatures $2);
# each in a struct, as a call with no step is kept (``min_by`` passes over a NULL value).
_STEPS = """
    SELECT c.rf, c.sid, [x.step FOR x IN min_by({'step': c.step}, c.ord, 5)]
    FROM calls c SEMI JOIN (SELECT unnest($1::BIGINT[]) AS rf, unnest($2::BIGINT[]) AS sid)
        USING (rf, sid)
    GROUP BY ALL
"""


def find(ctx: Context) -> None:
    """Add the repeat findings."""
    db = ctx.calls
    repeated = (
        "SELECT * FROM calls SEMI JOIN (SELECT rf, sid FROM calls GROUP BY ALL "
        "HAVING count(*) > 1) USING (rf, sid)"
    )
    db.con.execute(_REPEATS.replace("{facts}", db.facts(repeated)))
    bound = ctx.config.limits.max_repeats
    pattern = f"""
        CASE WHEN same THEN CASE WHEN f.effect IN {tuple(sorted(WRITES))}
                                 THEN 'duplicate-write' ELSE 'duplicate-call' END
             WHEN unexplained THEN 'repeat-changed-output' END
    """
    db.con.execute(f"""
        CREATE TABLE repeat_found AS
        SELECT *, 'repeat-budget' AS pattern FROM repeats WHERE n - 1 > {int(bound)}
        UNION ALL
        SELECT *, {pattern} AS pattern FROM repeats WHERE same OR unexplained
    """)
    for pattern, total in db.rows("SELECT pattern, count(*) FROM repeat_found GROUP BY ALL"):
        ctx.count(pattern, total)
    rows = db.rows(
        """
        SELECT r.pattern, u.run, r.sid, s.name, r.n, r.f.step, r.f.out, r.f.ord, r.f.effect,
               r.run_first
        FROM repeat_found r JOIN sigs s USING (sid) JOIN runs u ON u.first = r.run_first
        QUALIFY row_number() OVER (PARTITION BY r.pattern ORDER BY r.run_first, r.second) <= ?
        ORDER BY r.run_first, r.second, r.pattern <> 'repeat-budget'
        """,
        [ctx.limit],
    )
    args = db.sig_args([row[2] for row in rows])
    lines = db.lines(row[7] for row in rows)
    found = [[row[9] for row in rows], [row[2] for row in rows]]
    steps_of = {(rf, sid): steps for rf, sid, steps in db.rows(_STEPS, found)} if rows else {}
    positions = ctx.positions([(row[7], row[9]) for row in rows])
    for pattern, run, sid, name, n, step, out, first, effect, run_first in rows:
        line = lines[first]
        at = positions.get(first)  # the repeated call's first
        steps = steps_of[run_first, sid]
        call = {"tool": name, "args": args[sid], "count": n, "steps": steps}
        if pattern == "repeat-budget":
            message = f"repeat budget: {run} {name} {brief(args[sid])} ran {n} times "
            message += f"(max_repeats {bound})"
            ctx.add(pattern, message, run, step, call=at, evidence=call, bound=bound)
            continue
        what = "different" if pattern == "repeat-changed-output" else "same"
        times = f" ({n} calls)" if n > len(steps) or n > 2 else ""
        where = " == ".join(f"step {s}" for s in steps)
        message = f"repeat: {run} {where}{times} (same args, {what} output)"
        ctx.add(
            pattern, message, run, step, call=at, evidence=call, output=out, line=line,
            effect=effect,
        )  # fmt: skip
    db.con.execute("DROP TABLE repeats; DROP TABLE repeat_found")
