"""The records behind an analysis's calls: read back whole (or brief) from a store's texts,
a list of records, a cassette kept as read or read again; none from the seed's JSONL."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from tests.analysis.helpers import call, write_jsonl
from tracetape import Tape
from tracetape.analysis import AnalysisConfig, load
from tracetape.analysis.engine import ROW_BITS, Calls, Input
from tracetape.analysis.load import load_records
from tracetape.analysis.records import Brief, records_at
from tracetape.record import Record, RecordTexts

RECORDS = [
    Record(kind="tool", run="r", name="w", input={"args": {"c": 1}}, out="9", ms=2.5),
    Record(kind="llm", run="r", name="m", api="openai.chat.completions", out={"x": 1},
           usage={"input": 3, "output": 4}, tokens=7),
]  # fmt: skip


def _ords(calls: Calls, index: int) -> list[int]:
    rows = calls.rows("SELECT rowid FROM calls0 WHERE file = ? ORDER BY rowid", [index])
    return [index << ROW_BITS | rowid for (rowid,) in rows]


def test_a_stores_texts_give_records_whole_or_brief() -> None:
    """Texts decode to the records they were; brief, without their input and output."""
    with Calls(AnalysisConfig()) as calls:
        load_records(calls, RecordTexts([msgspec.json.encode(r) for r in RECORDS]), "s")
        ords = _ords(calls, 0)
        assert [records_at(calls, ords)[o] for o in ords] == RECORDS
        briefs = records_at(calls, ords, brief=True)
        assert [type(briefs[o]) for o in ords] == [Brief, Brief]
        assert (briefs[ords[1]].api, briefs[ords[1]].usage, briefs[ords[0]].ms) == (
            "openai.chat.completions", {"input": 3, "output": 4}, 2.5,
        )  # fmt: skip


@pytest.mark.parametrize("keep", [True, False], ids=["kept-as-read", "read-again"])
def test_a_cassette_gives_its_records_kept_or_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, keep: bool
) -> None:
    """A cassette's records come back in order, with their outputs, whether kept as read
    or read again."""
    path = tmp_path / "c.jsonl"
    with Tape(path, mode="record", harness_sha="t") as tape:
        for i in range(3):
            tape.call("tool", {"name": "w", "args": {"i": i}, "step": 1}, lambda i=i: i * 10)
    if not keep:
        monkeypatch.setattr(load, "KEEP_BYTES", 0)
    with Calls(AnalysisConfig()) as calls:
        load.load(calls, [Input(path)])
        assert (0 in calls.kept) is keep
        ords = _ords(calls, 0)
        found = records_at(calls, ords)
        assert [found[o].out for o in ords] == [0, 10, 20]
        assert calls.endings == {next(iter(calls.endings)): "completed"}


def test_seed_lines_hold_no_more_than_their_rows(tmp_path: Path) -> None:
    """The seed's JSONL (read by DuckDB) gives no record back: its rows are all it holds."""
    path = write_jsonl(tmp_path / "t.jsonl", [call("r", 1, "s", {}, "o")])
    with Calls(AnalysisConfig()) as calls:
        load.load(calls, [Input(path)])
        assert records_at(calls, [0, 1, 2]) == {}
