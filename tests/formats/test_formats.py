"""Reading any trace: its format sniffed from its first record (on any stream, from where the
caller left it), a file that is none of them named, bad lines skipped where asked."""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from tracetape.errors import TraceError
from tracetape.formats import TraceFormat, detect_format, read_records

from ..analysis.helpers import SEED_A
from .helpers import read_all, trace_files


@pytest.mark.parametrize(
    ("text", "match"),
    [
        pytest.param("", "empty", id="empty-file"),
        pytest.param("\n\n", "empty", id="blank-lines-only"),
        pytest.param("{'span_id': '7f3c'}\n", "Python dict repr", id="python-repr"),
        pytest.param("not json\n", "not valid JSON", id="not-json"),
        pytest.param('{"hello": 1}\n', "cannot tell the trace format.*hello", id="unknown-schema"),
    ],
)
def test_unreadable_files_are_named(tmp_path: Path, text: str, match: str) -> None:
    """A file whose format cannot be told raises a TraceError naming the file."""
    path = tmp_path / "bad.jsonl"
    path.write_text(text)
    with pytest.raises(TraceError, match=match) as info:
        read_all(path)
    assert "bad.jsonl" in str(info.value)


def test_missing_file_is_named(tmp_path: Path) -> None:
    """A trace that does not exist raises a TraceError naming it."""
    with pytest.raises(TraceError, match="no such trace file"):
        read_all(tmp_path / "nope.jsonl")


def test_skip_bad_lines_also_passes_over_a_bad_first_line(tmp_path: Path) -> None:
    """With skip_bad_lines, a malformed first line does not stop format detection."""
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"{torn\n" + orjson.dumps(SEED_A[0]) + b"\n")
    assert detect_format(path, skip_bad_lines=True) is TraceFormat.JSONL
    sources: list = []
    assert len(list(read_records(path, skip_bad_lines=True, sources=sources))) == 1
    assert sources[0].skipped == 1
    with pytest.raises(TraceError, match="not valid JSON"):
        detect_format(path)


class _UnseekableRaw(io.RawIOBase):
    """A raw byte stream that cannot seek, as a pipe or a socket."""

    def __init__(self, data: bytes):
        self._data = io.BytesIO(data)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        return self._data.readinto(buffer)


class _ReadOnly:
    """A stream with only read, readline and line iteration (no seek, tell, close)."""

    def __init__(self, data: bytes):
        self._data = io.BytesIO(data)

    def read(self, size: int = -1) -> bytes:
        return self._data.read(size)

    def readline(self, size: int = -1) -> bytes:
        return self._data.readline(size)

    def __iter__(self) -> Iterator[bytes]:
        return iter(self._data)


@pytest.mark.parametrize("fmt", [f for f in TraceFormat if f is not TraceFormat.AUTO], ids=str)
@pytest.mark.parametrize(
    "stream",
    [
        pytest.param(lambda data: io.BufferedReader(_UnseekableRaw(data)), id="unseekable-io"),
        pytest.param(_ReadOnly, id="read-readline-iter-only"),
    ],
)
def test_formats_are_sniffed_on_a_non_seekable_stream(
    tmp_path: Path, fmt: TraceFormat, stream: Callable[[bytes], Any]
) -> None:
    """The format is told from a stream that cannot seek back, and the records are all read."""
    path = trace_files(tmp_path)[fmt]
    data = path.read_bytes()
    if fmt is TraceFormat.OTLP:
        assert data.count(b"\n") > 10  # a multi-line, pretty-printed document
    assert not io.BufferedReader(_UnseekableRaw(data)).seekable()
    assert detect_format(stream(data)) is fmt
    assert list(read_records(stream(data), name=str(path))) == list(read_records(path))


def test_a_file_read_part_way_is_read_from_where_the_caller_left_it(tmp_path: Path) -> None:
    """An open file already read past its first line gives the same records whether the
    format is sniffed or named: sniffing rewinds to where reading began, not to the start."""
    path = tmp_path / "t.jsonl"
    lines = [
        json.dumps({"run_id": f"r{i}", "step": 1, "tool": "ls", "args": {}, "output_sha": "a"})
        for i in range(3)
    ]
    path.write_text("\n".join(lines) + "\n")
    runs = []
    for fmt in (TraceFormat.AUTO, TraceFormat.JSONL):
        with path.open("rb") as fh:
            fh.readline()
            runs.append([r.run for r in read_records(fh, fmt)])
    assert runs == [["r1", "r2"], ["r1", "r2"]]
