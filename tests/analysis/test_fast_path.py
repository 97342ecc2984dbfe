"""The seed-JSONL fast path (raw-call blocks) reports exactly what the event path reports."""

from __future__ import annotations

import itertools
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracetape.analysis import Analyzer, TraceError, check_trace, diff_traces, read_records
from tracetape.analysis.findings import SIDE_A, SIDE_B
from tracetape.formats.jsonl import read_blocks_of
from tracetape.record import call_args

from .helpers import call

UUIDS = [f"0b7e1b2c-6a1f-4c1e-9a51-8f0b8f9b2a{i:02d}" for i in range(40)]

args_st = st.fixed_dictionaries(
    {"path": st.sampled_from(["a.py", "b.py", "c.py"])},
    optional={
        "page": st.integers(1, 3),
        "request_id": st.sampled_from(UUIDS),  # volatile: normalized away
        "tmp": st.sampled_from(["/tmp/tmpab12/x", "/tmp/tmpcd34/x", "x"]),  # masked
    },
)
line_st = st.tuples(
    st.sampled_from(["read_file", "write_file", "list_dir"]),
    args_st,
    st.sampled_from(["o1", "o2", "o3"]),
    st.sampled_from([None, "read", "write"]),
    st.one_of(st.none(), st.integers(0, 900)),
    st.booleans(),  # the next call starts a new step
    st.booleans(),  # the next call starts a new run
)


def _trace(lines: list[Any], prefix: str, interleaved: bool = False) -> list[dict[str, Any]]:
    runs: list[list[dict[str, Any]]] = [[]]
    step = 1
    for tool, args, out, effect, tokens, new_step, new_run in lines:
        rec = call(f"{prefix}{len(runs)}", step, tool, args, out, tokens=tokens)
        if effect is not None:
            rec["effect"] = effect
        runs[-1].append(rec)
        step += new_step
        if new_run:
            runs.append([])
            step = 1
    if not interleaved:
        return [rec for run in runs for rec in run]
    # The runs' lines taken in turn, each run's own order kept: runs that overlap in time.
    merged = itertools.zip_longest(*runs)
    return [rec for turn in merged for rec in turn if rec is not None]


def _write(path: Path, records: list[dict[str, Any]], keys_sorted: bool) -> Path:
    option = orjson.OPT_SORT_KEYS if keys_sorted else 0
    path.write_bytes(b"".join(orjson.dumps(r, option=option) + b"\n" for r in records))
    return path


def _reference(paths: list[Path], compare: bool) -> dict[str, Any]:
    """The report of the event path: ``Analyzer.feed`` over ``read_records``."""
    analyzer = Analyzer(compare=compare, inputs=[str(p) for p in paths])
    for side, path in zip((SIDE_A, SIDE_B), paths, strict=False):
        analyzer.feed(read_records(path), side)
    return analyzer.finish().to_dict()


# Two seed-JSONL traces (runs a1, a2, ... and b1, b2, ...); ``layout`` is (keys sorted,
# runs interleaved line by line).
trace_pairs = given(
    a=st.lists(line_st, min_size=1, max_size=60),
    b=st.lists(line_st, min_size=1, max_size=60),
    layout=st.tuples(st.booleans(), st.booleans()),
)


@contextmanager
def written(a: list[Any], b: list[Any], layout: tuple[bool, bool]) -> Iterator[tuple[Path, Path]]:
    """The two traces of ``trace_pairs`` as files, removed afterwards."""
    keys_sorted, interleaved = layout
    with tempfile.TemporaryDirectory() as tmp:
        yield (
            _write(Path(tmp) / "a.jsonl", _trace(a, "a", interleaved), keys_sorted),
            _write(Path(tmp) / "b.jsonl", _trace(b, "b", interleaved), keys_sorted),
        )


@settings(max_examples=60, deadline=None)
@trace_pairs
def test_fast_path_reports_what_the_event_path_reports(
    a: list[Any], b: list[Any], layout: tuple[bool, bool]
) -> None:
    """check and diff of seed JSONL give the event path's report, finding for finding, for
    runs one after another and runs interleaved line by line."""
    with written(a, b, layout) as (pa, pb):
        assert check_trace(pa).to_dict() == _reference([pa], compare=False)
        assert diff_traces(pa, pb).to_dict() == _reference([pa, pb], compare=True)


def _rows_of_batches(path: Path, **kw: Any) -> list[tuple[Any, ...]]:
    return [
        (c.run, line, c.step, c.name, orjson.loads(bytes(c.args)), c.out, c.effect, c.tokens)
        for batch in read_blocks_of(path, **kw)
        for line, c in enumerate(batch.calls, batch.line)
    ]


def _rows_of_events(path: Path, **kw: Any) -> list[tuple[Any, ...]]:
    return [
        (e.run, e.line, e.step, e.name, call_args(e), e.out_digest, e.effect, e.tokens)
        for e in read_records(path, **kw)
    ]


GOOD = b'{"run_id":"r1","step":1,"tool":"ls","args":{"d":"/"},"output_sha":"ab"}'
ODD_LINES = [
    pytest.param(b"{not json", id="not-json"),
    pytest.param(b'{"run_id":"r1","step":1,"tool":"ls","output_sha":"ab"}', id="missing-args"),
    pytest.param(
        b'{"run_id":"r1","step":"1","tool":"ls","args":{},"output_sha":"ab"}', id="str-step"
    ),
    pytest.param(b'{"run_id":7,"step":1,"tool":"ls","args":{},"output_sha":"ab"}', id="int-run"),
    pytest.param(
        b'{"run_id":"r1","step":1,"tool":"ls","args":{},"output_sha":"ab","effect":"rm"}',
        id="bad-effect",
    ),
    pytest.param(
        b'{"run_id":"r1","step":123456789012345678901234567890,"tool":"ls","args":{},'
        b'"output_sha":"ab"}',
        id="huge-step",
    ),
    pytest.param(
        b'{"run_id":"r1","step":1,"tool":"ls","args":{"p":"\xff"},"output_sha":"ab"}',
        id="bad-utf8-in-args",
    ),
    pytest.param(b"", id="blank"),
    pytest.param(b"   \r", id="whitespace"),
    pytest.param(GOOD + b"\r", id="crlf"),
    pytest.param(b"[1, 2]", id="array"),
]


@pytest.mark.parametrize("odd", ODD_LINES)
def test_blocks_with_odd_lines_read_as_the_event_reader_reads_them(
    tmp_path: Path, odd: bytes
) -> None:
    """A block holding a bad, blank or unusual line gives the same calls and the same error."""
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"\n".join([GOOD, GOOD, odd, GOOD]))  # no newline at the end either
    try:
        expected: Any = _rows_of_events(path)
    except TraceError as exc:
        expected = (str(exc), exc.line, exc.field)
    try:
        got: Any = _rows_of_batches(path)
    except TraceError as exc:
        got = (str(exc), exc.line, exc.field)
    assert got == expected
    assert _rows_of_batches(path, skip_bad_lines=True) == _rows_of_events(path, skip_bad_lines=True)


def test_line_numbers_run_on_across_blocks(tmp_path: Path) -> None:
    """Calls of a file read in many blocks keep their file line numbers."""
    records = [call(f"r{i // 50}", 1 + i % 7, "ls", {"i": i}, "o") for i in range(30_000)]
    path = _write(tmp_path / "t.jsonl", records, keys_sorted=False)
    assert len(list(read_blocks_of(path))) > 1
    assert _rows_of_batches(path) == _rows_of_events(path)
