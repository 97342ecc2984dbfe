"""``Replay``: a recording's replay state (a FIFO queue per key, what was played), replay's
keys, and the diagnosis of a miss, on their own."""

from __future__ import annotations

from pathlib import Path

import pytest

from tracetape import Match, Tape
from tracetape.errors import (
    CassetteNotFoundError,
    MatchRulesError,
    TapeWarning,
    UnplayedDecisionsError,
)
from tracetape.record import RAISED, Decision, Record
from tracetape.redact import Redactor
from tracetape.replay import Replay
from tracetape.stores import FileStore


def _records() -> list[Record]:
    return [
        Record(kind="tool", key="tool:a", step=1, out=1, seq=1),
        Record(kind="tool", key="tool:a", step=2, out=2, seq=2),
        Record(kind="llm", key="llm:b", step=2, out="x", seq=3),
    ]


def test_a_key_recorded_twice_plays_in_recorded_order() -> None:
    """Each key's queue holds its records' indices in recorded order; each kind's too."""
    replay = Replay(_records(), Redactor(), Match())
    assert list(replay.queues) == ["tool:a", "llm:b"]
    assert list(replay.queues["tool:a"]) == [0, 1] and replay.by_kind == {
        "tool": [0, 1],
        "llm": [2],
    }
    replay.played[0] = 1
    assert replay.matched == 1 and [r.seq for r in replay.unplayed()] == [2, 3]
    assert replay.next_unplayed("tool") is replay.records[1]


def test_a_state_of_one_key_plays_apart() -> None:
    """``only(key)`` replays that key's first record with played flags of its own."""
    replay = Replay(_records(), Redactor(), Match())
    only = replay.only("tool:a")
    assert list(only.queues) == ["tool:a"] and list(only.queues["tool:a"]) == [0]
    only.played[0] = 1
    assert replay.matched == 0 and list(replay.queues["tool:a"]) == [0, 1]


def test_unplayed_is_reported_and_strict_raises() -> None:
    """Unplayed records are a warning naming the first of them, or under ``strict`` an
    ``UnplayedDecisionsError`` holding them; none, nothing."""
    replay = Replay(_records(), Redactor(), Match())
    with pytest.warns(
        TapeWarning, match=r"run\.jsonl: 3 recorded decision\(s\) were never played: #1"
    ):
        replay.report_unplayed("run.jsonl", strict=False)
    with pytest.raises(UnplayedDecisionsError) as info:
        replay.report_unplayed("run.jsonl", strict=True)
    assert len(info.value.unplayed) == 3
    replay.played[:] = b"\x01\x01\x01"
    replay.report_unplayed("run.jsonl", strict=True)


def test_a_request_that_always_failed_fails_again() -> None:
    """An ``http`` request whose every recorded attempt failed, asked once more, gets its last
    failure; its extra failures are not unplayed once one was played."""
    failed = {RAISED: {"type": "ConnectError", "message": "down"}}
    records = [Record(kind="http", key="http:1", out=failed, seq=n) for n in (1, 2)]
    replay = Replay(records, Redactor(), Match())
    decision = replay.decision("http", {"url": "u"}, None, False)
    assert replay.failed_again(decision) is None  # still queued
    replay.queues["http:1"].clear()
    replay.played[0] = 1
    again = replay.failed_again(Decision("http", "http:1", b"{}", None))
    assert again is records[1] and replay.unplayed() == []


def test_replay_keys_as_recording_keys(tmp_path: Path) -> None:
    """A payload replay keys is the key its recording wrote, under match rules too; a payload
    never recorded misses, and the miss names what changed."""
    path = tmp_path / "run.jsonl"
    payload = {"messages": [{"role": "user", "content": "hi"}], "params": {"user": "u"}, "step": 1}
    rules = Match(ignore=["params.user"])
    with Tape(path, mode="record", match=rules) as tape:
        tape.call("llm", payload, lambda: "hello")
    _, replay = Replay.load(FileStore(path), Redactor(), None, "rerecord it")
    assert replay.match == rules
    assert replay.decision("llm", payload, 1, False).key in replay.queues
    other = {**payload, "messages": [{"role": "user", "content": "bye"}]}
    miss = replay.miss(replay.decision("llm", other, 1, False), "rerecord it", None)
    assert miss.changes == ["messages[0].content"] and str(miss).rstrip().endswith("rerecord it")


def test_loading_says_how_to_record_and_refuses_other_rules(tmp_path: Path) -> None:
    """A missing recording says how to record it; rules given that differ from the
    recording's are a ``MatchRulesError`` naming how to migrate or re-record."""
    path = tmp_path / "run.jsonl"
    with pytest.raises(CassetteNotFoundError, match="mode='record'"):
        Replay.load(FileStore(path), Redactor(), None, "again")
    with Tape(path, mode="record") as tape:
        tape.call("tool", {"name": "t", "step": 1}, lambda: 1)
    with pytest.raises(MatchRulesError, match=r"tracetape migrate .* re-record it: again"):
        Replay.load(FileStore(path), Redactor(), Match(mask=["uuid"]), "again")
