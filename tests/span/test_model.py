"""Spans read from every format that keeps tool results, and found by id."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from examples.agent import ScriptedModel, run
from hypothesis import given
from hypothesis import strategies as st

from tracetape import SpanError, Tape, TraceError
from tracetape.formats.otlp import cassette_to_otlp
from tracetape.span import Span, emitted_calls, find_span, load_span, read_spans

TASK = "Find why the parser drops the last row of CSV exports"

SEED_SPAN = {
    "span_id": "7f3c",
    "tool_call": {"argv": ["git", "diff", "--stat"], "env_digest": "sha256:9a1e", "timeout_s": 30},
    "tool_result": {"exit_code": 0, "stdout": " 3 files changed, 41 insertions(+)", "stderr": ""},
    "model_decision": {"tool_name": "git_diff_stat", "args": {}, "model_id": "<redacted>"},
}


def record_agent(path: Path, task: str = TASK) -> Path:
    with Tape(path, mode="record") as tape:
        run(task, tape, ScriptedModel(latency_s=0))
    return path


def test_the_seed_span_jsonl_reads_as_it_is(tmp_path: Path) -> None:
    """Every field of the seed's span record is kept; the tool is the decision's name."""
    trace = tmp_path / "trace.jsonl"
    other = {**SEED_SPAN, "span_id": "8a01", "tool_result": {"exit_code": 1}}
    trace.write_text(json.dumps(SEED_SPAN) + "\n\n" + json.dumps(other) + "\n")
    spans = read_spans(trace)
    assert [(s.span_id, s.tool, s.step, s.exit_code, s.line) for s in spans] == [
        ("7f3c", "git_diff_stat", 1, 0, 1),
        ("8a01", "git_diff_stat", 2, 1, 3),
    ]
    first = spans[0]
    assert first.tool_call == SEED_SPAN["tool_call"]
    assert first.tool_result == SEED_SPAN["tool_result"]
    assert first.model_decision == SEED_SPAN["model_decision"]
    assert first.argv == ["git", "diff", "--stat"]
    again = Span.from_dict(first.to_dict())
    assert (again.tool_call, again.tool_result, again.model_decision) == (
        first.tool_call,
        first.tool_result,
        first.model_decision,
    )


def test_a_cassette_tool_record_is_a_span_with_the_preceding_model_decision(
    tmp_path: Path,
) -> None:
    """The decision is the run's llm record before the tool: prompt, schema, reply, and the
    call the model emitted."""
    spans = read_spans(record_agent(tmp_path / "run.jsonl"))
    assert [(s.tool, s.step, s.effect) for s in spans] == [
        ("search_issues", 1, "read"),
        ("read_file", 2, "read"),
        ("post_comment", 3, "irreversible"),
    ]
    search = spans[0]
    assert search.argv is None and search.args == {"q": "parser drops exports"}
    decision = search.model_decision
    assert decision is not None
    assert decision["tool_name"] == "search_issues"
    assert decision["args"] == {"q": "parser drops exports"}
    assert decision["model_id"] == "scripted-1"
    assert decision["messages"] == [{"role": "user", "content": TASK}]
    assert [t["function"]["name"] for t in decision["tools"]] == [
        "post_comment",
        "read_file",
        "search_issues",
    ]
    assert len(search.span_id) == 16 and decision["key"].startswith("llm:")


def test_a_cassette_span_id_is_stable_across_recordings_of_the_same_call(tmp_path: Path) -> None:
    """The id is the call's key: the same call in two runs has the same id."""
    a = read_spans(record_agent(tmp_path / "a.jsonl"))
    b = read_spans(record_agent(tmp_path / "b.jsonl"))
    assert [s.span_id for s in a] == [s.span_id for s in b]


