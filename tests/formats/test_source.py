"""Where records are read from: a path, an open file, bytes or any iterable of lines read alike,
each named in errors as a file is."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import orjson
import pytest

from tracetape.errors import TraceError
from tracetape.formats import TraceFormat, detect_format, read_records

from ..analysis.helpers import SEED_A
from .helpers import trace_files

# Each kind of source read_records takes, made from a trace file (files are closed by `stack`).
SOURCES: dict[str, Callable[[Path, ExitStack], Any]] = {
    "path": lambda path, stack: path,
    "binary-file": lambda path, stack: stack.enter_context(path.open("rb")),
    "text-file": lambda path, stack: stack.enter_context(path.open(encoding="utf-8")),
    "bytes": lambda path, stack: path.read_bytes(),
    "str-lines-without-newlines": lambda path, stack: path.read_text("utf-8").splitlines(),
    "bytes-lines-generator": lambda path, stack: (
        line for line in path.read_bytes().splitlines(keepends=True)
    ),
}


@pytest.mark.parametrize("fmt", [f for f in TraceFormat if f is not TraceFormat.AUTO], ids=str)
@pytest.mark.parametrize("kind", list(SOURCES))
def test_every_kind_of_source_reads_the_same_records(
    tmp_path: Path, fmt: TraceFormat, kind: str
) -> None:
    """A path, a binary or text file, bytes, str lines and a generator of bytes lines read alike."""
    path = trace_files(tmp_path)[fmt]
    expected = list(read_records(path))
    assert len(expected) >= 2 and all(r.key for r in expected)
    with ExitStack() as stack:
        source = SOURCES[kind](path, stack)
        # A file names itself; other sources are named like the path (a cassette's run is its
        # source's name), so that the records are equal field for field.
        name = None if kind in ("path", "binary-file", "text-file") else str(path)
        assert detect_format(SOURCES[kind](path, stack), name=name) is fmt
        got = list(read_records(source, name=name))
    assert [(r.run, r.step, r.out_digest, r.key) for r in got] == [
        (r.run, r.step, r.out_digest, r.key) for r in expected
    ]
    assert got == expected
    assert {r.source for r in got} == {str(path)}


@pytest.mark.parametrize(
    "lines",
    [
        pytest.param(lambda good: [good, "{not json", good], id="str-lines"),
        pytest.param(
            lambda good: (line.encode() + b"\n" for line in [good, "{not json", good]),
            id="bytes-generator",
        ),
    ],
)
def test_a_bad_line_of_a_named_source_is_named_in_the_error(
    lines: Callable[[str], Any],
) -> None:
    """A malformed line of an iterable source raises a TraceError starting with its name, line."""
    good = orjson.dumps(SEED_A[0]).decode()
    with pytest.raises(TraceError, match="not valid JSON") as info:
        list(read_records(lines(good), name="db-rows"))
    assert str(info.value).startswith("db-rows:2: ")
    assert (info.value.path, info.value.line) == ("db-rows", 2)
    sources: list[Any] = []
    records = list(read_records(lines(good), name="db-rows", skip_bad_lines=True, sources=sources))
    assert [r.line for r in records] == [1, 3]
    assert sources[0].skipped == 1
    assert sources[0].first_skipped[0].startswith("db-rows:2: ")


def test_a_source_that_is_no_source_is_a_clear_type_error() -> None:
    """Something that is neither a path, a file, bytes nor lines says what would do."""
    with pytest.raises(TypeError, match="pass a path, an open file, bytes, or an iterable"):
        list(read_records(42))  # type: ignore[arg-type]
