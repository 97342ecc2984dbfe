"""The file store: a cassette file, written to ``PATH.partial`` and moved into place.

Records are appended one line at a time and flushed, so a killed process leaves
``PATH.partial`` (whose complete records replay) and the old ``PATH`` untouched; ``commit``
moves the partial file over ``PATH`` atomically, ``abort`` removes it. A recording whose write
failed (a full disk) is moved into place only where there was no ``PATH``: one that was to
replace a cassette leaves it as it was, and stays in ``PATH.partial``.

One writer per cassette: the recorder holds an exclusive advisory lock (``flock``) on
``PATH.partial`` for as long as it records, and its header names its pid. A second recorder,
in another process or another thread, gets ``CassetteLockedError`` (naming that pid) when it
begins, before its agent runs; the lock of a killed recorder goes with its process, so its
partial file is taken over. Where the file cannot be written (``PATH`` is a folder, its folder
cannot be made or written, the disk is full) the error is a ``CassetteError`` naming the path,
raised when recording begins if it can be known then.
"""

from __future__ import annotations

import errno
import json
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from ..errors import CassetteError, CassetteLockedError
from ..formats.cassette import (
    MAX_RECORD_BYTES,
    Cassette,
    CassetteEncoder,
    dumps_record,
    header_digest,
    read_cassette,
    seal_line,
    trailer_line,
)
from ..record import Record

try:
    import fcntl
except ImportError:  # pragma: no cover - not on Windows: one writer is then not enforced
    fcntl = None  # type: ignore[assignment]

__all__ = ["CassetteWriter", "FileStore"]


def _write_error(exc: OSError, path: Path, kept: Path | None = None) -> CassetteError:
    """The error for a failed write of ``path``, saying what to do; ``kept``: the cassette
    the failed recording was to replace, which stays as it was."""
    if exc.errno == errno.ENOSPC:
        message = "the disk is full; free space and record again"
    elif exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        message = f"cannot write here ({exc.strerror}); record to a writable folder"
    else:
        message = f"cannot write cassette: {exc.strerror or exc}"
    if kept is not None:
        message += (
            f"; the recording before this one is kept as it was at {kept}, and what this one "
            f"wrote is left in {path}"
        )
    return CassetteError(message, path=path)


def _holder(partial: Path) -> int | None:
    """The pid a locked partial file's header names, if it can be read."""
    try:
        with partial.open("rb") as fh:
            head = fh.readline(4096)
        pid = json.loads(head).get("pid")
    except (OSError, ValueError, AttributeError):
        return None
    return pid if type(pid) is int else None


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
        """Whether a recording is there to replay (a folder is not one)."""
        return self.path.is_file()

    def load(self) -> Cassette:
        """Read the whole cassette (``CassetteNotFoundError`` when there is none), its chain
        walked as it is read (``Cassette.seal``: replay refuses a cassette edited by hand)."""
        return read_cassette(self.path)

    def begin(self, header: Mapping[str, Any]) -> None:
        """Start a new recording (in ``PATH.partial``) with ``header`` as its first line."""
        self._writer = CassetteWriter(self.path, header, self.max_record_bytes)

    def append(self, record: Record) -> int:
        """Write one record and flush it; returns its sequence number."""
        if self._writer is None:
            raise CassetteError("no recording was begun", path=self.path)
        return self._writer.write(record)

    def commit(self, ended: str = "completed") -> None:
        """Seal the recording with how it ``ended`` and move it over ``PATH`` (idempotent)."""
        if self._writer is not None:
            self._writer.close(ended=ended)

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
        self._broken: CassetteError | None = None
        if self.path.is_dir():
            raise CassetteError(
                f"is a folder, not a cassette file; name a file such as {self.path / 'run.jsonl'}",
                path=self.path,
            )
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.partial, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise _write_error(exc, self.partial) from None
        # Unbuffered: each record is one write of a whole line, and a failed write (a full
        # disk) leaves nothing behind in a buffer to fail again on close.
        self._fh: IO[bytes] | None = os.fdopen(fd, "r+b", buffering=0)
        self._claim()
        first = dumps_record({**header, "pid": os.getpid()})
        try:
            self._write(first)
        except CassetteError:  # a full disk already: let go of the file and its lock now
            self._fh.close()
            self._fh = None
            raise
        self._chain = header_digest(first)  # each record's digest chains to the one before

    def _claim(self) -> None:
        """Take the partial file's lock (or fail naming its holder) and empty the file."""
        assert self._fh is not None
        if fcntl is not None:
            try:
                fcntl.flock(self._fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                self._fh.close()
                self._fh = None
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise _write_error(exc, self.partial) from None
                pid = _holder(self.partial)
                who = "another recorder" if pid is None else f"process {pid}"
                if pid == os.getpid():
                    who = "another tape of this process"
                raise CassetteLockedError(
                    f"{who} is recording this cassette; wait for it to finish, or record "
                    "to another path",
                    path=self.path,
                    pid=pid,
                ) from None
        self._fh.truncate(0)
        self._size = 0  # the bytes of whole lines written

    def _write(self, line: bytes) -> None:
        assert self._fh is not None
        if self._broken is not None:
            raise self._broken
        view = memoryview(line)
        try:
            while view:
                n = self._fh.write(view)
                if not n:
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                view = view[n:]
            self._size += len(line)
        except OSError as exc:
            # What was written stays (a torn last line is skipped on reading); nothing more is
            # appended after it, so the file never holds a torn line before a whole one. A
            # recording that replaces one (``rewrite``) never replaces it now: both stay.
            kept = self.path if self.path.is_file() else None
            self._broken = _write_error(exc, self.partial, kept)
            raise self._broken from None
        except BaseException:
            # A signal's exception between two pieces of a line (SIGTERM, Ctrl-C): the piece
            # written goes, so the trailer that closes the recording follows a whole line.
            self._fh.truncate(self._size)
            self._fh.seek(self._size)
            raise

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
            sealed, chain = seal_line(self._chain, line)
            try:
                self._write(sealed)
            except BaseException:
                self._seq -= 1  # the line is not there (or torn, and the writer broken)
                raise
            self._chain = chain
            if isinstance(rec, Record):
                self._encoder.written(rec)
            return self._seq

    @property
    def count(self) -> int:
        """How many records were written."""
        return self._seq

    def close(self, *, keep: bool = True, ended: str = "completed") -> None:
        """Seal (the trailer: the record count, how the recording ``ended`` and the last
        digest), close and move ``PATH.partial`` over ``PATH`` (idempotent); with
        ``keep=False`` remove ``PATH.partial`` instead."""
        with self._lock:
            if self._fh is None:
                return
            if keep and self._broken is None:
                self._write(trailer_line(self._seq, ended, self._chain))
            fh, self._fh = self._fh, None
            try:
                # Moved (or removed) while the lock is held: a recorder that starts now finds
                # no partial file of ours to take over.
                if keep and self._broken is not None and self.path.is_file():
                    pass  # a failed recording never replaces a good one: both stay
                elif keep:
                    self.partial.replace(self.path)
                else:
                    self.partial.unlink(missing_ok=True)
            except OSError as exc:
                raise _write_error(exc, self.path) from None
            finally:
                fh.close()
