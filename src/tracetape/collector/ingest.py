"""From a request body to records ready to store: parse, check, redact.

A body is JSONL (one trace line a line, any format ``formats`` reads: cassettes, seed JSONL,
span records, OTLP/JSON documents) or a JSON array of such lines. Every line is read; a batch
with any bad line is refused whole, and the refusal names each bad line by number (the first
1,000) with its field and what is wrong. Records are redacted with the core's rules
(``[tool.tracetape.redact]`` and the built-in detectors) before they are returned, so a secret
in a pushed line never reaches the database; run ids must match ``RUN_ID``.

Each record gets a *line key* (``_line_keys``): what it is in its run, whatever batch brought
it (a digest of its run and an OTLP span's id, a cassette record's number, or a line's
source, place and content), so a line sent again is stored once (``Database.store``).
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import msgspec
import orjson

from ..canonical import canonical_json
from ..errors import CassetteError, TraceError
from ..formats import TraceFormat, detect_format, read_records
from ..formats._source import SKIP_ADVICE, TraceSource
from ..record import Record, decode_record
from ..redact import Redactor
from ..stores.database import RUN_ID, batch_digest

__all__ = ["BadBatch", "Batch", "Registry", "parse_batch", "redact_stored"]

# Any printable name up to 1,000 characters (a file's path as the client gave it).
SOURCE = re.compile(r"[^\x00-\x1f\x7f]{1,1000}")


class BadBatch(Exception):
    """A batch that cannot be stored: ``status`` (400, 413, 415) and what to say."""

    def __init__(self, status: int, message: str, lines: list[dict[str, Any]] | None = None):
        super().__init__(message)
        self.status, self.message, self.lines = status, message, lines or []

    def body(self) -> dict[str, Any]:
        """The JSON error body."""
        data: dict[str, Any] = {"error": self.message}
        if self.lines:
            data["lines"] = self.lines
        return data


@dataclass
class Batch:
    """A parsed batch: its records (redacted), its digest, its line count, how many records
    had a secret redacted, and how its recording ended where a cassette's trailer says."""

    records: list[Record]
    digest: str
    lines: int
    redacted: int = 0
    runs: list[str] = field(default_factory=list)
    keys: list[int] = field(default_factory=list)
    learned: dict[str, str] = field(default_factory=dict)
    ended: str | None = None  # how the recording ended, where its lines say (a trailer)


def _lines(body: bytes, max_lines: int) -> list[bytes]:
    text = body.lstrip()
    if text.startswith(b"["):
        try:
            items = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise BadBatch(400, f"the body is not a JSON array of trace lines ({exc})") from None
        if not isinstance(items, list):
            raise BadBatch(400, "a JSON body must be an array of trace lines")
        if len(items) > max_lines:
            raise BadBatch(413, f"{len(items)} lines in one batch; at most {max_lines}")
        return [orjson.dumps(item) for item in items]
    lines = body.splitlines()
    if len(lines) > max_lines:
        raise BadBatch(413, f"{len(lines)} lines in one batch; at most {max_lines}")
    return lines


