"""The first divergence of two runs: where they first disagree, the changed field paths, the end of
the shorter run, a divergence at a write."""

from __future__ import annotations

from pathlib import Path

from tests.analysis.helpers import call, diff, patterns
from tracetape.analysis import (
    Severity,
)


def test_first_divergence_names_the_changed_field_paths(tmp_path: Path) -> None:
    """The first position where the runs disagree is reported with both calls and field paths."""
    a = [
        call("A", 1, "search", {"q": "x", "page": 1}, "o1"),
        call("A", 2, "read", {"path": "f", "opts": {"n": 1}}, "o2"),
    ]
    b = [
        call("B", 1, "search", {"q": "x", "page": 1}, "o1"),
        call("B", 2, "read", {"path": "f", "opts": {"n": 2}}, "o2"),
    ]
    report = diff(tmp_path, a, b)
    div = report.divergence
    assert div is not None
    assert div.position == 2
    assert report.aligned == 1
    assert [c.path for c in div.changes] == ["args.opts.n"]
    assert (div.a["run"], div.b["run"], div.a["step"]) == ("A", "B", 2)  # type: ignore[index]
    assert patterns(report) == ["divergence", "replay-miss"]


def test_a_run_that_stops_early_diverges_at_its_end(tmp_path: Path) -> None:
    """When one run is a prefix of the other, the divergence is where the shorter one ended."""
    a = [call("A", 1, "s", {"i": 1}, "o"), call("A", 2, "s", {"i": 2}, "o")]
    report = diff(tmp_path, a, a[:1])
    assert report.divergence is not None
    assert report.divergence.position == 2
    assert report.divergence.b is None


def test_a_divergence_at_a_write_is_fatal(tmp_path: Path) -> None:
    """Runs that diverge at a write call produce a fatal divergent-write finding."""
    a = [call("A", 1, "write_file", {"path": "x", "body": "1"}, "ok", effect="write")]
    b = [call("B", 1, "write_file", {"path": "x", "body": "2"}, "ok", effect="write")]
    report = diff(tmp_path, a, b)
    assert report.worst is Severity.FATAL
    assert "divergent-write" in patterns(report)
