"""The Anthropic provider: usage (cache tokens included) and asked tool calls, whole or
streamed; the API key never stored."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anthropic
import pytest
from fakeserver import FakeServer

import tracetape
from tracetape import Tape, read_cassette
from tracetape.integrations.providers import Usage, provider

KEY = "sk-ant-api03-usage0123456789abcdefghijklmn"


@pytest.mark.parametrize("stream", [False, True])
def test_every_recorded_answer_carries_its_usage(
    tmp_path: Path, server: FakeServer, stream: bool
) -> None:
    """A Messages answer's usage (streamed: ``message_start`` then ``message_delta``) fills the
    record's ``tokens`` and ``usage``; the key is in no cassette byte."""
    path = tmp_path / "run.jsonl"
    client = anthropic.Anthropic(base_url=server.base_url, api_key=KEY, max_retries=0)
    messages: Any = [{"role": "user", "content": "sum 1 to 0"}]
    with Tape(path, mode="record") as tape, tracetape.patch_sdks(tape):
        if stream:
            with client.messages.stream(model="m", max_tokens=9, messages=messages) as events:
                assert events.get_final_text() == "The total is 0."
        else:
            client.messages.create(model="m", max_tokens=9, messages=messages)
    (rec,) = read_cassette(path).records
    assert (rec.api, rec.tokens, rec.usage) == ("anthropic.messages", 2, {"input": 1, "output": 1})
    assert KEY not in path.read_text()


def test_cache_tokens_are_input_tokens_too() -> None:
    """Anthropic counts cached input apart: all of it is the call's input, the read part is
    ``cached``."""
    usage = {
        "input_tokens": 10,
        "cache_creation_input_tokens": 5,
        "cache_read_input_tokens": 100,
        "output_tokens": 7,
    }
    assert provider("anthropic").usage({"body": {"usage": usage}}) == Usage(115, 7, 100)


def test_streamed_tool_use_is_assembled_from_its_json_deltas() -> None:
    """A streamed answer asks for each ``tool_use`` block its JSON deltas assemble."""
    events = [
        {"data": {"type": "content_block_start", "index": 1,
                  "content_block": {"type": "tool_use", "name": "add", "input": {}}}},
        {"data": {"type": "content_block_delta", "index": 1,
                  "delta": {"type": "input_json_delta", "partial_json": '{"a": 1'}}},
        {"data": {"type": "content_block_delta", "index": 1,
                  "delta": {"type": "input_json_delta", "partial_json": ', "b": 2}'}}},
        {"data": {"type": "message_stop"}},
    ]  # fmt: skip
    asked = provider("anthropic").asks({"events": events})
    assert [(a.name, a.args) for a in asked] == [("add", {"a": 1, "b": 2})]


def test_the_answer_text_is_its_text_blocks_whole_or_streamed() -> None:
    body = {"content": [{"type": "text", "text": "Let me look. "},
                        {"type": "tool_use", "name": "add", "input": {}},
                        {"type": "text", "text": "Done."}]}  # fmt: skip
    events = [
        {"data": {"type": "content_block_delta", "index": 0,
                  "delta": {"type": "text_delta", "text": "Let me "}}},
        {"data": {"type": "content_block_delta", "index": 0,
                  "delta": {"type": "text_delta", "text": "look."}}},
        {"data": {"type": "content_block_delta", "index": 1,
                  "delta": {"type": "input_json_delta", "partial_json": "{}"}}},
    ]  # fmt: skip
    anthropic = provider("anthropic")
    assert anthropic.text({"body": body}) == "Let me look. Done."
    assert anthropic.text({"events": events}) == "Let me look."
    assert anthropic.text({"body": {"content": []}}) is None
