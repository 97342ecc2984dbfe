"""The cassette file format: a JSONL header line, one record per decision, a trailer.

Format 2::

    {"tracetape": 2, "version": "0.1.0", "created": "2026-...Z", "harness_sha": "3f2a...",
     "env": {"MODEL": "hmac:1a2b..."}, "redact_key_id": "9c1e...", "pid": 4242}
    {"seq": 1, "key": "llm:9f2c41d0a7b3e815", "kind": "llm", "step": 1, "ms": 812.4,
     "effect": "read", "out": {...}, "input": {...redacted copy...},
     "digests": {"messages[0]": ...}, "chain": "5be1..."}
    {"end": 1, "ended": "completed", "chain": "5be1..."}

Sealed: each record ends with ``chain``, the SHA-256 (32 hex) of the previous line's chain
(the header's: the digest of the header line) followed by the record's line up to its
``,"chain"`` field; the trailer, written when the recording closes, holds the record count,
how the recording ended (``ENDINGS``: ``completed``, ``interrupted`` by SIGINT or SIGTERM, or
``failed: ExceptionType``) and its own chain digest (of the last chain and its count and
ending; a trailer without ``ended``, written before it, holds the last chain itself).
``verify_seal`` walks the chain, so a changed, deleted, inserted or reordered record, a
changed header or a changed ending, breaks it at the line at fault; a file without a trailer
did not close (a killed run). ``read_cassette`` walks the chain as it reads (``Cassette.seal``,
each line at fault), which replay refuses unless told to trust the edits; the analysis reads
edited files as they are. Format 1 is the same without them (unsealed), and is read as before.

Cassettes written by the seed's reference ``Tape`` (records ``{"key","kind","ms","out"}`` and no
header) are format 0 and read unchanged. Records are appended one line at a time and flushed,
so a killed process loses at most its last, torn, line: a torn *last* line is skipped with a
warning, a corrupt line anywhere else is an error naming the file and line.

A conversation grows by appending, so a record stores only the list elements that are new
since the previous record of its kind, and ``base`` says how many it shares: the encoder
(``CassetteEncoder``) and the expansion (``CassetteReader``) live here together.

A cassette names its run: the header's ``run_id`` is unique, given when the recording starts
(``new_run_id``: the cassette's name and 12 random hex digits, ``checkout@5be1c0ffee42``);
the collector files the cassette's records under it. A cassette recorded before run ids
takes one derived from its content (``run_id_of``: its name and its last chain digest), and
the reader, from the source's name (``runs/412.jsonl`` is run ``412``).

Values JSON cannot hold come back as they were: a NaN or an infinity in an output is stored
tagged, ``{"__float__": "NaN"}`` (``"Infinity"``, ``"-Infinity"``), in a record marked
``"tagged": true``; in such a record a dict that looks like a tag is stored wrapped,
``{"__escaped__": {...}}``. A record holding an integer beyond 64 bits is marked
``"bigint": true`` and read exactly. Records without a mark are read as plain JSON.

Why one module: it is the cassette format. Its header, its seal (the chain of digests and
the trailer), its reader and its writer change together whenever the format does (a new
version touches all of them, with its migration), and each checks what the others write.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import re
import uuid
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from .._version import __version__, install_command
from ..canonical import Normalizer, all_finite, fingerprint, json_default
from ..errors import (
    CassetteError,
    CassetteNotFoundError,
    CassetteVersionError,
    NotACassetteError,
    TapeWarning,
)
from ..record import Record
from ._source import TraceSource, stem_of
from .schemas import TOO_DEEP, is_effect, json_type, readable

__all__ = [
    "ENDINGS",
    "FORMAT_VERSION",
    "KEYS_VERSION",
    "MAX_RECORD_BYTES",
    "READABLE_FORMATS",
    "Cassette",
    "CassetteEncoder",
    "CassetteReader",
    "Seal",
    "dumps_record",
    "fill_steps",
    "final_chain",
    "name_of",
    "new_header",
    "read_cassette",
    "read_records",
    "seal_line",
    "tag_values",
    "tokens_of",
    "trailer_line",
    "untag_values",
    "verify_seal",
]

FORMAT_VERSION = 2
# What a cassette's keys mean, in its header's ``keys`` (absent: 1). 4: a model request's
# fields that never reach the model (its provider's noise) are stored under ``unkeyed``, not
# keyed (``integrations.keying``); 3 keyed them. 3: a model call's step is read from its
# conversation, or from the earlier answer its one user message quotes
# (``integrations.steps``); 2 read no quotes; 1 counted calls per thread and task.
KEYS_VERSION = 4
READABLE_FORMATS = (1, 2)  # format 1: the same records, without the seal
MAX_RECORD_BYTES = 64 * 1024 * 1024
_RECORD_FIELDS = ("key", "kind", "out")


def _default(value: Any) -> Any:
    # Stored outputs keep every field of a model (replay hands them back to the agent) and
    # refuse what has no JSON form, where a key falls back to ``str``.
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    if isinstance(value, set | frozenset | Mapping):
        return json_default(value)
    raise TypeError(f"{type(value).__name__} is not JSON-serializable")


_FLOAT_TAG, _ESCAPE_TAG = "__float__", "__escaped__"
_TAGS = frozenset({_FLOAT_TAG, _ESCAPE_TAG})
_NON_FINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def tag_values(value: Any) -> Any:
    """``value`` with its non-finite floats tagged and its tag-like dicts wrapped.

    >>> tag_values([float("nan"), {"__float__": "NaN"}, -float("inf")])
    [{'__float__': 'NaN'}, {'__escaped__': {'__float__': 'NaN'}}, {'__float__': '-Infinity'}]
    """
    kind = type(value)
    if kind is float:
        if math.isnan(value):
            return {_FLOAT_TAG: "NaN"}
        if math.isinf(value):
            return {_FLOAT_TAG: "Infinity" if value > 0 else "-Infinity"}
        return value
    if kind is list or kind is tuple:
        return [tag_values(v) for v in value]
    if kind is dict or isinstance(value, Mapping):
        tagged = {k: tag_values(v) for k, v in value.items()}
        return {_ESCAPE_TAG: tagged} if len(tagged) == 1 and next(iter(tagged)) in _TAGS else tagged
    return value


def untag_values(value: Any) -> Any:
    """The inverse of ``tag_values``.

    >>> untag_values([{"__float__": "Infinity"}, {"__escaped__": {"__float__": "NaN"}}])
    [inf, {'__float__': 'NaN'}]
    """
    kind = type(value)
    if kind is list:
        return [untag_values(v) for v in value]
    if kind is dict:
        if len(value) == 1:
            tag, inner = next(iter(value.items()))
            if tag == _FLOAT_TAG and inner in _NON_FINITE:
                return _NON_FINITE[inner]
            if tag == _ESCAPE_TAG and type(inner) is dict:
                return {k: untag_values(v) for k, v in inner.items()}
        return {k: untag_values(v) for k, v in value.items()}
    return value


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

    ``records`` are ``Record`` s in file order; ``skipped`` counts torn last lines dropped.
    ``trailer`` is the seal line (None: unsealed, or the recording never closed). ``seal`` is
    what the walk of its chain found as it was read (``read_cassette``; None where nobody
    walked it): a ``broken`` one names the lines edited by hand, which replay refuses.
    """

    path: Path
    header: dict[str, Any] | None
    records: list[Record] = field(default_factory=list)
    skipped: int = 0
    trailer: dict[str, Any] | None = None
    seal: Seal | None = None

    @property
    def ended(self) -> str | None:
        """How the recording ended: the trailer's ``ended`` (``completed``, ``interrupted``,
        ``failed: Type``), ``unfinished`` for a sealed format without a trailer (a killed
        recorder), None where the format does not say (format 0 and 1, old trailers)."""
        return _ended(self.header, self.trailer)

    @property
    def format(self) -> int:
        """The format version: 1 for tracetape cassettes, 0 for the seed's reference ones."""
        return int(self.header["tracetape"]) if self.header else 0

    def __iter__(self) -> Iterator[Record]:
        return iter(self.records)

    def __len__(self) -> int:
        return len(self.records)


