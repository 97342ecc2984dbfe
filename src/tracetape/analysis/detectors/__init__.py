"""The detectors: each finding is one small query over the engine's ``calls`` table.

A detector is a function ``(Context) -> None`` that adds what it finds to ``ctx.found``:
for each pattern the exact count, and the first ``max_examples`` findings in the order of
their evidence in the input (the files in the order given, then call order; per-run findings
by the run's first call). Only the examples are fetched from the engine, so a pattern found a
million times costs one count, not a million rows.

=================  ===================================================================
module             patterns
=================  ===================================================================
``steps``          ``fanout``, ``exploration`` (step segments of each run)
``repeats``        ``duplicate-call``, ``duplicate-write``, ``repeat-changed-output``,
                   ``repeat-budget``
``budgets``        ``call-budget``, ``token-budget``, ``step-budget``, ``step-budget-hit``
``drift``          ``drift``, ``external-drift``, ``write-echo``
``replay``         ``replay-mismatch``, ``replay-miss`` (diff only)
``divergence``     ``divergence``, ``divergent-write`` (diff only)
=================  ===================================================================

``detect`` runs them in chains that share no table they write, two threads taking the chains
in turn, each on a cursor of its own (DuckDB lets go of the GIL while a query runs): the
Python work of one detector and the queries of another overlap, and a query that keeps one
core busy leaves the other to the next chain.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from ...canonical import canonical_json
from ..config import AnalysisConfig
from ..engine import Background, Calls
from ..render import redacted
from ..report import Divergence, Finding

__all__ = ["Context", "brief", "detect", "detectors"]

SIDE_A = 1
SIDE_B = 2


def brief(args: Any, width: int = 60) -> str:
    """Arguments as a short JSON text, so lines about different calls read differently;
    redacted before it is cut (a secret cut short is no longer found)."""
    text = canonical_json(redacted(args))
    return text if len(text) <= width else text[: width - 1] + "…"


@dataclass
class Context:
    """What the detectors share: the calls, the settings, the runs compared, and the
    findings so far (``counts`` exact, ``examples`` capped per pattern)."""

    calls: Calls
    config: AnalysisConfig
    compare: bool
    baseline: str | None = None
    candidate: str | None = None
    counts: dict[str, int] = field(default_factory=dict)
    examples: dict[str, list[Finding]] = field(default_factory=dict)
    divergence: Divergence | None = None
    aligned: int = 0
    replay: dict[str, int] | None = None

    @property
    def limit(self) -> int:
        """The examples kept per pattern."""
        return self.config.max_examples

    def count(self, pattern: str, n: int) -> None:
        """Add ``n`` findings of ``pattern`` to the exact count."""
        if n:
            self.counts[pattern] = self.counts.get(pattern, 0) + n

    def add(
        self, pattern: str, message: str, run: str | None, step: int | None, **evidence: Any
    ) -> None:
        """Keep one example finding of ``pattern`` (counted by ``count``), in order."""
        kept = self.examples.setdefault(pattern, [])
        if len(kept) < self.limit:
            rule = self.config.rules[pattern]
            kept.append(Finding(pattern, rule.severity, message, rule.fix, run, step, evidence))


Detector = Callable[[Context], None]

# Per signature and output: where the output was first seen (the call's ``ord``), on which
# sides, and the facts of its sightings that drift classifies by (see ``drift``); ``replay``
# reads it too.
_VARIANTS = """
    CREATE TABLE variants AS
    SELECT sid, out, min(ord) AS first, bit_or(side) AS sides, bool_or(clean) AS clean,
           min(ord) FILTER (WHERE certain_ok AND NOT untagged) AS certain_at,
           min(ord) FILTER (WHERE certain_ok AND untagged) AS untagged_at
    FROM ({facts}) GROUP BY sid, out
"""


def _variants(ctx: Context) -> None:
    ctx.calls.con.execute(_VARIANTS.format(facts=ctx.calls.facts("SELECT * FROM calls")))


def detectors() -> list[list[Detector]]:
    """Every detector, in chains that write no table another chain reads (each chain in
    order), the longest first. Each module is imported here, when asked."""
    from . import budgets, divergence, drift, repeats, replay, steps

    return [
        [_variants, replay.find, drift.find],
        [repeats.find],
        [steps.find],
        [divergence.find],
        [budgets.find],
    ]


# The threads that run chains at once: two keep two cores busy (a third thread made the
# queries of the others wait).
_WORKERS = 2


def detect(ctx: Context) -> None:
    """Run every detector on ``ctx``: when the engine allows it (``Calls.concurrent``), two
    threads take the chains in turn, each thread on a cursor of its own (a chain that ends
    early leaves its thread to the next); else one chain after another. The report does not
    depend on which finishes first: each pattern is one detector's, and findings are
    ordered by their evidence."""
    chains = detectors()
    if not ctx.calls.concurrent:
        for chain in chains:
            for find in chain:
                find(ctx)
        return
    pending = iter(chains)
    lock = threading.Lock()
    forks = [replace(ctx, calls=ctx.calls.fork()) for _ in range(_WORKERS)]

    def work(sub: Context) -> None:
        try:
            while True:
                with lock:
                    chain = next(pending, None)
                if chain is None:
                    return
                for find in chain:
                    find(sub)
        finally:
            sub.calls.con.close()

    jobs = [Background(partial(work, sub)) for sub in forks]
    failures = []
    for job in jobs:  # every thread ends before any failure is raised
        try:
            job.wait()
        except BaseException as exc:
            failures.append(exc)
    if failures:
        raise failures[0]
    for sub in forks:  # what a detector sets besides its findings
        ctx.divergence = ctx.divergence or sub.divergence
        ctx.aligned = ctx.aligned or sub.aligned
        ctx.replay = ctx.replay or sub.replay
