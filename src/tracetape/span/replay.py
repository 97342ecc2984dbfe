"""Span replay: is the tool deterministic, has the world drifted, or is it the decision?

Two questions, two modes (the seed's): ``determinism`` runs the tool live twice and compares
the two results' fingerprints; ``drift`` runs it once and compares the result with the
recorded one. ``both`` (the default) asks them in that order and reads the pair:

=================  ====================  ====================================================
stable             drifted               verdict
=================  ====================  ====================================================
no                 (either)              ``nondeterministic tool``: replaying it against a
                                         recording tells nothing but that clocks exist
yes                yes                   ``world drifted``: the tool behaves, the world it
                                         reads changed since the recording
yes                no                    ``decision layer``: the tool and its world are as
                                         recorded; look at the model's decision
=================  ====================  ====================================================

Results are compared by ``fingerprint`` (normalized: volatile keys dropped, UUIDs, temp paths
and timestamps masked; ``[tool.tracetape.normalize]`` extends the list). A ``write`` or
``irreversible`` span is never run live: with a stub, the stub is called with the recorded
arguments and what it received is compared instead of a result; without one, ``SpanError``.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .._enums import LoudEnum
from ..canonical import Change, Normalizer, changed_paths, excerpt, fingerprint, normalize
from .live import Live
from .model import Span

__all__ = [
    "DECISION_LAYER",
    "NONDETERMINISTIC",
    "WORLD_DRIFTED",
    "ReplayMode",
    "ReplayResult",
    "describe",
    "replay",
]

NONDETERMINISTIC = "nondeterministic tool"
WORLD_DRIFTED = "world drifted"
DECISION_LAYER = "decision layer"

_MEANING = {
    NONDETERMINISTIC: "two live runs of the tool disagree: fix or pin the tool (its clock, "
    "randomness, ordering) before reading anything into a replay",
    WORLD_DRIFTED: "the tool is stable but today's world gives a different result than the "
    "recording: the data or service it reads changed",
    DECISION_LAYER: "the tool is stable and still gives the recorded result: look at the "
    "model's decision, not the tool",
}


class ReplayMode(LoudEnum):
    """What ``replay`` asks: ``determinism``, ``drift``, or ``both`` (in that order)."""

    DETERMINISM = "determinism"
    DRIFT = "drift"
    BOTH = "both"

    @classmethod
    def label(cls) -> str:
        """Named "replay mode" in errors."""
        return "replay mode"


@dataclass
class ReplayResult:
    """What a span replay found.

    ``recorded`` is the fingerprint of the recorded result (or, for a stubbed ``write``
    span, of the recorded arguments), ``runs`` the fingerprints of the determinism runs and
    ``live`` the drift run's; ``stable`` / ``drift`` are ``None`` for the mode not asked;
    ``verdict`` is set when both were. ``changes`` is the normalized diff of the recorded
    and the live result, ``env_drift`` how the environment differs from the recorded one.
    """

    span: Span
    mode: ReplayMode
    compared: str
    recorded: str
    runs: list[str] = field(default_factory=list)
    live: str | None = None
    stable: bool | None = None
    drift: bool | None = None
    changes: list[Change] = field(default_factory=list)
    env_drift: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    recorded_value: Any = None
    live_value: Any = None
    compared_runs: str = "recorded and live"

    @property
    def verdict(self) -> str | None:
        """The seed's two-boolean verdict, once the asked modes allow one."""
        if self.stable is False:
            return NONDETERMINISTIC
        if self.stable and self.drift is not None:
            return WORLD_DRIFTED if self.drift else DECISION_LAYER
        return None

    @property
    def meaning(self) -> str:
        """What the verdict means, in a sentence."""
        return _MEANING.get(self.verdict or "", "")

    def lines(self, *, head: bool = True, verdict: bool = True) -> list[str]:
        """The report, as ``tracetape span replay`` prints it; ``head`` and ``verdict`` keep
        its first line (the span) and its last (the verdict)."""
        s = self.span
        out = [describe(s)] if head else []
        if self.compared != "result":
            out.append(f"compared: the {self.compared} (a {s.effect} span is never run live)")
        if len(self.runs) == 2:
            a, b = self.runs
            out.append(f"recorded={self.recorded} run1={a} run2={b} stable={self.stable}")
        if self.live is not None:
            out.append(f"recorded={self.recorded} live={self.live} drift={self.drift}")
        out += [f"note: {n}" for n in self.notes]
        if self.changes:
            out.append(f"changed between {self.compared_runs} (normalized):")
        for change in self.changes[:8]:
            out.append("  " + _change_line(change))
        if len(self.changes) > 8:
            out.append(f"  ... {len(self.changes) - 8} more changed paths")
        out += [f"environment drift: {d}" for d in self.env_drift]
        if self.verdict and verdict:
            out.append(f"verdict: {self.verdict}: {self.meaning}")
        return out

    def to_dict(self) -> dict[str, Any]:
        """The result as JSON data (``--format json``)."""
        s = self.span
        return {
            "span_id": s.span_id,
            "tool": s.tool,
            "run_id": s.run,
            "step": s.step,
            "effect": s.effect,
            "mode": str(self.mode),
            "compared": self.compared,
            "recorded": self.recorded,
            "runs": self.runs,
            "live": self.live,
            "stable": self.stable,
            "drift": self.drift,
            "verdict": self.verdict,
            "environment_drift": self.env_drift,
            "notes": self.notes,
            "diff_between": self.compared_runs,
            "diff": [{"path": c.path, "before": c.before, "after": c.after} for c in self.changes],
            "recorded_output": self.recorded_value,
            "live_output": self.live_value,
        }


