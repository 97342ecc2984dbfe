"""Readers: one plain function per trace format, each turning a file into :class:`Event` s.

Supported formats (``TraceFormat``), sniffed from the first record unless named:

* ``cassette``: tracetape cassettes (format 1, with a header) and the seed's reference
  cassettes (format 0, records ``{"key","kind","ms","out"}``), read line by line;
* ``jsonl``: the seed's trace schema, one tool call a line, one or many runs a file::

      {"run_id": "run_0042", "step": 1, "tool": "search_issues", "args": {...},
       "output_sha": "a1b2c3", "tokens": 812, "ts": "2026-08-31T09:12:04Z"}

  with ``effect`` (``read``/``write``/``irreversible``), ``span_id``, ``parent_id`` and ``ms``
  honoured when present;
* ``spans``: one span a line, ``{"span_id", "tool_call", "tool_result", "model_decision"}``
  (the span-replay schema), with optional ``run_id``/``trace_id``, ``step``, ``effect``;
* ``otlp``: OpenTelemetry traces as OTLP/JSON (one ``ExportTraceServiceRequest`` document, or
  one per line as the collector's file exporter writes), read with the GenAI semantic
  conventions (``gen_ai.operation.name`` ``chat``/``execute_tool``, ``gen_ai.tool.name``,
  ``gen_ai.tool.call.arguments``/``result``, ``gen_ai.input.messages``/``output.messages``,
  ``gen_ai.usage.input_tokens``/``output_tokens``). OTLP documents are read whole: spans must
  be ordered by start time before they make a sequence.

Every reader but OTLP streams: memory does not grow with the file. Seed JSONL, the format of
large traces, also has a block reader for the analysis hot path, ``read_jsonl_batches``: a
block of lines is decoded in one ``msgspec`` call into :class:`JsonlCall` s whose ``args``
stay raw JSON (``read_batches``), which ``packed.Packer`` keys its work on.

A reader is a function ``(TraceSource) -> Iterator[Event]`` registered in ``READERS``; a bad
record goes through ``TraceSource.bad``, which raises a :class:`TraceError` naming the file,
line and field, or counts the line when ``skip_bad_lines`` is set.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import islice
from pathlib import Path
from typing import IO, Annotated, Any, Literal, TypeVar

import msgspec
import orjson

from ..canonical import Normalizer, fingerprint
from ..cassette import CassetteReader
from ..errors import CassetteError
from .events import CallBatch, Event, TraceError, TraceFormat

__all__ = [
    "READERS",
    "JsonlCall",
    "Reader",
    "TraceSource",
    "detect_format",
    "read_batches",
    "read_events",
    "read_jsonl_batches",
]

T = TypeVar("T")
EFFECTS = frozenset({"read", "write", "irreversible"})
PROGRESS_EVERY = 1 << 14
_LLM_OPERATIONS = frozenset({"chat", "text_completion", "generate_content"})
_new_event = tuple.__new__


@dataclass
class TraceSource:
    """An open trace file and the reading options every reader shares.

    ``skipped`` counts the bad lines dropped under ``skip_bad_lines`` (``first_skipped``
    keeps the first few errors for the report); ``progress`` is called now and then with the
    number of bytes read.
    """

    path: Path
    fh: IO[bytes]
    normalizer: Normalizer
    skip_bad_lines: bool = False
    progress: Callable[[int], None] | None = None
    skipped: int = 0
    first_skipped: list[str] = field(default_factory=list)

    def skip_error(self, error: CassetteError) -> None:
        """Raise ``error``, or count its line under ``skip_bad_lines``."""
        if not self.skip_bad_lines:
            raise error
        self.skipped += 1
        if len(self.first_skipped) < 5:
            self.first_skipped.append(str(error))

    def bad(self, message: str, line: int | None, field: str | None = None) -> None:
        """Raise a ``TraceError`` for a bad record, or count it under ``skip_bad_lines``."""
        where = f"field {field!r}: " if field else ""
        advice = "; fix the line, or skip bad lines with --skip-bad-lines (skip_bad_lines=True)"
        error = TraceError(where + message + advice, path=self.path, line=line, field=field)
        if not self.skip_bad_lines:
            raise error
        self.skipped += 1
        if len(self.first_skipped) < 5:
            self.first_skipped.append(str(error))

    @property
    def stem(self) -> str:
        """The file name without suffix: the run id of single-run files that name none."""
        return self.path.name.split(".")[0] or self.path.name


Reader = Callable[[TraceSource], Iterator[Event]]


def _schema_of(obj: Any) -> str:
    """Name the schema a record looks like, for mixed-schema error messages."""
    if not isinstance(obj, dict):
        return f"a JSON {type(obj).__name__}"
    if "tracetape" in obj or {"key", "kind", "out"} <= obj.keys():
        return "a tracetape cassette record"
    if "resourceSpans" in obj:
        return "an OTLP/JSON document"
    if "run_id" in obj and "tool" in obj:
        return "a seed JSONL trace record"
    if "span_id" in obj and ({"tool_call", "tool_result", "model_decision"} & obj.keys()):
        return "a span record"
    return "an object with fields " + ", ".join(sorted(map(str, obj))[:8])


def _fmt_of(obj: Any) -> TraceFormat | None:
    if not isinstance(obj, dict):
        return None
    if "tracetape" in obj or {"key", "kind", "out"} <= obj.keys():
        return TraceFormat.CASSETTE
    if "resourceSpans" in obj:
        return TraceFormat.OTLP
    if "run_id" in obj and "tool" in obj:
        return TraceFormat.JSONL
    if "span_id" in obj and ({"tool_call", "tool_result", "model_decision"} & obj.keys()):
        return TraceFormat.SPANS
    return None


_SCAN_LINES = 1000


def detect_format(path: str | os.PathLike[str], *, skip_bad_lines: bool = False) -> TraceFormat:
    """Tell a trace file's format from its first record.

    Raises ``TraceError`` for a missing or empty file, or one whose first record matches no
    known schema (the message lists the fields it found and the formats it knows). With
    ``skip_bad_lines``, a bad first record is passed over for the first good one among the
    next lines.
    """
    try:
        return _detect(Path(path))
    except TraceError as exc:
        if not skip_bad_lines or exc.line is None:
            raise
        with Path(path).open("rb") as fh:
            for raw in islice(fh, _SCAN_LINES):
                try:
                    fmt = _fmt_of(orjson.loads(raw))
                except orjson.JSONDecodeError:
                    continue
                if fmt is not None:
                    return fmt
        raise


def _detect(path: Path) -> TraceFormat:
    try:
        with path.open("rb") as fh:
            lineno, first = 0, b""
            for lineno, raw in enumerate(fh, 1):  # noqa: B007 - lineno is reported below
                if raw.strip():
                    first = raw
                    break
            head = first + fh.read(1 << 16) if first.lstrip().startswith(b"{") else first
    except FileNotFoundError:
        raise TraceError("no such trace file", path=path) from None
    except OSError as exc:
        raise TraceError(f"cannot read trace file: {exc.strerror}", path=path) from exc
    if not first:
        raise TraceError(
            "the trace file is empty; record a run first (a trace needs at least one call)",
            path=path,
        )
    try:
        obj = orjson.loads(first)
    except orjson.JSONDecodeError:
        stripped = first.strip()
        if stripped.startswith(b"{'"):
            raise TraceError(
                "the record is a Python dict repr, not JSON (single quotes); write traces "
                "with json.dumps",
                path=path,
                line=lineno,
            ) from None
        if stripped.startswith(b"{") and b'"resourceSpans"' in head:
            return TraceFormat.OTLP
        raise TraceError(
            "the first record is not valid JSON; a trace is JSONL (one JSON object a line) "
            "or an OTLP/JSON document",
            path=path,
            line=lineno,
        ) from None
    fmt = _fmt_of(obj)
    if fmt is None:
        known = "tracetape cassette, seed JSONL trace (run_id, step, tool, args, output_sha), "
        known += "span records (span_id, tool_call, tool_result), OTLP/JSON (resourceSpans)"
        raise TraceError(
            f"cannot tell the trace format: the first record is {_schema_of(obj)}; "
            f"known formats: {known}",
            path=path,
            line=lineno,
        )
    return fmt


# -- seed JSONL ------------------------------------------------------------------------------


def read_jsonl(src: TraceSource) -> Iterator[Event]:
    """Read the seed's JSONL trace schema, one tool call a line, as :class:`Event` s.

    ``read_jsonl_batches`` reads the same lines for the analysis hot path; this reader is
    the one ``read_events`` exposes (every field decoded) and the reference a test holds the
    fast path equal to.
    """
    progress = src.progress
    for lineno, raw in enumerate(src.fh, 1):
        c = _jsonl_record(src, raw, lineno)
        if c is None:
            continue
        if progress is not None and not lineno % PROGRESS_EVERY:
            progress(src.fh.tell())
        get = c.get
        yield _new_event(
            Event,
            (
                str(c["run_id"]),
                lineno,
                c["step"],
                "tool",
                c["tool"],
                c["args"],
                c["output_sha"],
                get("effect"),
                get("tokens"),
                get("ms"),
                get("ts"),
                get("span_id"),
                get("parent_id"),
                lineno,
            ),
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


# Beyond 64 bits orjson gives a float (which the reader rejects) where msgspec would give an
# exact int: such a "step" or "tokens" goes to the line-by-line path, which judges as orjson.
_Int64 = Annotated[int, msgspec.Meta(ge=-(1 << 63), le=(1 << 63) - 1)]


class JsonlCall(
    msgspec.Struct,
    gc=False,
    rename={"run": "run_id", "name": "tool", "out": "output_sha"},
):
    """One seed-JSONL line, decoded only as far as the findings need (a :class:`RawCall`)."""

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


def read_jsonl_batches(src: TraceSource) -> Iterator[CallBatch]:
    """Read the seed's JSONL trace schema in blocks of lines, for the analysis hot path.

    A block of about a MiB is decoded in one ``msgspec`` call into :class:`JsonlCall` s,
    with ``args`` left as raw JSON. A block that does not decode cleanly (a bad, blank or
    oddly typed line) is read again line by line through the same validation as
    ``read_jsonl``, so errors name the same line and field, and ``skip_bad_lines`` drops the
    same lines.
    """
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


def _jsonl_lines(src: TraceSource, buf: bytes, first: int) -> Iterator[CallBatch]:
    """The slow path of ``read_jsonl_batches``: one line at a time, bad lines reported."""
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
        src.bad(f"line holds {_schema_of(obj)}, not a trace record object", lineno)
        return
    missing = next(f for f in _JSONL_REQUIRED if f not in obj)
    hint = ""
    if _fmt_of(obj) not in (None, TraceFormat.JSONL):
        hint = (
            f"; this line is {_schema_of(obj)} but the file started as seed JSONL (mixed schemas)"
        )
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


# -- cassettes -------------------------------------------------------------------------------


def _args_of(data: Any) -> Any:
    """The call's arguments from a cassette record's stored input, without its step."""
    if isinstance(data, dict):
        if "args" in data:
            return data["args"]
        return {k: v for k, v in data.items() if k != "step"}
    return data


def _name_of(kind: str, data: Any) -> str:
    if isinstance(data, dict):
        params = data.get("params")
        if isinstance(params, dict) and isinstance(params.get("model"), str):
            return str(params["model"])
        for name in ("name", "tool", "model", "url"):
            if isinstance(data.get(name), str):
                return str(data[name])
    return kind


def tokens_of(out: Any) -> int | None:
    """Total tokens of a provider response (OpenAI or Anthropic ``usage``), if it has one."""
    usage = out.get("usage") if isinstance(out, dict) else None
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


def read_cassette_events(src: TraceSource) -> Iterator[Event]:
    """Read a tracetape cassette (format 1) or a seed reference cassette (format 0).

    Records come from the core's streaming ``CassetteReader`` (validation, shared-prefix
    records expanded, exact big integers), so a cassette reads here as it replays. The run id
    is the header's ``run_id`` or the file name. Records without a stored input (format 0, or
    ``store_inputs=False``) are compared by their decision key. Steps missing from the records
    are counted in model turns: each ``llm`` decision starts a step.
    """
    step = 0
    norm = src.normalizer
    progress = src.progress
    position = [0]

    def lines() -> Iterator[bytes]:
        for raw in src.fh:
            position[0] += 1
            if progress is not None and not position[0] % PROGRESS_EVERY:
                progress(src.fh.tell())
            yield raw

    reader = CassetteReader(lines(), src.path, on_error=src.skip_error)
    run: str | None = None
    try:
        for rec in reader:
            if run is None:
                header = reader.header or {}
                run = header["run_id"] if isinstance(header.get("run_id"), str) else src.stem
            lineno = position[0]
            kind, data, out = rec["kind"], rec.get("input"), rec["out"]
            rec_step = rec.get("step")
            if type(rec_step) is int:
                step = rec_step
            elif kind == "llm" or step == 0:
                step += 1
            effect = rec.get("effect")
            seq = rec.get("seq")
            yield Event(
                run,
                seq if type(seq) is int else lineno,
                step,
                kind,
                _name_of(kind, data),
                _args_of(data) if data is not None else {"key": rec["key"]},
                fingerprint(out, norm),
                effect if effect in EFFECTS else None,
                tokens_of(out),
                rec.get("ms"),
                None,
                None,
                None,
                lineno,
            )
    finally:
        if reader.skipped:
            src.skipped += reader.skipped
            src.first_skipped.append(f"{src.path}: torn last line skipped")


# -- span records ----------------------------------------------------------------------------


def read_spans(src: TraceSource) -> Iterator[Event]:
    """Read span records ``{"span_id","tool_call","tool_result","model_decision"}``.

    The tool's name is the model decision's ``tool_name`` (else the first word of
    ``tool_call.argv``); the call is compared on ``tool_call`` (argv, env digest, timeout)
    and the output fingerprint is taken on the normalized ``tool_result``.
    """
    norm = src.normalizer
    counters: dict[str, int] = {}
    for lineno, raw in enumerate(src.fh, 1):
        try:
            c = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            if raw.strip():
                src.bad(f"line is not valid JSON ({exc})", lineno)
            continue
        if type(c) is not dict:
            src.bad(f"line holds {_schema_of(c)}, not a span record", lineno)
            continue
        span_id = c.get("span_id")
        if not isinstance(span_id, str | int):
            hint = ""
            if _fmt_of(c) not in (None, TraceFormat.SPANS):
                hint = f"; this line is {_schema_of(c)} in a span file (mixed schemas)"
            src.bad(f"missing (a span record needs span_id and tool_call){hint}", lineno, "span_id")
            continue
        call, decision = c.get("tool_call"), c.get("model_decision")
        if not isinstance(call, dict) and not isinstance(decision, dict):
            src.bad("missing: a span record needs a tool_call object", lineno, "tool_call")
            continue
        decision = decision if isinstance(decision, dict) else {}
        call = call if isinstance(call, dict) else {"args": decision.get("args")}
        name = decision.get("tool_name") or call.get("name")
        argv = call.get("argv")
        if not name and isinstance(argv, list) and argv:
            name = str(argv[0])
        run = str(c.get("run_id") or c.get("trace_id") or src.stem)
        step = c.get("step")
        if type(step) is not int:
            step = counters[run] = counters.get(run, 0) + 1
        effect = c.get("effect")
        if effect is not None and effect not in EFFECTS:
            src.bad(
                f"must be one of 'read', 'write', 'irreversible', found {effect!r}",
                lineno,
                "effect",
            )
            continue
        if src.progress is not None and not lineno % PROGRESS_EVERY:
            src.progress(src.fh.tell())
        result = c.get("tool_result")
        yield Event(
            run,
            lineno,
            step,
            "tool",
            str(name or "tool"),
            call,
            None if result is None else fingerprint(result, norm),
            effect,
            c.get("tokens") if type(c.get("tokens")) is int else None,
            c.get("ms"),
            c.get("ts"),
            str(span_id),
            c.get("parent_id"),
            lineno,
        )


# -- OTLP/JSON -------------------------------------------------------------------------------


def _any_value(value: Any) -> Any:
    """Decode an OTLP/JSON ``AnyValue`` into plain data."""
    if not isinstance(value, dict):
        return value
    if "stringValue" in value:
        return value["stringValue"]
    if "intValue" in value:
        return int(value["intValue"])
    if "doubleValue" in value:
        return float(value["doubleValue"])
    if "boolValue" in value:
        return bool(value["boolValue"])
    if "arrayValue" in value:
        return [_any_value(v) for v in value["arrayValue"].get("values", [])]
    if "kvlistValue" in value:
        return {
            kv["key"]: _any_value(kv.get("value")) for kv in value["kvlistValue"].get("values", [])
        }
    if "bytesValue" in value:
        return value["bytesValue"]
    return None


def _maybe_json(value: Any) -> Any:
    """GenAI content attributes hold JSON text; decode it when it is JSON."""
    if isinstance(value, str) and value[:1] in ("{", "["):
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            return value
    return value


def _otlp_documents(src: TraceSource) -> Iterator[tuple[int, Any]]:
    data = src.fh.read()
    try:
        yield 1, orjson.loads(data)
        return
    except orjson.JSONDecodeError:
        pass
    for lineno, raw in enumerate(data.split(b"\n"), 1):
        if not raw.strip():
            continue
        try:
            yield lineno, orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            src.bad(f"line is not valid JSON ({exc})", lineno)


@dataclass
class _Span:
    run: str
    start: int
    end: int
    attrs: dict[str, Any]
    span_id: str | None
    parent_id: str | None
    line: int


def read_otlp(src: TraceSource) -> Iterator[Event]:
    """Read OTLP/JSON traces with the OpenTelemetry GenAI semantic conventions.

    A run is a trace, named by the ``gen_ai.conversation.id`` one of its spans carries, else
    by its trace id. Spans with
    ``gen_ai.operation.name`` ``execute_tool`` become tool events and ``chat`` (or
    ``text_completion``/``generate_content``) model events; other spans (agents, HTTP) only
    link parents. Each model call starts a step.
    """
    spans: list[_Span] = []
    conversations: dict[str, str] = {}  # trace id -> gen_ai.conversation.id of any span
    for lineno, doc in _otlp_documents(src):
        if not isinstance(doc, dict) or not isinstance(doc.get("resourceSpans"), list):
            hint = f"; found {_schema_of(doc)} (mixed schemas)" if _fmt_of(doc) else ""
            src.bad(
                f"missing: an OTLP/JSON document needs a resourceSpans list{hint}",
                lineno,
                "resourceSpans",
            )
            continue
        for r, rs in enumerate(doc["resourceSpans"]):
            for s, ss in enumerate(
                rs.get("scopeSpans") or rs.get("instrumentationLibrarySpans") or []
            ):
                for i, span in enumerate(ss.get("spans") or []):
                    where = f"resourceSpans[{r}].scopeSpans[{s}].spans[{i}]"
                    if (
                        not isinstance(span, dict)
                        or not span.get("traceId")
                        or not span.get("spanId")
                    ):
                        src.bad("a span needs traceId and spanId", lineno, f"{where}.spanId")
                        continue
                    try:
                        attrs = {
                            kv["key"]: _any_value(kv.get("value"))
                            for kv in span.get("attributes") or []
                        }
                        start = int(span.get("startTimeUnixNano") or 0)
                        end = int(span.get("endTimeUnixNano") or start)
                    except (KeyError, TypeError, ValueError) as exc:
                        src.bad(
                            f"malformed span attributes or times ({exc})",
                            lineno,
                            f"{where}.attributes",
                        )
                        continue
                    run = str(span["traceId"])
                    conversation = attrs.get("gen_ai.conversation.id")
                    if conversation and run not in conversations:
                        conversations[run] = str(conversation)
                    spans.append(
                        _Span(
                            str(run),
                            start,
                            end,
                            attrs,
                            span["spanId"],
                            span.get("parentSpanId") or None,
                            lineno,
                        )
                    )
    order: dict[str, int] = {}
    for sp in spans:
        sp.run = conversations.get(sp.run, sp.run)
    for sp in spans:
        order.setdefault(sp.run, len(order))
    spans.sort(key=lambda sp: (order[sp.run], sp.start))
    steps: dict[str, int] = {}
    norm = src.normalizer
    for seq, sp in enumerate(spans, 1):
        a = sp.attrs
        op = a.get("gen_ai.operation.name")
        ms = (sp.end - sp.start) / 1e6
        ts = (
            datetime.fromtimestamp(sp.start / 1e9, UTC).isoformat().replace("+00:00", "Z")
            if sp.start
            else None
        )
        effect = a.get("tracetape.effect")
        effect = effect if effect in EFFECTS else None
        if op in _LLM_OPERATIONS:
            step = steps[sp.run] = steps.get(sp.run, 0) + 1
            usage = [a.get("gen_ai.usage.input_tokens"), a.get("gen_ai.usage.output_tokens")]
            counted = [u for u in usage if isinstance(u, int)]
            args: dict[str, Any] = {"messages": _maybe_json(a.get("gen_ai.input.messages"))}
            if "gen_ai.system_instructions" in a:
                args["system"] = _maybe_json(a["gen_ai.system_instructions"])
            output = a.get("gen_ai.output.messages")
            yield Event(
                sp.run,
                seq,
                step,
                "llm",
                str(a.get("gen_ai.request.model") or op),
                args,
                None if output is None else fingerprint(_maybe_json(output), norm),
                effect,
                sum(counted) if counted else None,
                ms,
                ts,
                sp.span_id,
                sp.parent_id,
                sp.line,
            )
        elif op == "execute_tool":
            step = steps.setdefault(sp.run, 1)
            result = a.get("gen_ai.tool.call.result")
            yield Event(
                sp.run,
                seq,
                step,
                "tool",
                str(a.get("gen_ai.tool.name") or "tool"),
                _maybe_json(a.get("gen_ai.tool.call.arguments")),
                None if result is None else fingerprint(_maybe_json(result), norm),
                effect,
                None,
                ms,
                ts,
                sp.span_id,
                sp.parent_id,
                sp.line,
            )


READERS: dict[TraceFormat, Reader] = {
    TraceFormat.CASSETTE: read_cassette_events,
    TraceFormat.JSONL: read_jsonl,
    TraceFormat.SPANS: read_spans,
    TraceFormat.OTLP: read_otlp,
}


def read_events(
    path: str | os.PathLike[str],
    fmt: str | TraceFormat = TraceFormat.AUTO,
    *,
    normalizer: Normalizer | None = None,
    skip_bad_lines: bool = False,
    progress: Callable[[int], None] | None = None,
    source: list[TraceSource] | None = None,
) -> Iterator[Event]:
    """Yield the events of a trace file in file order, detecting its format unless named.

    ``source``, when given, receives the ``TraceSource`` (for its ``skipped`` count).

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "t.jsonl"
    >>> _ = p.write_text('{"run_id":"r1","step":1,"tool":"ls","args":{},"output_sha":"ab"}\\n')
    >>> [(e.run, e.step, e.name, e.out) for e in read_events(p)]
    [('r1', 1, 'ls', 'ab')]
    """
    path = Path(path)
    kind = TraceFormat.parse(fmt)
    if kind is TraceFormat.AUTO:
        kind = detect_format(path, skip_bad_lines=skip_bad_lines)
    yield from _read(
        path,
        READERS[kind],
        normalizer=normalizer,
        skip_bad_lines=skip_bad_lines,
        progress=progress,
        source=source,
    )


def read_batches(
    path: str | os.PathLike[str],
    *,
    normalizer: Normalizer | None = None,
    skip_bad_lines: bool = False,
    progress: Callable[[int], None] | None = None,
    source: list[TraceSource] | None = None,
) -> Iterator[CallBatch]:
    """``read_events`` for a seed-JSONL trace, as blocks of raw calls (the analysis fast path).

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "t.jsonl"
    >>> _ = p.write_text('{"run_id":"r1","step":1,"tool":"ls","args":{},"output_sha":"ab"}\\n')
    >>> [(b.line, [(c.run, c.name, bytes(c.args)) for c in b.calls]) for b in read_batches(p)]
    [(1, [('r1', 'ls', b'{}')])]
    """
    yield from _read(
        Path(path),
        read_jsonl_batches,
        normalizer=normalizer,
        skip_bad_lines=skip_bad_lines,
        progress=progress,
        source=source,
    )


def _read(
    path: Path,
    reader: Callable[[TraceSource], Iterator[T]],
    *,
    normalizer: Normalizer | None,
    skip_bad_lines: bool,
    progress: Callable[[int], None] | None,
    source: list[TraceSource] | None,
) -> Iterator[T]:
    try:
        fh = path.open("rb", buffering=1 << 20)
    except FileNotFoundError:
        raise TraceError("no such trace file", path=path) from None
    except OSError as exc:
        raise TraceError(f"cannot read trace file: {exc.strerror}", path=path) from exc
    with fh:
        src = TraceSource(path, fh, normalizer or Normalizer(), skip_bad_lines, progress)
        if source is not None:
            source.append(src)
        yield from reader(src)
