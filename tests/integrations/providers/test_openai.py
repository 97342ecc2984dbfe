"""The OpenAI provider: usage and route on every recorded answer, streamed or not, at both
hook levels; credentials never stored, even echoed back by the server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import openai
import pytest
from fakeserver import FakeServer
from sdk_agents import OPENAI_TOOLS, add

import tracetape
from tracetape import Tape, read_cassette
from tracetape.integrations.providers import Usage, provider
from tracetape.span import SAME, decide, read_spans

KEY = "sk-proj-usage0123456789abcdefghijklmnop"


def _client(base: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=base + "/v1", api_key=KEY, max_retries=0)


@pytest.mark.parametrize("level", ["sdk", "http"])
@pytest.mark.parametrize("stream", [False, True])
def test_every_recorded_answer_carries_its_usage(
    tmp_path: Path, server: FakeServer, level: str, stream: bool
) -> None:
    """A Chat answer's ``usage`` (a stream's last chunk, with ``include_usage``) fills the
    record's ``tokens`` and ``usage``, and the record names its route."""
    path = tmp_path / "run.jsonl"
    messages = [{"role": "user", "content": "echo hello"}]
    hook = tracetape.patch_sdks if level == "sdk" else tracetape.patch_http
    with Tape(path, mode="record") as tape, hook(tape):
        client = _client(server.base_url)
        if stream:
            options: Any = {"include_usage": True}
            chunks = client.chat.completions.create(
                model="m", messages=messages, stream=True, stream_options=options
            )
            assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        else:
            client.chat.completions.create(model="m", messages=messages)
    (rec,) = read_cassette(path).records
    assert (rec.api, rec.tokens, rec.usage) == (
        "openai.chat.completions",
        2,
        {"input": 1, "output": 1},
    )


@pytest.mark.parametrize(
    ("out", "usage"),
    [
        pytest.param(
            {"body": {"usage": {"prompt_tokens": 9, "completion_tokens": 3,
                                "prompt_tokens_details": {"cached_tokens": 4}}}},
            Usage(9, 3, 4),
            id="chat-cached",
        ),
        pytest.param(
            {"body": {"object": "response", "usage": {"input_tokens": 7, "output_tokens": 2}}},
            Usage(7, 2, None),
            id="responses",
        ),
        pytest.param(
            {"events": [
                {"data": {"type": "response.created", "response": {"usage": None}}},
                {"data": {"type": "response.completed", "response": {
                    "object": "response", "usage": {
                        "input_tokens": 5, "output_tokens": 6,
                        "input_tokens_details": {"cached_tokens": 1}}}}},
            ]},
            Usage(5, 6, 1),
            id="responses-stream",
        ),
        pytest.param({"body": {"usage": {"total_tokens": 42}}}, None, id="total-only"),
        pytest.param({"events": [{"text": "[DONE]"}]}, None, id="stream-without-usage"),
    ],
)  # fmt: skip
def test_usage_is_read_where_each_api_puts_it(out: dict[str, Any], usage: Usage | None) -> None:
    """Chat, Completions and Responses usage, whole or streamed; an answer without the parts
    reports none (never a made-up count)."""
    assert provider("openai").usage(out) == usage


def test_streamed_tool_calls_are_assembled_from_their_deltas() -> None:
    """A streamed answer asks for the tool calls its deltas assemble, by index."""
    events = [
        {"data": {"choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "function": {"name": "add", "arguments": '{"a": '}},
            {"index": 1, "function": {"name": "mul", "arguments": '{"x"'}},
        ]}}]}},
        {"data": {"choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "function": {"arguments": "1}"}},
            {"index": 1, "function": {"arguments": ": 2}"}},
        ]}}]}},
        {"text": "[DONE]"},
    ]  # fmt: skip
    asked = provider("openai").asks({"events": events})
    assert [(a.name, a.args) for a in asked] == [("add", {"a": 1}), ("mul", {"x": 2})]


