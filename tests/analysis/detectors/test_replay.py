"""Mock replay: the candidate's calls answered from the baseline's, counting the calls it answers
differently and those it never recorded."""

from __future__ import annotations

from pathlib import Path

from tests.analysis.helpers import call, diff, patterns


def test_mock_replay_counts_mismatches_and_misses(tmp_path: Path) -> None:
    """Replaying the candidate against the baseline counts changed outputs and unrecorded calls."""
    a = [call("A", 1, "s", {"q": 1}, "x"), call("A", 2, "s", {"q": 2}, "y")]
    b = [
        call("B", 1, "s", {"q": 1}, "x"),
        call("B", 2, "s", {"q": 2}, "z"),
        call("B", 3, "s", {"q": 3}, "w"),
    ]
    report = diff(tmp_path, a, b)
    assert report.replay == {"unique": 3, "mismatches": 1, "unrecorded": 1}
    assert {"replay-mismatch", "replay-miss"} <= set(patterns(report))
