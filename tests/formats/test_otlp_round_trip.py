"""``tracetape export --otel`` round trip: a cassette and its OTLP/JSON export are the same run
to ``tracetape diff`` (no divergence, no drift, no finding, the same summary), for a cassette of
every provider; every field the diff compares is in the export, and nothing the cassette does
not hold.

The cassettes of ``tests/fixtures/providers`` were recorded through each provider's official
SDK against the fake servers of ``tests/integrations/providers`` (by their tool-loop, stream and
error-status tests, and ``tests/integrations/test_sdk.py``'s OpenAI and Anthropic agents): these
tests stay on the ground floor, no SDK imported. Record them again the same way when the
cassette format changes.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

from tracetape import Tape
from tracetape.analysis.causes import CAUSES
from tracetape.cli import main
from tracetape.errors import TraceError
from tracetape.formats import TraceFormat, TraceSource, read_records
from tracetape.formats.cassette import fill_steps, tag_values
from tracetape.formats.otlp import cassette_to_otlp
from tracetape.record import raised_record

FIXTURES = Path(__file__).parents[1] / "fixtures"
PROVIDERS = sorted((FIXTURES / "providers").glob("*.jsonl"))
# Older cassettes: the seed's format 0 (no input, no step), and earlier formats and endings.
OLDER = sorted(FIXTURES.glob("recorded_*.jsonl"))
# The diff's strictest gate: any finding, or a root with any cause, exits 1.
STRICT = ",".join(["expected", *CAUSES])
# What a record read from a trace holds that the diff and its report read.
FIELDS = ("kind", "key", "seq", "run", "name", "step", "input", "out", "out_digest", "effect",
          "tokens", "usage", "api", "ms")  # fmt: skip
KEY = "sk-proj-Zx81qLmN0pQrStUvWxYz0123456789abcd"


def every_kind(path: Path) -> Path:
    """A cassette of what no provider cassette holds: a model call with system instructions,
    tools and settings; outputs JSON cannot hold (NaN, infinity, a tag look-alike, an
    integer beyond 64 bits) or that look like JSON text; a tool call without a step; a tool
    that raised; an environment read; an HTTP call; a recording that failed."""
    llm = {
        "messages": [{"role": "user", "content": "naïve ✓ fix it"}],
        "system": "be brief",
        "tools": [{"name": "read_file", "parameters": {"type": "object"}}],
        "params": {"model": "gpt-4o", "temperature": 0, "max_tokens": 64},
        "step": 1,
    }
    answer = {"choices": [{"message": {"content": "ok"}}], "usage": {"prompt_tokens": 12}}
    with pytest.raises(ValueError), Tape(path, mode="record", harness_sha="h") as tape:
        tape.call("llm", llm, lambda: answer)
        tape.call("tool", {"name": "read_file", "args": {"path": "a.py"}, "step": 1}, lambda: "[1]")
        odd = [float("nan"), -float("inf"), {"__float__": "NaN"}, 2**70, None, "{not json"]
        tape.call("tool", {"name": "stats", "args": None, "step": 1}, lambda: odd)
        tape.call("tool", {"name": "now", "args": {}}, lambda: "12:00")
        denied = raised_record(PermissionError("denied"))
        tape.call("tool", {"name": "rm", "args": ["/"], "step": 2}, lambda: denied, effect="write")
        tape.call("env", {"name": "HOME", "step": 2}, lambda: "/root")
        tape.call(
            "http", {"method": "GET", "url": "https://example.com/x"}, lambda: {"status": 204}
        )
        raise ValueError("the agent failed")
    return path


CASSETTES = [
    *(pytest.param(p, id=f"provider-{p.stem}") for p in PROVIDERS),
    *(pytest.param(p, id=p.stem) for p in OLDER),
    pytest.param(every_kind, id="every-kind"),
]


def _cassette(source: Path | Any, tmp_path: Path) -> Path:
    return source if isinstance(source, Path) else source(tmp_path / "every_kind.jsonl")


def _cli(*args: str | Path) -> Any:
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def _export(cassette: Path, tmp_path: Path) -> Path:
    exported = tmp_path / f"{cassette.stem}.otlp.json"
    assert _cli("export", "--otel", cassette, "-o", exported).exit_code == 0
    return exported


def _diff(a: Path, b: Path) -> tuple[int, dict[str, Any]]:
    """``tracetape diff A B --format json`` under the strictest gate: its exit code, and its
    report without the names of the inputs."""
    result = _cli("diff", a, b, "--format", "json", "--fail-on", STRICT)
    report = json.loads(result.stdout)
    report.pop("inputs")
    return result.exit_code, report


@pytest.mark.parametrize("source", CASSETTES)
def test_a_cassette_and_its_export_are_the_same_run_to_diff(source: Any, tmp_path: Path) -> None:
    """``diff A.jsonl A.otlp.json`` exits 0 under the strictest ``--fail-on`` (no finding, no
    root of any cause) and reports exactly what ``diff A.jsonl A.jsonl`` does: the same run,
    calls, steps, tokens, cost, duration, ending and final answer, no divergence, no drift."""
    cassette = _cassette(source, tmp_path)
    exported = _export(cassette, tmp_path)
    code, report = _diff(cassette, exported)
    assert code == 0, report
    assert report["origin"] is None and report["divergence"] is None
    assert report["counts"] == {} and report["findings"] == []
    assert report == _diff(cassette, cassette)[1]


def _read(path: Path, fmt: TraceFormat) -> tuple[Any, str | None]:
    """The fields the diff reads of each record of a trace (a cassette's steps filled in, as
    the analysis reads them; NaN tagged, to compare equal), and how the recording ended."""
    sources: list[TraceSource] = []
    records = list(read_records(path, fmt, sources=sources))
    if fmt is TraceFormat.CASSETTE:
        records = list(fill_steps(records))
    return tag_values([[getattr(r, f) for f in FIELDS] for r in records]), sources[0].ended


@pytest.mark.parametrize("source", CASSETTES)
def test_every_record_reads_back_whole(source: Any, tmp_path: Path) -> None:
    """Each record read from the export equals the one read from the cassette in every field
    the diff reads, the recording ends as it did, and the export is a valid
    ``ExportTraceServiceRequest``."""
    cassette = _cassette(source, tmp_path)
    exported = _export(cassette, tmp_path)
    json_format.Parse(exported.read_text(), trace_service_pb2.ExportTraceServiceRequest())
    assert _read(exported, TraceFormat.OTLP) == _read(cassette, TraceFormat.CASSETTE)


def _without(doc: dict[str, Any], attribute: str) -> dict[str, Any]:
    for span in doc["resourceSpans"][0]["scopeSpans"][0]["spans"]:
        span["attributes"] = [kv for kv in span["attributes"] if kv["key"] != attribute]
    return doc


@pytest.mark.parametrize(
    ("attribute", "cassette", "in_diff"),
    [
        pytest.param("tracetape.usage", "providers/groq-stream.jsonl", True, id="usage"),
        pytest.param("tracetape.tokens", "providers/groq-stream.jsonl", True, id="tokens"),
        pytest.param("tracetape.api", "providers/groq-stream.jsonl", True, id="api"),
        pytest.param("tracetape.input", "providers/groq.jsonl", True, id="params"),
        pytest.param("gen_ai.tool.definitions", "providers/groq.jsonl", True, id="tools"),
        pytest.param("gen_ai.input.messages", "providers/anthropic.jsonl", True, id="messages"),
        pytest.param("gen_ai.output.messages", "providers/gemini.jsonl", True, id="response"),
        pytest.param("gen_ai.tool.name", "providers/cohere.jsonl", True, id="tool-name"),
        pytest.param("gen_ai.tool.call.arguments", "providers/ollama.jsonl", True, id="args"),
        pytest.param("gen_ai.tool.call.result", "providers/mistral.jsonl", True, id="result"),
        pytest.param("tracetape.step", "providers/bedrock-converse.jsonl", True, id="step"),
        pytest.param("tracetape.ms", "providers/openai-chat.jsonl", True, id="duration"),
        pytest.param("tracetape.effect", "providers/openai-chat.jsonl", False, id="effect"),
        pytest.param("gen_ai.conversation.id", "providers/openai-chat.jsonl", True, id="run"),
        pytest.param("tracetape.key", "recorded_by_the_seed.jsonl", True, id="key-of-no-input"),
        # The analysis keeps a run's ending by its id: both sides' here, whichever file said.
        pytest.param(
            "tracetape.ended", "recorded_with_match_rules_and_an_ending.jsonl", False, id="ending"
        ),
        pytest.param("tracetape.output", "", True, id="env-output"),
        pytest.param("tracetape.bigint", "", False, id="bigint"),
    ],
)
def test_leaving_a_field_out_of_the_export_breaks_the_round_trip(
    attribute: str, cassette: str, in_diff: bool, tmp_path: Path
) -> None:
    """The round-trip tests above notice each field the export carries: without it, the
    records read back differ from the cassette's, and (where the diff compares that field)
    ``diff`` of the cassette and its export no longer reports what the cassette against
    itself does."""
    path = FIXTURES / cassette if cassette else every_kind(tmp_path / "every_kind.jsonl")
    cut = tmp_path / "cut.otlp.json"
    cut.write_text(json.dumps(_without(cassette_to_otlp(path), attribute)))
    assert _read(cut, TraceFormat.OTLP) != _read(path, TraceFormat.CASSETTE)
    if in_diff:
        assert _diff(path, cut) != _diff(path, path)


def test_an_export_holds_no_secret_its_cassette_redacted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The export is made from the redacted cassette: a key in a tool's arguments, its
    output and an environment read is in neither file, and its redaction mark is in both."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    path = tmp_path / "run.jsonl"
    with Tape(path, mode="record", harness_sha="h") as tape:
        headers = {"Authorization": f"Bearer {KEY}"}
        tape.call("tool", {"name": "fetch", "args": {"headers": headers}}, lambda: {"token": KEY})
        tape.call("env", {"name": "OPENAI_API_KEY"}, lambda: KEY)
    exported = _export(path, tmp_path).read_text()
    assert KEY not in path.read_text()
    assert KEY not in exported
    assert exported.count("[REDACTED:") == path.read_text().count("[REDACTED:") == 3


def test_an_export_written_before_read_back_still_imports() -> None:
    """An export of an earlier version (no ``tracetape.export`` on its spans) is read with the
    GenAI conventions, as it was: its model and tool calls, its run named by its spans."""
    records = list(read_records(FIXTURES / "exported_before_read_back.otlp.json"))
    assert [(r.kind, r.name, r.step, r.tokens, r.run) for r in records] == [
        ("llm", "gpt-x", 1, 15, "run_7"),
        ("tool", "read_file", 1, None, "run_7"),
    ]
    assert records[1].input == {"name": "read_file", "args": {"path": "a.py"}, "step": 1}
    assert records[1].out == "print(1)"


def _spans(doc: dict[str, Any]) -> list[dict[str, Any]]:
    spans: list[dict[str, Any]] = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
    return spans


@pytest.mark.parametrize(
    ("attribute", "value"),
    [
        pytest.param("tracetape.kind", {"intValue": "1"}, id="kind-not-a-string"),
        pytest.param("tracetape.step", {"stringValue": "2"}, id="step-not-an-integer"),
        pytest.param("tracetape.tokens", {"intValue": "-1"}, id="tokens-negative"),
        pytest.param("tracetape.ms", {"stringValue": "fast"}, id="ms-not-a-number"),
        pytest.param("tracetape.usage", {"stringValue": '{"input": -3}'}, id="usage-negative"),
        pytest.param("tracetape.input", {"stringValue": "{cut"}, id="input-not-json"),
        pytest.param("gen_ai.tool.call.result", {"intValue": "3"}, id="output-not-json-text"),
    ],
)
def test_a_read_back_attribute_tracetape_cannot_keep_is_refused_by_name(
    attribute: str, value: dict[str, Any], tmp_path: Path
) -> None:
    """A span of an export whose own attribute was edited to another type, range or text is
    refused naming the span and attribute, not a crash nor a record of the wrong type."""
    doc = cassette_to_otlp(FIXTURES / "providers" / "groq.jsonl")
    tool = _spans(doc)[2]
    tool["attributes"] = [kv for kv in tool["attributes"] if kv["key"] != attribute]
    tool["attributes"].append({"key": attribute, "value": value})
    path = tmp_path / "edited.otlp.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(TraceError, match=re.escape(f"spans[2].attributes.{attribute}")):
        list(read_records(path))
    skipped = list(read_records(path, skip_bad_lines=True))
    assert len(skipped) == len(_spans(doc)) - 2  # the root, and the refused span


@pytest.mark.parametrize("seed", ["1", "2"])
def test_an_export_is_the_same_in_every_process(seed: str, tmp_path: Path) -> None:
    """Two processes (their string hashes seeded apart) export one cassette byte for byte
    alike: no attribute's place depends on a set's order."""
    path = FIXTURES / "providers" / "bedrock-converse.jsonl"
    env = {**os.environ, "PYTHONHASHSEED": seed}
    command = [sys.executable, "-m", "tracetape", "export", "--otel", str(path)]
    printed = subprocess.run(command, env=env, capture_output=True, check=True).stdout
    assert json.loads(printed) == cassette_to_otlp(path)
    assert printed.decode().rstrip("\n") == json.dumps(cassette_to_otlp(path), ensure_ascii=False)
