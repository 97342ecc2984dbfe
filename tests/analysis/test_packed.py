"""Packed chunks and the worker process: the same report, errors and skips as in-process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracetape.analysis import TraceError, check_trace, diff_traces
from tracetape.analysis.config import AnalysisConfig
from tracetape.analysis.normalize import MemoNormalizer
from tracetape.analysis.packed import (
    AUTO_JOBS_BYTES,
    Cutter,
    Packer,
    Skips,
    Worker,
    _forkable,
    _volatile_pairs,
    use_worker,
)
from tracetape.canonical import Normalizer
from tracetape.formats.jsonl import read_blocks_of

from .helpers import call, write_jsonl
from .test_fast_path import trace_pairs, written

GOOD = call("r1", 1, "ls", {"d": "/"}, "ab")
BAD_ARGS = b'{"run_id":"r1","step":2,"tool":"ls","args":{"d":1e999999},"output_sha":"ab"}'


def _both(run: Any) -> tuple[Any, Any]:
    """``run(jobs)`` in this process and with a worker: the report, or the error's parts."""
    results = []
    for jobs in (1, 2):
        try:
            results.append(run(jobs).to_dict())
        except TraceError as exc:
            results.append((str(exc), exc.path, exc.line, exc.field))
    return results[0], results[1]


@settings(max_examples=12, deadline=None)
@trace_pairs
def test_a_worker_gives_the_report_of_this_process(
    a: list[Any], b: list[Any], layout: tuple[bool, bool]
) -> None:
    """check, diff A B and diff --runs give the same report whichever process packs."""
    with written(a, b, layout) as (pa, pb):
        one, two = _both(lambda jobs: check_trace(pa, jobs=jobs))
        assert one == two
        one, two = _both(lambda jobs: diff_traces(pa, pb, jobs=jobs))
        assert one == two
        one, two = _both(lambda jobs: diff_traces(pa, runs=("a1", "a2"), jobs=jobs))
        assert one == two


def test_groups_cross_chunks_and_files_end_unevenly(tmp_path: Path) -> None:
    """Two files of many blocks, fed 8192 calls each in turn, one longer than the other."""
    a = [call(f"a{i // 40}", 1 + i % 9, "ls", {"i": i % 700}, f"o{i % 3}") for i in range(30_000)]
    b = [call(f"b{i // 40}", 1 + i % 9, "ls", {"i": i % 700}, f"o{i % 5}") for i in range(12_000)]
    pa, pb = write_jsonl(tmp_path / "a.jsonl", a), write_jsonl(tmp_path / "b.jsonl", b)
    one, two = _both(lambda jobs: diff_traces(pa, pb, jobs=jobs))
    assert one == two
    assert one["events"] == 42_000


@pytest.mark.parametrize("skip", [False, True])
def test_bad_lines_fail_or_are_skipped_as_in_this_process(tmp_path: Path, skip: bool) -> None:
    """A line whose args are not JSON, and one that is not a record: same error, same skips."""
    lines = [orjson.dumps(GOOD), BAD_ARGS, b"{not json", orjson.dumps(GOOD)]
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    good = write_jsonl(tmp_path / "g.jsonl", [call("r2", 1, "ls", {"d": "/"}, "ab")])
    one, two = _both(lambda jobs: check_trace(path, jobs=jobs, skip_bad_lines=skip))
    assert one == two
    one, two = _both(lambda jobs: diff_traces(good, path, jobs=jobs, skip_bad_lines=skip))
    assert one == two
    if skip:
        assert two["skipped_lines"] == 2
        assert "t.jsonl:2: " in two["skipped_examples"][0]
    else:
        assert two[1:] == (str(path), 2, None)
        assert "not valid JSON" in two[0]


def test_a_missing_file_is_reported_from_the_worker(tmp_path: Path) -> None:
    """The worker's TraceError reaches the analysis as it is: file named, nothing hangs."""
    skips = [Skips()]
    worker = Worker(
        [tmp_path / "gone.jsonl"],
        normalizer=AnalysisConfig().normalizer,
        skip_bad_lines=False,
        group=None,
        progress=[None],
        skips=skips,
    )
    try:
        with pytest.raises(TraceError, match="no such trace file") as caught:
            list(worker.turn(0))
        assert caught.value.path == str(tmp_path / "gone.jsonl")
    finally:
        worker.close()


def test_closing_stops_a_worker_mid_file_and_progress_moves(tmp_path: Path) -> None:
    """An analysis that stops early (an error elsewhere, Ctrl-C) leaves no process behind."""
    records = [call(f"r{i // 30}", 1, "ls", {"i": i}, "o") for i in range(60_000)]
    path = write_jsonl(tmp_path / "t.jsonl", records)
    seen: list[int] = []
    worker = Worker(
        [path],
        normalizer=AnalysisConfig().normalizer,
        skip_bad_lines=False,
        group=1000,
        progress=[seen.append],
        skips=[Skips()],
    )
    for _ in range(5):
        assert sum(len(c.kids) for c in worker.turn(0)) == 1000
    assert worker.more == [True]
    assert 0 < seen[-1] < path.stat().st_size  # bytes read so far, reported as they grow
    worker.close()
    assert worker.exitcode == -signal.SIGTERM  # stopped mid-file, and reaped