def _ended(header: dict[str, Any] | None, trailer: dict[str, Any] | None) -> str | None:
    """How a recording ended, from its header and trailer (see ``Cassette.ended``)."""
    if trailer is not None:
        ended = trailer.get("ended")
        return ended if isinstance(ended, str) else None
    if header is not None and header.get("tracetape") == FORMAT_VERSION:
        return "unfinished"
    return None


def _check_header(header: dict[str, Any], path: Path) -> None:
    version = header.get("tracetape")
    if not isinstance(version, int) or isinstance(version, bool):
        raise CassetteError(
            "header field 'tracetape' (the format version) must be an integer, "
            f"found {json_type(version)}; the header was edited or is not a tracetape cassette",
            path=path,
            line=1,
        )
    if version not in READABLE_FORMATS:
        newer = version > FORMAT_VERSION
        advice = (
            f"upgrade tracetape ({install_command(upgrade=True)}, from a newer copy) to read it"
            if newer
            else "re-record it with this tracetape"
        )
        raise CassetteVersionError(
            f"cassette format {version} (written by tracetape {header.get('version', '?')}) "
            f"is {'newer' if newer else 'older'} than the formats {READABLE_FORMATS} this "
            f"tracetape reads; {advice}",
            path=path,
            line=1,
        )


