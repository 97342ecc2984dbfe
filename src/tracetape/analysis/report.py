"""The report of an analysis: findings, the first divergence, and per-run figures.

``Report`` is what ``diff_traces`` and ``check_trace`` return and what ``render`` and
``summarize`` read; ``Finding`` is one classified pattern with its evidence.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..canonical import Change
from ..redact import redacted
from .rules import INVARIANTS, Severity

__all__ = ["Divergence", "Finding", "Origin", "Outcome", "Report", "redacted"]


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
    call: int | None = None

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
            "call": self.call,
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


@dataclass(eq=False)
class Origin:
    """Where two runs part (the origin) or change again independently (a later root): the
    position (``call``, counted as ``Divergence.position`` is), the baseline's step of that
    call (the candidate's where the baseline has none), the call's kind and name, the
    ``side`` (``input``, ``output``, ``ending``), the causes found (``causes``, first the
    ``cause``; see ``causes.CAUSES``), the changed paths with short before/after texts, and
    the later positions it explains (``explains``: the first 50; ``explained`` counts them
    all). ``a`` and ``b`` say in short what each run did there."""

    call: int
    step: int | None
    kind: str | None
    name: str | None
    side: str
    causes: list[str]
    changes: list[dict[str, Any]]
    explains: list[int] = field(default_factory=list)
    explained: int = 0
    a: str | None = None
    b: str | None = None
    ended: str | None = None  # for an ending: "A", "B" (the run that ended), or "both"

    @property
    def cause(self) -> str:
        """The first cause, in ``causes.CAUSES`` order."""
        return self.causes[0]

    @property
    def says(self) -> str:
        """What happened here, as the verdict says it: ``the model answered the same
        request differently``."""
        from .causes import CAUSES

        if self.cause == "ending" and self.ended in ("A", "B"):
            other = "A" if self.ended == "B" else "B"
            text = f"{self.ended} ended where {other} went on"
        elif self.cause == "ending":
            text = "the runs made the same calls and ended differently"
        else:
            text = CAUSES[self.cause].says.format(name=self.name, kind=self.kind)
        others = [c for c in self.causes[1:]]
        return text + (f" (and: {', '.join(others)})" if others else "")

    def to_dict(self) -> dict[str, Any]:
        """The origin as plain JSON data (the contract ``tracetape diff --format json``
        keeps)."""
        return {
            "call": self.call,
            "step": self.step,
            "kind": self.kind,
            "name": self.name,
            "side": self.side,
            "cause": self.cause,
            "causes": list(self.causes),
            "changes": list(self.changes),
            "explains": list(self.explains),
            "explained": self.explained,
            "a": self.a,
            "b": self.b,
        }


_FAILED = ("failed", "interrupted", "unfinished")


@dataclass
class Outcome:
    """What each compared run came to, ``[baseline, candidate]`` each: calls, steps, tokens,
    cost in US dollars (None: no call of the run could be priced), duration in ms (None: the
    records hold no timing), how it ended (None: its format does not say) and the last model
    answer (None: the records hold none)."""

    calls: tuple[int, int]
    steps: tuple[int, int]
    tokens: tuple[int, int]
    cost: tuple[float | None, float | None]
    duration_ms: tuple[float | None, float | None]
    ending: tuple[str | None, str | None]
    final: tuple[str | None, str | None]
    # whether the whole answers differ (``final`` holds them short); None: compare ``final``
    final_differs: bool | None = None

    @property
    def final_changed(self) -> bool | None:
        """Whether the last model answer changed; None where the records hold none."""
        if self.final == (None, None):
            return None
        if self.final_differs is not None:
            return self.final_differs
        return self.final[0] != self.final[1]

    @property
    def failed(self) -> bool:
        """Whether the candidate failed (or was interrupted, or never closed) where the
        baseline did not."""
        a, b = (e or "" for e in self.ending)
        return b.startswith(_FAILED) and not a.startswith(_FAILED)

    @property
    def endings_differ(self) -> bool:
        """Whether the runs are known to have ended differently."""
        a, b = self.ending
        return a is not None and b is not None and a != b

    def endings_text(self) -> tuple[str, str]:
        """Each run's ending as the report says it: ``completed after 4 calls``."""

        def text(ending: str | None, calls: int) -> str:
            return f"{ending or 'ended'} after {calls} call{'s' if calls != 1 else ''}"

        return text(self.ending[0], self.calls[0]), text(self.ending[1], self.calls[1])

    def to_dict(self) -> dict[str, Any]:
        """The outcome as the report's ``summary``."""
        both_none = self.cost == (None, None)
        no_time = self.duration_ms == (None, None)
        return {
            "calls": list(self.calls),
            "steps": list(self.steps),
            "tokens": list(self.tokens),
            "cost": None if both_none else list(self.cost),
            "duration_ms": None if no_time else list(self.duration_ms),
            "ending": list(self.ending),
            "final": {
                "changed": bool(self.final_changed),
                "before": self.final[0],
                "after": self.final[1],
            },
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
    outcome: Outcome | None = None
    roots: list[Origin] = field(default_factory=list)

    @property
    def origin(self) -> Origin | None:
        """Where the runs part (the first of ``roots``); None where they do not differ."""
        return self.roots[0] if self.roots else None

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
            "origin": redacted(self.origin.to_dict()) if self.origin else None,
            "summary": redacted(self.outcome.to_dict()) if self.outcome else None,
            "divergence": self.divergence.to_dict() if self.divergence else None,
            "aligned": self.aligned,
            "replay": self.replay,
            "skipped_lines": self.skipped,
            "skipped_examples": self.skipped_examples,
            "signatures": self.signatures,
            "limits": self.limits,
            "findings": [f.to_dict() for f in self.findings],
        }
