"""``Recorder``: how a recording keys its decisions and writes them, on its own: the keys
are ``tracetape.key``'s, the header names the harness and the rules, what the store took is
counted and the first failure kept, and two flows' different outputs for one key warn."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from tracetape import Match, key
from tracetape.errors import CassetteError, TapeWarning
from tracetape.formats.cassette import read_cassette
from tracetape.options import TapeOptions
from tracetape.record import Record
from tracetape.recorder import Recorder
from tracetape.redact import Redactor
from tracetape.stores import FileStore


def _recorder(**options: Any) -> Recorder:
    return Recorder(Redactor(), TapeOptions(**options), lambda: {"MODEL": "hmac:1"})


def test_a_recording_keys_as_the_key_helper() -> None:
    """Without rules the key is ``tracetape.key``'s; under rules, the payload's as the rules
    see it (an ignored field changes nothing), while the decision keeps the whole payload."""
    payload = {"messages": ["hi"], "user": "u1", "step": 1}
    recorder = _recorder()
    assert recorder.decision("llm", payload, 1, False).key == key("llm", payload)
    recorder.use(Match(ignore=["user"]))
    ignored = recorder.decision("llm", payload, 1, False)
    assert ignored.key == recorder.decision("llm", {**payload, "user": "u2"}, 1, False).key
    assert ignored.input()["user"] == "u1"


def test_the_header_names_the_harness_the_environment_and_the_rules() -> None:
    """The header holds the run id, the harness SHA given, the environment's digests, the
    redaction key's id, the keys' version and the match rules, then the fields given."""
    recorder = _recorder(harness_sha="abc123")
    recorder.use(Match(mask=["uuid"]))
    header = recorder.header("run-1", fork={"seq": 1})
    assert (header["run_id"], header["harness_sha"]) == ("run-1", "abc123")
    assert header["env"] == {"MODEL": "hmac:1"} and header["match"]["mask"] == ["uuid"]
    assert header["redact_key_id"] and header["keys"] and header["fork"] == {"seq": 1}


def test_writes_are_counted_and_redacted(tmp_path: Path) -> None:
    """Each write stores the redacted output with its tokens and time; ``written`` is the
    highest sequence number the store gave back."""
    store = FileStore(tmp_path / "run.jsonl")
    store.begin(_recorder().header("run-1"))
    recorder = _recorder(store_inputs=False)
    decision = recorder.decision("llm", {"q": "hi", "step": 1}, 1, False)
    stored = recorder.write(
        store, decision, {"api_key": "sk-abcdefghijklmnopqrstuvwx"}, ms=1.23456,
        effect="read", usage={"input": 2, "output": 3}, api="chat", stream_text=None,
    )  # fmt: skip
    store.commit()
    assert "sk-abc" not in str(stored) and recorder.written == 1
    (rec,) = read_cassette(tmp_path / "run.jsonl").records
    assert (rec.tokens, rec.ms, rec.api, rec.input) == (5, 1.235, "chat", None)


class _FullDisk:
    name = "full.jsonl"

    def append(self, record: Record) -> int:
        raise CassetteError("no space left on device", path=self.name)


def test_the_first_write_failure_is_kept() -> None:
    """A failed write raises, and the recorder keeps the first failure for the report."""
    recorder = _recorder()
    decision = recorder.decision("tool", {"step": 1}, 1, False)
    for _ in range(2):
        with pytest.raises(CassetteError):
            recorder.write(
                _FullDisk(),  # type: ignore[arg-type]
                decision, 1, ms=0.0, effect="read", usage=None, api=None, stream_text=None,
            )  # fmt: skip
    assert recorder.write_failure is not None and recorder.written == 0


def test_two_flows_with_different_outputs_for_one_key_warn(tmp_path: Path) -> None:
    """The same decision made by two threads with different outputs warns once: replay
    gives a key's outputs in recorded order, not arrival order."""
    store = FileStore(tmp_path / "run.jsonl")
    recorder = _recorder()
    store.begin(recorder.header("run-1"))
    decision = recorder.decision("tool", {"name": "t", "step": 1}, 1, False)

    def write(out: int) -> None:
        recorder.write(
            store, decision, out, ms=0.0, effect="read", usage=None, api=None, stream_text=None
        )

    with pytest.warns(TapeWarning, match="two concurrent flows"):
        write(1)
        other = threading.Thread(target=write, args=(2,))
        other.start()
        other.join()
    store.commit()