def test_a_worker_that_dies_is_an_error_not_a_hang(tmp_path: Path) -> None:
    """If the worker is killed, the analysis says so and how to read without one."""
    # More packed data than the pipe holds: the worker cannot be done when it is killed.
    records = [call(f"r{i // 30}", 1, "ls", {"i": i}, "o") for i in range(50_000)]
    path = write_jsonl(tmp_path / "t.jsonl", records)
    worker = Worker(
        [path],
        normalizer=AnalysisConfig().normalizer,
        skip_bad_lines=False,
        group=None,
        progress=[None],
        skips=[Skips()],
    )
    os.kill(worker.pid, signal.SIGKILL)
    try:
        with pytest.raises(RuntimeError, match=r"exit code -9\); run again with --jobs 1"):
            list(worker.turn(0))
    finally:
        worker.close()


def test_packer_forms_keep_the_first_key_order_and_drop_volatile_keys(tmp_path: Path) -> None:
    """A fresh request id maps to the form of the call without it; key order is kept."""
    fresh = {"b": 1, "a": 2, "request_id": "0b7e1b2c-6a1f-4c1e-9a51-8f0b8f9b2a00"}
    records = [
        call("r", 1, "ls", {"b": 1, "a": 2}, "o"),
        call("r", 1, "ls", fresh, "o"),
        call("r", 1, "ls", {"a": 2, "b": 1}, "o"),
    ]
    path = write_jsonl(tmp_path / "t.jsonl", records)
    (chunk,) = Packer(AnalysisConfig().normalizer).pack(read_blocks_of(path))
    assert chunk.kids == [0, 0, 1]
    assert chunk.forms == [("ls", {"b": 1, "a": 2}), ("ls", {"a": 2, "b": 1})]
    head, tail = chunk.split(2)
    assert (head.line, tail.line, len(head.kids), tail.forms) == (1, 3, 2, [])
    assert [len(c.kids) for c in Cutter(iter([chunk])).take(-1)] == [3]


def test_use_worker_follows_jobs_then_size(tmp_path: Path) -> None:
    """jobs 1 never, 2 always, auto only for large files; 0 is refused."""
    small = write_jsonl(tmp_path / "t.jsonl", [GOOD])
    assert not use_worker(small, 1)
    assert use_worker(small, 2)
    assert not use_worker(small, None)
    assert not use_worker(tmp_path / "gone.jsonl", None)
    big = tmp_path / "big.jsonl"
    with big.open("wb") as fh:
        fh.truncate(AUTO_JOBS_BYTES)
    assert use_worker(big, None) == (len(os.sched_getaffinity(0)) > 1)
    with pytest.raises(ValueError, match="jobs must be 1 or more"):
        use_worker(small, 0)


def test_with_other_threads_alive_the_worker_is_spawned_not_forked(tmp_path: Path) -> None:
    """Forking next to other threads can deadlock: then a fresh interpreter packs (one
    that does not run this test module again, as multiprocessing's spawn would)."""
    records = [call(f"r{i // 7}", 1 + i % 3, "ls", {"i": i % 11}, f"o{i % 2}") for i in range(500)]
    path = write_jsonl(tmp_path / "t.jsonl", records)
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert not _forkable()
        one, two = _both(lambda jobs: check_trace(path, jobs=jobs))
    finally:
        stop.set()
        other.join()
    assert one == two
    if threading.active_count() == 1:
        assert _forkable()


_KEYS = st.sampled_from(["q", "path", "ts", "request_id", "created_at", "a,b", 'x"y', "time"])
_VALUES = st.one_of(
    st.integers(-5, 5),
    st.text(alphabet=st.sampled_from('ab,:{}[]"\\ -_\x01é'), max_size=6),
)
_ARGS = st.recursive(
    st.dictionaries(_KEYS, _VALUES, max_size=4),
    lambda inner: st.dictionaries(_KEYS, st.one_of(_VALUES, inner, st.lists(inner, max_size=2))),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(args=_ARGS)
def test_dropping_volatile_pairs_from_the_text_normalizes_as_decoding_does(args: Any) -> None:
    """The text without the volatile pairs is valid JSON that normalizes, key order and all,
    to what the full text normalizes to: the packer may look it up instead of decoding."""
    normalizer = Normalizer()
    strip = _volatile_pairs(normalizer.volatile_keys)
    assert strip is not None
    text = orjson.dumps(args)
    rest = strip(b"", text)
    memo = MemoNormalizer(normalizer)
    assert orjson.dumps(memo(orjson.loads(rest))) == orjson.dumps(memo(orjson.loads(text)))


def test_an_unguarded_script_with_threads_runs_once(tmp_path: Path) -> None:
    """A script without ``if __name__ == "__main__"`` is not run again by the worker."""
    path = write_jsonl(tmp_path / "t.jsonl", [GOOD, call("r2", 1, "ls", {"d": "/"}, "cd")])
    script = tmp_path / "script.py"
    script.write_text(
        "import threading\n"
        "from tracetape.analysis import diff_traces\n"
        "threading.Thread(target=threading.Event().wait, args=(5,), daemon=True).start()\n"
        "print('top level ran')\n"
        f"print(diff_traces({str(path)!r}, jobs=2).replay)\n"
    )
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, check=False, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "top level ran",
        "{'unique': 1, 'mismatches': 1, 'unrecorded': 0}",
    ]
