"""``Replay``: a recording's replay state (a FIFO queue per key, what was played), replay's
keys, and the diagnosis of a miss, on their own."""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from tracetape import Match, Tape
from tracetape.config import _load
from tracetape.errors import (
    CassetteError,
    CassetteNotFoundError,
    ConfigError,
    MatchRulesError,
    TapeWarning,
    UnplayedDecisionsError,
)
from tracetape.formats.cassette import seal_line, verify_seal
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


# -- a sealed cassette edited by hand ----------------------------------------------------------

FIXTURES = Path(__file__).parent / "fixtures"


def _recorded(path: Path) -> Path:
    """A sealed cassette of six lines: its header, four records (``f(i)`` is ``{"n": i}``)
    and its trailer."""
    with Tape(path, mode="record") as tape:
        for i in range(4):
            tape.call("tool", {"name": "f", "args": {"i": i}, "step": 1}, lambda i=i: {"n": i})
    return path


def _replayed(path: Path, **options: Any) -> list[Any]:
    """The four calls of ``_recorded``, replayed."""
    with Tape(path, mode="replay", **options) as tape:
        return [
            tape.call("tool", {"name": "f", "args": {"i": i}, "step": 1}, lambda: 1 / 0)
            for i in range(4)
        ]


def _edited(path: Path, edit: Callable[[list[bytes]], list[bytes]]) -> Path:
    """``path`` with its lines (without their newlines) changed by ``edit``."""
    lines = path.read_bytes().splitlines()
    path.write_bytes(b"\n".join(edit(lines)) + b"\n")
    return path


def _sub(line: bytes, old: bytes, new: bytes) -> bytes:
    assert line.count(old) == 1
    return line.replace(old, new)


def _forged(lines: list[bytes]) -> list[bytes]:
    """A fifth record inserted before the trailer, chained to the fourth as a recorder would
    chain it: a forger who knows the format."""
    record = orjson.loads(lines[4])
    del record["chain"]
    record.update(seq=5, out={"n": 99})
    line, _ = seal_line(orjson.loads(lines[4])["chain"], orjson.dumps(record) + b"\n")
    return [*lines[:5], line.rstrip(b"\n"), lines[5]]