_CHAIN_FIELD = b',"chain":"'
_CHAIN_HEX = 32  # the hex digits of a chain digest
# What ends a record after its digest: the closing quote and brace, then the line's end (none
# on a last line; CRLF where a checkout converted the line endings, which is not an edit).
_LINE_ENDS = (b'"}\n', b'"}', b'"}\r\n')


def _digest(previous: bytes, body: bytes) -> bytes:
    """``chain_digest`` on bytes, as a reader holds them."""
    return hashlib.sha256(previous + body).hexdigest()[:_CHAIN_HEX].encode()


def chain_digest(previous: str, body: bytes) -> str:
    """The chain digest of a record line whose bytes before its ``,"chain"`` field are ``body``
    (with the closing brace), following the line whose digest is ``previous``."""
    return _digest(previous.encode(), body).decode()


def seal_line(previous: str, line: bytes) -> tuple[bytes, str]:
    """``line`` (a record's JSONL line) with its chain digest appended, and that digest."""
    body = line.rstrip(b"\n")
    chain = chain_digest(previous, body)
    return body[:-1] + _CHAIN_FIELD + chain.encode() + b'"}\n', chain


ENDINGS = ("completed", "interrupted")  # and "failed: ExceptionType"
_ENDING = re.compile(r"completed|interrupted|failed: [A-Za-z_][A-Za-z0-9_.]{0,120}")


def _trailer_body(count: int, ended: str) -> bytes:
    return orjson.dumps({"end": count, "ended": ended})


def trailer_line(count: int, ended: str, chain: str) -> bytes:
    """The trailer of a recording of ``count`` records whose last chain digest is ``chain``,
    sealing how it ``ended`` too.

    >>> trailer_line(2, "interrupted", "ab")[:36]
    b'{"end":2,"ended":"interrupted","chai'
    """
    if not _ENDING.fullmatch(ended):
        raise ValueError(f"{ended!r} is not how a recording ends; use one of {ENDINGS}")
    body = _trailer_body(count, ended)
    return body[:-1] + _CHAIN_FIELD + chain_digest(chain, body).encode() + b'"}\n'


def header_digest(line: bytes) -> str:
    """The chain digest the first record follows: the header line's own."""
    return hashlib.sha256(line.rstrip(b"\r\n")).hexdigest()[:_CHAIN_HEX]


@dataclass
class Seal:
    """What a walk of a cassette's chain found: ``state`` is ``sealed`` (every record chains
    to the trailer), ``unfinished`` (the chain holds but the recording never closed: a killed
    run), ``unsealed`` (format 1 or the seed's format 0: no digests to check) or ``broken``,
    with the first ``line`` at fault and its ``reason``; ``faults`` holds every ``(line,
    reason)`` found where the walk went on past the first (``read_cassette`` does)."""

    state: str
    records: int = 0
    line: int | None = None
    reason: str = ""
    faults: tuple[tuple[int, str], ...] = ()


