"""One run's page: its decisions step by step (a step row only where records say one), each
bar of its timeline a link to its row, long texts folded, nothing clipped."""

from __future__ import annotations

from pathlib import Path

from tests.collector.pages.triage import SYSTEM, record_triage
from tracetape.collector.pages import run_page
from tracetape.formats.cassette import read_cassette
from tracetape.record import Record

SUMMARY = {"events": 3, "steps": 1, "last_seen": 0.0}


def test_records_without_a_step_show_none_and_every_bar_links_its_row() -> None:
    """An env read with no step gets no "step None" row; each decision is a row ``d{n}`` and
    its timeline bar links there."""
    html = run_page("r1", SUMMARY, [
        Record(kind="env", name="HOME", out="/root"),
        Record(kind="tool", name="ls", step=1, input={"args": {}}, out="a b", ms=3.0),
    ])  # fmt: skip
    assert "step None" not in html and html.count("<tr class=step>") == 1
    assert "id=d1" in html and "id=d2" in html
    assert "href='#d1'" in html and "href='#d2'" in html


def test_a_long_system_prompt_is_folded_not_clipped(tmp_path: Path) -> None:
    """The triage agent's 3.2 KB system prompt shows its first and last lines with the middle
    folded in a details (opened by a click, no script needed); no box scrolls inside."""
    path = record_triage(tmp_path / "t.jsonl", "a")
    records = read_cassette(path).records
    html = run_page("t", {**SUMMARY, "events": len(records)}, records)
    assert len(SYSTEM) > 3000
    assert "Rule 1:" in html and "Rule 23:" in html
    assert "<details class=fold>" in html and "unchanged lines" not in html.split("id=d2")[0]
    assert "max-height" not in html.split("<style>")[1].split(".part .text")[1].split("}")[0]
