"""Cohere's v2 API through its official SDK (``cohere``: ``ClientV2``, ``AsyncClientV2``),
against the fake of ``fake_cohere``: a tool-using agent, sync and async, whole and streamed;
embeddings as a one-shot call; errors; usage; an unmodified script under ``tracetape run``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cohere
import httpx
import pytest

from tests.integrations.frameworks.conftest import record_replay_miss
from tracetape import Tape, patch_sdks, read_cassette
from tracetape.integrations.providers import Usage, match_route, provider

from .agent_checks import (
    ANSWER,
    MISSING,
    TASK,
    TOOLS,
    WAYS,
    Agent,
    add,
    check_agent,
    check_error,
    check_miss,
    check_one_shot,
    check_split_secret,
    to_fake,
    usage_for,
)
from .fake_cohere import FakeCohere

# cohere 7.3.1's own parsing of a whole chat answer (not ours to fix)
pytestmark = pytest.mark.filterwarnings("ignore:The `__fields__` attribute is deprecated")

KEY = "co0123456789abcdefghijklmnopqrstuvwxyzABCD"
MODEL = "command-a-03-2025"


@pytest.fixture
def fake() -> Iterator[FakeCohere]:
    server = FakeCohere().start()
    try:
        yield server
    finally:
        server.stop()


def _client(base: str, *, aio: bool = False) -> Any:
    """A client of api.cohere.com whose requests reach the fake."""
    if aio:
        http = httpx.AsyncClient(transport=to_fake(httpx, base, aio=True))
        return cohere.AsyncClientV2(api_key=KEY, httpx_client=http)
    return cohere.ClientV2(api_key=KEY, httpx_client=httpx.Client(transport=to_fake(httpx, base)))


class _Streamed:
    """An answer assembled from stream events."""

    def __init__(self) -> None:
        self.text, self.plan = "", ""
        self.calls: dict[int, dict[str, Any]] = {}

    def take(self, event: Any) -> None:
        message = getattr(getattr(event, "delta", None), "message", None)
        if event.type == "content-delta":
            self.text += message.content.text
        elif event.type == "tool-plan-delta":
            self.plan += message.tool_plan
        elif event.type == "tool-call-start":
            call = message.tool_calls
            self.calls[event.index] = {"id": call.id, "name": call.function.name, "arguments": ""}
        elif event.type == "tool-call-delta":
            self.calls[event.index]["arguments"] += message.tool_calls.function.arguments


def _step(messages: list[Any], text: str, plan: str, calls: list[dict[str, Any]]) -> str | None:
    """Append the answer and its tool results; the answer when it called no tool."""
    if not calls:
        return text
    tool_calls = [
        {
            "id": c["id"],
            "type": "function",
            "function": {"name": c["name"], "arguments": c["arguments"]},
        }
        for c in calls
    ]
    messages.append({"role": "assistant", "tool_plan": plan, "tool_calls": tool_calls})
    for call in calls:
        result = add(**json.loads(call["arguments"]))
        messages.append({"role": "tool", "tool_call_id": call["id"], "content": str(result)})
    return None


def _whole(reply: Any) -> tuple[str, str, list[dict[str, Any]]]:
    message = reply.message
    calls = [
        {"id": c.id, "name": c.function.name, "arguments": c.function.arguments}
        for c in message.tool_calls or ()
    ]
    return "".join(c.text for c in message.content or ()), message.tool_plan or "", calls


def _loop(client: Any, task: str, stream: bool) -> str:
    messages: list[Any] = [{"role": "user", "content": task}]
    for _ in range(10):
        if stream:
            streamed = _Streamed()
            for event in client.chat_stream(model=MODEL, messages=messages, tools=TOOLS):
                streamed.take(event)
            answer = (streamed.text, streamed.plan, list(streamed.calls.values()))
        else:
            answer = _whole(client.chat(model=MODEL, messages=messages, tools=TOOLS))
        final = _step(messages, *answer)
        if final is not None:
            return final
    raise AssertionError("no answer after 10 steps")


async def _aloop(client: Any, task: str, stream: bool) -> str:
    messages: list[Any] = [{"role": "user", "content": task}]
    for _ in range(10):
        if stream:
            streamed = _Streamed()
            async for event in client.chat_stream(model=MODEL, messages=messages, tools=TOOLS):
                streamed.take(event)
            answer = (streamed.text, streamed.plan, list(streamed.calls.values()))
        else:
            answer = _whole(await client.chat(model=MODEL, messages=messages, tools=TOOLS))
        final = _step(messages, *answer)
        if final is not None:
            return final
    raise AssertionError("no answer after 10 steps")


def _agent(base: str) -> Agent:
    def run(task: str, aio: bool, stream: bool) -> Any:
        return (_aloop if aio else _loop)(_client(base, aio=aio), task, stream)

    return run


@pytest.mark.parametrize(("aio", "stream"), WAYS)
def test_agent_records_and_replays_offline(
    tmp_path: Path, fake: FakeCohere, aio: bool, stream: bool
) -> None:
    """A tool loop replays offline: steps 1..4, tools at their asking step, usage read from
    ``usage.tokens`` (streamed: ``message-end``), ``cohere.chat``, no key stored."""
    agent = _agent(fake.base_url)
    path = tmp_path / "run.jsonl"
    check_agent(path, fake, agent, aio=aio, stream=stream, api="cohere.chat", key=KEY)


@pytest.mark.parametrize(("aio", "stream"), WAYS)
def test_one_word_edit_is_a_replay_miss(
    tmp_path: Path, fake: FakeCohere, aio: bool, stream: bool
) -> None:
    """Changing one word of the task misses at step 1, naming the message and both words."""
    agent = _agent(fake.base_url)
    check_miss(tmp_path / "run.jsonl", fake, agent, "messages[0].content", aio=aio, stream=stream)


def test_a_stream_is_stored_as_its_named_events(tmp_path: Path, fake: FakeCohere) -> None:
    """A streamed answer is stored event by event with its ``event:`` names, and ends (whole)
    at ``message-end``, with no ``[DONE]``."""
    path = tmp_path / "run.jsonl"
    with Tape(path, mode="record") as tape, patch_sdks(tape):
        _loop(_client(fake.base_url), TASK, stream=True)
    first = read_cassette(path).records[0].out
    assert [e["event"] for e in first["events"]] == [
        "message-start",
        "tool-plan-delta",
        "tool-call-start",
        "tool-call-delta",
        "tool-call-delta",
        "tool-call-end",
        "message-end",
    ]
    assert all(e["event"] == e["data"]["type"] for e in first["events"])
    assert "complete" not in first


def test_embed_is_a_one_shot_call(tmp_path: Path, fake: FakeCohere) -> None:
    """``/v2/embed`` carries no conversation: step 1, ``cohere.embed``, its usage from
    ``meta``, replayed offline to the same vectors."""

    def embed() -> Any:
        reply = _client(fake.base_url).embed(
            model="embed-v4.0",
            texts=["a", "b"],
            input_type="search_document",
            embedding_types=["float"],
        )
        return reply.embeddings.float_

    rec = check_one_shot(tmp_path / "run.jsonl", fake, embed)
    assert rec.out["body"]["embeddings"]["float"] == [[0.5, -0.25]] * 2
    read, wrote = usage_for(2)
    assert (rec.api, rec.step, rec.usage) == ("cohere.embed", 1, {"input": read, "output": wrote})


def test_an_http_error_replays_as_the_sdks_error(tmp_path: Path, fake: FakeCohere) -> None:
    """A 404 (an unknown model) is recorded as the model call's answer and replays as the
    SDK's ``NotFoundError`` with the same body."""
    messages = [{"role": "user", "content": TASK}]
    recorded, replayed = check_error(
        tmp_path / "run.jsonl",
        fake,
        lambda: _client(fake.base_url).chat(model=MISSING, messages=messages),
        cohere.NotFoundError,
    )
    assert replayed.status_code == recorded.status_code == 404
    assert replayed.body == recorded.body and MISSING in replayed.body["message"]


