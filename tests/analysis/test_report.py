"""The report of an analysis: its worst severity, findings at or above one, the invariants it
breaks (counted exactly, beyond the examples kept), one table row per pattern, worst first, and
its JSON; evidence redacted before people see it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.analysis.helpers import SEED_A, check
from tracetape.analysis import Severity
from tracetape.analysis.report import Finding, Report, redacted


def _finding(pattern: str, severity: Severity) -> Finding:
    """A finding of ``pattern`` at ``severity``."""
    return Finding(pattern, severity, f"{pattern}: x", "fix it", run="r", step=1)


def _report(*findings: Finding, counts: dict[str, int] | None = None) -> Report:
    """A report of ``findings``, each counted once unless ``counts`` says otherwise."""
    found = counts if counts is not None else {f.pattern: 1 for f in findings}
    return Report(inputs=["t.jsonl"], findings=list(findings), counts=found, runs=1, events=3)


def test_severities_rank_findings() -> None:
    """The worst is the highest severity; ``at_least`` keeps findings of that rank and up."""
    drift = _finding("drift", Severity.SUSPICIOUS)
    echo = _finding("write-echo", Severity.EXPECTED)
    write = _finding("duplicate-write", Severity.FATAL)
    report = _report(echo, drift, write)
    assert report.worst is Severity.FATAL and _report().worst is None
    assert report.at_least(Severity.SUSPICIOUS) == [drift, write]
    assert report.at_least(Severity.EXPECTED) == [echo, drift, write]


def test_broken_invariants_are_counted_beyond_the_examples_kept() -> None:
    """Only the bounds ``check`` enforces are invariants; their count is the exact one."""
    fanout = _finding("fanout", Severity.SUSPICIOUS)
    budget = _finding("call-budget", Severity.FATAL)
    drift = _finding("drift", Severity.SUSPICIOUS)
    report = _report(fanout, budget, drift, counts={"fanout": 40, "call-budget": 1, "drift": 9})
    assert report.broken_invariants == [fanout, budget]
    assert report.broken_count == 41
    assert fanout.invariant and not drift.invariant


def test_the_table_has_a_row_per_pattern_worst_first() -> None:
    """A pattern's first finding makes its row, with the exact count; fatal rows come first,
    then by pattern name."""
    report = _report(
        _finding("drift", Severity.SUSPICIOUS),
        _finding("drift", Severity.SUSPICIOUS),
        _finding("duplicate-write", Severity.FATAL),
        _finding("duplicate-call", Severity.SUSPICIOUS),
        counts={"drift": 7, "duplicate-write": 1, "duplicate-call": 2},
    )
    assert [(r["pattern"], r["severity"], r["count"]) for r in report.table()] == [
        ("duplicate-write", "fatal", 1),
        ("drift", "suspicious", 7),
        ("duplicate-call", "suspicious", 2),
    ]


def test_the_json_of_a_report_is_its_whole(tmp_path: Path) -> None:
    """Every field, the worst severity by name, findings as their own JSON."""
    report = check(tmp_path, SEED_A)
    data = report.to_dict()
    assert data["worst"] == "suspicious" and data["runs"] == 1 and data["events"] == 2
    assert data["findings"] == [f.to_dict() for f in report.findings]
    assert data["findings"][0]["invariant"] is False
    assert data["table"] == report.table() and data["divergence"] is None


@pytest.mark.parametrize("where", ["value", "nested"])
def test_evidence_is_redacted(where: str) -> None:
    """A secret anywhere in the evidence becomes a placeholder; other values stay as they are."""
    secret = "sk-proj-Zz9Yy8Xx7Ww6Vv5Uu4Tt3Ss2Rr1Qq0Pp"
    data = {"args": {"key": secret}} if where == "nested" else {"args": f"use {secret}"}
    clean = redacted({**data, "step": 3})
    assert secret not in str(clean) and "[REDACTED:openai_key:" in str(clean)
    assert clean["step"] == 3
