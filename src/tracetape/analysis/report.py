"""The report of an analysis: findings, the first divergence, and per-run figures.

``Report`` is what ``diff_traces`` and ``check_trace`` return and what ``render`` and
``summarize`` read; ``Finding`` is one classified pattern with its evidence.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..canonical import Change
from ..config import load_config
from ..redact import Redactor, RedactRules
from .rules import INVARIANTS, Severity

__all__ = ["Divergence", "Finding", "Report", "redacted"]


def redacted(data: Any) -> Any:
    """Return ``data`` with secrets replaced by ``[REDACTED:...]`` placeholders (the
    project's ``[tool.tracetape.redact]`` rules included): evidence passes through it before
    people see it."""
    redactor = Redactor(RedactRules.coerce(load_config("redact") or None))
    return redactor.redact_value(data)[0]


@dataclass
class Finding:
    """One finding: its pattern, severity and fix (from the rule table) and its evidence.

    ``message`` is the one-line form (the seed's ``repeat: run_0042 step 1 == step 2 (same
    args, same output)``); ``invariant`` is true for the bounds ``tracetape check`` enforces.
    """

    pattern: str
    severity: Severity
    message: str
    fix: str
    run: str | None = None
    step: int | None = None
    evidence: dict[str, Any] = field(default_factory=dict)

    @property
    def invariant(self) -> bool:
        """True when this finding breaks one of the run invariants ``check`` enforces."""
        return self.pattern in INVARIANTS

    def to_dict(self) -> dict[str, Any]:
        """The finding as plain JSON data."""
        return {
            "pattern": self.pattern,
            "severity": self.severity.value,
            "message": self.message,
            "fix": self.fix,
            "run": self.run,
            "step": self.step,
            "invariant": self.invariant,
            "evidence": self.evidence,
        }


@dataclass
class Divergence:
    """Where the compared runs first disagree: position, both calls, changed field paths."""

    position: int
    a: dict[str, Any] | None
    b: dict[str, Any] | None
    changes: list[Change]

    def to_dict(self) -> dict[str, Any]:
        """The divergence as plain JSON data."""
        return {
            "position": self.position,
            "a": self.a,
            "b": self.b,
            "changes": [
                {"path": c.path, "before": c.before, "after": c.after} for c in self.changes
            ],
        }


@dataclass
class Report:
    """The result of one analysis: findings by severity, divergence, replay and run stats."""

    inputs: list[str]
    findings: list[Finding]
    counts: dict[str, int]
    runs: int
    events: int
    baseline: dict[str, Any] | None = None
    candidate: dict[str, Any] | None = None
    divergence: Divergence | None = None
    aligned: int = 0
    replay: dict[str, int] | None = None
    skipped: int = 0
    skipped_examples: list[str] = field(default_factory=list)
    limits: dict[str, int] = field(default_factory=dict)
    signatures: int = 0

    @property
    def worst(self) -> Severity | None:
        """The highest severity of any finding, or None when there is none."""
        if not self.findings:
            return None
        return max((f.severity for f in self.findings), key=lambda s: s.rank)

    def at_least(self, severity: Severity) -> list[Finding]:
        """The findings at or above ``severity``."""
        return [f for f in self.findings if f.severity.rank >= severity.rank]

    @property
    def broken_invariants(self) -> list[Finding]:
        """The findings that break an invariant of ``tracetape check``."""
        return [f for f in self.findings if f.invariant]

    @property
    def broken_count(self) -> int:
        """How many invariant breaks were found (exact, beyond the examples kept)."""
        return sum(n for p, n in self.counts.items() if p in INVARIANTS)

    def table(self) -> list[dict[str, Any]]:
        """One row per pattern found: pattern, severity, count, fix (worst first)."""
        rows: dict[str, dict[str, Any]] = {}
        for f in self.findings:
            if f.pattern not in rows:
                rows[f.pattern] = {
                    "pattern": f.pattern,
                    "severity": f.severity.value,
                    "count": self.counts.get(f.pattern, 0),
                    "fix": f.fix,
                }
        order = {s.value: s.rank for s in Severity}
        return sorted(rows.values(), key=lambda r: (-order[r["severity"]], r["pattern"]))

    def to_dict(self) -> dict[str, Any]:
        """The report as plain JSON data (what ``--format json`` prints)."""
        return {
            "inputs": self.inputs,
            "runs": self.runs,
            "events": self.events,
            "baseline": self.baseline,
            "candidate": self.candidate,
            "worst": self.worst.value if self.worst else None,
            "counts": self.counts,
            "table": self.table(),
            "divergence": self.divergence.to_dict() if self.divergence else None,
            "aligned": self.aligned,
            "replay": self.replay,
            "skipped_lines": self.skipped,
            "skipped_examples": self.skipped_examples,
            "signatures": self.signatures,
            "limits": self.limits,
            "findings": [f.to_dict() for f in self.findings],
        }
