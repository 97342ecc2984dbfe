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

from . import WRITES, Context, brief

# The first call's fields and the first five steps are filtered aggregates on the call's
# rank in its repeat (ordered aggregates sort each group again: 3x the time).
_REPEATS = f"""
    CREATE TABLE repeats AS
    SELECT rf AS run_first, sid, count(*) AS n,
           min(ord) FILTER (WHERE rk = 2) AS second,
           {{'step': any_value(step) FILTER (WHERE rk = 1),
             'out': any_value(out) FILTER (WHERE rk = 1),
             'ord': min(ord),
             'effect': any_value(effect) FILTER (WHERE rk = 1)}} AS f,
           list_value({", ".join(f"any_value(step) FILTER (WHERE rk = {k})" for k in range(1, 6))})
               [1:least(count(*), 5)] AS steps,
           bool_and(out IS NOT DISTINCT FROM fout) AS same,
           bool_or(rk > 1 AND out IS DISTINCT FROM fout AND NOT explained)
               AS unexplained
    FROM (
        SELECT rf, sid, ord, step, out, effect, explained,
               row_number() OVER w AS rk, first_value(out) OVER w AS fout
        FROM ({{facts}})
        WINDOW w AS (PARTITION BY rf, sid ORDER BY ord)
    )
    GROUP BY rf, sid
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
               r.steps
        FROM repeat_found r JOIN sigs s USING (sid) JOIN runs u ON u.first = r.run_first
        QUALIFY row_number() OVER (PARTITION BY r.pattern ORDER BY r.run_first, r.second) <= ?
        ORDER BY r.run_first, r.second, r.pattern <> 'repeat-budget'
        """,
        [ctx.limit],
    )
    args = db.sig_args([row[2] for row in rows])
    lines = db.lines(row[7] for row in rows)
    for pattern, run, sid, name, n, step, out, first, effect, steps in rows:
        line = lines[first]
        call = {"tool": name, "args": args[sid], "count": n, "steps": steps}
        if pattern == "repeat-budget":
            message = f"repeat budget: {run} {name} {brief(args[sid])} ran {n} times "
            ctx.add(pattern, message + f"(max_repeats {bound})", run, step, **call, bound=bound)
            continue
        what = "different" if pattern == "repeat-changed-output" else "same"
        times = f" ({n} calls)" if n > len(steps) or n > 2 else ""
        where = " == ".join(f"step {s}" for s in steps)
        message = f"repeat: {run} {where}{times} (same args, {what} output)"
        ctx.add(pattern, message, run, step, **call, output=out, line=line, effect=effect)
    db.con.execute("DROP TABLE repeats; DROP TABLE repeat_found")