def test_a_key_the_server_echoes_never_reaches_the_cassette(
    tmp_path: Path, server: FakeServer
) -> None:
    """The credential a request sent is learned as a secret: an answer quoting it back is
    stored redacted, and no cassette byte holds it."""
    path = tmp_path / "run.jsonl"
    with Tape(path, mode="record") as tape, tracetape.patch_sdks(tape):
        reply = _client(server.base_url).chat.completions.create(
            model="m", messages=[{"role": "user", "content": "show header authorization"}]
        )
    assert reply.choices[0].message.content == f"you sent Bearer {KEY}"
    text = path.read_text()
    assert KEY not in text and "[REDACTED:" in text


@pytest.mark.parametrize(
    ("out", "text"),
    [
        pytest.param({"body": {"choices": [{"message": {"content": "Sunny."}}]}}, "Sunny.",
                     id="chat"),
        pytest.param({"body": {"choices": [{"message": {"content": None, "tool_calls": []}}]}},
                     None, id="chat-tool-calls-only"),
        pytest.param({"events": [
            {"data": {"choices": [{"index": 0, "delta": {"content": "Sun"}}]}},
            {"data": {"choices": [{"index": 0, "delta": {"content": "ny."}}]}},
            {"text": "[DONE]"}]}, "Sunny.", id="chat-stream"),
        pytest.param({"body": {"object": "response", "output": [
            {"type": "reasoning", "summary": []},
            {"type": "message", "content": [{"type": "output_text", "text": "Sunny."}]}]}},
            "Sunny.", id="responses"),
        pytest.param({"events": [
            {"data": {"type": "response.output_text.delta", "delta": "Sun"}},
            {"data": {"type": "response.output_text.delta", "delta": "ny."}}]}, "Sunny.",
            id="responses-stream"),
    ],
)  # fmt: skip
def test_the_answer_text_is_read_where_each_api_puts_it(out: dict[str, Any], text: Any) -> None:
    """Chat's message content, Responses' output_text parts, whole or streamed; an answer of
    tool calls alone has no text."""
    assert provider("openai").text(out) == text


def test_a_span_recorded_through_the_openai_sdk_is_decided_by_a_second_model(
    tmp_path: Path, server: FakeServer
) -> None:
    """The real openai SDK against a local fake server, a taped tool, then decide: the
    recorded request's messages and tools go to the second model, which makes the same call."""
    taped_add = tracetape.tool(add)
    client = openai.OpenAI(base_url=server.base_url + "/v1", api_key="sk-test", max_retries=0)
    path = tmp_path / "sdk.jsonl"
    with Tape(path, mode="record") as tape, tracetape.patch_sdks(tape):
        messages: list[Any] = [{"role": "user", "content": "sum 1 to 2"}]
        for _ in range(5):
            reply = client.chat.completions.create(
                model="gpt-test", messages=messages, tools=OPENAI_TOOLS, temperature=0
            )
            message = reply.choices[0].message
            messages.append(message.model_dump(exclude_none=True))
            if not message.tool_calls:
                break
            for call in message.tool_calls:
                out = taped_add(**json.loads(call.function.arguments))
                messages.append({"role": "tool", "tool_call_id": call.id, "content": str(out)})
    spans = read_spans(path)
    assert [(s.tool, s.args) for s in spans] == [
        ("add", {"a": 0, "b": 1}),
        ("add", {"a": 1, "b": 2}),
    ]
    second = spans[1]
    assert second.model_decision is not None
    assert second.model_decision["tool_name"] == "add"
    assert second.model_decision["args"] == {"a": 1, "b": 2}
    assert second.model_decision["model_id"] == "gpt-test"
    result = decide(second, "another-model", base_url=server.base_url + "/v1")
    assert result.verdict == SAME
    sent = server.requests[-1]["body"]
    assert sent["model"] == "another-model" and sent["temperature"] == 0
    assert sent["messages"] == second.model_decision["messages"]
    assert sorted(t["function"]["name"] for t in sent["tools"]) == ["add", "noop"]
