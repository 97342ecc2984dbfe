"""The rule table: every pattern's severity and fix, the seed's rows, overrides by pattern."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.analysis.helpers import SEED_A, write_jsonl
from tracetape.analysis import (
    AnalysisConfig,
    Severity,
    check_trace,
)
from tracetape.analysis.rules import RULES, classify_table, rules_markdown


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


@pytest.mark.parametrize(
    ("overrides", "said"),
    [
        pytest.param(
            {"duplicate_call": "fatal"},
            r"^\[tool.tracetape.severity\]: unknown pattern 'duplicate_call'; patterns: .*drift",
            id="unknown-pattern",
        ),
        pytest.param(
            {"drift": "critical"},
            r"^\[tool.tracetape.severity\] drift: 'critical' is not a valid severity; use one of "
            r"'expected', 'suspicious', 'fatal'$",
            id="unknown-severity",
        ),
    ],
)
def test_a_wrong_override_names_it_and_what_is_valid(overrides: dict[str, str], said: str) -> None:
    """An unknown pattern lists the patterns; an unknown severity lists the severities."""
    with pytest.raises(ValueError, match=said):
        classify_table(overrides)


def test_an_override_changes_only_its_rules_severity() -> None:
    """The evidence and the fix stay; other rules and the table itself are untouched."""
    table = classify_table({"write-echo": "fatal"})
    assert table["write-echo"].severity is Severity.FATAL
    assert (table["write-echo"].evidence, table["write-echo"].fix) == (
        RULES["write-echo"].evidence,
        RULES["write-echo"].fix,
    )
    assert RULES["write-echo"].severity is Severity.EXPECTED
    assert {p: r for p, r in table.items() if p != "write-echo"} == {
        p: r for p, r in RULES.items() if p != "write-echo"
    }


def test_the_markdown_table_has_a_row_per_rule_in_order() -> None:
    """The README's table: its header, then every rule in the table's order."""
    rows = rules_markdown().splitlines()
    assert rows[:2] == [
        "| pattern | default severity | evidence | suggested fix |",
        "|---|---|---|---|",
    ]
    assert [row.split(" | ")[0].removeprefix("| `").removesuffix("`") for row in rows[2:]] == list(
        RULES
    )
