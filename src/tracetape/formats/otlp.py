"""OpenTelemetry traces as OTLP/JSON with the GenAI semantic conventions: read and write.

**Reading.** One ``ExportTraceServiceRequest`` document, or one per line as the collector's
file exporter writes, read with the GenAI conventions (``gen_ai.operation.name``
``chat``/``execute_tool``, ``gen_ai.tool.name``, ``gen_ai.tool.call.arguments``/``result``,
``gen_ai.input.messages``/``output.messages``, ``gen_ai.usage.input_tokens``/
``output_tokens``). A run is a trace, named by the ``gen_ai.conversation.id`` one of its spans
carries, else by its trace id. ``execute_tool`` spans become ``tool`` records and ``chat``
(or ``text_completion``/``generate_content``) ``llm`` records; other spans (agents, HTTP) only
link parents. Each model call starts a step. Documents are read whole: spans must be ordered
by start time before they make a sequence. A span ``cassette_to_otlp`` wrote (it carries
``tracetape.export``) is read back as the record it was written from, whatever its kind.

**Writing** (``cassette_to_otlp``): one ``ExportTraceServiceRequest`` document that an
OTLP/HTTP endpoint (``POST /v1/traces``, JSON) or the collector's file receiver accepts. One
trace per cassette: a root ``invoke_agent`` span (the ending in ``tracetape.ended``), and a
child span per decision, the run id in its ``gen_ai.conversation.id``. A model call's span
(``chat {model}``, or ``embeddings``...) carries the input's ``messages``, ``system`` and
``tools`` in ``gen_ai.input.messages``, ``gen_ai.system_instructions`` and
``gen_ai.tool.definitions``, the response in ``gen_ai.output.messages``; a tool call's
(``execute_tool {name}``) its ``name`` and ``args`` in ``gen_ai.tool.name`` and
``gen_ai.tool.call.arguments``, its output in ``gen_ai.tool.call.result``; another kind's
(``env HOME``) its output in ``tracetape.output``. Every decision span carries the rest of its
record: ``tracetape.input`` (the input without those parts), ``tracetape.kind``, ``key``,
``seq``, ``step`` (as the analysis reads it, filled in where the cassette has none),
``effect``, ``api``, ``tokens``, ``usage``, ``ms``. Structured values are JSON text (non-finite
floats tagged as in a cassette; ``tracetape.bigint`` on a span holding an integer beyond 64
bits). Added for backends, never read back: ``gen_ai.request.*`` (model, settings),
``gen_ai.provider.name``, ``gen_ai.usage.*`` (the record's usage, else its response's),
``error.type`` and an error status. So ``diff A.jsonl A.otlp.json`` finds what ``diff A.jsonl
A.jsonl`` does: nothing. Spans are laid end to end from the header's ``created`` time; ids
derive from the cassette's content. Cassettes are already redacted; nothing else is added.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson

from .._version import __version__
from ..canonical import Normalizer, fingerprint
from ..record import INT64_MAX, RAISED, Record
from ._source import TraceSource, stem_of
from .cassette import (
    Cassette,
    fill_steps,
    name_of,
    read_cassette,
    tag_values,
    tokens_of,
    untag_values,
)
from .schemas import TOO_DEEP, fmt_of, is_effect, keyed, readable, schema_of

__all__ = ["EXPORT_VERSION", "cassette_to_otlp", "read_records"]

_LLM_OPERATIONS = frozenset({"chat", "text_completion", "generate_content"})
# The version of ``cassette_to_otlp``'s spans, in their ``tracetape.export``: a span that
# carries it is read back as the record it was made from (exports before carried none).
EXPORT_VERSION = 2
# The parts of a decision's input a GenAI attribute carries, by kind (the rest is in
# ``tracetape.input``); a tool's name is carried as itself (a string), the others as JSON.
_PARTS = {
    "llm": {
        "messages": "gen_ai.input.messages",
        "system": "gen_ai.system_instructions",
        "tools": "gen_ai.tool.definitions",
    },
    "tool": {"name": "gen_ai.tool.name", "args": "gen_ai.tool.call.arguments"},
}
_AS_IS = frozenset({"name"})
# Where a decision's output goes, by kind (other kinds: ``tracetape.output``).
_OUTPUTS = {"llm": "gen_ai.output.messages", "tool": "gen_ai.tool.call.result"}
_JSON_ATTRIBUTES = frozenset(
    {"tracetape.input", "tracetape.usage", "tracetape.output", *_OUTPUTS.values()}
    | {attr for parts in _PARTS.values() for key, attr in parts.items() if key not in _AS_IS}
)
# The record's fields a decision span carries as themselves, each in ``tracetape.{field}``.
_SCALAR_FIELDS = ("kind", "key", "seq", "step", "effect", "api", "tokens", "ms")
# The lowest value of each integer a read-back span carries (the highest: 2**63 - 1).
_LOWEST = {"tracetape.seq": -INT64_MAX - 1, "tracetape.step": -INT64_MAX - 1, "tracetape.tokens": 0}


def _json_texts(values: dict[str, Any]) -> tuple[dict[str, str], bool]:
    """``values`` as JSON texts that ``_from_json_text`` reads back equal (a NaN or an
    infinity tagged as a cassette tags it), and whether one holds an integer beyond 64 bits:
    orjson reads those as floats, so such a span says ``tracetape.bigint``."""
    texts, big = {}, False
    for name, value in values.items():
        tagged = tag_values(value)
        try:
            texts[name] = orjson.dumps(tagged).decode()
        except TypeError:  # an integer beyond 64 bits
            texts[name], big = json.dumps(tagged, ensure_ascii=False), True
    return texts, big


def _from_json_text(text: str, big: bool) -> Any:
    """The value ``_json_texts`` wrote (``ValueError``, ``TypeError``, ``RecursionError``: it
    wrote none); ``big``: the span holds integers beyond 64 bits."""
    return untag_values(json.loads(text) if big else orjson.loads(text))


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


def _read_back_problem(attrs: dict[str, Any]) -> tuple[str, str] | None:
    """Decode in place the JSON texts of a span ``cassette_to_otlp`` wrote; the first of its
    attributes tracetape cannot read back, as (field, what it must be), value unquoted."""
    for name in ("tracetape.kind", "tracetape.key", "tracetape.api"):
        value = attrs.get(name)
        if (value is not None or name == "tracetape.kind") and type(value) is not str:
            return f"attributes.{name}", "must be a string"
    for name, lowest in _LOWEST.items():
        value = attrs.get(name)
        if value is not None and (type(value) is not int or not lowest <= value <= INT64_MAX):
            return f"attributes.{name}", f"must be an integer from {lowest} to 2**63 - 1"
    if type(attrs.get("tracetape.ms", 0.0)) not in (int, float):
        return "attributes.tracetape.ms", "must be a duration in milliseconds"
    big = attrs.get("tracetape.bigint") is True
    for name in sorted(_JSON_ATTRIBUTES & attrs.keys()):
        try:
            value = _from_json_text(attrs[name], big)
        except (TypeError, ValueError, RecursionError):  # TypeError: not a string
            return f"attributes.{name}", "must be JSON text, as tracetape export writes it"
        if not readable(value):
            return f"attributes.{name}", TOO_DEEP
        attrs[name] = value
    usage = attrs.get("tracetape.usage")
    if usage is not None and (
        type(usage) is not dict
        or not all(type(v) is int and 0 <= v <= INT64_MAX for v in usage.values())
    ):
        return "attributes.tracetape.usage", "must be token counts by name"
    return None


def _read_back(a: dict[str, Any], fields: dict[str, Any], norm: Normalizer) -> Record:
    """The record a span ``cassette_to_otlp`` wrote was made from: its input rebuilt from
    ``tracetape.input`` and the GenAI attributes holding its parts, its other fields from
    theirs, its tokens (where the cassette stored none) and output digest as the cassette
    reader finds them."""
    kind = a["tracetape.kind"]
    data = a.get("tracetape.input")
    if isinstance(data, dict):
        for key, attr in _PARTS.get(kind, {}).items():
            if attr in a:
                data[key] = a[attr]
        data = dict(sorted(data.items()))  # a tape stores its inputs' keys sorted
    out = a.get(_OUTPUTS.get(kind, "tracetape.output"))
    fields.update({f: a.get(f"tracetape.{f}") for f in _SCALAR_FIELDS if f != "effect"})
    fields.update(usage=a.get("tracetape.usage"), out_digest=fingerprint(out, norm))
    if fields["tokens"] is None:
        fields["tokens"] = tokens_of(out)
    return Record(input=data, name=name_of(data), out=out, **fields)


def read_records(src: TraceSource) -> Iterator[Record]:
    """Read OTLP/JSON traces with the OpenTelemetry GenAI semantic conventions.

    A run is a trace, named by the ``gen_ai.conversation.id`` one of its spans carries, else
    by its trace id. Spans with ``gen_ai.operation.name`` ``execute_tool`` become tool events
    and ``chat`` (or ``text_completion``/``generate_content``) model events; other spans
    (agents, HTTP) only link parents. Each model call starts a step. A span
    ``cassette_to_otlp`` wrote is read back as its record (``_read_back``); the ending its
    root span names is the source's.
    """
    spans: list[_Span] = []
    conversations: dict[str, str] = {}  # trace id -> gen_ai.conversation.id of any span
    endings: dict[str, str] = {}  # trace id -> how its recording ended (tracetape.ended)
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
            if problem is None and "tracetape.export" in attrs:
                problem = _read_back_problem(attrs)
            if problem is not None:
                src.bad(problem[1], lineno, f"{where}.{problem[0]}")
                continue
            run = str(span["traceId"])
            conversation = attrs.get("gen_ai.conversation.id")
            if conversation and run not in conversations:
                conversations[run] = str(conversation)
            if isinstance(attrs.get("tracetape.ended"), str):
                endings[run] = attrs["tracetape.ended"]
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
    ended = {conversations.get(trace, trace): how for trace, how in endings.items()}
    for sp in spans:
        sp.run = conversations.get(sp.run, sp.run)
    runs = {sp.run for sp in spans}
    if runs and runs <= ended.keys() and len({ended[run] for run in runs}) == 1:
        src.ended = ended[next(iter(runs))]  # a source has one ending: each run's the same
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
        if "tracetape.export" in a:
            yield _read_back(a, fields, norm)
            continue
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
_STATUS_ERROR = 2
# GenAI settings of a model call's ``params`` that backends show (finite numbers only).
_SETTINGS = ("frequency_penalty", "max_tokens", "presence_penalty", "seed", "temperature",
             "top_k", "top_p")  # fmt: skip
# A record's usage counts as the GenAI attributes name them.
_USAGE_NAMES = {
    "input": "gen_ai.usage.input_tokens",
    "output": "gen_ai.usage.output_tokens",
    "cached": "gen_ai.usage.cache_read.input_tokens",
}
# ``gen_ai.provider.name`` where the conventions name a provider otherwise than its route.
_PROVIDER_NAMES = {"bedrock": "aws.bedrock", "gemini": "gcp.gemini", "mistral": "mistral_ai"}
# ``gen_ai.operation.name`` of a model call by its route (``api`` without the provider).
_OPERATIONS = {
    **dict.fromkeys(("completions", "fim.completions", "generate"), "text_completion"),
    **dict.fromkeys(("embed", "embed_content", "embeddings"), "embeddings"),
    "generate_content": "generate_content",
}


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


def _usage(out: Any) -> dict[str, int]:
    """The usage an OpenAI-shaped response reports, for a record that stored none."""
    usage = out.get("usage") if isinstance(out, dict) else None
    if not isinstance(usage, dict):
        return {}
    found = {
        "input": usage.get("input_tokens", usage.get("prompt_tokens")),
        "output": usage.get("output_tokens", usage.get("completion_tokens")),
    }
    return {k: v for k, v in found.items() if type(v) is int}


def _failure(rec: Record) -> tuple[str, str] | None:
    """(``error.type``, status message) of a decision that failed: a call that raised, or a
    provider's answer with an error status."""
    out = rec.out
    if not isinstance(out, dict):
        return None
    raised = out.get(RAISED)
    if len(out) == 1 and isinstance(raised, dict):
        return str(raised.get("type") or "error"), str(raised.get("message") or "")
    status = out.get("status")
    if rec.api and type(status) is int and status >= 400:
        return str(status), f"HTTP {status}"
    return None


