"""Drift: the same call with another output, and its cause (the run's own write to the resource: an
echo; no write first: external; no effect tags, or a write to no named resource: undetermined)."""

from __future__ import annotations

from pathlib import Path

from tests.analysis.helpers import SEED_A, SEED_B, call, check, diff, patterns
from tracetape.analysis import (
    Severity,
)


def test_drift_after_a_local_write_is_an_expected_echo(tmp_path: Path) -> None:
    """A read whose output changed after the run's own write to the same resource is expected."""
    records = [
        call("A", 1, "read_file", {"path": "notes.md"}, "v1", effect="read"),
        call("A", 2, "write_file", {"path": "notes.md", "body": "new"}, "ok", effect="write"),
        call("A", 3, "read_file", {"path": "notes.md"}, "v2", effect="read"),
    ]
    report = check(tmp_path, records)
    assert patterns(report) == ["write-echo"]  # and no changed-output repeat: the write explains it
    finding = report.findings[0]
    assert finding.severity is Severity.EXPECTED
    assert finding.evidence["within_run"] is True


def test_drift_without_a_local_write_is_external(tmp_path: Path) -> None:
    """With effect tags and no write to the resource, changed output is external drift."""
    records = [
        call("A", 1, "read_file", {"path": "notes.md"}, "v1", effect="read"),
        call("A", 2, "write_file", {"path": "other.md"}, "ok", effect="write"),
        call("A", 3, "read_file", {"path": "notes.md"}, "v2", effect="read"),
    ]
    (finding,) = [f for f in check(tmp_path, records).findings if f.message.startswith("drift")]
    assert finding.pattern == "external-drift"


def test_drift_across_runs_after_a_write_in_one_run_is_an_echo(tmp_path: Path) -> None:
    """Across runs, the output that differs only where that run wrote first is the write's echo."""
    a = [call("A", 1, "get_record", {"id": 7}, "old", effect="read")]
    b = [
        call("B", 1, "update_record", {"id": 7, "v": 2}, "ok", effect="write"),
        call("B", 2, "get_record", {"id": 7}, "new", effect="read"),
    ]
    drift = [f for f in diff(tmp_path, a, b).findings if f.message.startswith("drift")]
    assert [f.pattern for f in drift] == ["write-echo"]


def test_drift_without_effect_tags_has_an_undetermined_cause(tmp_path: Path) -> None:
    """Without effect tags a drift is reported with its cause undetermined."""
    (finding,) = [
        f for f in diff(tmp_path, SEED_A, SEED_B).findings if f.message.startswith("drift")
    ]
    assert finding.pattern == "drift"
    assert "undetermined" in finding.evidence["cause"]


def test_drift_after_a_write_to_an_unnamed_resource_is_undetermined(tmp_path: Path) -> None:
    """A read naming no resource, after some write, drifts with an undetermined cause."""
    records = [
        call("A", 1, "search", {"q": "x"}, "v1", effect="read"),
        call("A", 2, "write_file", {"path": "notes.md"}, "ok", effect="write"),
        call("A", 3, "search", {"q": "x"}, "v2", effect="read"),
    ]
    (finding,) = [f for f in check(tmp_path, records).findings if f.message.startswith("drift")]
    assert finding.pattern == "drift"
    assert "names no resource" in finding.evidence["cause"]