class _Chain:
    """A format-2 cassette's chain, walked one line at a time as the file is read: each
    record's digest is checked against the line before it, the trailer against the record
    count and the last digest. A fault is noted and the walk goes on from the digest the line
    holds, so one changed record is one fault and the records after it still chain. A record
    without a digest is one inserted by hand, unless no line carries one: a cassette written
    without the seal (by hand, by a tool) is unsealed, as format 1 is."""

    def __init__(self, header_line: bytes) -> None:
        self.previous = header_digest(header_line).encode()  # the digest the next line follows
        self.seq = 0
        self.count = 0
        self.closed = False  # the trailer was read
        self.chained = False  # a line carried a digest: the cassette was sealed
        self.faults: list[tuple[int, str]] = []
        self.unchained: list[int] = []  # the records without a digest

    @property
    def broken(self) -> bool:
        """Whether a fault was found so far."""
        return bool(self.faults) or (self.chained and bool(self.unchained))

    def follows_trailer(self, lineno: int) -> bool:
        """Whether line ``lineno`` comes after the trailer: a fault, as nothing does."""
        if self.closed:
            self.faults.append((lineno, "lines were added after the trailer"))
        return self.closed

    def record(self, lineno: int, raw: bytes, this: Any) -> None:
        """Check the record ``raw`` at ``lineno`` (whose ``seq`` is ``this``)."""
        if self.closed:
            self.follows_trailer(lineno)
            return
        # The digest covers the line's bytes before its ``,"chain"`` field, which must end it:
        # a field added after it would not be sealed.
        end = raw.rfind(_CHAIN_FIELD)
        if end < 0:
            self.unchained.append(lineno)
            return
        self.chained = True
        start = end + len(_CHAIN_FIELD)
        found = raw[start : start + _CHAIN_HEX]
        seq = self.seq
        if (
            found != _digest(self.previous, raw[:end] + b"}")
            or raw[start + _CHAIN_HEX :] not in _LINE_ENDS
        ):
            if type(this) is int and this > seq + 1:
                why = f"records were deleted or moved before it (seq {seq} is followed by {this})"
            elif type(this) is int and this <= seq:
                why = f"records were reordered or copied (seq {this} after {seq})"
            elif self.count == 0:
                why = "the header or this record was changed"
            else:
                why = "the record was changed (its bytes no longer match its digest)"
            self.faults.append((lineno, why))
        self.previous, self.seq = found, this if type(this) is int else seq + 1
        self.count += 1

    def trailer(self, lineno: int, rec: dict[str, Any]) -> None:
        """Check the trailer ``rec`` at ``lineno`` against the records read before it."""
        if self.follows_trailer(lineno):
            return
        self.closed = self.chained = True
        count, previous, end = self.count, self.previous.decode("ascii", "replace"), rec.get("end")
        ended = rec.get("ended")
        if ended is not None:
            if not isinstance(ended, str) or not _ENDING.fullmatch(ended):
                self.faults.append((lineno, "the trailer's ending was changed"))
                return
            sealed = rec.get("chain") == chain_digest(previous, _trailer_body(count, ended))
        else:
            sealed = rec.get("chain") == previous
        if not sealed and end == count:
            self.faults.append((lineno, "the trailer's ending or its seal was changed"))
        elif not sealed:
            self.faults.append(
                (
                    lineno,
                    f"the trailer seals {end!r} records and this file holds {count}: "
                    "records at the end were deleted or added",
                )
            )
        elif end != count:
            self.faults.append(
                (
                    lineno,
                    f"the trailer's record count was changed: it says {end!r}, and the chain "
                    f"it seals holds {count}",
                )
            )

    def seal(self) -> Seal:
        """What the walk found so far."""
        faults = self.faults
        if self.chained and self.unchained:
            inserted = "the record has no chain digest: inserted by hand"
            faults = sorted([*faults, *((line, inserted) for line in self.unchained)])
        if faults:
            line, reason = faults[0]
            return Seal("broken", self.count, line, reason, tuple(faults))
        if self.unchained:
            return Seal("unsealed", reason="its records were written without chain digests")
        if not self.closed:
            return Seal("unfinished", self.count, None, "no trailer")
        return Seal("sealed", self.count)