def parse_batch(
    body: bytes,
    *,
    source: str,
    offset: int,
    fmt: str,
    redactor: Redactor,
    max_lines: int,
    run: str | None = None,
    registry: Registry | None = None,
) -> Batch:
    """Read ``body`` (see the module docstring); raise ``BadBatch`` for what cannot be stored.

    ``source`` names the lines (a run without its own id takes it, as a file's name would);
    ``offset`` is the number of lines of the same source sent before (line numbers in
    records and errors count from there); ``run`` files every record under that run;
    ``registry`` holds the secrets each run taught before (``Batch.learned`` is what this
    batch taught that only a registry finds, for the caller to add once the batch is
    stored).
    """
    if not SOURCE.fullmatch(source):
        raise BadBatch(400, "source: must be 1-1000 printable characters")
    if run is not None and not RUN_ID.fullmatch(run):
        raise BadBatch(400, f"run: {_RUN_RULE}")
    try:
        kind = TraceFormat.parse(fmt)
    except ValueError as exc:
        raise BadBatch(400, str(exc)) from None
    lines = _lines(body, max_lines)
    if not any(line.strip() for line in lines):
        raise BadBatch(400, "the body holds no trace lines")
    # A JSONL body is read as a file would be (lines end at "\n" only, numbered the same),
    # and faster than its list of lines; a JSON array's items are the lines.
    text: Any = io.BytesIO(body) if not body.lstrip().startswith(b"[") else lines
    sources: list[TraceSource] = []
    try:
        if kind is TraceFormat.AUTO:
            kind = detect_format(text, skip_bad_lines=True, name=source)
            text = io.BytesIO(body) if isinstance(text, io.BytesIO) else lines
        records = list(read_records(text, kind, name=source, skip_bad_lines=True, sources=sources))
    except (CassetteError, RecursionError) as exc:
        raise BadBatch(400, _message(exc, offset)) from None
    src = sources[0] if sources else None
    if src is not None and src.skipped:
        bad = [_line_error(e, offset) for e in src.errors]
        raise BadBatch(
            400,
            f"{src.skipped} bad line(s); nothing of this batch was stored",
            bad,
        )
    out: list[Record] = []
    redacted = 0
    bad_runs: list[dict[str, Any]] = []
    # What the runs of this batch learned before (their registries), then this batch's own:
    # a text that quotes a secret before the line naming it is scanned again once it is known.
    seeded: dict[str, str] = {}
    if registry is not None:
        for name in {run or rec.run or "" for rec in records}:
            seeded.update(registry.known(name))
    base, redactor = redactor, redactor.fresh(seeded)
    cleaned = _scrub(records, redactor)
    learned = _registry_only(base, {k: v for k, v in redactor.known.items() if k not in seeded})
    if learned:
        cleaned = _scrub(records, redactor)
    for rec, scrubbed in zip(records, cleaned, strict=True):
        redacted += scrubbed is not rec
        line = rec.line + offset if rec.line else rec.line
        clean = msgspec.structs.replace(scrubbed, line=line, source=source, run=run or scrubbed.run)
        if not RUN_ID.fullmatch(clean.run or ""):
            bad_runs.append({"line": line, "field": "run_id", "message": _RUN_RULE})
            continue
        out.append(clean)
    if bad_runs:
        raise BadBatch(400, f"{len(bad_runs)} line(s) name a bad run id; nothing stored", bad_runs)
    digest = batch_digest([source.encode(), str(offset).encode(), (run or "").encode(), *lines])
    keys = _line_keys(out, kind, source)
    names = sorted({r.run or "" for r in out})
    # Only a trailer says how a recording ended: a batch of a live push holds a header and
    # records, never a trailer, and is no recording that stopped unfinished.
    ended = src.ended if src is not None and src.ended != "unfinished" else None
    return Batch(out, digest, len(lines), redacted, names, keys, learned, ended)


def _registry_only(base: Redactor, learned: dict[str, str]) -> dict[str, str]:
    """The secrets of ``learned`` that only the registry finds (a value a named field gave):
    a secret a detector finds by its shape is found wherever it appears, and needs neither a
    second pass nor remembering."""
    return {
        value: placeholder
        for value, placeholder in learned.items()
        if base.fresh().redact_text(json.dumps(value)) == json.dumps(value)
    }


def _scrub(records: list[Record], redactor: Redactor) -> list[Record]:
    """``records`` redacted: one scan per chunk of records, of their content as JSON text
    (strings as the walk sees them: UTF-8, quotes and controls escaped); only the records of
    a chunk with a hit are scanned (and, on a hit, walked) one by one."""
    cleaned: list[Record] = []
    for k in range(0, len(records), _CHUNK):
        chunk = records[k : k + _CHUNK]
        content = [[getattr(rec, name) for name in _CONTENT] for rec in chunk]
        try:
            text = orjson.dumps(content).decode()
        except TypeError:  # an integer beyond 64 bits: the standard library writes it
            text = json.dumps(content, ensure_ascii=False, separators=(",", ":"), default=str)
        if redactor.is_clean(text):
            cleaned += chunk
        else:
            cleaned += [_redacted(rec, redactor) for rec in chunk]
    return cleaned


