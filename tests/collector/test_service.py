"""The collector's own work below its routes: a batch stored and its runs queued (with
their diff where it ended a recording), and the key of a kept diff page."""

from __future__ import annotations

from pathlib import Path

from tests.analysis.helpers import record_tools
from tests.collector.test_app import jsonl, seed_line
from tracetape.analysis import AnalysisConfig
from tracetape.collector.service import Collector, Settings
from tracetape.stores.database import Database


def test_a_stored_batch_queues_its_runs_and_an_ended_recording_its_diff(
    db: Database, tmp_path: Path
) -> None:
    """Lines that end a recording queue the run with its diff (a verdict against the run
    before it, and that page kept); lines that do not, without."""
    collector = Collector(db, Settings())
    queued: list[tuple[str, bool]] = []
    collector.summaries.add = lambda runs, diff=False: queued.extend((r, diff) for r in runs)  # type: ignore[method-assign]
    first = record_tools(tmp_path / "first.jsonl", ["9"])
    said = collector.store(first.read_bytes(), "agent.jsonl", 0, "auto", run="first")
    assert said["stored"] == 1 and said["runs"] == ["first"]
    collector.store(jsonl(seed_line("live", 1)), "live.jsonl", 0, "auto")
    again = collector.store(first.read_bytes(), "agent.jsonl", 0, "auto", run="first")
    assert again["duplicate"] is True
    assert queued == [("first", True), ("live", False)]  # a batch sent again queues nothing
    collector.close()


def test_a_kept_pages_key_says_what_it_read(db: Database) -> None:
    """The key changes with the runs (and their order), their event counts and endings; it
    is the same for the same reading."""
    collector = Collector(db, Settings())
    key = collector.page_key
    base = key(("a", "b"), (3, 4), {"a": "completed"})
    assert base == key(("a", "b"), (3, 4), {"a": "completed"})
    assert len({
        base,
        key(("b", "a"), (3, 4), {"a": "completed"}),
        key(("a", "b"), (3, 5), {"a": "completed"}),
        key(("a", "b"), (3, 4), {"a": "interrupted"}),
        key(("a", "b"), (3, 4), {}),
    }) == 5  # fmt: skip
    other = Collector(db, Settings(config=AnalysisConfig(max_examples=3)))
    assert other.page_key(("a", "b"), (3, 4), {"a": "completed"}) != base  # another config
    collector.close()
    other.close()
