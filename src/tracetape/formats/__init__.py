"""Formats: one module per format, each reading (and where tracetape writes it, writing) records.

* ``cassette``: tracetape cassettes (format 1, header, versions, the delta encoding) and the
  seed's reference cassettes (format 0);
* ``jsonl``: the seed's JSONL trace, one tool call a line, with its block reader;
* ``spans``: span records, the full tool result and model decision kept;
* ``otlp``: OpenTelemetry OTLP/JSON with the GenAI conventions, read and written.

``read_records(source)`` reads any of them from a path, an open file, bytes or any iterable of
lines (a database row stream, an HTTP body), sniffing the format from the first record unless
it is named. A reader is a function ``(TraceSource) -> Iterator[Record]`` registered in
``READERS``; a bad record goes through ``TraceSource.bad``, which raises a ``TraceError``
naming the source, line and field, or counts the line when ``skip_bad_lines`` is set.

    >>> rows = ['{"run_id":"r1","step":1,"tool":"ls","args":{},"output_sha":"ab"}']
    >>> [(r.run, r.name, r.out_digest, r.source) for r in read_records(rows, name="db")]
    [('r1', 'ls', 'ab', 'db')]
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from itertools import islice
from typing import IO, Any

import orjson

from ..canonical import Normalizer
from ..errors import TraceError
from ..record import Record, record_problem
from ._source import Source, TraceFormat, TraceSource, open_source, rewound
from .schemas import fmt_of, schema_of

__all__ = [
    "READERS",
    "Reader",
    "Source",
    "TraceFormat",
    "TraceSource",
    "detect_format",
    "open_trace",
    "read_records",
]

Reader = Callable[[TraceSource], Iterator[Record]]


def _reader(module: str) -> Reader:
    """A format module's ``read_records``, imported on first use: ``import tracetape``
    (the tape needs only the cassette format) stays light."""

    def read(src: TraceSource) -> Iterator[Record]:
        reader: Reader = importlib.import_module(f"{__name__}.{module}").read_records
        return reader(src)

    read.__qualname__ = read.__name__ = f"{module}.read_records"
    return read


READERS: dict[TraceFormat, Reader] = {
    TraceFormat.CASSETTE: _reader("cassette"),
    TraceFormat.JSONL: _reader("jsonl"),
    TraceFormat.SPANS: _reader("spans"),
    TraceFormat.OTLP: _reader("otlp"),
}

_SCAN_LINES = 1000
_HEAD = 1 << 16


def _sniff(fh: IO[bytes], name: str, consumed: bytearray) -> TraceFormat:
    """The format of a stream's first record; ``consumed`` gets the bytes read to find it."""
    lineno, first = 0, b""
    for lineno, raw in enumerate(fh, 1):  # noqa: B007 - lineno is reported below
        consumed += raw
        if raw.strip():
            first = raw
            break
    if first.lstrip().startswith(b"{"):
        head = fh.read(_HEAD)
        consumed += head
        head = first + head
    else:
        head = first
    if not first:
        raise TraceError(
            "the trace file is empty; record a run first (a trace needs at least one call)",
            path=name,
        )
    try:
        obj = orjson.loads(first)
    except orjson.JSONDecodeError:
        stripped = first.strip()
        if stripped.startswith(b"{'"):
            raise TraceError(
                "the record is a Python dict repr, not JSON (single quotes); write traces "
                "with json.dumps",
                path=name,
                line=lineno,
            ) from None
        if stripped.startswith(b"{") and b'"resourceSpans"' in head:
            return TraceFormat.OTLP
        raise TraceError(
            "the first record is not valid JSON; a trace is JSONL (one JSON object a line) "
            "or an OTLP/JSON document",
            path=name,
            line=lineno,
        ) from None
    fmt = fmt_of(obj)
    if fmt is None:
        known = "tracetape cassette, seed JSONL trace (run_id, step, tool, args, output_sha), "
        known += "span records (span_id, tool_call, tool_result), OTLP/JSON (resourceSpans)"
        raise TraceError(
            f"cannot tell the trace format: the first record is {schema_of(obj)}; "
            f"known formats: {known}",
            path=name,
            line=lineno,
        )
    return fmt