def verify_seal(path: str | os.PathLike[str]) -> Seal:
    """Walk a cassette's chain of digests (format 2) and say whether it is intact: the first
    line at fault, where it is not."""
    path = Path(path)
    lines = path.read_bytes().splitlines(keepends=True)
    if not lines:
        return Seal("unsealed", reason="the file is empty")
    try:
        header = orjson.loads(lines[0])
    except orjson.JSONDecodeError:
        header = None
    if not isinstance(header, dict) or header.get("tracetape") != FORMAT_VERSION:
        return Seal("unsealed", reason="written before records carried digests")
    chain = _Chain(lines[0])
    for lineno, raw in enumerate(lines[1:], 2):
        if not raw.strip():
            continue
        if chain.follows_trailer(lineno):
            break
        if not raw.endswith(b"\n") and lineno == len(lines):
            return Seal(
                "unfinished", chain.count, lineno, "its last line is torn: the run was killed"
            )
        try:
            rec = orjson.loads(raw)
        except orjson.JSONDecodeError:
            chain.faults.append((lineno, "the line is not valid JSON"))
            break
        if not isinstance(rec, dict):
            chain.faults.append((lineno, "the line is not a record object"))
            break
        if "end" in rec and "key" not in rec:
            chain.trailer(lineno, rec)
        else:
            chain.record(lineno, raw, rec.get("seq"))
        if chain.broken:
            break
    return chain.seal()


