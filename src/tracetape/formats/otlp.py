"""OpenTelemetry traces as OTLP/JSON with the GenAI semantic conventions: read and write.

**Reading.** One ``ExportTraceServiceRequest`` document, or one per line as the collector's
file exporter writes, read with the GenAI conventions (``gen_ai.operation.name``
``chat``/``execute_tool``, ``gen_ai.tool.name``, ``gen_ai.tool.call.arguments``/``result``,
``gen_ai.input.messages``/``output.messages``, ``gen_ai.usage.input_tokens``/
``output_tokens``). A run is a trace, named by the ``gen_ai.conversation.id`` one of its spans
carries, else by its trace id. ``execute_tool`` spans become ``tool`` records and ``chat``
(or ``text_completion``/``generate_content``) ``llm`` records; other spans (agents, HTTP) only
link parents. Each model call starts a step. Documents are read whole: spans must be ordered
by start time before they make a sequence.

**Writing** (``cassette_to_otlp``).
The output is one ``ExportTraceServiceRequest`` document (``{"resourceSpans": [...]}``) that
an OTLP/HTTP endpoint (``POST /v1/traces`` with ``Content-Type: application/json``) or the
collector's file receiver accepts. One trace per cassette: a root ``invoke_agent`` span, and
one child span per decision:

* ``llm`` decisions: ``chat {model}`` with ``gen_ai.operation.name=chat``,
  ``gen_ai.request.model``, ``gen_ai.input.messages``, ``gen_ai.output.messages`` (the
  recorded response) and ``gen_ai.usage.input_tokens``/``output_tokens``;
* ``tool`` decisions: ``execute_tool {name}`` with ``gen_ai.tool.name``,
  ``gen_ai.tool.call.arguments`` and ``gen_ai.tool.call.result``;
* other kinds (environment reads, HTTP): a span named after the kind;

and on every span ``tracetape.key``, ``tracetape.seq``, ``tracetape.step``,
``tracetape.effect``. A cassette records durations, not start times, so spans are laid end
to end from the header's ``created`` time. Ids are derived from the cassette's content, so
the same cassette always exports the same trace. Cassettes are already redacted; nothing else
is added.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson

from .._version import __version__
from ..canonical import fingerprint
from ..record import INT64_MAX, Record
from ._source import TraceSource, stem_of
from .cassette import Cassette, read_cassette
from .schemas import TOO_DEEP, fmt_of, is_effect, keyed, readable, schema_of

__all__ = ["cassette_to_otlp", "read_records"]

_LLM_OPERATIONS = frozenset({"chat", "text_completion", "generate_content"})


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
    if src.progress is not None:
        src.progress(src.tell())
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


def _spans_of(doc: dict[str, Any], src: TraceSource, lineno: int) -> Iterator[tuple[str, Any]]:
    """The spans of one OTLP/JSON document with where each is; a list or object of the wrong
    shape on the way is reported (``src.bad``) with its field path and skipped."""
    for r, rs in enumerate(doc["resourceSpans"]):
        scopes = (
            rs.get("scopeSpans") or rs.get("instrumentationLibrarySpans") or []
            if (isinstance(rs, dict))
            else None
        )
        if not isinstance(scopes, list):
            src.bad("resourceSpans entries must be objects holding a scopeSpans list", lineno,
                    f"resourceSpans[{r}].scopeSpans")  # fmt: skip
            continue
        for s, ss in enumerate(scopes):
            spans = (ss.get("spans") or []) if isinstance(ss, dict) else None
            if not isinstance(spans, list):
                src.bad("scopeSpans entries must be objects holding a spans list", lineno,
                        f"resourceSpans[{r}].scopeSpans[{s}].spans")  # fmt: skip
                continue
            for i, span in enumerate(spans):
                where = f"resourceSpans[{r}].scopeSpans[{s}].spans[{i}]"
                if (
                    not isinstance(span, dict)
                    or not isinstance(span.get("traceId"), str | int)
                    or not span.get("traceId")
                    or not isinstance(span.get("spanId"), str | int)
                    or not span.get("spanId")
                ):
                    src.bad("a span needs a traceId and a spanId", lineno, f"{where}.spanId")
                    continue
                yield where, span


_FIXED64 = 1 << 64
_TEXT_ATTRIBUTES = ("gen_ai.operation.name", "gen_ai.request.model", "gen_ai.tool.name")
_USAGE = ("gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens")


def _typing_problem(attrs: dict[str, Any], start: int, end: int) -> tuple[str, str] | None:
    """The first attribute or time of a span whose type or range tracetape cannot keep, as
    (field, what it must be); the value itself is never quoted."""
    for name, nanos in (("startTimeUnixNano", start), ("endTimeUnixNano", end)):
        if not 0 <= nanos < _FIXED64:
            return name, "must be nanoseconds since the epoch (an unsigned 64-bit number)"
    for name in _TEXT_ATTRIBUTES:
        text = attrs.get(name)
        if text is not None and not isinstance(text, str | int | float | bool):
            return f"attributes.{name}", f"must be a string, found {type(text).__name__}"
    total = 0
    for name in _USAGE:
        value = attrs.get(name)
        if value is not None and (type(value) is not int or not 0 <= value <= INT64_MAX):
            return f"attributes.{name}", "must be a token count (0 to 2**63 - 1)"
        total += value if type(value) is int else 0
    if total > INT64_MAX:
        return f"attributes.{_USAGE[0]}", "input and output tokens must sum below 2**63"
    return None


def read_records(src: TraceSource) -> Iterator[Record]:
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
            hint = f"; found {schema_of(doc)} (mixed schemas)" if fmt_of(doc) else ""
            src.bad(
                f"missing: an OTLP/JSON document needs a resourceSpans list{hint}",
                lineno,
                "resourceSpans",
            )
            continue
        for where, span in _spans_of(doc, src, lineno):
            if not readable(span):
                src.bad(TOO_DEEP, lineno, where)
                continue
            try:
                attrs = {
                    kv["key"]: _any_value(kv.get("value")) for kv in span.get("attributes") or []
                }
                start = int(span.get("startTimeUnixNano") or 0)
                end = int(span.get("endTimeUnixNano") or start)
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                src.bad(
                    f"malformed span attributes or times ({type(exc).__name__})",
                    lineno,
                    f"{where}.attributes",
                )
                continue
            problem = _typing_problem(attrs, start, end)
            if problem is not None:
                src.bad(problem[1], lineno, f"{where}.{problem[0]}")
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
                    str(span["spanId"]),
                    str(span.get("parentSpanId")) if span.get("parentSpanId") else None,
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
        ts = (
            datetime.fromtimestamp(sp.start / 1e9, UTC).isoformat().replace("+00:00", "Z")
            if sp.start
            else None
        )
        effect = a.get("tracetape.effect")
        fields = {
            "seq": seq,
            "run": sp.run,
            "effect": effect if is_effect(effect) else None,
            "ms": (sp.end - sp.start) / 1e6,
            "ts": ts,
            "span_id": sp.span_id,
            "parent_id": sp.parent_id,
            "source": src.name,
            "line": sp.line,
        }
        if op in _LLM_OPERATIONS:
            step = steps[sp.run] = steps.get(sp.run, 0) + 1
            usage = [a.get("gen_ai.usage.input_tokens"), a.get("gen_ai.usage.output_tokens")]
            counted = [u for u in usage if isinstance(u, int)]
            data: dict[str, Any] = {"messages": _maybe_json(a.get("gen_ai.input.messages"))}
            if "gen_ai.system_instructions" in a:
                data["system"] = _maybe_json(a["gen_ai.system_instructions"])
            data["step"] = step
            name = str(a.get("gen_ai.request.model") or op)
            output = a.get("gen_ai.output.messages")
            tokens = sum(counted) if counted else None
            kind = "llm"
        elif op == "execute_tool":
            step = steps.setdefault(sp.run, 1)
            output = a.get("gen_ai.tool.call.result")
            name = str(a.get("gen_ai.tool.name") or "tool")
            args = _maybe_json(a.get("gen_ai.tool.call.arguments"))
            data, tokens, kind = {"name": name, "args": args, "step": step}, None, "tool"
        else:
            continue
        out = None if output is None else _maybe_json(output)
        digest = None if output is None else fingerprint(out, norm)
        yield keyed(kind, data, name=name, out=out, out_digest=digest, tokens=tokens, **fields)


_SPAN_KIND_INTERNAL = 1
_SPAN_KIND_CLIENT = 3


def _value(value: Any) -> dict[str, Any]:
    """Encode a value as an OTLP/JSON ``AnyValue`` (int64 as a decimal string)."""
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, str):
        return {"stringValue": value}
    return {"stringValue": json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)}


def _attrs(values: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"key": k, "value": _value(v)} for k, v in values.items() if v is not None]


def _hex(seed: str, length: int) -> str:
    return hashlib.sha256(seed.encode()).hexdigest()[:length]


def _usage(out: Any) -> tuple[int | None, int | None]:
    usage = out.get("usage") if isinstance(out, dict) else None
    if not isinstance(usage, dict):
        return None, None
    inp = usage.get("input_tokens", usage.get("prompt_tokens"))
    outp = usage.get("output_tokens", usage.get("completion_tokens"))
    return (inp if isinstance(inp, int) else None, outp if isinstance(outp, int) else None)


def _model(data: Any) -> str | None:
    if not isinstance(data, dict):
        return None
    params = data.get("params")
    if isinstance(params, dict) and isinstance(params.get("model"), str):
        return str(params["model"])
    return data.get("model") if isinstance(data.get("model"), str) else None


def _span_attrs(rec: Record) -> tuple[str, int, dict[str, Any]]:
    kind, data, out = rec.kind, rec.input, rec.out
    base: dict[str, Any] = {
        "tracetape.key": rec.key,
        "tracetape.kind": kind,
        "tracetape.seq": rec.seq,
        "tracetape.step": rec.step,
        "tracetape.effect": rec.effect,
    }
    if kind == "llm":
        model = _model(data)
        messages = data.get("messages") if isinstance(data, dict) else None
        inp, outp = _usage(out)
        base.update(
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": model,
                "gen_ai.input.messages": messages,
                "gen_ai.output.messages": out,
                "gen_ai.usage.input_tokens": inp,
                "gen_ai.usage.output_tokens": outp,
            }
        )
        return f"chat {model}" if model else "chat", _SPAN_KIND_CLIENT, base
    if kind == "tool":
        name = data.get("name") if isinstance(data, dict) else None
        args = data.get("args") if isinstance(data, dict) else None
        base.update(
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": name,
                "gen_ai.tool.type": "function",
                "gen_ai.tool.call.arguments": args,
                "gen_ai.tool.call.result": out,
            }
        )
        return f"execute_tool {name}" if name else "execute_tool", _SPAN_KIND_INTERNAL, base
    base["tracetape.output"] = out
    return kind, _SPAN_KIND_INTERNAL, base


def _start_ns(cassette: Cassette) -> int:
    created = (cassette.header or {}).get("created")
    if isinstance(created, str):
        try:
            return int(datetime.fromisoformat(created.replace("Z", "+00:00")).timestamp() * 1e9)
        except ValueError:
            pass
    return int(datetime(2000, 1, 1, tzinfo=UTC).timestamp() * 1e9)


def cassette_to_otlp(
    path: str | os.PathLike[str], service_name: str = "tracetape"
) -> dict[str, Any]:
    """Return the OTLP/JSON ``ExportTraceServiceRequest`` of a cassette.

    >>> import tempfile, pathlib
    >>> from tracetape import Tape
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "run.jsonl"
    >>> with Tape(p, mode="record", harness_sha="x") as tape:
    ...     _ = tape.call("tool", {"name": "add", "args": [1, 2], "step": 1}, lambda: 3)
    >>> span = cassette_to_otlp(p)["resourceSpans"][0]["scopeSpans"][0]["spans"][1]
    >>> span["name"], span["attributes"][5]
    ('execute_tool add', {'key': 'gen_ai.operation.name', 'value': {'stringValue': 'execute_tool'}})
    """
    cassette = read_cassette(path)
    lines = "\n".join(r.key or "" for r in cassette.records)
    trace_id = _hex(f"{cassette.path.name}\n{cassette.header}\n{lines}", 32)
    root_id = _hex(trace_id + ":root", 16)
    clock = start = _start_ns(cassette)
    spans: list[dict[str, Any]] = []
    for i, rec in enumerate(cassette.records, 1):
        name, span_kind, attrs = _span_attrs(rec)
        ms = rec.ms
        duration = int(float(ms) * 1e6) if isinstance(ms, int | float) else 0
        spans.append(
            {
                "traceId": trace_id,
                "spanId": _hex(f"{trace_id}:{i}:{rec.key}", 16),
                "parentSpanId": root_id,
                "name": name,
                "kind": span_kind,
                "startTimeUnixNano": str(clock),
                "endTimeUnixNano": str(clock + duration),
                "attributes": _attrs(attrs),
                "status": {},
            }
        )
        clock += duration
    run = stem_of(cassette.path.name)  # as the cassette reader names it
    root = {
        "traceId": trace_id,
        "spanId": root_id,
        "name": f"invoke_agent {run}",
        "kind": _SPAN_KIND_INTERNAL,
        "startTimeUnixNano": str(start),
        "endTimeUnixNano": str(clock),
        "attributes": _attrs(
            {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.conversation.id": run,
                "tracetape.cassette": str(cassette.path.name),
                "tracetape.format": cassette.format,
            }
        ),
        "status": {},
    }
    resource = {"attributes": _attrs({"service.name": service_name})}
    scope = {"name": "tracetape", "version": __version__}
    return {
        "resourceSpans": [
            {"resource": resource, "scopeSpans": [{"scope": scope, "spans": [root, *spans]}]}
        ]
    }