def describe(span: Span) -> str:
    """One line naming a span and its call."""
    what = shlex.join(span.argv) if span.argv else f"{span.tool}({_short(span.args)})"
    head = f"span {span.span_id} ({span.tool}"
    head += f", step {span.step}" if span.step is not None else ""
    head += f", effect {span.effect}" if span.effect else ""
    return f"{head}): {what}"


def _short(value: Any, width: int = 60) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= width else text[: width - 1] + "…"


def _change_line(change: Change) -> str:
    before, after = change.before, change.after
    if isinstance(before, str) and isinstance(after, str):
        before, after = excerpt(before, after)
        return f"{change.path}: {before!r} -> {after!r}"
    return f"{change.path}: {_short(before)} -> {_short(after)}"


def replay(
    span: Span,
    mode: str | ReplayMode = ReplayMode.BOTH,
    *,
    live: Live | None = None,
    normalizer: Normalizer | None = None,
) -> ReplayResult:
    """Replay one span live and compare fingerprints; see the module docstring.

    ``live`` says how the tool runs (a callable, a stub, a pinned environment); a ``write``
    span without ``live.stub``, a Python tool without ``live.call`` and a command not
    installed raise ``SpanError``.

        >>> import sys
        >>> span = Span.from_dict({"span_id": "1", "tool_call": {"argv": [sys.executable,
        ...     "-c", "print('ok')"]}, "tool_result": {"exit_code": 0, "stdout": "ok\\n",
        ...     "stderr": ""}})
        >>> replay(span).verdict
        'decision layer'
    """
    mode = ReplayMode.parse(mode)
    live = live or Live()
    norm = normalizer

    def fp(value: Any) -> str:
        return fingerprint(value, norm)

    run: Callable[[], tuple[Any, str | None]]
    recorded_value: Any
    if span.writes and live.stub is not None:
        compared, recorded_value = "stub arguments", live.redacted(live.stub_arguments(span))

        def run() -> tuple[Any, str | None]:
            return live.run_stub(span)[0], None

    else:
        compared, recorded_value = "result", span.tool_result

        def run() -> tuple[Any, str | None]:
            return live.run(span)

    result = ReplayResult(span, mode, compared, fp(recorded_value), recorded_value=recorded_value)
    if compared == "result":
        result.env_drift = live.environment_drift(span)
    if mode in (ReplayMode.DETERMINISM, ReplayMode.BOTH):
        outs = []
        for n in (1, 2):
            value, note = run()
            if note:
                result.notes.append(f"run {n} {note}")
            outs.append(value)
        result.runs = [fp(v) for v in outs]
        result.stable = result.runs[0] == result.runs[1]
        if not result.stable:
            result.changes = changed_paths(normalize(outs[0], norm), normalize(outs[1], norm))
            result.compared_runs = "run 1 and run 2"
            result.live_value = outs[1]
    if mode in (ReplayMode.DRIFT, ReplayMode.BOTH):
        value, note = run()
        if note:
            result.notes.append(f"drift run {note}")
        result.live = fp(value)
        result.drift = result.live != result.recorded
        result.live_value = value
        if result.stable is not False:
            result.changes = changed_paths(normalize(recorded_value, norm), normalize(value, norm))
    return result
