"""The cassette file format: a JSONL header line, then one record per decision.

Format 1::

    {"tracetape": 1, "version": "0.1.0", "created": "2026-...Z", "harness_sha": "3f2a...",
     "env": {"MODEL": "hmac:1a2b..."}, "redact_key_id": "9c1e..."}
    {"seq": 1, "key": "llm:9f2c41d0a7b3e815", "kind": "llm", "step": 1, "ms": 812.4,
     "effect": "read", "out": {...}, "input": {...redacted copy...},
     "digests": {"messages[0]": ...}}

Cassettes written by the seed's reference ``Tape`` (records ``{"key","kind","ms","out"}`` and no
header) are format 0 and read unchanged. Records are appended one line at a time and flushed,
so a killed process loses at most its last, torn, line: a torn *last* line is skipped with a
warning, a corrupt line anywhere else is an error naming the file and line.

This module imports nothing of tracetape's but its errors.
"""

from __future__ import annotations

import io
import json
import os
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import orjson

from ._version import __version__
from .errors import CassetteError, CassetteNotFoundError, CassetteVersionError, TapeWarning

__all__ = [
    "FORMAT_VERSION",
    "Cassette",
    "CassetteReader",
    "CassetteWriter",
    "read_cassette",
]

FORMAT_VERSION = 1
MAX_RECORD_BYTES = 64 * 1024 * 1024
_RECORD_FIELDS = ("key", "kind", "out")


def _default(value: Any) -> Any:
    # Pydantic models (SDK responses) and objects with a dict form serialize as their data.
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    if isinstance(value, set | frozenset):
        return sorted(value, key=repr)
    raise TypeError(f"{type(value).__name__} is not JSON-serializable")


def dumps_record(record: Mapping[str, Any]) -> bytes:
    """Serialize one record or header as a JSONL line (with its newline).

    orjson handles integers of up to 64 bits; a record holding a larger one is written by the
    standard library instead and marked ``"bigint": true`` so readers parse it exactly too.
    """
    try:
        return orjson.dumps(
            record, default=_default, option=orjson.OPT_APPEND_NEWLINE | orjson.OPT_NON_STR_KEYS
        )
    except TypeError as exc:
        if "64-bit" not in str(exc):
            raise
    text = json.dumps({**record, "bigint": True}, default=_default, ensure_ascii=False)
    return text.encode() + b"\n"


@dataclass
class Cassette:
    """A cassette read into memory: its header (None for the seed's format 0) and records.

    ``records`` are plain dicts in file order; ``skipped`` counts torn last lines dropped.
    """

    path: Path
    header: dict[str, Any] | None
    records: list[dict[str, Any]] = field(default_factory=list)
    skipped: int = 0

    @property
    def format(self) -> int:
        """The format version: 1 for tracetape cassettes, 0 for the seed's reference ones."""
        return int(self.header["tracetape"]) if self.header else 0

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.records)

    def __len__(self) -> int:
        return len(self.records)


def _check_header(header: dict[str, Any], path: Path) -> None:
    version = header.get("tracetape")
    if not isinstance(version, int) or isinstance(version, bool):
        raise CassetteError(
            "header field 'tracetape' (the format version) must be an integer, "
            f"found {version!r}; the header was edited or is not a tracetape cassette",
            path=path,
            line=1,
        )
    if version != FORMAT_VERSION:
        newer = version > FORMAT_VERSION
        advice = (
            "upgrade tracetape (pip install -U tracetape) to read it"
            if newer
            else "re-record it with this tracetape"
        )
        raise CassetteVersionError(
            f"cassette format {version} (written by tracetape {header.get('version', '?')}) "
            f"is {'newer' if newer else 'older'} than the format {FORMAT_VERSION} this "
            f"tracetape reads; {advice}",
            path=path,
            line=1,
        )


