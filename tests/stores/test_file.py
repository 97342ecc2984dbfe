"""Stores: the file store under ``Tape(path)``, and any ``RecordStore`` under ``Tape(store)``."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from tracetape import (
    Cassette,
    CassetteError,
    CassetteLockedError,
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

    def commit(self, ended: str = "completed") -> None:
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


def test_a_second_recorder_of_one_cassette_is_refused_before_it_runs(tmp_path: Path) -> None:
    """Two tapes recording one path (two threads, say): the second fails when it begins,
    naming the holder, and the first recording is whole."""
    path = tmp_path / "run.jsonl"
    with Tape(path, mode="record") as first:
        first.call("tool", {"name": "a", "args": {}, "step": 1}, lambda: 1)
        with pytest.raises(CassetteLockedError, match="another tape of this process") as info:
            Tape(path, mode="rewrite")
        assert info.value.pid == os.getpid()
        first.call("tool", {"name": "b", "args": {}, "step": 1}, lambda: 2)
    assert [r.out for r in read_cassette(path).records] == [1, 2]
    with Tape(path, mode="rewrite") as again:  # the lock went with the first recorder
        again.call("tool", {"name": "c", "args": {}, "step": 1}, lambda: 3)
    assert [r.out for r in read_cassette(path).records] == [3]


HOLD = """
import sys, tracetape
with tracetape.Tape(sys.argv[1], mode="record") as tape:
    tape.call("tool", {"name": "a", "args": {}, "step": 1}, lambda: 1)
    print("recording", flush=True)
    sys.stdin.readline()
"""


def test_a_second_recording_process_exits_2_naming_the_first(tmp_path: Path) -> None:
    """``tracetape run --mode rewrite`` on a cassette another process is recording exits 2
    before the program starts, naming that process; the first recording completes."""
    path = tmp_path / "run.jsonl"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(path)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "recording\n"
        second = subprocess.run(
            [sys.executable, "-m", "tracetape", "run", "--tape", str(path), "--mode", "rewrite",
             "--hook", "none", "--", sys.executable, "-c", "print('the agent ran')"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
    finally:
        holder.communicate("\n", timeout=30)
    assert second.returncode == 2, second.stderr
    assert f"process {holder.pid} is recording this cassette" in second.stderr
    assert "the agent ran" not in second.stdout
    assert "Traceback" not in second.stderr
    assert [r.out for r in read_cassette(path).records] == [1]


def test_a_killed_recorders_partial_file_is_taken_over(tmp_path: Path) -> None:
    """A recorder killed mid-run leaves its partial file; its lock went with it."""
    path = tmp_path / "run.jsonl"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    assert holder.stdout is not None and holder.stdout.readline() == "recording\n"
    holder.kill()
    holder.communicate(timeout=30)
    assert Path(str(path) + ".partial").exists()
    with Tape(path, mode="record") as tape:
        tape.call("tool", {"name": "b", "args": {}, "step": 1}, lambda: 2)
    assert [r.out for r in read_cassette(path).records] == [2]


def test_a_folder_or_an_unmakeable_folder_fails_before_the_agent_runs(tmp_path: Path) -> None:
    """A cassette path that is a folder, or under a file, is a CassetteError naming it when the
    tape opens: nothing has run, and no partial file is left."""
    folder = tmp_path / "runs"
    folder.mkdir()
    with pytest.raises(CassetteError, match="is a folder, not a cassette file") as info:
        Tape(folder, mode="record")
    assert info.value.path == str(folder)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs"]
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(CassetteError, match="cannot write cassette") as info:
        Tape(blocker / "run.jsonl", mode="record")
    assert str(blocker) in str(info.value)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_folder_fails_before_the_agent_runs(tmp_path: Path) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        with pytest.raises(CassetteError, match="cannot write here"):
            Tape(folder / "run.jsonl", mode="record")
    finally:
        folder.chmod(0o700)


def test_a_full_disk_is_one_clear_error_and_what_fit_is_kept(tiny_disk: Path) -> None:
    """Recording onto a full disk: the call that cannot be stored raises one CassetteError
    saying the disk is full (closing the tape raises nothing more), and the records written
    before it are in the cassette."""
    path = tiny_disk / "run.jsonl"
    tape = Tape(path, mode="record")
    with pytest.raises(CassetteError, match="the disk is full") as info, tape:
        tape.call("tool", {"name": "small", "args": {}, "step": 1}, lambda: "x" * 1000)
        tape.call("tool", {"name": "big", "args": {}, "step": 2}, lambda: "y" * 200_000)
    # the error of the failed write itself, not a second one from closing the tape
    assert not isinstance(info.value.__context__, CassetteError)
    assert info.value.__suppress_context__
    with pytest.warns(UserWarning):  # the torn last line is skipped, with a warning
        records = read_cassette(path).records
    assert [r.name or r.input["name"] for r in records] == ["small"]


def _recorded(path: Path, outs: list[str]) -> None:
    with Tape(path, mode="rewrite") as tape:
        for i, out in enumerate(outs):
            tape.call("tool", {"name": f"t{i}", "args": {}, "step": 1}, lambda out=out: out)


def test_a_full_disk_during_rewrite_keeps_the_old_cassette(tiny_disk: Path) -> None:
    """A re-recording that fills the disk never replaces the good cassette it was to replace
    (issue 37, item 7): the old one replays as it was, what the new one wrote stays in
    ``PATH.partial``, and the error names both."""
    path = tiny_disk / "run.jsonl"
    _recorded(path, ["old"])
    before = path.read_bytes()
    with pytest.raises(CassetteError, match="the disk is full") as info:
        _recorded(path, ["new", "y" * 200_000])
    assert str(path) in str(info.value) and f"{path}.partial" in str(info.value)
    assert path.read_bytes() == before
    assert [r.out for r in read_cassette(path).records] == ["old"]
    assert Path(f"{path}.partial").exists()
    _recorded(path, ["again"])  # the next recording takes the partial file over
    assert [r.out for r in read_cassette(path).records] == ["again"]
    assert not Path(f"{path}.partial").exists()


FILE_LIMIT = """
import resource, signal, sys
from tracetape import Tape
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG)
resource.setrlimit(resource.RLIMIT_FSIZE, (65536, 65536))
with Tape(sys.argv[1], mode="rewrite") as tape:
    tape.call("tool", {"name": "new", "args": {}, "step": 1}, lambda: "new")
    tape.call("tool", {"name": "big", "args": {}, "step": 1}, lambda: "y" * 200_000)
