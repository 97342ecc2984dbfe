"""tracetape export --otel: a cassette as OTLP/JSON that the OTLP protobuf schema accepts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

from tracetape import Record, Tape
from tracetape.formats import TraceFormat, read_records
from tracetape.formats.otlp import cassette_to_otlp
from tracetape.record import call_args


@pytest.fixture
def cassette(tmp_path: Path) -> Path:
    path = tmp_path / "run_7.jsonl"
    with Tape(path, mode="record", harness_sha="h") as tape:
        tape.call(
            "llm",
            {
                "messages": [{"role": "user", "content": "fix it"}],
                "params": {"model": "gpt-x"},
                "step": 1,
            },
            lambda: {
                "choices": [{"message": {"content": "ok"}}],
                "usage": {"prompt_tokens": 12, "completion_tokens": 3},
            },
        )
        tape.call(
            "tool", {"name": "read_file", "args": {"path": "a.py"}, "step": 1}, lambda: "print(1)"
        )
        tape.call(
            "tool",
            {"name": "write_file", "args": {"path": "a.py"}, "step": 2},
            lambda: True,
            effect="write",
        )
        tape.call("env", {"name": "HOME", "step": 2}, lambda: "/root")
    return path


def test_export_is_a_valid_export_trace_service_request(cassette: Path) -> None:
    """The OTLP protobuf JSON parser accepts the export, with one span per decision plus a root."""
    doc = cassette_to_otlp(cassette)
    request = json_format.Parse(json.dumps(doc), trace_service_pb2.ExportTraceServiceRequest())
    spans = request.resource_spans[0].scope_spans[0].spans
    assert len(spans) == 5
    root, chat, read = spans[0], spans[1], spans[2]
    assert [s.parent_span_id for s in spans[1:]] == [root.span_id] * 4
    attrs = {kv.key: kv.value for kv in chat.attributes}
    assert attrs["gen_ai.operation.name"].string_value == "chat"
    assert attrs["gen_ai.request.model"].string_value == "gpt-x"
    assert attrs["gen_ai.usage.input_tokens"].int_value == 12
    assert read.name == "execute_tool read_file"
    assert chat.end_time_unix_nano <= read.start_time_unix_nano


def test_export_is_deterministic(cassette: Path) -> None:
    """The same cassette always exports the same trace and span ids."""
    assert cassette_to_otlp(cassette) == cassette_to_otlp(cassette)


def _tools(events: list[Record]) -> list[tuple[object, ...]]:
    return [
        (e.kind, e.name, call_args(e), e.out_digest, e.effect) for e in events if e.kind == "tool"
    ]


def test_export_reads_back_as_the_same_calls(cassette: Path, tmp_path: Path) -> None:
    """Reading the export with the OTLP reader gives the cassette's tool calls and outputs."""
    out = tmp_path / "run.otlp.json"
    out.write_text(json.dumps(cassette_to_otlp(cassette)))
    back = list(read_records(out, TraceFormat.OTLP))
    direct = list(read_records(cassette, TraceFormat.CASSETTE))
    assert _tools(back) == _tools(direct)
    assert [e.name for e in back if e.kind == "llm"] == ["gpt-x"]
    assert back[0].tokens == 15
    assert {e.run for e in back} == {"run_7"}
