"""OTLP/JSON: spans of the GenAI conventions read as records, and ``tracetape export --otel``: a
cassette as OTLP/JSON that the OTLP protobuf schema accepts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

from tracetape import Record, Tape, read_cassette
from tracetape.formats import TraceFormat, detect_format, read_records
from tracetape.formats.otlp import cassette_to_otlp
from tracetape.record import call_args

from .helpers import otlp_doc, read_all


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
    """Reading the export with the OTLP reader gives the cassette's tool calls and outputs,
    under the cassette's own run id."""
    out = tmp_path / "run.otlp.json"
    out.write_text(json.dumps(cassette_to_otlp(cassette)))
    back = list(read_records(out, TraceFormat.OTLP))
    direct = list(read_records(cassette, TraceFormat.CASSETTE))
    assert _tools(back) == _tools(direct)
    assert [e.name for e in back if e.kind == "llm"] == ["gpt-x"]
    assert back[0].tokens == 15
    run = read_cassette(cassette).header["run_id"]
    assert {e.run for e in back} == {e.run for e in direct} == {run}


@pytest.mark.parametrize(
    "layout",
    [pytest.param("document", id="pretty-document"), pytest.param("jsonl", id="one-per-line")],
)
def test_otlp_json_is_read_with_genai_conventions(tmp_path: Path, layout: str) -> None:
    """OTLP/JSON spans become chat and tool events in start-time order, with tokens, parents."""
    path = tmp_path / "otlp.json"
    doc = otlp_doc()
    path.write_bytes(
        orjson.dumps(doc, option=orjson.OPT_INDENT_2)
        if layout == "document"
        else orjson.dumps(doc) + b"\n"
    )
    assert detect_format(path) is TraceFormat.OTLP
    events = read_all(path)
    assert [(e.kind, e.name, e.step, e.tokens, e.parent_id) for e in events] == [
        ("llm", "gpt-x", 1, 15, "aaaaaaaaaaaaaaaa"),
        ("tool", "search", 1, None, "aaaaaaaaaaaaaaaa"),
    ]
    assert call_args(events[1]) == {"q": "x"}
    assert events[1].ms == pytest.approx(2.0)


@pytest.mark.parametrize(
    ("value", "effect"),
    [
        ({"stringValue": "write"}, "write"),
        ({"stringValue": "delete"}, None),
        ({"arrayValue": {"values": [{"stringValue": "write"}]}}, None),
        ({"kvlistValue": {"values": [{"key": "w", "value": {"intValue": "1"}}]}}, None),
    ],
)
def test_an_otlp_effect_is_kept_only_where_it_is_one_of_the_three(
    tmp_path: Path, value: dict[str, object], effect: str | None
) -> None:
    """A span's ``tracetape.effect`` of another value or type is dropped, not a crash."""
    doc: Any = otlp_doc()
    tool = doc["resourceSpans"][0]["scopeSpans"][0]["spans"][1]
    tool["attributes"].append({"key": "tracetape.effect", "value": value})
    path = tmp_path / "otlp.json"
    path.write_bytes(orjson.dumps(doc))
    assert [e.effect for e in read_all(path) if e.kind == "tool"] == [effect]