"""


def test_a_file_size_limit_during_rewrite_keeps_the_old_cassette(tmp_path: Path) -> None:
    """The case as it was found: a process whose file size limit is reached while it
    re-records ("File too large") leaves the old cassette whole, never a torn partial."""
    path = tmp_path / "run.jsonl"
    _recorded(path, ["old"])
    before = path.read_bytes()
    done = subprocess.run(
        [sys.executable, "-c", FILE_LIMIT, str(path)], capture_output=True, text=True, check=False
    )
    assert done.returncode != 0
    assert "File too large" in done.stderr and f"{path}.partial" in done.stderr, done.stderr
    assert path.read_bytes() == before
    partial = Path(f"{path}.partial").read_bytes()
    assert len(partial) == 65536 and not partial.endswith(b"\n")


class _SignalMidLine:
    """A file that writes half of the next line and then takes a signal (Ctrl-C)."""

    def __init__(self, fh: Any):
        self.fh, self.armed = fh, True

    def write(self, data: Any) -> int:
        if self.armed:
            self.armed = False
            self.fh.write(bytes(data[: len(data) // 2]))
            raise KeyboardInterrupt
        return int(self.fh.write(data))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.fh, name)


def test_a_signal_mid_line_leaves_the_recording_whole_and_sealed(tmp_path: Path) -> None:
    """The half line a signal cut is taken back: the trailer that closes the recording as
    interrupted follows the last whole record, and the seal holds."""
    from tracetape.formats.cassette import read_cassette, verify_seal
    from tracetape.stores.file import CassetteWriter

    path = tmp_path / "c.jsonl"
    writer = CassetteWriter(path, {"tracetape": 2})
    assert writer.write({"key": "tool:1", "kind": "tool", "out": 1}) == 1
    writer._fh = _SignalMidLine(writer._fh)  # type: ignore[assignment]
    with pytest.raises(KeyboardInterrupt):
        writer.write({"key": "tool:2", "kind": "tool", "out": "x" * 1000})
    assert writer.count == 1
    writer.close(ended="interrupted")
    assert verify_seal(path).state == "sealed"
    cassette = read_cassette(path)
    assert [r.out for r in cassette] == [1] and cassette.ended == "interrupted"
