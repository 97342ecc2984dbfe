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
divergence             suspicious  the second run made a different call than the first
divergent-write        fatal       the runs diverge at a write or irreversible call
replay-mismatch        suspicious  a recorded call returns another output in the second run
replay-miss            suspicious  the second run made calls the first never recorded
=====================  ==========  =========================================================

The suggested fix of each pattern is in ``RULES`` (the seed's fixes for its four rows).

``fanout`` and the ``*-budget`` patterns are the invariants ``tracetape check`` enforces.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .._enums import LoudEnum

__all__ = ["INVARIANTS", "RULES", "Rule", "Severity", "classify_table", "rules_markdown"]


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
            "divergence",
            "suspicious",
            "the second run made a different call than the first at this position",
            "If the change is intended, re-record the baseline; else inspect the changed fields",
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
