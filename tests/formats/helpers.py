"""Traces of every format, for the format tests: a recorded cassette, seed JSONL, span records
and OTLP/JSON."""

from __future__ import annotations

from pathlib import Path

import orjson

from tracetape import Record, Tape
from tracetape.formats import TraceFormat, read_records

from ..analysis.helpers import SEED_A, SEED_B, write_jsonl


def recorded_cassette(path: Path, *, write: bool = False) -> Path:
    """A recorded cassette: a model call and a read (and, with ``write``, a write at step 2)."""
    with Tape(path, mode="record", harness_sha="h") as tape:
        tape.call(
            "llm",
            {"messages": [{"role": "user", "content": "hi"}], "params": {"model": "m1"}, "step": 1},
            lambda: {"text": "ok", "usage": {"total_tokens": 9}},
        )
        tape.call(
            "tool", {"name": "ls", "args": {"path": "/"}, "step": 1}, lambda: ["a"], effect="read"
        )
        if write:
            rm = {"name": "rm", "args": {"path": "/a"}, "step": 2}
            tape.call("tool", rm, lambda: True, effect="write")
    return path


SPAN = {
    "span_id": "7f3c",
    "tool_call": {"argv": ["git", "diff", "--stat"], "env_digest": "sha256:9a1e", "timeout_s": 30},
    "tool_result": {"exit_code": 0, "stdout": " 3 files changed", "stderr": ""},
    "model_decision": {"tool_name": "git_diff_stat", "args": {}, "model_id": "<redacted>"},
}


def _kv(key: str, value: object) -> dict[str, object]:
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    return {"key": key, "value": {"stringValue": value}}


def otlp_doc() -> dict[str, object]:
    """A small OTLP/JSON trace: an agent span, a chat span and a tool span (GenAI conventions)."""
    trace = "5b8efff798038103d269b633813fc60c"
    spans = [
        {
            "traceId": trace,
            "spanId": "aaaaaaaaaaaaaaaa",
            "name": "invoke_agent",
            "startTimeUnixNano": "1000",
            "endTimeUnixNano": "9000",
            "attributes": [_kv("gen_ai.operation.name", "invoke_agent")],
        },
        {
            "traceId": trace,
            "spanId": "cccccccccccccccc",
            "parentSpanId": "aaaaaaaaaaaaaaaa",
            "name": "execute_tool search",
            "startTimeUnixNano": "3000000",
            "endTimeUnixNano": "5000000",
            "attributes": [
                _kv("gen_ai.operation.name", "execute_tool"),
                _kv("gen_ai.tool.name", "search"),
                _kv("gen_ai.tool.call.arguments", '{"q": "x"}'),
                _kv("gen_ai.tool.call.result", '{"hits": 2}'),
            ],
        },
        {
            "traceId": trace,
            "spanId": "bbbbbbbbbbbbbbbb",
            "parentSpanId": "aaaaaaaaaaaaaaaa",
            "name": "chat gpt-x",
            "startTimeUnixNano": "2000",
            "endTimeUnixNano": "2500000",
            "attributes": [
                _kv("gen_ai.operation.name", "chat"),
                _kv("gen_ai.request.model", "gpt-x"),
                _kv(
                    "gen_ai.input.messages",
                    '[{"role": "user", "parts": [{"type": "text", "content": "hi"}]}]',
                ),
                _kv("gen_ai.output.messages", '[{"role": "assistant", "parts": []}]'),
                _kv("gen_ai.usage.input_tokens", 10),
                _kv("gen_ai.usage.output_tokens", 5),
            ],
        },
    ]
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": []},
                "scopeSpans": [{"scope": {"name": "t"}, "spans": spans}],
            }
        ]
    }


def trace_files(tmp_path: Path) -> dict[TraceFormat, Path]:
    """One small trace of each format, of several records (the OTLP one pretty-printed)."""
    cassette = recorded_cassette(tmp_path / "run_1.jsonl")
    otlp = tmp_path / "otlp.json"
    otlp.write_bytes(orjson.dumps(otlp_doc(), option=orjson.OPT_INDENT_2))
    return {
        TraceFormat.CASSETTE: cassette,
        TraceFormat.JSONL: write_jsonl(tmp_path / "seed.jsonl", SEED_A + SEED_B),
        TraceFormat.SPANS: write_jsonl(tmp_path / "spans.jsonl", [SPAN, {**SPAN, "span_id": "8a"}]),
        TraceFormat.OTLP: otlp,
    }


def read_all(path: Path, **kw: object) -> list[Record]:
    return list(read_records(path, **kw))  # type: ignore[arg-type]
