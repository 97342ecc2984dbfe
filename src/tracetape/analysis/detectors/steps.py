"""``fanout`` and ``exploration``: what one step of a run did.

A run's *step segment* is a stretch of consecutive calls with the same step number (the
engine marks the call that opens one). ``fanout``: a segment with more calls than
``max_calls_per_step``. ``exploration``: one tool called with more than ``exploration``
distinct (normalized) arguments in one segment; its examples are the first three in call
order.
"""

from __future__ import annotations

from . import Context

# The calls that may belong to a step segment over a bound, each with its segment. In a run
# whose steps never go down, a segment is a step number, and only step numbers called more
# than ``$1`` times are kept. In any other run (or one with a step NULL), a call's segment
# is the latest call at or before it that opens a segment (a running maximum in call order):
# a run's first call opens one, and so does each call whose step differs from its
# predecessor's (a step NULL from a number too), so that call opened the call's own stretch.
_SEGMENTS = """
    CREATE TABLE seg_calls AS
    SELECT c.side, c.run, c.ord, c.line, c.step, c.name, c.sid, c.step AS seg
    FROM calls c
    JOIN (SELECT side, run, step FROM calls GROUP BY ALL HAVING count(*) > $1) k
        USING (side, run, step)
    SEMI JOIN (SELECT side, run FROM runs WHERE NOT unordered) USING (side, run)
    UNION ALL
    SELECT c.side, c.run, c.ord, c.line, c.step, c.name, c.sid,
           max(c.ord) FILTER (WHERE c.opens_run OR c.new_seg)
               OVER (PARTITION BY c.side, c.run ORDER BY c.ord ROWS UNBOUNDED PRECEDING) AS seg
    FROM calls c SEMI JOIN (SELECT side, run FROM runs WHERE unordered) USING (side, run)
"""
_BIG = """
    CREATE TABLE big_segs AS
    SELECT s.*, r.first AS run_first
    FROM (SELECT side, run, seg, count(*) AS n, min(ord) AS first
          FROM seg_calls GROUP BY side, run, seg HAVING count(*) > ?) s
    JOIN runs r USING (side, run)
"""


def find(ctx: Context) -> None:
    """Add the fanout and exploration findings."""
    limits = ctx.config.limits
    db = ctx.calls
    bound = min(limits.max_calls_per_step, limits.exploration)
    db.con.execute(_SEGMENTS, [bound])
    db.con.execute(_BIG, [bound])
    _fanout(ctx, limits.max_calls_per_step)
    _exploration(ctx, limits.exploration)
    db.con.execute("DROP TABLE big_segs; DROP TABLE seg_calls")


def _fanout(ctx: Context, bound: int) -> None:
    db = ctx.calls
    (total,) = db.one("SELECT count(*) FROM big_segs WHERE n > ?", [bound])
    ctx.count("fanout", total)
    if not total:
        return
    rows = db.rows(
        """
        SELECT c.run, any_value(c.step), count(*), arg_min(c.line, c.ord),
               list(c.name ORDER BY c.ord)
        FROM (SELECT * FROM big_segs WHERE n > ? ORDER BY run_first, first LIMIT ?) s
        JOIN seg_calls c USING (side, run, seg)
        GROUP BY s.side, c.run, s.seg, s.run_first, s.first ORDER BY s.run_first, s.first
        """,
        [bound, ctx.limit],
    )
    for run, step, n, line, names in rows:
        by_tool: dict[str, int] = {}
        for name in names:
            by_tool[name] = by_tool.get(name, 0) + 1
        ctx.add(
            "fanout",
            f"fanout: {run} step {step}: {n} tool calls (max_calls_per_step {bound})",
            run,
            step,
            calls=n,
            bound=bound,
            by_tool=by_tool,
            line=line,
        )


def _exploration(ctx: Context, bound: int) -> None:
    db = ctx.calls
    db.con.execute(
        """
        CREATE TABLE explored AS
        SELECT s.run_first, s.first, c.side, c.run, c.seg, c.name, any_value(c.step) AS step,
               min(c.ord) AS tool_first, count(DISTINCT c.sid) AS distinct_args
        FROM big_segs s JOIN seg_calls c USING (side, run, seg)
        WHERE s.n > ?
        GROUP BY s.run_first, s.first, c.side, c.run, c.seg, c.name
        HAVING count(DISTINCT c.sid) > ?
        """,
        [bound, bound],
    )
    (total,) = db.one("SELECT count(*) FROM explored")
    ctx.count("exploration", total)
    if total:
        rows = db.rows(
            """
            SELECT e.run, e.step, e.name, e.distinct_args, list(c.sid ORDER BY c.ord)
            FROM (SELECT * FROM explored ORDER BY run_first, first, tool_first LIMIT ?) e
            JOIN seg_calls c USING (side, run, seg, name)
            GROUP BY e.side, e.run, e.seg, e.name, e.step, e.distinct_args, e.run_first,
                     e.first, e.tool_first
            ORDER BY e.run_first, e.first, e.tool_first
            """,
            [ctx.limit],
        )
        firsts = [list(dict.fromkeys(sids))[:3] for *_, sids in rows]
        args = db.sig_args([s for sids in firsts for s in sids])
        for (run, step, name, n, _), sids in zip(rows, firsts, strict=True):
            ctx.add(
                "exploration",
                f"exploration: {run} step {step}: {name} called with {n} different args "
                f"(bound {bound})",
                run,
                step,
                tool=name,
                distinct_args=n,
                bound=bound,
                examples=[args[s] for s in sids],
            )
    db.con.execute("DROP TABLE explored")
