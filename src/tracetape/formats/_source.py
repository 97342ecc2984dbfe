"""Where records are read from: a path, an open file, bytes, or any iterable of lines.

``open_source`` turns any of these into one binary stream with ``read``, ``readline``, line
iteration and ``tell``, plus a name for error messages; ``TraceSource`` carries that stream
and the options every reader shares (the normalizer, ``skip_bad_lines``, progress). A
database row stream or an HTTP body reads exactly as a file does, with line numbers.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path
from typing import IO, Any

from .._enums import LoudEnum
from ..canonical import Normalizer
from ..errors import CassetteError, TraceError

__all__ = ["PROGRESS_EVERY", "Source", "TraceFormat", "TraceSource", "open_source", "stem_of"]

PROGRESS_EVERY = 1 << 14
MAX_ERRORS = 1000
_BUFFER = 1 << 20

# A path, an open file (binary or text), bytes, or an iterable of lines (bytes or str).
Source = str | os.PathLike[str] | IO[bytes] | IO[str] | bytes | bytearray | Iterable[Any]


class TraceFormat(LoudEnum):
    """The formats ``read_records`` understands (``auto`` sniffs the source)."""

    AUTO = "auto"
    CASSETTE = "cassette"
    JSONL = "jsonl"
    SPANS = "spans"
    OTLP = "otlp"

    @classmethod
    def label(cls) -> str:
        """Named "trace format" in errors."""
        return "trace format"


class _Lines(io.RawIOBase):
    """A raw stream over an iterable of lines; a line given without its newline gets one."""

    def __init__(self, lines: Iterable[Any], *, chunks: bool = False):
        self._it = iter(lines)
        self._buf = b""
        self._pos = 0
        self._chunks = chunks  # items are byte chunks of a stream, not whole lines

    def readable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def readinto(self, buffer: Any) -> int:
        while not self._buf:
            try:
                item = next(self._it)
            except StopIteration:
                return 0
            data = item.encode() if isinstance(item, str) else bytes(item)
            if data and not self._chunks and not data.endswith(b"\n"):
                data += b"\n"
            self._buf = data
        n = min(len(buffer), len(self._buf))
        buffer[:n] = self._buf[:n]
        self._buf = self._buf[n:]
        self._pos += n
        return n


def stem_of(name: str) -> str:
    """A source's name without folder and suffix: the run id of a source whose format names
    none (``runs/412.jsonl`` is run ``412``).

    >>> stem_of("runs/412.cassette.jsonl")
    '412'
    """
    base = name.replace("\\", "/").rsplit("/", 1)[-1]
    return base.split(".")[0] or base


def _from_lines(lines: Iterable[Any], *, chunks: bool = False) -> IO[bytes]:
    return io.BufferedReader(_Lines(lines, chunks=chunks), _BUFFER)


def open_source(source: Source, name: str | None = None) -> tuple[IO[bytes], str, Path | None]:
    """Open ``source`` as a binary stream; return it, its name and its path (None if none).

    Raises ``TraceError`` for a path that is missing or unreadable.

    >>> fh, name, path = open_source([b'{"a": 1}', '{"b": 2}\\n'], name="rows")
    >>> fh.read(), name, path
    (b'{"a": 1}\\n{"b": 2}\\n', 'rows', None)
    """
    if isinstance(source, str | os.PathLike):
        path = Path(source)
        try:
            fh: IO[bytes] = path.open("rb", buffering=_BUFFER)
        except FileNotFoundError:
            raise TraceError("no such trace file", path=path) from None
        except IsADirectoryError:
            raise TraceError("is a folder, not a trace file", path=path) from None
        except OSError as exc:
            raise TraceError(f"cannot read trace file: {exc.strerror}", path=path) from exc
        return fh, name or str(path), path
    if isinstance(source, bytes | bytearray):
        return io.BytesIO(bytes(source)), name or "<bytes>", None
    label = name or str(getattr(source, "name", "") or "<stream>")
    if isinstance(source, io.TextIOBase):
        return _from_lines(source), label, None
    if hasattr(source, "read"):
        if isinstance(source.read(0), str):
            return _from_lines(source), label, None
        if isinstance(source, io.IOBase):
            return source, label, None  # type: ignore[return-value]
        # A file-like object that is only readable: its reads become a stream's chunks.
        read = source.read
        return _from_lines(iter(lambda: read(_BUFFER), b""), chunks=True), label, None
    if not isinstance(source, Iterable):
        raise TypeError(
            f"cannot read records from a {type(source).__name__}; pass a path, an open file, "
            "bytes, or an iterable of lines"
        )
    return _from_lines(source), label, None


def rewound(fh: IO[bytes], consumed: bytes) -> IO[bytes]:
    """``fh`` from where reading began: seek back over ``consumed`` when it can, else replay
    ``consumed`` first."""
    try:
        if fh.seekable():
            fh.seek(fh.tell() - len(consumed))
            return fh
    except (OSError, ValueError):
        pass
    return _from_lines(chain([consumed], iter(lambda: fh.read(_BUFFER), b"")), chunks=True)


# What a reader's error for a bad line advises (a caller with other means strips it).
SKIP_ADVICE = "; fix the line, or skip bad lines with --skip-bad-lines (skip_bad_lines=True)"


@dataclass
class TraceSource:
    """An open source of records and the reading options every reader shares.

    ``name`` names it in errors (the path, or what the caller called it), ``path`` is set for
    files. ``skipped`` counts the bad lines dropped under ``skip_bad_lines``
    (``first_skipped`` keeps the first few errors for the report); ``progress`` is called now
    and then with the number of bytes read. ``ended`` is how the recording read ended, where
    its format says (a cassette's trailer: ``completed``, ``interrupted``, ``failed: Type``;
    ``unfinished`` for a sealed cassette that never closed), once it is read.
    """

    name: str
    fh: IO[bytes]
    normalizer: Normalizer
    skip_bad_lines: bool = False
    progress: Callable[[int], None] | None = None
    path: Path | None = None
    skipped: int = 0
    first_skipped: list[str] = field(default_factory=list)
    errors: list[CassetteError] = field(default_factory=list)
    ended: str | None = None

    def skip_error(self, error: CassetteError) -> None:
        """Raise ``error``, or count its line under ``skip_bad_lines`` (keeping the first
        ``MAX_ERRORS`` errors in ``errors``, for a caller that reports every bad line)."""
        if not self.skip_bad_lines:
            raise error
        self.skipped += 1
        if len(self.first_skipped) < 5:
            self.first_skipped.append(str(error))
        if len(self.errors) < MAX_ERRORS:
            self.errors.append(error)

    def bad(self, message: str, line: int | None, field: str | None = None) -> None:
        """Raise a ``TraceError`` for a bad record, or count it under ``skip_bad_lines``."""
        where = f"field {field!r}: " if field else ""
        self.skip_error(
            TraceError(where + message + SKIP_ADVICE, path=self.name, line=line, field=field)
        )

    def tell(self) -> int:
        """Bytes read so far (for progress)."""
        try:
            return self.fh.tell()
        except (OSError, ValueError):
            return 0

    def lines(self) -> Iterator[tuple[int, bytes]]:
        """The source's lines, numbered from 1, reporting progress now and then."""
        progress = self.progress
        for lineno, raw in enumerate(self.fh, 1):
            if progress is not None and not lineno % PROGRESS_EVERY:
                progress(self.tell())
            yield lineno, raw

    @property
    def stem(self) -> str:
        """The source's name without folder and suffix: the run id of a source whose format
        names none (a cassette without ``run_id`` in its header, a span file without
        ``run_id``/``trace_id``)."""
        return stem_of(self.name)
