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
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...canonical import canonical_json
from ..config import AnalysisConfig
from ..engine import Calls
from ..report import Divergence, Finding

__all__ = ["Context", "brief", "detectors"]

SIDE_A = 1
SIDE_B = 2
WRITES = frozenset({"write", "irreversible"})


def brief(args: Any, width: int = 60) -> str:
    """Arguments as a short JSON text, so lines about different calls read differently."""
    text = canonical_json(args)
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


def detectors() -> list[Detector]:
    """Every detector, in the order they run (each module is imported here, when asked)."""
    from . import budgets, divergence, drift, repeats, replay, steps

    return [steps.find, repeats.find, budgets.find, divergence.find, replay.find, drift.find]
