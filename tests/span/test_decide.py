"""Decision replay against a second model on 127.0.0.1 (a real HTTP endpoint)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.span.helpers import Decider, tool_call_reply
from tests.span.test_model import record_agent
from tracetape import SpanError
from tracetape.span import DIFFERENT, SAME, Span, decide, read_spans

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add two integers.",
            "parameters": {
                "type": "object",
                "properties": {"b": {"type": "integer"}, "a": {"type": "integer"}},
            },
        },
    }
]


def span(**decision: Any) -> Span:
    base = {
        "tool_name": "add",
        "args": {"a": 0, "b": 1},
        "model_id": "gpt-recorded",
        "messages": [{"role": "user", "content": "sum 1 to 3"}],
        "tools": TOOLS,
        "params": {"temperature": 0, "tool_choice": "auto", "stream": True, "model": "x"},
    }
    return Span.from_dict(
        {
            "span_id": "d1",
            "tool_call": {"name": "add", "args": {"a": 0, "b": 1}},
            "tool_result": 1,
            "model_decision": {**base, **decision},
        }
    )


def test_the_same_call_is_the_same_decision(decider: Decider) -> None:
    """Prompt and schema are sent as recorded; the emitted call's fingerprint matches."""
    decider.reply = lambda body: tool_call_reply("add", {"b": 1, "a": 0})
    result = decide(span(), "second-model", base_url=decider.base_url, api_key="sk-test")
    assert result.verdict == SAME and result.agreement == 1.0
    (request,) = decider.requests
    assert request["path"] == "/v1/chat/completions"
    assert request["headers"]["Authorization"] == "Bearer sk-test"
    body = request["body"]
    assert body["model"] == "second-model"
    assert body["messages"] == [{"role": "user", "content": "sum 1 to 3"}]
    assert body["temperature"] == 0 and body["tool_choice"] == "auto" and "stream" not in body
    # byte-identical schema: the recorded key order ("b" before "a") is kept on the wire
    assert json.dumps(TOOLS) in decider.raw[0].decode()
    assert result.lines()[-1].startswith("verdict: same decision")


def test_another_call_is_a_different_decision(decider: Decider) -> None:
    decider.reply = lambda body: tool_call_reply("add", {"a": 5, "b": 1})
    result = decide(span(), "m", base_url=decider.base_url)
    assert result.verdict == DIFFERENT
    text = "\n".join(result.lines())
    assert 'recorded decision add({"a": 0, "b": 1})' in text
    assert 'm #1: add({"a": 5, "b": 1})' in text and "same=False" in text


def test_repeat_reports_the_agreement_rate(decider: Decider) -> None:
    """Three answers, two agree: 67% and a different decision."""
    answers = iter([{"a": 0, "b": 1}, {"a": 0, "b": 1}, {"a": 9, "b": 9}])
    decider.reply = lambda body: tool_call_reply("add", next(answers))
    result = decide(span(), "m", base_url=decider.base_url, repeat=3)
    assert len(decider.requests) == 3
    assert result.agreement == pytest.approx(2 / 3)
    assert result.verdict == DIFFERENT
    assert "agreement: 2/3 (67%)" in result.lines()
    assert result.to_dict()["agreement"] == pytest.approx(2 / 3)


def test_a_reply_without_a_tool_call_is_a_different_decision_with_its_text(
    decider: Decider,
) -> None:
    decider.reply = lambda body: (200, {"choices": [{"message": {"content": "I'd rather not."}}]})
    result = decide(span(), "m", base_url=decider.base_url)
    assert result.verdict == DIFFERENT
    assert result.answers == [{"text": "I'd rather not.", "same": False}]
    assert 'no tool call; answered "I\'d rather not."' in "\n".join(result.lines())


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        pytest.param(
            (500, {"error": {"message": "overloaded"}}), "answered HTTP 500: overloaded", id="500"
        ),
        pytest.param((401, b"denied"), "answered HTTP 401: denied", id="401-text"),
        pytest.param((200, b"<html>"), "not a chat completion", id="not-json"),
        pytest.param((200, {"choices": []}), "not a chat completion", id="no-choices"),
    ],
)
def test_an_error_status_or_a_bad_reply_is_a_clear_message(
    decider: Decider, reply: tuple[int, Any], message: str
) -> None:
    decider.reply = lambda body: reply
    with pytest.raises(SpanError, match=message):
        decide(span(), "m", base_url=decider.base_url)


def test_a_timeout_is_a_clear_message(decider: Decider) -> None:
    decider.answering.clear()  # no answer until the test is over: the client's 0.2 s pass
    decider.reply = lambda body: tool_call_reply("add", {"a": 0, "b": 1})
    with pytest.raises(SpanError, match=r"did not answer within 0\.2 s; .*--timeout"):
        decide(span(), "m", base_url=decider.base_url, timeout=0.2)


def test_nothing_listening_is_a_clear_message(refused_port: int) -> None:
    url = f"http://127.0.0.1:{refused_port}/v1"
    with pytest.raises(SpanError, match=f"cannot reach {re.escape(url)}/chat/completions"):
        decide(span(), "m", base_url=url, timeout=30)


@pytest.mark.parametrize(
    ("decision", "message"),
    [
        pytest.param({"messages": None}, "records no prompt", id="no-prompt"),
        pytest.param({"tools": None}, "records no tool schema", id="no-tools"),
        pytest.param({"tools": ["add"]}, "not OpenAI's function-tool schema", id="names-only"),
        pytest.param(
            {"tools": [{"name": "add", "input_schema": {}}]}, "not OpenAI's", id="anthropic-shape"
        ),
    ],
)
def test_a_span_without_prompt_or_schema_is_refused(decision: dict[str, Any], message: str) -> None:
    with pytest.raises(SpanError, match=message):
        decide(span(**decision), "m", base_url="http://127.0.0.1:9/v1")


def test_a_cassette_span_of_the_example_agent_can_be_decided(
    tmp_path: Path, decider: Decider
) -> None:
    """The example agent records OpenAI tool schemas; its recorded decision is read from the
    scripted model's reply."""
    spans = read_spans(record_agent(tmp_path / "run.jsonl"))
    search = spans[0]
    decider.reply = lambda body: tool_call_reply("search_issues", {"q": "parser drops exports"})
    result = decide(search, "m", base_url=decider.base_url)
    assert result.verdict == SAME
    assert decider.requests[0]["body"]["tools"] == search.model_decision["tools"]  # type: ignore[index]


def test_what_the_second_model_writes_is_redacted(decider: Decider) -> None:
    """A secret in the model's arguments, text or error is a placeholder in the result."""
    key = "sk-proj-ModelLeak0123456789abcdefXYZ"
    decider.reply = lambda body: tool_call_reply("add", {"a": key})
    result = decide(span(), "m", base_url=decider.base_url)
    assert key not in str(result.to_dict()) and "[REDACTED:openai_key:" in str(result.to_dict())
    decider.reply = lambda body: (200, {"choices": [{"message": {"content": f"use {key}"}}]})
    assert key not in str(decide(span(), "m", base_url=decider.base_url).to_dict())
    decider.reply = lambda body: (500, {"error": {"message": f"bad key {key}"}})
    with pytest.raises(SpanError) as caught:
        decide(span(), "m", base_url=decider.base_url)
    assert key not in str(caught.value)
