"""Stores: the file store under ``Tape(path)``, and any ``RecordStore`` under ``Tape(store)``."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from tracetape import (
    Cassette,
    CassetteError,
    CassetteNotFoundError,
    FileStore,
    Record,
    RecordStore,
    ReplayMiss,
    Tape,
    read_cassette,
)


class MemoryStore:
    """A store that keeps its recording in a list, as a database store keeps rows."""

    def __init__(self) -> None:
        self.name = "memory://run"
        self.header: dict[str, Any] | None = None
        self.rows: list[Record] | None = None
        self._new: list[Record] = []

    def exists(self) -> bool:
        return self.rows is not None

    def load(self) -> Cassette:
        if self.rows is None:
            raise CassetteNotFoundError("nothing recorded", path=self.name)
        return Cassette(Path(self.name), self.header, list(self.rows))

    def begin(self, header: Mapping[str, Any]) -> None:
        self.header, self._new = dict(header), []

    def append(self, record: Record) -> int:
        self._new.append(record)
        return len(self._new)

    def commit(self) -> None:
        self.rows = [
            Record(**{**{f: getattr(r, f) for f in r.__struct_fields__}, "seq": i})
            for i, r in enumerate(self._new, 1)
        ]

    def abort(self) -> None:
        self._new = []


def _agent(tape: Tape, task: str) -> list[Any]:
    messages = [{"role": "user", "content": task}]
    outs = []
    for step in (1, 2):
        outs.append(tape.call("llm", {"messages": messages, "step": step}, lambda: f"step {step}"))
        messages = [*messages, {"role": "assistant", "content": outs[-1]}]
    return outs


def test_a_tape_records_to_and_replays_from_any_record_store() -> None:
    """``Tape(store)`` needs only the protocol: a store in memory records and replays, and a
    miss names the store."""
    store = MemoryStore()
    assert isinstance(store, RecordStore)
    with Tape(store, mode="record", harness_sha="x") as tape:
        recorded = _agent(tape, "plan")
    assert [r.seq for r in store.rows or []] == [1, 2]
    with Tape(store, mode="replay", harness_sha="x") as tape:
        assert _agent(tape, "plan") == recorded
    with pytest.raises(ReplayMiss) as info, Tape(store, mode="replay", harness_sha="x") as tape:
        _agent(tape, "other plan")
    assert "Tape('memory://run', mode='rewrite')" in str(info.value)


def test_auto_mode_asks_the_store_whether_a_recording_exists() -> None:
    """``mode="auto"`` records into an empty store and replays from a filled one."""
    store = MemoryStore()
    assert Tape(store, mode="auto").mode.value == "record"
    store.rows = []
    assert Tape(store, mode="auto").mode.value == "replay"


def test_abort_keeps_the_previous_recording(tmp_path: Path) -> None:
    """A file store's ``abort`` drops the new recording and leaves the old cassette whole."""
    path = tmp_path / "run.jsonl"
    with Tape(path, mode="record", harness_sha="x") as tape:
        _agent(tape, "first")
    before = path.read_bytes()
    store = FileStore(path)
    store.begin({"tracetape": 1})
    store.append(Record(kind="tool", key="tool:1", out="new"))
    store.abort()
    assert path.read_bytes() == before
    assert not path.with_name("run.jsonl.partial").exists()


def test_a_refused_record_does_not_shift_the_next_records_delta(tmp_path: Path) -> None:
    """A record refused for its size is not the base of the next one: the conversation after
    it still reads back in full."""
    path = tmp_path / "run.jsonl"
    messages: list[dict[str, str]] = []
    with Tape(path, mode="record", harness_sha="x", max_record_bytes=4096) as tape:
        for step in range(1, 5):
            messages = [*messages, {"role": "user", "content": f"turn {step}"}]
            payload = {"messages": messages, "step": step}
            if step == 2:
                with pytest.raises(CassetteError, match="record limit"):
                    tape.call("llm", payload, lambda: "x" * 10_000)
                continue
            tape.call("llm", payload, lambda: "ok")
    records = read_cassette(path).records
    assert [len(r.input["messages"]) for r in records] == [1, 3, 4]
    assert [r.seq for r in records] == [1, 2, 3]