class Registry:
    """The secrets each run taught the collector (value -> placeholder), in this process's
    memory only (a secret is never written anywhere), for the ``runs`` most recently seen and
    ``per_run`` secrets each: a secret learned in one batch of a run is redacted in every
    later batch of it, pushed now or later, as long as this process runs."""

    def __init__(self, runs: int = 1024, per_run: int = 256):
        self._runs: OrderedDict[str, dict[str, str]] = OrderedDict()
        self._lock = threading.Lock()
        self.runs, self.per_run = runs, per_run

    def known(self, run: str) -> dict[str, str]:
        """The secrets ``run`` taught so far."""
        with self._lock:
            found = self._runs.get(run)
            if found is None:
                return {}
            self._runs.move_to_end(run)
            return dict(found)

    def add(self, run: str, learned: dict[str, str]) -> None:
        """Remember what a batch of ``run`` taught."""
        if not learned:
            return
        with self._lock:
            known = self._runs.setdefault(run, {})
            self._runs.move_to_end(run)
            for value, placeholder in learned.items():
                if len(known) < self.per_run:
                    known[value] = placeholder
            while len(self._runs) > self.runs:
                self._runs.popitem(last=False)


_RUN_RULE = "must be a run id: 1-200 letters, digits and ._:@+=-, starting with a letter or digit"


def _line_keys(records: list[Record], kind: TraceFormat, source: str) -> list[int]:
    """Each record's line key (see the module docstring): a 64-bit digest of its run and an
    OTLP span's id; of its run and a cassette record's source, number and key (the same
    whether the tape pushed it live or the file was pushed later); else of its run, source,
    line, place on the line and content. ``stores/migrations/versions/0002`` keeps a frozen
    copy of this rule."""
    keys: list[int] = []
    place, last = 0, -1
    prefixes: dict[str | None, Any] = {}  # run -> the digest of the parts a run shares
    for rec in records:
        place = place + 1 if rec.line == last else 0
        last = rec.line
        digest = prefixes.get(rec.run)
        if digest is None:
            digest = prefixes[rec.run] = hashlib.blake2b(
                f"{rec.run}\x1f{source}\x1f".encode(), digest_size=8
            )
        digest = digest.copy()
        if kind is TraceFormat.OTLP and rec.span_id:
            digest.update(f"span\x1f{rec.span_id}".encode())
        elif kind is TraceFormat.CASSETTE and rec.seq is not None:
            digest.update(f"seq\x1f{rec.seq}\x1f{rec.key}".encode())
        else:
            digest.update(
                f"line\x1f{rec.line}\x1f{place}\x1f{rec.key}\x1f{rec.out_digest}".encode()
            )
        keys.append(int.from_bytes(digest.digest(), "big", signed=True))
    return keys


# The fields of a record that hold what a trace says (the rest are numbers, digests, names
# of our own); a run id or a tool name can be a secret too.
_CONTENT = ("run", "name", "input", "out", "ts", "span_id", "parent_id", "extra")
_CHUNK = 64


def redact_stored(text: bytes, redactor: Redactor) -> bytes | None:
    """A stored record's text with the secrets ``redactor`` knows replaced, or None when it
    holds none of them (a secret learned after the record was stored)."""
    rec = decode_record(text)
    clean = _redacted(rec, redactor)
    return None if clean is rec else msgspec.json.encode(clean)


def _redacted(rec: Record, redactor: Redactor) -> Record:
    """``rec`` with its secrets replaced, or ``rec`` itself when it holds none.

    The record's content is scanned as canonical JSON text (the scan the tape runs on each
    decision); only a record with a hit is walked and rebuilt."""
    content = {name: getattr(rec, name) for name in _CONTENT}
    text = canonical_json(content)
    clean = redactor.redact_payload(content, text, stream="ingest")
    if clean is text:
        return rec
    return msgspec.structs.replace(rec, **json.loads(clean))


def _bare(error: CassetteError) -> str:
    """The error's message without the ``source:line: `` it starts with, the field it names
    (given apart) and the command-line advice of a reader."""
    text = str(error).removesuffix(SKIP_ADVICE)
    for prefix in (f"{error.path}:{error.line}: ", f"{error.path}: "):
        if text.startswith(prefix):
            text = text[len(prefix) :]
            break
    field = getattr(error, "field", None)
    return text.removeprefix(f"field {field!r}: ") if field else text


def _line_error(error: CassetteError, offset: int) -> dict[str, Any]:
    line = error.line + offset if error.line else error.line
    return {"line": line, "field": getattr(error, "field", None), "message": _bare(error)}


def _message(exc: BaseException, offset: int) -> str:
    if isinstance(exc, RecursionError):
        return "a value is nested deeper than tracetape reads; flatten it"
    if isinstance(exc, TraceError) and exc.line is not None:
        return f"line {exc.line + offset}: {_bare(exc)}"
    return _bare(exc) if isinstance(exc, CassetteError) else str(exc)