@pytest.fixture
def _no_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The test runs in its own folder, with no pyproject but the one it writes."""
    monkeypatch.chdir(tmp_path)
    _load.cache_clear()
    yield
    _load.cache_clear()


def test_a_changed_output_refuses_replay_naming_its_line(tmp_path: Path) -> None:
    """One byte of a recorded output changed by hand: replay refuses with a ``CassetteError``
    naming the file and the line, and saying what to do (verify, re-record, or trust it)."""
    path = _edited(_recorded(tmp_path / "run.jsonl"), lambda ls: [
        *ls[:2], _sub(ls[2], b'"n":1', b'"n":7'), *ls[3:]
    ])  # fmt: skip
    with pytest.raises(CassetteError) as refused:
        _replayed(path)
    message = str(refused.value)
    assert refused.value.line == 3 and refused.value.path == str(path)
    assert message.startswith(f"{path}:3: the record was changed"), message
    for advice in (
        f"tracetape verify {path}",
        f"re-record it (Tape({str(path)!r}, mode='rewrite'))",
        "Tape(..., trust_edits=True)",
        "tracetape run --trust-edits",
        "[tool.tracetape] trust_edits = true",
    ):
        assert advice in message


@pytest.mark.parametrize(
    ("edit", "line", "reason"),
    [
        pytest.param(lambda ls: [*ls[:2], *ls[3:]], 3,
                     "records were deleted or moved before it (seq 1 is followed by 3)",
                     id="deleted"),
        pytest.param(lambda ls: [*ls[:2], ls[3], ls[2], *ls[4:]], 3,
                     "records were deleted or moved before it (seq 1 is followed by 3)",
                     id="swapped"),
        pytest.param(lambda ls: [*ls, ls[4]], 7, "lines were added after the trailer",
                     id="appended-after-the-trailer"),
        pytest.param(lambda ls: [*ls[:5], ls[1].split(b',"chain"')[0] + b"}", ls[5]], 6,
                     "the record has no chain digest: inserted by hand", id="inserted"),
        pytest.param(_forged, 7, "the trailer seals 4 records and this file holds 5",
                     id="forged-and-chained"),
        pytest.param(lambda ls: [*ls[:2], ls[2][:-1] + b',"out":{"n":9}}', *ls[3:]], 3,
                     "the record was changed", id="a-field-after-the-digest"),
        pytest.param(lambda ls: [_sub(ls[0], b'"tracetape":2,', b'"tracetape": 2,'), *ls[1:]], 2,
                     "the header or this record was changed", id="header-changed"),
    ],
)  # fmt: skip
@pytest.mark.parametrize("mode", ["replay", "fork"])
def test_a_deleted_reordered_or_forged_line_refuses_replay_and_fork(
    tmp_path: Path, edit: Callable[[list[bytes]], list[bytes]], line: int, reason: str, mode: str
) -> None:
    """A deleted, swapped, inserted or appended record, one forged with a digest chained as
    the tape chains it, or a changed header: replay and fork refuse, naming the line."""
    path = _edited(_recorded(tmp_path / "run.jsonl"), edit)
    with pytest.raises(CassetteError, match=f"^{re.escape(f'{path}:{line}: {reason}')}"):
        Tape(path, mode=mode)
    assert not list(tmp_path.glob("*.fork-*"))  # a refused fork writes no branch


def test_trust_edits_warns_naming_the_lines_and_replays_the_edits(tmp_path: Path) -> None:
    """With ``trust_edits``, replay warns once, naming every line at fault, and plays the
    edited outputs."""
    path = _edited(_recorded(tmp_path / "run.jsonl"), lambda ls: [
        ls[0], ls[1], _sub(ls[2], b'"n":1', b'"n":7'), ls[3], _sub(ls[4], b'"n":3', b'"n":8'),
        ls[5],
    ])  # fmt: skip
    with pytest.warns(TapeWarning) as caught:
        outputs = _replayed(path, trust_edits=True)
    assert outputs == [{"n": 0}, {"n": 7}, {"n": 2}, {"n": 8}]
    said = [str(w.message) for w in caught if "seal" in str(w.message)]
    assert said == [
        f"{path}: its seal is broken at lines 3 and 5 (the first: the record was changed (its "
        "bytes no longer match its digest)); it replays as edited by hand, not as recorded, as "
        "trust_edits asks"
    ]
    assert caught[0].filename == __file__  # said where the tape was made


@pytest.mark.usefixtures("_no_project")
def test_the_project_may_trust_edits_and_a_tape_may_overrule_it(tmp_path: Path) -> None:
    """``[tool.tracetape] trust_edits = true`` trusts every tape's edits but a tape's own
    ``trust_edits=False``; a value that is not a boolean is an error naming the file."""
    path = _edited(_recorded(tmp_path / "run.jsonl"), lambda ls: [
        *ls[:2], _sub(ls[2], b'"n":1', b'"n":7'), *ls[3:]
    ])  # fmt: skip
    (tmp_path / "pyproject.toml").write_text("[tool.tracetape]\ntrust_edits = true\n")
    with pytest.warns(TapeWarning, match="its seal is broken at line 3: the record was changed"):
        assert _replayed(path)[1] == {"n": 7}
    with pytest.raises(CassetteError, match=":3: the record was changed"):
        _replayed(path, trust_edits=False)
    (tmp_path / "pyproject.toml").write_text('[tool.tracetape]\ntrust_edits = "yes"\n')
    _load.cache_clear()
    with pytest.raises(ConfigError, match=r"pyproject.toml: \[tool.tracetape\] trust_edits must"):
        _replayed(path)


def test_line_endings_a_checkout_converted_are_not_an_edit(tmp_path: Path) -> None:
    """A cassette whose line endings became CRLF (a checkout with git's ``autocrlf``) replays
    with no warning, and verify calls it sealed: the seal covers each line's content."""
    path = _recorded(tmp_path / "run.jsonl")
    path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _replayed(path) == [{"n": 0}, {"n": 1}, {"n": 2}, {"n": 3}]
    assert verify_seal(path).state == "sealed"


@pytest.mark.parametrize("torn", [False, True], ids=["no-trailer", "torn-last-line"])
def test_a_cut_recording_replays_as_before(tmp_path: Path, torn: bool) -> None:
    """A recording cut short (its trailer never written, or its last line torn: a killed
    recorder) is not an edit: it replays what it holds, as an unfinished recording."""
    path = _recorded(tmp_path / "run.jsonl")
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:-2]) + lines[-2][:30] if torn else b"".join(lines[:-1]))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with Tape(path, mode="replay") as tape:
            played = [
                tape.call("tool", {"name": "f", "args": {"i": i}, "step": 1}, lambda: 1 / 0)
                for i in range(3)
            ]
            assert tape.ended == "unfinished"
            if not torn:
                tape.call("tool", {"name": "f", "args": {"i": 3}, "step": 1}, lambda: 1 / 0)
    assert played == [{"n": 0}, {"n": 1}, {"n": 2}]
    said = [str(w.message) for w in caught]
    assert not [m for m in said if "seal" in m or "edited" in m], said
    assert ["torn last line" in m for m in said] == ([True] if torn else [])


@pytest.mark.parametrize(
    ("fixture", "seal", "records"),
    [
        pytest.param("recorded_by_the_seed.jsonl", "unsealed", 3, id="format-0"),
        pytest.param("recorded_before_record_model.jsonl", "unsealed", 7, id="format-1"),
        pytest.param("recorded_before_conversation_steps.jsonl", "sealed", 7,
                     id="format-2-a-trailer-without-its-ending"),
        pytest.param("recorded_before_trust_round_two.jsonl", "sealed", 3,
                     id="format-2-before-trust-round-two"),
        pytest.param("recorded_with_match_rules_and_an_ending.jsonl", "sealed", 2,
                     id="format-2-with-an-ending"),
    ],
)  # fmt: skip
def test_cassettes_of_earlier_formats_load_as_before(fixture: str, seal: str, records: int) -> None:
    """Cassettes recorded by earlier versions (the seed's, format 1 without digests, format 2
    whose trailer holds the last chain itself) load for replay with no warning and no error."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cassette, replay = Replay.load(FileStore(FIXTURES / fixture), Redactor(), None, "again")
    assert cassette.seal is not None and cassette.seal.state == seal
    assert len(replay.records) == records
