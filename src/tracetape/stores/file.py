"""The file store: a cassette file, written to ``PATH.partial`` and moved into place.

Records are appended one line at a time and flushed, so a killed process leaves
``PATH.partial`` (whose complete records replay) and the old ``PATH`` untouched; ``commit``
moves the partial file over ``PATH`` atomically, ``abort`` removes it.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from ..errors import CassetteError
from ..formats.cassette import (
    MAX_RECORD_BYTES,
    Cassette,
    CassetteEncoder,
    dumps_record,
    read_cassette,
)
from ..record import Record

__all__ = ["CassetteWriter", "FileStore"]


class FileStore:
    """A ``RecordStore`` over one cassette file (the default store of ``Tape(path)``).

    >>> import tempfile, pathlib
    >>> store = FileStore(pathlib.Path(tempfile.mkdtemp()) / "run.jsonl")
    >>> store.begin({"tracetape": 1})
    >>> store.append(Record(kind="tool", key="tool:1", out=3))
    1
    >>> store.commit()
    >>> [r.out for r in store.load().records]
    [3]
    """

    def __init__(self, path: str | os.PathLike[str], max_record_bytes: int = MAX_RECORD_BYTES):
        self.path = Path(path)
        self.max_record_bytes = max_record_bytes
        self._writer: CassetteWriter | None = None

    @property
    def name(self) -> str:
        """The file's path, as messages name it."""
        return str(self.path)

    def exists(self) -> bool:
        """Whether a recording is there to replay."""
        return self.path.exists()

    def load(self) -> Cassette:
        """Read the whole cassette (``CassetteNotFoundError`` when there is none)."""
        return read_cassette(self.path)

    def begin(self, header: Mapping[str, Any]) -> None:
        """Start a new recording (in ``PATH.partial``) with ``header`` as its first line."""
        self._writer = CassetteWriter(self.path, header, self.max_record_bytes)

    def append(self, record: Record) -> int:
        """Write one record and flush it; returns its sequence number."""
        if self._writer is None:
            raise CassetteError("no recording was begun", path=self.path)
        return self._writer.write(record)

    def commit(self) -> None:
        """Move the recording over ``PATH`` (idempotent)."""
        if self._writer is not None:
            self._writer.close()

    def abort(self) -> None:
        """Drop the recording and keep whatever ``PATH`` held before (idempotent)."""
        if self._writer is not None:
            self._writer.close(keep=False)

    def __repr__(self) -> str:
        return f"FileStore({self.name!r})"


class CassetteWriter:
    """Append records to ``PATH.partial`` and move it over ``PATH`` on ``close()``.

    Thread-safe: each record is written and flushed as one line under a lock, so records from
    several threads or asyncio tasks never interleave.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        header: Mapping[str, Any],
        max_record_bytes: int = MAX_RECORD_BYTES,
    ):
        self.path = Path(path)
        self._encoder = CassetteEncoder()
        self.max_record_bytes = max_record_bytes
        self.partial = self.path.with_name(self.path.name + ".partial")
        self._lock = threading.Lock()
        self._seq = 0
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fh: IO[bytes] | None = self.partial.open("wb")
        except OSError as exc:
            raise CassetteError(
                f"cannot write cassette: {exc.strerror}", path=self.partial
            ) from exc
        self._write(dumps_record(header))

    def _write(self, line: bytes) -> None:
        assert self._fh is not None
        self._fh.write(line)
        self._fh.flush()

    def write(self, rec: Record | Mapping[str, Any]) -> int:
        """Append one record (a ``Record``, or a line's dict as it is), assigning and
        returning its sequence number."""
        with self._lock:
            if self._fh is None:
                raise CassetteError(
                    "cassette is closed; no more records can be written", path=self.path
                )
            self._seq += 1
            fields = self._encoder.encode(rec) if isinstance(rec, Record) else rec
            record = {"seq": self._seq, **fields}
            try:
                line = dumps_record(record)
            except TypeError as exc:
                self._seq -= 1
                raise CassetteError(
                    f"decision {record.get('key')} cannot be stored: {exc}; return plain "
                    "JSON data (dict, list, str, number) from the call",
                    path=self.path,
                ) from None
            if len(line) > self.max_record_bytes:
                self._seq -= 1
                raise CassetteError(
                    f"decision {record.get('key')} is {len(line):,} bytes, over the "
                    f"{self.max_record_bytes:,}-byte record limit; return less data from the "
                    "call, or raise the limit with Tape(..., max_record_bytes=N)",
                    path=self.path,
                )
            self._write(line)
            if isinstance(rec, Record):
                self._encoder.written(rec)
            return self._seq

    @property
    def count(self) -> int:
        """How many records were written."""
        return self._seq

    def close(self, *, keep: bool = True) -> None:
        """Flush, close and move ``PATH.partial`` over ``PATH`` (idempotent); with
        ``keep=False`` remove ``PATH.partial`` instead."""
        with self._lock:
            if self._fh is None:
                return
            self._fh.close()
            self._fh = None
            if keep:
                self.partial.replace(self.path)
            else:
                self.partial.unlink(missing_ok=True)