def test_otlp_execute_tool_spans_are_spans(tmp_path: Path) -> None:
    """An OTLP/JSON trace (here exported from a cassette) gives the same tool calls."""
    cassette = record_agent(tmp_path / "run.jsonl")
    otlp = tmp_path / "run.otlp.json"
    otlp.write_text(json.dumps(cassette_to_otlp(cassette)))
    spans = read_spans(otlp)
    assert [(s.tool, s.args) for s in spans] == [(s.tool, s.args) for s in read_spans(cassette)]
    assert all(len(s.span_id) == 16 for s in spans)
    assert spans[0].model_decision is not None
    assert spans[0].model_decision["messages"] == [{"role": "user", "content": TASK}]


def test_a_seed_jsonl_trace_has_no_spans(tmp_path: Path) -> None:
    """It keeps only output digests: a clear error, not an empty list."""
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"run_id":"r1","step":1,"tool":"ls","args":{},"output_sha":"ab"}\n')
    with pytest.raises(SpanError, match="keeps only a digest of each tool's output"):
        read_spans(trace)


def test_a_malformed_span_line_names_file_line_and_field(tmp_path: Path) -> None:
    """The span reader's errors reach the user unchanged."""
    trace = tmp_path / "t.jsonl"
    bad = '{"span_id": "x", "tool_call": {}, "effect": "delete"}'
    trace.write_text(json.dumps(SEED_SPAN) + "\n" + bad + "\n")
    with pytest.raises(TraceError, match=r"t\.jsonl:2: field 'effect'"):
        read_spans(trace)
    assert [s.span_id for s in read_spans(trace, skip_bad_lines=True)] == ["7f3c"]


def test_find_span_takes_an_id_or_its_unique_start() -> None:
    """Exact ids win; a prefix must be unique; a miss lists the ids."""
    spans = [Span.from_dict({**SEED_SPAN, "span_id": i}) for i in ("7f3c", "7f3d", "9a")]
    assert find_span(spans, "9", "t").span_id == "9a"
    assert find_span(spans, "7f3c", "t").span_id == "7f3c"
    with pytest.raises(SpanError, match="start of several span ids"):
        find_span(spans, "7f", "t")
    with pytest.raises(SpanError, match=r"no span 'zz' \(spans: 7f3c, 7f3d, 9a"):
        find_span(spans, "zz", "t")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        pytest.param([], "a span is a JSON object", id="not-an-object"),
        pytest.param({"tool_call": {}}, "field span_id: missing", id="no-id"),
        pytest.param({"span_id": "1"}, "field tool_call: missing", id="no-call"),
        pytest.param({"span_id": "1", "tool_call": {}, "step": "2"}, "field step", id="step"),
        pytest.param(
            {"span_id": "1", "tool_call": {}, "effect": "delete"}, "field effect", id="effect"
        ),
        pytest.param(
            {"span_id": "1", "tool_call": {}, "model_decision": []},
            "field model_decision",
            id="decision",
        ),
        pytest.param(
            {"span_id": "1", "tool_call": {"argv": []}}, "tool_call.argv", id="argv-empty"
        ),
        pytest.param(
            {"span_id": "1", "tool_call": {"argv": "ls -l"}}, "tool_call.argv", id="argv-str"
        ),
        pytest.param(
            {"span_id": "1", "tool_call": {"argv": ["ls", 1]}}, "tool_call.argv", id="argv-int"
        ),
        pytest.param(
            {"span_id": "1", "tool_call": {"argv": ["a\0b"]}}, "tool_call.argv", id="argv-nul"
        ),
        pytest.param(
            {"span_id": "1", "tool_call": {"timeout_s": "9"}},
            "tool_call.timeout_s",
            id="timeout-str",
        ),
        pytest.param(
            {"span_id": "1", "tool_call": {"timeout_s": 0}}, "tool_call.timeout_s", id="timeout-0"
        ),
        pytest.param(
            {"span_id": "1", "tool_call": {"timeout_s": True}},
            "tool_call.timeout_s",
            id="timeout-bool",
        ),
        pytest.param({"span_id": "1", "tool_call": {"cwd": 5}}, "tool_call.cwd", id="cwd"),
        pytest.param({"span_id": "1", "tool_call": {"env": {"A": 1}}}, "tool_call.env", id="env"),
        pytest.param(
            {"span_id": "1", "tool_call": {"env_digest": 1}}, "tool_call.env_digest", id="digest"
        ),
        pytest.param(
            {"span_id": "1", "tool_call": {"env_names": "A"}}, "tool_call.env_names", id="names"
        ),
    ],
)
def test_a_bad_span_names_its_field(data: Any, message: str) -> None:
    with pytest.raises(SpanError, match=message):
        Span.from_dict(data, "span.json")


