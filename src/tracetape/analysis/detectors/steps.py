"""``fanout`` and ``exploration``: what one step of a run did.

A run's *step segment* is a stretch of consecutive calls with the same step number; the
engine gives each call its run (``rf``, the ord of its first call) and its segment in the run
(``seg``: its step number, or in a run whose steps go back with several calls a step, the
ord of the segment's first call).
``fanout``: a segment with more calls than ``max_calls_per_step``. ``exploration``: one tool
called with more than ``exploration`` distinct (normalized) arguments in one segment; its
examples are the first three in call order.
"""

from __future__ import annotations

from . import Context

READS = ("calls", "runs", "sigs")
CREATES = ("big_segs", "explored")
PATTERNS = ("fanout", "exploration")

# The segments over the smaller bound, with their first call: one pass over the calls of the
# runs that have a step over it (a segment is a stretch of one step's calls: ``runs.most``).
_BIG = """
    CREATE TABLE big_segs AS
    SELECT rf AS run_first, seg, count(*) AS n, min(ord) AS first
    FROM calls SEMI JOIN (SELECT first FROM runs WHERE most > $1) r ON calls.rf = r.first
    GROUP BY rf, seg HAVING count(*) > $1
"""


def find(ctx: Context) -> None:
    """Add the fanout and exploration findings."""
    limits = ctx.config.limits
    db = ctx.calls
    db.con.execute(_BIG, [min(limits.max_calls_per_step, limits.exploration)])
    _fanout(ctx, limits.max_calls_per_step)
    _exploration(ctx, limits.exploration)
    db.con.execute("DROP TABLE big_segs")


def _fanout(ctx: Context, bound: int) -> None:
    db = ctx.calls
    (total,) = db.one("SELECT count(*) FROM big_segs WHERE n > ?", [bound])
    ctx.count("fanout", total)
    if not total:
        return
    rows = db.rows(
        """
        SELECT u.run, any_value(c.step), count(*), min(c.ord), list(g.name ORDER BY c.ord),
               s.run_first
        FROM (SELECT * FROM big_segs WHERE n > ? ORDER BY run_first, first LIMIT ?) s
        JOIN calls c ON c.rf = s.run_first AND c.seg = s.seg
        JOIN sigs g USING (sid) JOIN runs u ON u.first = s.run_first
        GROUP BY u.run, s.run_first, s.first ORDER BY s.run_first, s.first
        """,
        [bound, ctx.limit],
    )
    lines = db.lines(row[3] for row in rows)
    positions = ctx.positions([(row[3], row[5]) for row in rows])
    for run, step, n, first, names, _ in rows:
        by_tool: dict[str, int] = {}
        for name in names:
            by_tool[name] = by_tool.get(name, 0) + 1
        ctx.add(
            "fanout",
            f"fanout: {run} step {step}: {n} tool calls (max_calls_per_step {bound})",
            run,
            step,
            call=positions.get(first),  # the step's first call
            evidence={"calls": n, "bound": bound, "by_tool": by_tool, "line": lines[first]},
        )


def _exploration(ctx: Context, bound: int) -> None:
    db = ctx.calls
    # Only a tool called more than ``bound`` times in a segment can have more distinct args
    # (and its segment is then one of big_segs).
    db.con.execute(
        """
        CREATE TABLE explored AS
        WITH seg_calls AS (
            SELECT c.rf, c.seg, c.sid, c.ord, c.step, g.name
            FROM (SELECT * FROM calls c
                  SEMI JOIN big_segs s ON s.run_first = c.rf AND s.seg = c.seg) c
            JOIN sigs g USING (sid))
        SELECT s.run_first, s.first, s.seg, c.name, any_value(c.step) AS step,
               min(c.ord) AS tool_first, count(DISTINCT c.sid) AS distinct_args
        FROM (SELECT rf, seg, name FROM seg_calls GROUP BY ALL HAVING count(*) > ?) t
        JOIN seg_calls c USING (rf, seg, name)
        JOIN big_segs s ON s.run_first = c.rf AND s.seg = c.seg
        GROUP BY s.run_first, s.first, s.seg, c.name
        HAVING count(DISTINCT c.sid) > ?
        """,
        [bound, bound],
    )
    (total,) = db.one("SELECT count(*) FROM explored")
    ctx.count("exploration", total)
    if total:
        rows = db.rows(
            """
            SELECT u.run, e.step, e.name, e.distinct_args, list(c.sid ORDER BY c.ord),
                   e.tool_first, e.run_first
            FROM (SELECT * FROM explored ORDER BY run_first, first, tool_first LIMIT ?) e
            JOIN calls c ON c.rf = e.run_first AND c.seg = e.seg
            JOIN sigs g ON g.sid = c.sid AND g.name = e.name
            JOIN runs u ON u.first = e.run_first
            GROUP BY u.run, e.first, e.name, e.step, e.distinct_args, e.run_first, e.tool_first
            ORDER BY e.run_first, e.first, e.tool_first
            """,
            [ctx.limit],
        )
        firsts = [list(dict.fromkeys(row[4]))[:3] for row in rows]
        args = db.sig_args([s for sids in firsts for s in sids])
        positions = ctx.positions([(row[5], row[6]) for row in rows])
        for (run, step, name, n, _, tool_first, _), sids in zip(rows, firsts, strict=True):
            ctx.add(
                "exploration",
                f"exploration: {run} step {step}: {name} called with {n} different args "
                f"(bound {bound})",
                run,
                step,
                call=positions.get(tool_first),  # the tool's first call in the step
                tool=name,
                distinct_args=n,
                bound=bound,
                examples=[args[s] for s in sids],
            )
    db.con.execute("DROP TABLE explored")
