"""Drift: one signature (same tool, same normalized args), more than one output.

The engine's ``variants`` table holds, per signature and output, where the output was first
seen and what was true when it was seen: a *clean* sighting is not preceded, in its run, by a
write to the call's own resource; a *certain* one is clean, follows no write at all in its run
(or only writes to other named resources), and its run carried effect tags on every call so
far. Classified per signature by its clean outputs:

* at most one: ``write-echo`` (the other outputs follow the run's own write);
* all certain: ``external-drift`` (no local write came first: external data changed);
* else ``drift``, the cause undetermined (no effect tags, or a write to an unnamed resource);

but a model request answered differently is ``model-drift``: no tool data changed, the model
is not deterministic on it. Each finding names the call and step where the second output was
first seen (``call``: the call's position in its run).

A variant that became certain is settled: later sightings do not change it. Findings follow
the signatures in order of first appearance; each lists its first 16 outputs.
"""

from __future__ import annotations

from . import Context

READS = ("variants", "sigs", "calls", "runs")
CREATES = ("drifted",)
PATTERNS = ("write-echo", "external-drift", "drift", "model-drift")
# The seed's text report printed these first, after the repeats (``render.summary_lines``).
SEED_LINES = {"write-echo": 4, "external-drift": 5, "drift": 6, "model-drift": 7}

MAX_OUTPUTS = 16

_CLASSIFIED = """
    CREATE TABLE drifted AS
    SELECT sid, outputs, CASE WHEN s.kind = 'llm' THEN 'model-drift' ELSE pattern END AS pattern,
           untagged
    FROM (
        SELECT sid, count(*) AS outputs,
               CASE WHEN count(*) FILTER (WHERE clean) <= 1 THEN 'write-echo'
                    WHEN bool_and(certain_at IS NOT NULL) FILTER (WHERE clean)
                        THEN 'external-drift'
                    ELSE 'drift' END AS pattern,
               coalesce(bool_or(untagged_at IS NOT NULL
                                AND (certain_at IS NULL OR untagged_at < certain_at))
                        FILTER (WHERE clean), false) AS untagged
        FROM variants GROUP BY sid HAVING count(*) > 1) JOIN sigs s USING (sid)
"""

_CAUSES = {
    "write-echo": "the changed output follows the run's own write",
    "external-drift": "no local write to the resource came first",
}
_UNTAGGED = "undetermined: the trace has no effect tags (read/write) for these calls"
_UNNAMED = (
    "undetermined: a write came first in the run, and the call or the write names no "
    "resource (see resource_keys)"
)


def find(ctx: Context) -> None:
    """Add the drift findings."""
    db = ctx.calls
    db.con.execute(_CLASSIFIED)
    # Each pattern's count and first signatures (a top-n aggregate, not a sort of them all).
    firsts: list[int] = []
    for pattern, total, sids in db.rows(
        "SELECT pattern, count(*), min(sid, ?) FROM drifted GROUP BY ALL", [ctx.limit]
    ):
        ctx.count(pattern, total)
        firsts += sids
    rows = db.rows(
        """
        SELECT d.pattern, d.sid, s.kind, s.name, s.resource, d.outputs, d.untagged
        FROM drifted d JOIN sigs s USING (sid)
        WHERE d.sid IN (SELECT unnest($1::BIGINT[]))
        ORDER BY d.sid
        """,
        [firsts],
    )
    sids = [row[1] for row in rows]
    args = db.sig_args(sids)
    # Where each example's outputs were first seen: the first 16, and every output's run
    # (a drift within one run names it).
    outputs: dict[int, list[dict[str, object]]] = {sid: [] for sid in sids}
    runs: dict[int, set[str]] = {sid: set() for sid in sids}
    found = db.rows(
        """
        SELECT v.sid, v.out, u.run, c.step, c.ord, v.clean, c.rf,
               row_number() OVER (PARTITION BY v.sid ORDER BY v.first) AS rank
        FROM variants v JOIN calls c ON c.ord = v.first JOIN runs u ON u.first = c.rf
        WHERE v.sid IN (SELECT unnest($1::BIGINT[]))
        ORDER BY v.sid, v.first
        """,
        [sids],
    )
    lines = db.lines(row[4] for row in found if row[7] <= MAX_OUTPUTS)
    # Where each drift shows: the first sighting of its second output.
    second = {row[0]: (row[3], row[4]) for row in found if row[7] == 2}
    calls = ctx.positions([(row[4], row[6]) for row in found if row[7] == 2])
    for sid, out, run, step, first, clean, _, rank in found:
        runs[sid].add(run)
        if rank <= MAX_OUTPUTS:
            seen = {"out": out, "run": run, "step": step, "line": lines[first]}
            outputs[sid].append(seen | {"after_write": not clean})
    for pattern, sid, kind, name, resource, n, untagged in rows:
        cause = _CAUSES.get(pattern) or (_UNTAGGED if untagged else _UNNAMED)
        within_run = len(runs[sid]) == 1
        step, first = second[sid]
        call = calls.get(first)
        where = f" (step {step}, call #{call})" if step is not None else f" (call #{call})"
        what = "answers to the same request" if pattern == "model-drift" else "outputs"
        ctx.add(
            pattern,
            f"{'model-drift' if pattern == 'model-drift' else 'drift'}: {name} -> {n} "
            f"distinct {what}{where}",
            next(iter(runs[sid])) if within_run else None,
            step,
            call=call,
            tool=name,
            kind=kind,
            args=args[sid],
            resource=resource,
            within_run=within_run,
            cause=cause,
            outputs=outputs[sid],
        )
    db.con.execute("DROP TABLE drifted")
