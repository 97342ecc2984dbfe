"""Write a cassette as OpenTelemetry traces in OTLP/JSON, with the GenAI semantic conventions.

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
from datetime import UTC, datetime
from typing import Any

from .._version import __version__
from ..cassette import Cassette, read_cassette

__all__ = ["cassette_to_otlp"]

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


def _span_attrs(rec: dict[str, Any]) -> tuple[str, int, dict[str, Any]]:
    kind, data, out = rec["kind"], rec.get("input"), rec.get("out")
    base: dict[str, Any] = {
        "tracetape.key": rec["key"],
        "tracetape.kind": kind,
        "tracetape.seq": rec.get("seq"),
        "tracetape.step": rec.get("step"),
        "tracetape.effect": rec.get("effect"),
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
    lines = "\n".join(r["key"] for r in cassette.records)
    trace_id = _hex(f"{cassette.path.name}\n{cassette.header}\n{lines}", 32)
    root_id = _hex(trace_id + ":root", 16)
    clock = start = _start_ns(cassette)
    spans: list[dict[str, Any]] = []
    for i, rec in enumerate(cassette.records, 1):
        name, span_kind, attrs = _span_attrs(rec)
        ms = rec.get("ms")
        duration = int(float(ms) * 1e6) if isinstance(ms, int | float) else 0
        spans.append(
            {
                "traceId": trace_id,
                "spanId": _hex(f"{trace_id}:{i}:{rec['key']}", 16),
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
    run = cassette.path.name.split(".")[0] or cassette.path.name  # as the cassette reader names it
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