@pytest.mark.parametrize(
    ("event", "text_of"),
    [
        pytest.param(
            lambda piece: {"type": "content-delta", "index": 0,
                           "delta": {"message": {"content": {"text": piece}}}},
            lambda data: data["delta"]["message"]["content"]["text"],
            id="content-delta",
        ),
        pytest.param(
            lambda piece: {"type": "tool-call-delta", "index": 0, "delta": {"message": {
                "tool_calls": {"function": {"arguments": piece}}}}},
            lambda data: data["delta"]["message"]["tool_calls"]["function"]["arguments"],
            id="tool-call-delta",
        ),
    ],
)  # fmt: skip
def test_a_secret_split_over_streamed_events_is_redacted(event: Any, text_of: Any) -> None:
    """A key streamed in pieces over several events is found in the text they assemble."""
    check_split_secret("cohere", event, text_of)


@pytest.mark.parametrize(
    ("out", "usage"),
    [
        pytest.param(
            {"body": {"usage": {"billed_units": {"input_tokens": 5, "output_tokens": 2},
                                "tokens": {"input_tokens": 70, "output_tokens": 2},
                                "cached_tokens": 64}}},
            Usage(70, 2, 64),
            id="tokens-before-billed-units",
        ),
        pytest.param(
            {"body": {"usage": {"billed_units": {"input_tokens": 5.0, "output_tokens": 2.0}}}},
            Usage(5, 2, None),
            id="billed-units-as-numbers",
        ),
        pytest.param(
            {"events": [{"event": "message-start", "data": {"type": "message-start"}},
                        {"event": "message-end", "data": {"type": "message-end", "delta": {
                            "usage": {"tokens": {"input_tokens": 9, "output_tokens": 4}}}}}]},
            Usage(9, 4, None),
            id="stream",
        ),
        pytest.param({"body": {"message": {}, "usage": {}}}, None, id="none-reported"),
        pytest.param({"body": {"usage": {"tokens": {"input_tokens": 1.5}}}}, None,
                     id="not-a-count"),
    ],
)  # fmt: skip
def test_usage_is_read_where_cohere_puts_it(out: dict[str, Any], usage: Usage | None) -> None:
    """``tokens`` (the model's own count) before ``billed_units``, and ``cached_tokens``; a
    stream's in ``message-end``; an answer without counts reports none."""
    assert provider("cohere").usage(out) == usage