def _detect(fh: IO[bytes], name: str, skip_bad_lines: bool) -> tuple[TraceFormat, IO[bytes]]:
    """Sniff the format of ``fh``; return it and the stream rewound to its start."""
    consumed = bytearray()
    try:
        return _sniff(fh, name, consumed), rewound(fh, bytes(consumed))
    except TraceError as exc:
        if not skip_bad_lines or exc.line is None:
            raise
        error = exc
    fh = rewound(fh, bytes(consumed))
    seen = bytearray()
    for raw in islice(fh, _SCAN_LINES):
        seen += raw
        try:
            fmt_found = fmt_of(orjson.loads(raw))
        except orjson.JSONDecodeError:
            continue
        if fmt_found is not None:
            return fmt_found, rewound(fh, bytes(seen))
    raise error


def detect_format(
    source: Source, *, skip_bad_lines: bool = False, name: str | None = None
) -> TraceFormat:
    """Tell a trace's format from its first record.

    Raises ``TraceError`` for a missing or empty source, or one whose first record matches no
    known schema (the message lists the fields it found and the formats it knows). With
    ``skip_bad_lines``, a bad first record is passed over for the first good one among the
    next lines.
    """
    fh, label, _ = open_source(source, name)
    with fh:
        return _detect(fh, label, skip_bad_lines)[0]


def open_trace(
    source: Source,
    fmt: str | TraceFormat = TraceFormat.AUTO,
    *,
    name: str | None = None,
    normalizer: Normalizer | None = None,
    skip_bad_lines: bool = False,
    progress: Callable[[int], None] | None = None,
) -> tuple[TraceFormat, TraceSource]:
    """Open ``source``, sniff its format unless named, and return both (close ``src.fh``)."""
    kind = TraceFormat.parse(fmt)
    fh, label, path = open_source(source, name)
    if kind is TraceFormat.AUTO:
        try:
            kind, fh = _detect(fh, label, skip_bad_lines)
        except BaseException:
            fh.close()
            raise
    src = TraceSource(label, fh, normalizer or Normalizer(), skip_bad_lines, progress, path)
    return kind, src


def read_records(
    source: Source,
    fmt: str | TraceFormat = TraceFormat.AUTO,
    *,
    sources: list[TraceSource] | None = None,
    **options: Any,
) -> Iterator[Record]:
    """Yield the records of a trace in source order, detecting its format unless named.

    ``source`` is a path, an open file (binary or text), bytes, or any iterable of lines
    (bytes or str); ``name`` names it in errors (default: the path, or the file's name).
    ``normalizer`` computes each record's ``out_digest``; ``sources``, when given, receives
    the ``TraceSource`` (for its ``skipped`` count); ``progress`` gets the bytes read. The
    options are ``open_trace``'s: ``name``, ``normalizer``, ``skip_bad_lines``, ``progress``.
    """
    kind, src = open_trace(source, fmt, **options)
    if sources is not None:
        sources.append(src)
    named = _LINE_FIELDS.get(kind, {})
    with src.fh:
        for rec in READERS[kind](src):
            problem = record_problem(rec)
            if problem is None:
                yield rec
                continue
            path, message = problem
            head, dot, rest = path.partition(".")
            src.bad(message, rec.line or None, named.get(head, head) + dot + rest)


# What a record's field is called in the lines of a format, where the names differ: a line
# whose value does not fit the record's type is refused naming its own field.
_LINE_FIELDS: dict[TraceFormat, dict[str, str]] = {
    TraceFormat.JSONL: {"run": "run_id", "name": "tool", "out_digest": "output_sha"},
    TraceFormat.SPANS: {"run": "run_id", "name": "model_decision.tool_name"},
    TraceFormat.OTLP: {"run": "traceId", "ts": "startTimeUnixNano", "ms": "endTimeUnixNano"},
}