def read_cassette(path: str | os.PathLike[str]) -> Cassette:
    """Read and validate a cassette (format 2, 1 or the seed's format 0), walking its chain of
    digests as it goes (``Cassette.seal``: a record edited by hand is found, not refused here).

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
    if not data.strip():
        raise NotACassetteError(
            "the file is empty (no header, no records): it was never recorded, or was cut to "
            "nothing; record it again",
            path=path,
        )
    reader = CassetteReader(io.BytesIO(data), path, run=stem_of(path.name), check_seal=True)
    records = list(reader)
    return Cassette(path, reader.header, records, reader.skipped, reader.trailer, reader.seal)


class CassetteReader:
    """Stream a cassette's records one line at a time, validated, with deltas expanded.

    ``lines`` yields raw lines (a binary file object will do). ``header`` is set once the
    first line is read. A torn last line is skipped with a ``TapeWarning``. A bad line raises
    ``CassetteError``, or, when ``on_error`` is given, is passed to it and skipped. With a
    ``normalizer``, each record also gets its ``out_digest`` and ``tokens`` (for the analysis).
    ``run`` is the run id of a cassette whose header names none. With ``check_seal`` the chain
    of a sealed cassette is walked on the bytes read (``seal``); a fault is noted there, never
    raised: replay decides what an edit means, the analysis reads edited files as they are.

        >>> import io
        >>> reader = CassetteReader(io.BytesIO(b'{"key":"tool:1","kind":"tool","out":1}\\n'))
        >>> [r.out for r in reader], reader.header
        ([1], None)
    """

    def __init__(
        self,
        lines: Iterable[bytes],
        path: str | os.PathLike[str] = "<cassette>",
        on_error: Callable[[CassetteError], None] | None = None,
        *,
        normalizer: Normalizer | None = None,
        run: str | None = None,
        check_seal: bool = False,
    ):
        self.lines = lines
        self.path = Path(path)
        self.on_error = on_error
        self.normalizer = normalizer
        self.run = run
        self.check_seal = check_seal
        self.header: dict[str, Any] | None = None
        self.trailer: dict[str, Any] | None = None
        self.skipped = 0
        self._chain: _Chain | None = None

    @property
    def seal(self) -> Seal | None:
        """What the walk of the chain found in the lines read (None without ``check_seal``)."""
        if not self.check_seal:
            return None
        if self._chain is None:
            return Seal("unsealed", reason="written before records carried digests")
        return self._chain.seal()

    def _bad(self, error: CassetteError) -> None:
        if self.on_error is None:
            raise error
        self.on_error(error)

    def __iter__(self) -> Iterator[Record]:
        source, norm = str(self.path), self.normalizer
        run: str | None = None
        new = Record
        for lineno, rec in self._lines():
            if norm is not None and not readable(rec.get("out")):
                self._bad(_too_deep(self.path, lineno, "out"))
                continue
            if run is None:
                named = (self.header or {}).get("run_id")
                run = self.run = named if isinstance(named, str) else self.run
            get = rec.get
            data, out, seq, step, ms, effect, tokens, usage, api = (
                get("input"),
                rec["out"],
                get("seq"),
                get("step"),
                get("ms"),
                get("effect"),
                get("tokens"),
                get("usage"),
                get("api"),
            )
            if type(tokens) is not int or not 0 <= tokens < 1 << 63:
                tokens = None if norm is None else tokens_of(out)
            yield new(
                kind=rec["kind"],
                key=rec["key"],
                seq=seq if type(seq) is int else None,
                run=run,
                name=name_of(data) if type(data) is dict else None,
                step=step if type(step) is int else None,
                input=data,
                out=out,
                out_digest=None if norm is None else fingerprint(out, norm),
                effect=effect if is_effect(effect) else None,
                tokens=tokens,
                usage=usage if _is_usage(usage) else None,
                api=api if type(api) is str else None,
                ms=ms if type(ms) is float or type(ms) is int else None,
                digests=get("digests"),
                source=source,
                line=lineno,
            )

    def _lines(self) -> Iterator[tuple[int, dict[str, Any]]]:
        path = self.path
        loads = orjson.loads
        previous: dict[str, dict[str, Any]] = {}
        whole = False  # a line parsed before: a torn one after it is a killed recording's
        chain: _Chain | None = None  # a sealed cassette's, walked as it is read
        for lineno, raw in enumerate(self.lines, 1):
            try:
                rec = loads(raw)
            except orjson.JSONDecodeError as exc:
                if not raw.strip():
                    continue
                if not whole and (self.on_error is None or not raw.endswith(b"\n")):
                    self._bad(
                        NotACassetteError(
                            "not a cassette: its first line is not JSON and no header or record "
                            "comes before it (a recording killed mid-write keeps its header "
                            "line); check the path, or record it again",
                            path=path,
                            line=lineno,
                        )
                    )
                    return
                if not raw.endswith(b"\n"):
                    if chain is not None:
                        chain.follows_trailer(lineno)
                    self.skipped += 1
                    warnings.warn(
                        f"{path}:{lineno}: skipped a torn last line (the recording process was "
                        "killed mid-write); the records before it replay",
                        TapeWarning,
                        stacklevel=3,
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
            whole = True
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
                if "end" in rec and "chain" in rec and self.header is not None:
                    if chain is not None:
                        chain.trailer(lineno, rec)
                    self.trailer = rec
                    continue
                if lineno == 1 and "tracetape" in rec:
                    _check_header(rec, path)
                    self.header = rec
                    if self.check_seal and rec["tracetape"] == FORMAT_VERSION:
                        chain = self._chain = _Chain(raw)
                    continue
                self._bad(
                    CassetteError(
                        f"{_record_fault(rec)} (a record needs key and kind strings and an out); "
                        "the cassette is corrupt or not a tracetape cassette: re-record it",
                        path=path,
                        line=lineno,
                    )
                )
                continue
            if chain is not None:
                chain.record(lineno, raw, rec.get("seq"))
            if rec.get("bigint") is True:
                rec = json.loads(raw)
                del rec["bigint"]
            if rec.get("tagged") is True:
                try:
                    rec["out"] = untag_values(rec["out"])
                except RecursionError:
                    self._bad(_too_deep(path, lineno, "out"))
                    continue
                del rec["tagged"]
            base = rec.get("base")
            if base is not None:
                try:
                    _expand(rec, base, previous.get(kind), path, lineno)
                except CassetteError as error:
                    self._bad(error)
                    continue
            previous[kind] = rec
            yield lineno, rec


def _too_deep(path: Path, lineno: int, field_name: str) -> CassetteError:
    return CassetteError(
        f"field {field_name!r} is {TOO_DEEP}; the cassette is corrupt or was edited: re-record it",
        path=path,
        line=lineno,
    )


def _record_fault(rec: dict[str, Any]) -> str:
    """What makes a line's object not a record, for the error naming its field."""
    for name in _RECORD_FIELDS:
        if name not in rec or rec[name] is None:
            return f"record has no {name!r} field"
        if name != "out" and type(rec[name]) is not str:
            return f"record field {name!r} is a {type(rec[name]).__name__}, not a string"
    return "record is malformed"


def name_of(data: Any) -> str | None:
    """The tool or model a decision's input names (``params.model``, ``name``, ``tool``...).

    >>> name_of({"messages": [], "params": {"model": "gpt-4o"}}), name_of([1])
    ('gpt-4o', None)
    """
    if type(data) is not dict:
        return None
    get = data.get
    params = get("params")
    if type(params) is dict:
        model = params.get("model")
        if type(model) is str:
            return model
    for field_name in _NAME_FIELDS:
        value = get(field_name)
        if type(value) is str:
            return value
    return None