def test_load_span_errors_say_what_to_do(tmp_path: Path) -> None:
    """Missing file, a JSONL trace given as a span file, and a good file."""
    with pytest.raises(SpanError, match="no such span file"):
        load_span(tmp_path / "none.json")
    trace = tmp_path / "t.jsonl"
    trace.write_text(json.dumps(SEED_SPAN) + "\n" + json.dumps(SEED_SPAN) + "\n")
    with pytest.raises(SpanError, match="takes --id"):
        load_span(trace)
    one = tmp_path / "span.json"
    one.write_text(json.dumps(SEED_SPAN, indent=2))
    assert load_span(one).span_id == "7f3c"


@pytest.mark.parametrize(
    ("reply", "calls"),
    [
        pytest.param(
            {"output": [{"type": "function_call", "name": "add", "arguments": '{"a": 1}'}]},
            [("add", {"a": 1})],
            id="responses",
        ),
        pytest.param(
            {"tool": "read_file", "args": {"path": "x"}}, [("read_file", {"path": "x"})], id="plain"
        ),
        pytest.param(
            [
                {
                    "role": "assistant",
                    "parts": [{"type": "tool_call", "name": "add", "arguments": {"a": 2}}],
                }
            ],
            [("add", {"a": 2})],
            id="otlp",
        ),
        pytest.param({"choices": [{"message": {"content": "hi"}}]}, [], id="text-only"),
        pytest.param("text", [], id="a-string"),
    ],
)
def test_emitted_calls_reads_every_reply_shape(reply: Any, calls: list[Any]) -> None:
    assert emitted_calls(reply) == calls


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(),
        lambda c: st.lists(c) | st.dictionaries(st.text(), c),
        max_leaves=20,
    )
)
def test_emitted_calls_never_raises_on_any_json(value: Any) -> None:
    """A reply of any shape gives a list of calls, never an exception."""
    assert isinstance(emitted_calls(value), list)
    assert isinstance(
        emitted_calls({"choices": [value], "output": [value], "content": [value]}), list
    )


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4),
    max_leaves=12,
)


@given(
    result=json_values,
    decision=st.dictionaries(st.text(max_size=8), json_values, max_size=4),
    argv=st.lists(st.text(min_size=1).filter(lambda a: "\0" not in a), min_size=1, max_size=4),
    step=st.none() | st.integers(0, 10**6),
)
def test_a_span_reads_back_what_it_wrote(
    result: Any, decision: dict[str, Any], argv: list[str], step: int | None
) -> None:
    """to_dict / from_dict round-trip every field, through JSON."""
    span = Span.from_dict(
        {"span_id": "s", "step": step, "tool_call": {"argv": argv, "timeout_s": 3},
         "tool_result": result, "model_decision": decision}
    )  # fmt: skip
    again = Span.from_dict(json.loads(json.dumps(span.to_dict())))
    assert again == span


@given(
    before=st.text(max_size=20), after=st.text(max_size=20), a=st.uuids(), b=st.uuids(),
    name=st.from_regex(r"tmp[a-z0-9_]{1,10}", fullmatch=True),
)  # fmt: skip
def test_a_uuid_or_a_temp_path_never_changes_a_fingerprint(
    before: str, after: str, a: Any, b: Any, name: str
) -> None:
    """Output that differs only in a UUID or a temp folder's name has one fingerprint."""
    from tracetape import fingerprint

    one = {"stdout": f"{before} {a} /tmp/{name}/x {after}"}
    two = {"stdout": f"{before} {b} /tmp/{name[::-1]}q/x {after}"}
    assert fingerprint(one) == fingerprint(two)
