"""The rule table: every pattern's severity and fix, the seed's rows, overrides by pattern."""

from __future__ import annotations

from pathlib import Path

from tests.analysis.helpers import SEED_A, write_jsonl
from tracetape.analysis import (
    AnalysisConfig,
    Severity,
    check_trace,
)
from tracetape.analysis.rules import RULES, classify_table


def test_severity_overrides_apply(tmp_path: Path) -> None:
    """A per-pattern override in the config changes the finding's severity."""
    config = AnalysisConfig(rules=classify_table({"duplicate-call": "fatal"}))
    report = check_trace(write_jsonl(tmp_path / "t.jsonl", SEED_A), config=config)
    assert [(f.pattern, f.severity) for f in report.findings] == [
        ("duplicate-call", Severity.FATAL)
    ]


def test_every_rule_has_a_fix_and_the_seed_rows() -> None:
    """The rule table keeps the seed's four fixes for its four patterns."""
    assert RULES["duplicate-call"].fix == "Cap tool calls per step"
    assert RULES["external-drift"].fix == "Add freshness checks to context"
    assert RULES["exploration"].fix == "Tighten tool budget or prompt"
    assert RULES["fanout"].fix == "Reduce available tools"
    assert all(rule.fix and rule.evidence for rule in RULES.values())
    assert classify_table() == RULES
