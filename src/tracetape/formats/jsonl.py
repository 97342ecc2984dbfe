"""The seed's JSONL trace: one tool call a line, one or many runs a file.

::

    {"run_id": "run_0042", "step": 1, "tool": "search_issues", "args": {...},
     "output_sha": "a1b2c3", "tokens": 812, "ts": "2026-08-31T09:12:04Z"}

with ``effect`` (``read``/``write``/``irreversible``), ``span_id``, ``parent_id`` and ``ms``
honoured when present. A line names its run; it stores the output's digest only, so a record
read from it has ``out_digest`` and no ``out``. Its ``input`` is the tool call as the tape keys
one (``{"name", "args", "step"}``), and its ``key`` that payload's key.

Two readers: ``read_records`` (every field decoded, a ``Record`` a line) and, for the
analysis hot path on large traces, ``read_blocks``: a block of about 256 KiB is decoded in one
``msgspec`` call into :class:`JsonlCall` s whose ``args`` stay raw JSON, which the analysis
keys its work on. A block that does not decode cleanly (a bad, blank or oddly typed line) is
read again line by line through the same validation as ``read_records``, so errors name the
same line and field, and ``skip_bad_lines`` drops the same lines.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Annotated, Any, Literal, NamedTuple

import msgspec
import orjson

from ..canonical import Normalizer
from ..record import Record
from ._source import Source, TraceFormat, TraceSource, open_source
from .schemas import EFFECTS, TOO_DEEP, fmt_of, keyed, readable, schema_of

__all__ = ["CallBatch", "JsonlCall", "read_blocks", "read_blocks_of", "read_records"]


def read_records(src: TraceSource) -> Iterator[Record]:
    """Read the seed's JSONL trace schema as records, one tool call a line.

    >>> import io
    >>> from tracetape.formats import read_records
    >>> line = b'{"run_id":"r1","step":1,"tool":"ls","args":{},"output_sha":"ab"}\\n'
    >>> [(r.run, r.step, r.name, r.out_digest, r.key) for r in read_records([line])]
    [('r1', 1, 'ls', 'ab', 'tool:72f0e8bd012b678a')]
    """
    name = src.name
    for lineno, raw in src.lines():
        c = _jsonl_record(src, raw.rstrip(b"\r\n"), lineno)
        if c is None:
            continue
        if not readable(c["args"]):
            src.bad(TOO_DEEP, lineno, "args")
            continue
        get = c.get
        tool, step = c["tool"], c["step"]
        yield keyed(
            "tool",
            {"name": tool, "args": c["args"], "step": step},
            seq=lineno,
            run=str(c["run_id"]),
            name=tool,
            out_digest=c["output_sha"],
            effect=get("effect"),
            tokens=get("tokens"),
            ms=get("ms"),
            ts=get("ts"),
            span_id=get("span_id"),
            parent_id=get("parent_id"),
            source=name,
            line=lineno,
        )


def _jsonl_record(src: TraceSource, raw: bytes, lineno: int) -> dict[str, Any] | None:
    """Parse and validate one seed-JSONL line; None (after ``src.bad``) if it is unusable."""
    try:
        c = orjson.loads(raw)
        run, step, tool, out, _ = (c["run_id"], c["step"], c["tool"], c["output_sha"], c["args"])
    except orjson.JSONDecodeError as exc:
        if raw.strip():
            src.bad(f"line is not valid JSON ({exc})", lineno)
        return None
    except (KeyError, TypeError):
        _bad_jsonl(src, raw, lineno)
        return None
    effect, tokens = c.get("effect"), c.get("tokens")
    if (
        type(run) is not str
        or type(tool) is not str
        or type(step) is not int
        or type(out) is not str
        or (effect is not None and effect not in EFFECTS)
        or (tokens is not None and type(tokens) is not int)
    ) and not _check_jsonl(src, c, lineno):
        return None
    return c  # type: ignore[no-any-return]


class CallBatch(NamedTuple):
    """Consecutive lines of one source as :class:`JsonlCall` s: ``calls[i]`` is on
    ``line + i``.

    ``bad(message, line)`` reports a line whose ``args`` turn out not to be valid JSON (it
    raises a ``TraceError``, or counts the line under ``skip_bad_lines``).
    """

    line: int
    calls: Sequence[JsonlCall]
    bad: Callable[[str, int], None]


# Beyond 64 bits orjson gives a float (which the reader rejects) where msgspec would give an
# exact int: such a "step" or "tokens" goes to the line-by-line path, which judges as orjson.
_Int64 = Annotated[int, msgspec.Meta(ge=-(1 << 63), le=(1 << 63) - 1)]


class JsonlCall(
    msgspec.Struct,
    gc=False,
    rename={"run": "run_id", "name": "tool", "out": "output_sha"},
):
    """One seed-JSONL line, decoded only as far as the analysis needs: ``args`` stays the
    raw JSON text."""

    run: str
    step: _Int64
    name: str
    args: msgspec.Raw
    out: str
    effect: Literal["read", "write", "irreversible"] | None = None
    tokens: _Int64 | None = None


_JSONL_BATCH = 1 << 18
_jsonl_decoder = msgspec.json.Decoder(JsonlCall)


def _utf8(data: bytes) -> bool:
    if data.isascii():
        return True
    try:
        data.decode()
    except UnicodeDecodeError:
        return False
    return True


def read_blocks(src: TraceSource) -> Iterator[CallBatch]:
    """Read the seed's JSONL trace schema in blocks of lines, for the analysis hot path
    (see the module docstring)."""
    decode = _jsonl_decoder.decode_lines
    fh, progress = src.fh, src.progress
    first = 1
    while True:
        buf = fh.read(_JSONL_BATCH)
        if not buf:
            return
        if buf[-1:] != b"\n":
            buf += fh.readline()
        lines = buf.count(b"\n") + (buf[-1:] != b"\n")
        calls: list[JsonlCall] | None = None
        # msgspec leaves invalid UTF-8 inside raw args unchecked; orjson would reject it.
        if _utf8(buf):
            try:
                calls = decode(buf)
            except msgspec.MsgspecError:
                calls = None
        # decode_lines passes over blank lines: then line numbers need the slow path too.
        if calls is not None and len(calls) == lines:
            yield CallBatch(first, calls, src.bad)
        else:
            yield from _jsonl_lines(src, buf, first)
        first += lines
        if progress is not None:
            progress(fh.tell())


def read_blocks_of(
    source: Source,
    *,
    normalizer: Normalizer | None = None,
    skip_bad_lines: bool = False,
    progress: Callable[[int], None] | None = None,
    sources: list[Any] | None = None,
) -> Iterator[CallBatch]:
    """``read_blocks`` of a seed-JSONL source (a path, file, bytes or lines) opened here and
    closed when done; ``sources`` receives the ``TraceSource`` (for its skip counts).

    >>> line = b'{"run_id":"r1","step":1,"tool":"ls","args":{},"output_sha":"ab"}\\n'
    >>> [(b.line, [(c.run, c.name, bytes(c.args)) for c in b.calls]) for b in read_blocks_of(line)]
    [(1, [('r1', 'ls', b'{}')])]
    """
    fh, name, path = open_source(source)
    src = TraceSource(name, fh, normalizer or Normalizer(), skip_bad_lines, progress, path)
    if sources is not None:
        sources.append(src)
    with fh:
        yield from read_blocks(src)


def _jsonl_lines(src: TraceSource, buf: bytes, first: int) -> Iterator[CallBatch]:
    """The slow path of ``read_blocks``: one line at a time, bad lines reported."""
    pieces = buf.split(b"\n")
    if not pieces[-1]:
        pieces.pop()
    calls: list[JsonlCall] = []
    start = first
    for lineno, raw in enumerate(pieces, first):
        c = _jsonl_record(src, raw, lineno)
        if c is None:
            if calls:
                yield CallBatch(start, calls, src.bad)
                calls = []
            start = lineno + 1
            continue
        calls.append(
            JsonlCall(
                str(c["run_id"]),
                c["step"],
                c["tool"],
                msgspec.Raw(orjson.dumps(c["args"])),
                c["output_sha"],
                c.get("effect"),
                c.get("tokens"),
            )
        )
    if calls:
        yield CallBatch(start, calls, src.bad)


_JSONL_REQUIRED = ("run_id", "step", "tool", "args", "output_sha")


def _bad_jsonl(src: TraceSource, raw: bytes, lineno: int) -> None:
    obj = orjson.loads(raw)
    if not isinstance(obj, dict):
        src.bad(f"line holds {schema_of(obj)}, not a trace record object", lineno)
        return
    missing = next(f for f in _JSONL_REQUIRED if f not in obj)
    hint = ""
    if fmt_of(obj) not in (None, TraceFormat.JSONL):
        hint = f"; this line is {schema_of(obj)} but the file started as seed JSONL (mixed schemas)"
    src.bad(
        f"missing (a seed trace record needs {', '.join(_JSONL_REQUIRED)}){hint}",
        lineno,
        missing,
    )


def _check_jsonl(src: TraceSource, c: dict[str, Any], lineno: int) -> bool:
    """Validate field types on the slow path; True if the record is usable."""
    run, step, tool, out = c["run_id"], c["step"], c["tool"], c["output_sha"]
    if not (type(run) is str or type(run) is int):
        src.bad(f"must be a string, found {run!r}", lineno, "run_id")
    elif type(step) is not int:
        src.bad(f"must be an integer step number, found {step!r}", lineno, "step")
    elif type(tool) is not str:
        src.bad(f"must be the tool name as a string, found {tool!r}", lineno, "tool")
    elif type(out) is not str:
        src.bad(f"must be the output hash as a string, found {out!r}", lineno, "output_sha")
    elif c.get("effect") is not None and c["effect"] not in EFFECTS:
        src.bad(
            f"must be one of 'read', 'write', 'irreversible', found {c['effect']!r}",
            lineno,
            "effect",
        )
    elif c.get("tokens") is not None and type(c["tokens"]) is not int:
        src.bad(f"must be an integer, found {c['tokens']!r}", lineno, "tokens")
    else:
        return True
    return False
