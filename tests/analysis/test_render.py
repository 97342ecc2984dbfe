"""Rendering a report: the seed's summary lines, a capped pattern's count of the rest, in text and
Markdown."""

from __future__ import annotations

from pathlib import Path

from tests.analysis.helpers import SEED_A, SEED_B, call, diff, write_jsonl
from tracetape.analysis import (
    AnalysisConfig,
    check_trace,
    render_markdown,
    render_text,
    summary_lines,
)
from tracetape.analysis.render import verdict_text


def test_the_seed_example_prints_the_seed_lines(tmp_path: Path) -> None:
    """The seed's two traces give its repeat, drift and replay lines (the drift naming where
    it shows)."""
    report = diff(tmp_path, SEED_A, SEED_B)
    assert summary_lines(report) == [
        "repeat: run_0042 step 1 == step 2 (same args, same output)",
        "drift: search_issues -> 2 distinct outputs (step 1, call #1)",
        "replay: 1 unique call, 1 mock mismatch",
    ]
    assert report.replay == {"unique": 1, "mismatches": 1, "unrecorded": 0}


def test_a_capped_pattern_ends_with_how_many_more(tmp_path: Path) -> None:
    """A pattern with more findings than a report keeps ends its lines with one counting the
    rest, in text and Markdown; the count in the table stays exact."""
    records = [call(f"r{i}", 1, "search", {"q": "x"}, "o") for i in range(5) for _ in range(2)]
    path = write_jsonl(tmp_path / "t.jsonl", records)
    report = check_trace(path, config=AnalysisConfig(max_examples=2))
    more = "… and 3 more duplicate-call findings (a report keeps the first 2; counts are exact)"
    lines = render_text(report).splitlines()
    assert lines[2] == more
    assert more in render_markdown(report)
    assert report.counts["duplicate-call"] == 5


def test_the_verdict_in_two_lines(tmp_path: Path) -> None:
    """A list of runs shows a diff as two lines: where B diverged and why, and what each run
    came to; runs that do not diverge say so."""
    report = diff(tmp_path, SEED_A, SEED_B)
    assert verdict_text(report).splitlines() == [
        "B diverged from A at step 1 (call #1): the tool search_issues returned another result "
        "for the same call  [cause: tool]",
        "B: 1 call (A 2), 817 tokens (A 1624)",
    ]
    same = diff(tmp_path, SEED_A, SEED_A)
    assert verdict_text(same).splitlines()[0] == "B does not diverge from A"