_NAME_FIELDS = ("name", "tool", "model", "url")


def _is_usage(value: Any) -> bool:
    """Whether a record's ``usage`` is token counts by name (``{"input": 12, ...}``)."""
    return (
        type(value) is dict
        and bool(value)
        and all(type(k) is str and type(v) is int and 0 <= v < 1 << 63 for k, v in value.items())
    )


def tokens_of(out: Any) -> int | None:
    """Total tokens of a provider response (OpenAI or Anthropic ``usage``), if it has one:
    what a record read without its own ``tokens`` (written before the tape filled them in)
    is given.

    >>> tokens_of({"usage": {"input_tokens": 3, "output_tokens": 4}})
    7
    """
    usage = out.get("usage") if isinstance(out, dict) else None
    if usage is None and isinstance(out, dict) and isinstance(out.get("body"), dict):
        usage = out["body"].get("usage")  # a response the hooks recorded before ``usage``
    if not isinstance(usage, dict):
        return None
    total = usage.get("total_tokens")
    if isinstance(total, int):
        return total
    parts = [
        usage.get(k)
        for k in ("prompt_tokens", "completion_tokens", "input_tokens", "output_tokens")
    ]
    counted = [p for p in parts if isinstance(p, int)]
    return sum(counted) if counted else None


def read_records(src: TraceSource) -> Iterator[Record]:
    """The records of a cassette source (format 1, or the seed's format 0) for ``read_records``.

    The run id is the header's ``run_id``, else the source's name (a cassette names no run).
    """
    reader = CassetteReader(
        (raw for _, raw in src.lines()),
        src.name,
        src.skip_error,
        normalizer=src.normalizer,
        run=src.stem,
    )
    try:
        yield from reader
        src.ended = _ended(reader.header, reader.trailer)
    finally:
        if reader.skipped:
            src.skipped += reader.skipped
            src.first_skipped.append(f"{src.name}: torn last line skipped")


def fill_steps(records: Iterable[Record]) -> Iterator[Record]:
    """Give a cassette's records without a step the step of the model turn they belong to:
    each ``llm`` record without one starts a step (as do records before the first turn).
    The analysis reads a cassette's steps so (a tool call the tape recorded outside any
    model turn still belongs to one)."""
    import msgspec

    step = 0
    replace = msgspec.structs.replace
    for rec in records:
        if rec.step is not None:
            step = rec.step
            yield rec
            continue
        if rec.kind == "llm" or step == 0:
            step += 1
        yield replace(rec, step=step)


def _expand(
    rec: dict[str, Any], base: Any, previous: dict[str, Any] | None, path: Path, lineno: int
) -> None:
    """Rebuild the list fields a record shares with the previous record of its kind."""
    for name, shared in base.items() if isinstance(base, dict) else [("base", None)]:
        for field_name, suffix in (("input", ""), ("digests", "[]")):
            section = rec.get(field_name)
            if section is None:
                continue
            before = (previous or {}).get(field_name)
            prior = before.get(name + suffix) if isinstance(before, dict) else None
            tail = section.get(name + suffix) if isinstance(section, dict) else None
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


