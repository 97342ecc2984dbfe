"""Classification: every finding gets a pattern, a severity and a suggested fix.

The rule table starts from the seed's decision table and adds rules for the other findings.
Severities are ``expected`` < ``suspicious`` < ``fatal``; ``[tool.tracetape.severity]``
overrides them per pattern::

    [tool.tracetape.severity]
    duplicate-call = "fatal"
    write-echo = "suspicious"

=====================  ==========  =========================================================
pattern                severity    when
=====================  ==========  =========================================================
duplicate-call         suspicious  same args, same output, repeated in a run (seed table)
repeat-changed-output  suspicious  same args, different output, repeated in a run with no
                                   local write between
drift                  suspicious  same args, different output; cause undetermined (no effect
                                   tags, or a write to an unnamed resource came first)
external-drift         suspicious  same args, different output, no local write came first
                                   (seed table: "external data changed")
write-echo             expected    the output changed after the run's own write to the same
                                   resource (the cascade of a local write)
exploration            suspicious  same tool, different args, many times in a step (seed)
fanout                 suspicious  tool-call count per step above the bound (seed table)
duplicate-write        fatal       a write/irreversible call repeated with the same args
repeat-budget          fatal       a call repeated more often than ``max_repeats``
call-budget            fatal       more calls in a run than ``max_calls``
token-budget           fatal       more tokens in a run than ``max_tokens``
step-budget            fatal       more steps in a run than ``max_steps``
step-budget-hit        suspicious  a run stopped exactly at ``max_steps``
model-drift            suspicious  the same model request, another answer (the model is not
                                   deterministic on it)
divergence             by effect   where the runs part (the origin) or change again on their
                                   own, with its cause (``causes``): fatal where the candidate
                                   failed or was interrupted where the baseline did not;
                                   suspicious where the final answer, the number of calls or
                                   the ending changed (or the records cannot tell); expected
                                   where the candidate came to the same final answer and end
divergent-write        fatal       the runs diverge at a write or irreversible call
replay-mismatch        suspicious  a recorded call returns another output in the second run
replay-miss            suspicious  the second run made calls the first never recorded
=====================  ==========  =========================================================

The suggested fix of each pattern is in ``RULES`` (the seed's fixes for its four rows); a
divergence's fix is its cause's (``causes.CAUSES``). A ``[tool.tracetape.severity]`` override
of ``divergence`` sets its severity whatever the effect.

``fanout`` and the ``*-budget`` patterns are the invariants ``tracetape check`` enforces.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from .._enums import LoudEnum

__all__ = [
    "INVARIANTS",
    "RULES",
    "Rule",
    "Severity",
    "classify_table",
    "divergence_severity",
    "rules_markdown",
]


class Severity(LoudEnum):
    """How bad a finding is, ordered: ``expected`` < ``suspicious`` < ``fatal``."""

    EXPECTED = "expected"
    SUSPICIOUS = "suspicious"
    FATAL = "fatal"

    @property
    def rank(self) -> int:
        """0 for expected, 1 for suspicious, 2 for fatal."""
        return _RANK[self]


_RANK = {Severity.EXPECTED: 0, Severity.SUSPICIOUS: 1, Severity.FATAL: 2}


@dataclass(frozen=True)
class Rule:
    """One row of the rule table: what a pattern means and what to do about it."""

    pattern: str
    severity: Severity
    evidence: str
    fix: str


def _rule(pattern: str, severity: str, evidence: str, fix: str) -> Rule:
    return Rule(pattern, Severity(severity), evidence, fix)


RULES: dict[str, Rule] = {
    r.pattern: r
    for r in (
        _rule(
            "duplicate-call",
            "suspicious",
            "same args, same output, repeated: retry loop or duplicate call",
            "Cap tool calls per step",
        ),
        _rule(
            "repeat-changed-output",
            "suspicious",
            "same args, different output, repeated in one run with no local write between: "
            "the data changed between two identical calls",
            "Add freshness checks to context; cap tool calls per step",
        ),
        _rule(
            "drift",
            "suspicious",
            "same args, different output; whether a local write caused it is undetermined "
            "(no effect tags, or a write to an unnamed resource came first)",
            "Tag tools read/write to tell external drift from local writes; add freshness "
            "checks to context",
        ),
        _rule(
            "external-drift",
            "suspicious",
            "same args, different output, and no local write to the resource came first: "
            "external data changed",
            "Add freshness checks to context",
        ),
        _rule(
            "write-echo",
            "expected",
            "same args, different output, after the run's own write to the same resource: "
            "the expected echo of a local write",
            "Nothing to fix; keep the tools' effect tags",
        ),
        _rule(
            "exploration",
            "suspicious",
            "different args, same tool, many times in a step: the model is exploring too much",
            "Tighten tool budget or prompt",
        ),
        _rule(
            "fanout",
            "suspicious",
            "tool count spikes per step: agent browsing instead of deciding",
            "Reduce available tools",
        ),
        _rule(
            "duplicate-write",
            "fatal",
            "a write or irreversible call repeated with the same args: a duplicated side effect",
            "Make the tool idempotent (idempotency key) or cap retries of write tools",
        ),
        _rule(
            "repeat-budget",
            "fatal",
            "a call repeated more often than max_repeats in one run",
            "Break the retry loop: cap tool calls per step",
        ),
        _rule(
            "call-budget",
            "fatal",
            "a run made more tool and model calls than max_calls",
            "Cap calls per run or split the task",
        ),
        _rule(
            "token-budget",
            "fatal",
            "a run used more tokens than max_tokens",
            "Trim the context or cap steps",
        ),
        _rule(
            "step-budget",
            "fatal",
            "a run took more steps than max_steps",
            "Find why the agent does not converge before raising the budget",
        ),
        _rule(
            "step-budget-hit",
            "suspicious",
            "a run stopped exactly at max_steps: it probably ran out of steps",
            "Check that the run finished instead of hitting its step budget",
        ),
        _rule(
            "model-drift",
            "suspicious",
            "the same model request got different answers: the model is not deterministic on "
            "it (no tool data changed)",
            "Pin temperature and seed where the API allows, or make the agent robust to "
            "either answer",
        ),
        _rule(
            "divergence",
            "suspicious",
            "where the runs part, or change again on their own, with a cause (model, tool, "
            "env, input, prompt, config, code, ending); severity by effect: fatal where the "
            "candidate failed where the baseline did not, suspicious where the final answer, "
            "the calls or the ending changed, expected where they did not",
            "The fix of its cause (see the cause table)",
        ),
        _rule(
            "divergent-write",
            "fatal",
            "the runs diverge at a write or irreversible call: the agent now changes the world "
            "differently",
            "Review before shipping; re-record the baseline only if the new write is intended",
        ),
        _rule(
            "replay-mismatch",
            "suspicious",
            "replaying the second run against a mock of the first returns a different output "
            "for a recorded call",
            "Refresh the recording, or add freshness checks where the data is live",
        ),
        _rule(
            "replay-miss",
            "suspicious",
            "the second run made calls the first never recorded: a replay would miss them",
            "Re-record the baseline if the new calls are intended",
        ),
    )
}


class Ended(Protocol):
    """What a divergence's severity reads of the runs' outcome (``report.Outcome``)."""

    @property
    def calls(self) -> tuple[int, int]: ...
    @property
    def failed(self) -> bool: ...
    @property
    def endings_differ(self) -> bool: ...
    @property
    def final_changed(self) -> bool | None: ...


def divergence_severity(rules: Mapping[str, Rule], pattern: str, outcome: Ended | None) -> Severity:
    """The severity of a divergence finding (see the module doc): by the effect on the runs,
    unless ``[tool.tracetape.severity]`` sets the pattern's.

    >>> divergence_severity(RULES, "divergent-write", None)
    <Severity.FATAL: 'fatal'>
    """
    rule = rules[pattern]
    if rule is not RULES[pattern] or pattern != "divergence":
        return rule.severity
    if outcome is None:
        return Severity.SUSPICIOUS
    if outcome.failed:
        return Severity.FATAL
    same_end = outcome.calls[0] == outcome.calls[1] and not outcome.endings_differ
    if outcome.final_changed is False and same_end:
        return Severity.EXPECTED
    return Severity.SUSPICIOUS


INVARIANTS = frozenset({"fanout", "repeat-budget", "call-budget", "token-budget", "step-budget"})


def classify_table(overrides: Mapping[str, Any] | None = None) -> dict[str, Rule]:
    """Return the rule table with ``[tool.tracetape.severity]`` overrides applied.

    Raises ``ValueError`` naming an unknown pattern or severity and listing the valid ones.

    >>> classify_table({"duplicate-call": "fatal"})["duplicate-call"].severity
    <Severity.FATAL: 'fatal'>
    """
    table = dict(RULES)
    for pattern, value in (overrides or {}).items():
        if pattern not in table:
            known = ", ".join(sorted(RULES))
            raise ValueError(
                f"[tool.tracetape.severity]: unknown pattern {pattern!r}; patterns: {known}"
            )
        try:
            severity = Severity.parse(value)
        except ValueError as exc:
            raise ValueError(f"[tool.tracetape.severity] {pattern}: {exc}") from None
        rule = table[pattern]
        table[pattern] = Rule(pattern, severity, rule.evidence, rule.fix)
    return table


def rules_markdown() -> str:
    """The rule table as the README shows it (a test keeps the README equal to this).

    >>> rules_markdown().splitlines()[2].startswith("| `duplicate-call` | suspicious |")
    True
    """
    rows = ["| pattern | default severity | evidence | suggested fix |", "|---|---|---|---|"]
    rows += [
        f"| `{r.pattern}` | {r.severity.value} | {r.evidence} | {r.fix} |" for r in RULES.values()
    ]
    return "\n".join(rows) + "\n"