def _shown(rec: Record, model: str | None) -> dict[str, Any]:
    """What backends show of a model call beside what is read back: its operation, model,
    provider, settings and usage."""
    provider, _, route = (rec.api or "").partition(".")
    shown: dict[str, Any] = {
        "gen_ai.operation.name": _OPERATIONS.get(route, "chat"),
        "gen_ai.request.model": model,
        "gen_ai.provider.name": _PROVIDER_NAMES.get(provider, provider) or None,
    }
    params = rec.input.get("params") if isinstance(rec.input, dict) else None
    if isinstance(params, dict):
        for name in _SETTINGS:
            value = params.get(name)
            if isinstance(value, int | float) and type(value) is not bool and math.isfinite(value):
                shown[f"gen_ai.request.{name}"] = value
    usage = rec.usage if rec.usage is not None else _usage(rec.out)
    shown.update({_USAGE_NAMES[k]: v for k, v in usage.items() if k in _USAGE_NAMES})
    return shown


def _span_of(rec: Record, run: str) -> dict[str, Any]:
    """A decision span's name, kind, attributes and status (no ids, no times): the whole
    record (``_read_back`` reads it), and what backends show."""
    kind, data = rec.kind, rec.input
    parts = _PARTS.get(kind, {})
    rest, moved = data, []
    if isinstance(data, dict):
        moved = [k for k in parts if k in data and (k not in _AS_IS or type(data[k]) is str)]
        rest = {k: v for k, v in data.items() if k not in moved}
    as_json = {parts[k]: data[k] for k in moved if k not in _AS_IS}
    as_json[_OUTPUTS.get(kind, "tracetape.output")] = rec.out
    as_json["tracetape.input"] = rest
    if rec.usage is not None:
        as_json["tracetape.usage"] = rec.usage
    texts, big = _json_texts(as_json)
    name = name_of(data)
    attrs = _shown(rec, name) if kind == "llm" else {}
    if kind == "tool":
        attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.type": "function"}
    span = f"{attrs.get('gen_ai.operation.name', kind)} {name or ''}".rstrip()
    failed = _failure(rec)
    attrs.update({"gen_ai.conversation.id": run, "error.type": failed and failed[0], **texts})
    attrs.update({parts[k]: data[k] for k in moved if k in _AS_IS})
    attrs.update({"tracetape.export": EXPORT_VERSION, "tracetape.bigint": big or None})
    attrs.update({f"tracetape.{field}": getattr(rec, field) for field in _SCALAR_FIELDS})
    return {
        "name": span,
        "kind": _SPAN_KIND_CLIENT if kind == "llm" else _SPAN_KIND_INTERNAL,
        "attributes": _attrs(attrs),
        "status": {} if failed is None else {"code": _STATUS_ERROR, "message": failed[1]},
    }


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
    >>> with Tape(p, mode="record", harness_sha="x", run_id="run-1") as tape:
    ...     _ = tape.call("tool", {"name": "add", "args": [1, 2], "step": 1}, lambda: 3)
    >>> span = cassette_to_otlp(p)["resourceSpans"][0]["scopeSpans"][0]["spans"][1]
    >>> attrs = {kv["key"]: kv["value"] for kv in span["attributes"]}
    >>> span["name"], attrs["gen_ai.tool.call.arguments"], attrs["gen_ai.conversation.id"]
    ('execute_tool add', {'stringValue': '[1,2]'}, {'stringValue': 'run-1'})
    """
    cassette = read_cassette(path)
    lines = "\n".join(r.key or "" for r in cassette.records)
    trace_id = _hex(f"{cassette.path.name}\n{cassette.header}\n{lines}", 32)
    root_id = _hex(trace_id + ":root", 16)
    clock = start = _start_ns(cassette)
    # The run as the cassette reader names it: the header's run id, else the file's stem.
    named = (cassette.header or {}).get("run_id")
    run = named if isinstance(named, str) else stem_of(cassette.path.name)
    spans: list[dict[str, Any]] = []
    for i, rec in enumerate(fill_steps(cassette.records), 1):
        duration = 0 if rec.ms is None else round(rec.ms * 1e6)
        spans.append(
            {
                "traceId": trace_id,
                "spanId": _hex(f"{trace_id}:{i}:{rec.key}", 16),
                "parentSpanId": root_id,
                "startTimeUnixNano": str(clock),
                "endTimeUnixNano": str(clock + duration),
                **_span_of(rec, run),
            }
        )
        clock += duration
    root = {
        "traceId": trace_id,
        "spanId": root_id,
        "name": f"invoke_agent {stem_of(cassette.path.name)}",
        "kind": _SPAN_KIND_INTERNAL,
        "startTimeUnixNano": str(start),
        "endTimeUnixNano": str(clock),
        "attributes": _attrs(
            {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.conversation.id": run,
                "tracetape.cassette": str(cassette.path.name),
                "tracetape.format": cassette.format,
                "tracetape.ended": cassette.ended,
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