class CassetteEncoder:
    """Turn records into cassette lines, storing shared list prefixes as ``base`` (deltas).

    A record whose input is a mapping carries its per-field ``digests``; the list elements
    it shares with the previous record of its kind (that was ``written``) are left out of
    ``input`` and ``digests`` and counted in ``base``. Not thread-safe: the store calls it
    under its lock.

    >>> enc = CassetteEncoder()
    >>> msgs = [{"role": "user", "content": "hi"}]
    >>> from tracetape.canonical import field_digests
    >>> def rec(m): return Record(kind="llm", key="llm:1", input={"messages": m},
    ...                           digests=field_digests({"messages": m}), out="ok", ms=1.0)
    >>> enc.written(rec(msgs))
    >>> line = enc.encode(rec(msgs + [{"role": "user", "content": "more"}]))
    >>> line["base"], line["input"]
    ({'messages': 1}, {'messages': [{'role': 'user', 'content': 'more'}]})
    """

    def __init__(self) -> None:
        self._last_digests: dict[str, dict[str, Any]] = {}

    def encode(self, rec: Record) -> dict[str, Any]:
        """The cassette line of ``rec`` (without ``seq``, which the writer assigns)."""
        line: dict[str, Any] = {"key": rec.key, "kind": rec.kind}
        if rec.step is not None:
            line["step"] = rec.step
        line["ms"] = round(rec.ms or 0.0, 3)
        line["effect"] = rec.effect or "read"
        if rec.api is not None:
            line["api"] = rec.api
        if rec.tokens is not None:
            line["tokens"] = rec.tokens
        if rec.usage is not None:
            line["usage"] = rec.usage
        line["out"] = rec.out
        if not all_finite(rec.out):
            line["out"] = tag_values(rec.out)
            line["tagged"] = True
        digests = rec.digests
        if digests is None:
            if rec.input is not None:
                line["input"] = rec.input
            return line
        previous = self._last_digests.get(rec.kind, {})
        base: dict[str, int] = {}
        for name, elements in digests.items():
            old = previous.get(name)
            if not name.endswith("[]") or not old:
                continue
            shared = 0
            for a, b in zip(old, elements, strict=False):
                if a != b:
                    break
                shared += 1
            if shared:
                base[name[:-2]] = shared
        if rec.input is not None:
            line["input"] = {k: v[base[k] :] if k in base else v for k, v in rec.input.items()}
        line["digests"] = {
            k: v[base[k[:-2]] :] if k[:-2] in base and k.endswith("[]") else v
            for k, v in digests.items()
        }
        if base:
            line["base"] = base
        return line

    def written(self, rec: Record) -> None:
        """``rec``'s line was written: the next record of its kind is encoded against it."""
        if rec.digests is not None:
            self._last_digests[rec.kind] = rec.digests


# A run id: what run ids look like, and nothing that needs escaping in a URL or a page.
RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@+=-]{0,199}")
_NOT_IN_RUN_ID = re.compile(r"[^A-Za-z0-9._:@+=-]+")


def _run_name(name: str) -> str:
    """``name`` as the readable part of a run id (what ``RUN_ID`` accepts), at most 180."""
    text = _NOT_IN_RUN_ID.sub("-", name.replace("/", ".")).strip("-._:@+=")
    return text[:180] or "run"


def new_run_id(name: str) -> str:
    """A unique run id for a recording of ``name`` (a cassette's name, a test's node id).

    >>> import re; bool(re.fullmatch(r"tests.test_a.py::test_b-x@[0-9a-f]{12}",
    ...                              new_run_id("tests/test_a.py::test_b[x]")))
    True
    """
    return f"{_run_name(name)}@{uuid.uuid4().hex[:12]}"


def _trailer_of(data: bytes) -> dict[str, Any] | None:
    last = data.rstrip(b"\n").rpartition(b"\n")[2]
    try:
        trailer = orjson.loads(last)
    except orjson.JSONDecodeError:
        return None
    if isinstance(trailer, dict) and isinstance(trailer.get("chain"), str) and "end" in trailer:
        return trailer
    return None


def final_chain(path: str | os.PathLike[str]) -> str | None:
    """The chain digest a sealed cassette's trailer ends with (None: unsealed, unfinished)."""
    trailer = _trailer_of(Path(path).read_bytes())
    return None if trailer is None else str(trailer["chain"])


def run_id_of(path: str | os.PathLike[str]) -> str:
    """The run id of the cassette at ``path``: its header's ``run_id``, else one derived from
    its content (the last chain digest of a sealed cassette, else the digest of its bytes),
    so pushing the same old cassette twice names the same run."""
    path = Path(path)
    data = path.read_bytes()
    first, _, _ = data.partition(b"\n")
    try:
        header = orjson.loads(first)
    except orjson.JSONDecodeError:
        header = None
    if isinstance(header, dict) and isinstance(header.get("run_id"), str) and header["run_id"]:
        return str(header["run_id"])
    trailer = _trailer_of(data)
    digest = str(trailer["chain"]) if trailer else hashlib.sha256(data).hexdigest()
    return f"{_run_name(stem_of(path.name))}@{digest[:12]}"


def new_header(**fields: Any) -> dict[str, Any]:
    """Return a format-1 header with the current time and tracetape version, plus ``fields``."""
    now = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    header: dict[str, Any] = {"tracetape": FORMAT_VERSION, "version": __version__, "created": now}
    header.update({k: v for k, v in fields.items() if v is not None})
    return header
