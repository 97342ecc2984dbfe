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

# One hash aggregate over each run's repeated calls, no sort of them: the first five calls by
# ord (a top-n aggregate; a struct keeps a call with no step), and what ``same`` and
# ``unexplained`` need of the outputs: all of a repeat's outputs are its first call's where
# their least and greatest are (or all are NULL where it is). A call with no write before it
# that explains a change is one of ``u``; the first call is among them or not, whatever its
# output: it gives its own.
_REPEATS = """
    CREATE TABLE repeats AS
    SELECT run_first, sid, n, firsts[2].ord AS second,
           {'step': firsts[1].step, 'out': fout, 'ord': firsts[1].ord,
            'effect': firsts[1].effect} AS f,
           [c.step FOR c IN firsts] AS steps,
           CASE WHEN fout IS NULL THEN outs = 0
                ELSE outs = n AND lo = fout AND hi = fout END AS same,
           u > 0 AND CASE WHEN fout IS NULL THEN u_outs > 0
                          ELSE u_outs < u OR u_lo <> fout OR u_hi <> fout END AS unexplained
    FROM (
        SELECT *, firsts[1].out AS fout FROM (
            SELECT rf AS run_first, sid, count(*) AS n,
                   min_by({'ord': ord, 'step': step, 'out': out, 'effect': effect}, ord, 5)
                       AS firsts,
                   count(out) AS outs, min(out) AS lo, max(out) AS hi,
                   count(*) FILTER (WHERE NOT explained) AS u,
                   count(out) FILTER (WHERE NOT explained) AS u_outs,
                   min(out) FILTER (WHERE NOT explained) AS u_lo,
                   max(out) FILTER (WHERE NOT explained) AS u_hi
            FROM ({facts})
            GROUP BY rf, sid))
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