def read_cassette(path: str | os.PathLike[str]) -> Cassette:
    """Read and validate a cassette (format 1 or the seed's format 0).

    Raises ``CassetteNotFoundError`` if it does not exist, ``CassetteVersionError`` for an
    unknown format, and ``CassetteError`` naming the line and field of any corrupt record.
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise CassetteNotFoundError(
            "no such cassette; record it first with mode='record' (or mode='auto')", path=path
        ) from None
    except OSError as exc:
        raise CassetteError(f"cannot read cassette: {exc.strerror}", path=path) from exc
    reader = CassetteReader(io.BytesIO(data), path)
    records = list(reader)
    return Cassette(path, reader.header, records, reader.skipped)


class CassetteReader:
    """Stream a cassette's records one line at a time, validated, with deltas expanded.

    ``lines`` yields raw lines (a binary file object will do). ``header`` is set once the
    first line is read. A torn last line is skipped with a ``TapeWarning``. A bad line raises
    ``CassetteError``, or, when ``on_error`` is given, is passed to it and skipped.

        >>> import io
        >>> reader = CassetteReader(io.BytesIO(b'{"key":"tool:1","kind":"tool","out":1}\\n'))
        >>> [r["out"] for r in reader], reader.header
        ([1], None)
    """

    def __init__(
        self,
        lines: Iterable[bytes],
        path: str | os.PathLike[str] = "<cassette>",
        on_error: Callable[[CassetteError], None] | None = None,
    ):
        self.lines = lines
        self.path = Path(path)
        self.on_error = on_error
        self.header: dict[str, Any] | None = None
        self.skipped = 0

    def _bad(self, error: CassetteError) -> None:
        if self.on_error is None:
            raise error
        self.on_error(error)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        path = self.path
        loads = orjson.loads
        previous: dict[str, dict[str, Any]] = {}
        for lineno, raw in enumerate(self.lines, 1):
            try:
                rec = loads(raw)
            except orjson.JSONDecodeError as exc:
                if not raw.strip():
                    continue
                if not raw.endswith(b"\n"):
                    self.skipped += 1
                    warnings.warn(
                        f"{path}:{lineno}: skipped a torn last line (the recording process was "
                        "killed mid-write); the records before it replay",
                        TapeWarning,
                        stacklevel=2,
                    )
                    return
                self._bad(
                    CassetteError(
                        f"line is not valid JSON ({exc}); the cassette is corrupt: re-record "
                        "it, or restore it from version control",
                        path=path,
                        line=lineno,
                    )
                )
                continue
            if type(rec) is not dict:
                self._bad(
                    CassetteError(
                        f"line holds a JSON {type(rec).__name__}, not a record object; the "
                        "cassette is corrupt: re-record it",
                        path=path,
                        line=lineno,
                    )
                )
                continue
            kind = rec.get("kind")
            if type(rec.get("key")) is not str or type(kind) is not str or "out" not in rec:
                if lineno == 1 and "tracetape" in rec:
                    _check_header(rec, path)
                    self.header = rec
                    continue
                missing = next(f for f in _RECORD_FIELDS if f not in rec or rec[f] is None)
                self._bad(
                    CassetteError(
                        f"record has no valid {missing!r} field (a record needs key, kind and "
                        "out); the cassette is corrupt or not a tracetape cassette: re-record it",
                        path=path,
                        line=lineno,
                    )
                )
                continue
            if rec.get("bigint") is True:
                rec = json.loads(raw)
                del rec["bigint"]
            base = rec.get("base")
            if base is not None:
                try:
                    _expand(rec, base, previous.get(kind), path, lineno)
                except CassetteError as error:
                    self._bad(error)
                    continue
            previous[kind] = rec
            yield rec


def _expand(
    rec: dict[str, Any], base: Any, previous: dict[str, Any] | None, path: Path, lineno: int
) -> None:
    """Rebuild the list fields a record shares with the previous record of its kind."""
    for name, shared in base.items() if isinstance(base, dict) else [("base", None)]:
        for field_name, suffix in (("input", ""), ("digests", "[]")):
            section = rec.get(field_name)
            if section is None:
                continue
            prior = (previous or {}).get(field_name, {}).get(name + suffix)
            tail = section.get(name + suffix)
            if (
                not isinstance(shared, int)
                or not isinstance(prior, list)
                or not isinstance(tail, list)
                or len(prior) < shared
            ):
                raise CassetteError(
                    f"field 'base' says this record shares {shared!r} elements of {name!r} with "
                    f"the previous {rec['kind']!r} record, which does not have them; the "
                    "cassette was edited, reordered or truncated: re-record it",
                    path=path,
                    line=lineno,
                )
            section[name + suffix] = prior[:shared] + tail
    del rec["base"]


def new_header(**fields: Any) -> dict[str, Any]:
    """Return a format-1 header with the current time and tracetape version, plus ``fields``."""
    now = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    header: dict[str, Any] = {"tracetape": FORMAT_VERSION, "version": __version__, "created": now}
    header.update({k: v for k, v in fields.items() if v is not None})
    return header


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

    def write(self, record: dict[str, Any]) -> int:
        """Append one record, assigning and returning its sequence number."""
        with self._lock:
            if self._fh is None:
                raise CassetteError(
                    "cassette is closed; no more records can be written", path=self.path
                )
            self._seq += 1
            record = {"seq": self._seq, **record}
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
            return self._seq

    @property
    def count(self) -> int:
        """How many records were written."""
        return self._seq

    def close(self) -> None:
        """Flush, close and move ``PATH.partial`` over ``PATH`` (idempotent)."""
        with self._lock:
            if self._fh is None:
                return
            self._fh.close()
            self._fh = None
            self.partial.replace(self.path)