@pytest.mark.parametrize(
    ("host", "path", "api"),
    [
        ("api.cohere.com", "/v2/chat", "cohere.chat"),
        ("api.cohere.com", "/v2/embed", "cohere.embed"),
        ("127.0.0.1", "/v2/chat", "cohere.chat"),
        ("api.cohere.com", "/v1/chat", None),
    ],
)
def test_routes(host: str, path: str, api: str | None) -> None:
    """The v2 chat and embed endpoints are Cohere's on any host; v1 is not taped as a model."""
    found = match_route("POST", host, path)
    assert (found.api if found else None) == api


SCRIPT = """\
import json
import sys

import cohere

client = cohere.ClientV2(base_url=sys.argv[1])  # the key from CO_API_KEY
tools = [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}]
messages = [{"role": "user", "content": sys.argv[2]}]
while True:
    message = client.chat(model="command-a-03-2025", messages=messages, tools=tools).message
    if not message.tool_calls:
        print(message.content[0].text)
        break
    messages.append(message)
    for call in message.tool_calls:
        args = json.loads(call.function.arguments)
        result = str(args["a"] + args["b"])
        messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
"""


@pytest.mark.slow
def test_an_unmodified_script_under_tracetape_run(tmp_path: Path, fake: FakeCohere) -> None:
    """``tracetape run`` (default hook) records the script, replays it offline, and exits 3
    on a one-word edit."""
    (tmp_path / "agent.py").write_text(SCRIPT)
    record_replay_miss(
        tmp_path,
        fake,
        lambda task: ["agent.py", fake.base_url, task],
        ANSWER + "\n",
        env={"CO_API_KEY": KEY},
    )
    assert KEY not in (tmp_path / "run.jsonl").read_text()
