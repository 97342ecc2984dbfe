"""Groq through its official SDK (``groq``: ``Groq``, ``AsyncGroq``), against the fake of
``fake_groq``: a tool-using agent, sync and async, whole and streamed; the SDK fast path;
streamed usage in ``x_groq``; misses with and without the SDK's retries; errors; an unmodified
script under ``tracetape run``."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import groq
import httpx
import pytest
from groq.types.chat import ChatCompletion

from tests.integrations.frameworks.conftest import record_replay_miss
from tracetape import Tape, patch_sdks
from tracetape.integrations.providers import Usage, match_route, provider

from .agent_checks import (
    ANSWER,
    MISSING,
    TASK,
    WAYS,
    chat_agent,
    check_agent,
    check_error,
    check_miss,
    to_fake,
)
from .fake_groq import FakeGroq

KEY = "gsk_0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMN"
MODEL = "llama-3.3-70b-versatile"


@pytest.fixture
def fake() -> Iterator[FakeGroq]:
    server = FakeGroq().start()
    try:
        yield server
    finally:
        server.stop()


def _client(base: str, aio: bool = False, **options: Any) -> Any:
    """A client of api.groq.com whose requests reach the fake."""
    if aio:
        http: Any = httpx.AsyncClient(transport=to_fake(httpx, base, aio=True))
        return groq.AsyncGroq(api_key=KEY, http_client=http, **options)
    http = httpx.Client(transport=to_fake(httpx, base), **options.pop("http", {}))
    return groq.Groq(api_key=KEY, http_client=http, **options)


@pytest.mark.parametrize(("aio", "stream"), WAYS)
def test_agent_records_and_replays_offline(
    tmp_path: Path, fake: FakeGroq, aio: bool, stream: bool
) -> None:
    """A tool loop replays offline: steps 1..4, tools at their asking step, usage (streamed:
    from ``x_groq.usage``), ``groq.chat.completions``, no key stored."""
    agent = chat_agent(lambda aio: _client(fake.base_url, aio), MODEL)
    path = tmp_path / "run.jsonl"
    check_agent(path, fake, agent, aio=aio, stream=stream, api="groq.chat.completions", key=KEY)


@pytest.mark.parametrize(("aio", "stream"), WAYS)
@pytest.mark.parametrize("retries", [2, 0], ids=["retries", "no-retries"])
def test_one_word_edit_is_a_replay_miss(  # noqa: PLR0917 - parametrized
    tmp_path: Path,
    fake: FakeGroq,
    monkeypatch: pytest.MonkeyPatch,
    aio: bool,
    stream: bool,
    retries: int,
) -> None:
    """Changing one word of the task misses at step 1, naming the message and both words,
    without a retry's wait: with retries the miss leaves the call at once (the retry seam);
    without, the SDK wraps it into ``APIConnectionError`` and the tape raises the miss as
    its block exits."""
    slept: list[float] = []

    async def asleep(seconds: float) -> None:
        slept.append(seconds)

    monkeypatch.setattr(time, "sleep", slept.append)
    monkeypatch.setattr(anyio, "sleep", asleep)
    agent = chat_agent(lambda aio: _client(fake.base_url, aio, max_retries=retries), MODEL)
    check_miss(tmp_path / "run.jsonl", fake, agent, "messages[0].content", aio=aio, stream=stream)
    assert slept == []


def test_a_replayed_answer_is_built_by_the_fast_path(tmp_path: Path, fake: FakeGroq) -> None:
    """At the SDK level a recorded JSON answer is validated into ``groq``'s public
    ``ChatCompletion``, and a recorded stream handed back as the SDK's own ``Stream`` of
    ``ChatCompletionChunk``, without building a request (no response reaches the client's
    hooks)."""
    path = tmp_path / "run.jsonl"
    messages = [{"role": "user", "content": "echo fast path"}]

    def ask(responses: list[Any]) -> tuple[Any, str]:
        client = _client(fake.base_url, http={"event_hooks": {"response": [responses.append]}})
        whole = client.chat.completions.create(model=MODEL, messages=messages)
        chunks = client.chat.completions.create(model=MODEL, messages=messages, stream=True)
        return whole, "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)

    with Tape(path, mode="record") as tape, patch_sdks(tape):
        recorded = ask([])
    fake.stop()
    responses: list[Any] = []
    with Tape(path, mode="replay") as tape, patch_sdks(tape):
        whole, streamed = ask(responses)
    assert type(whole) is ChatCompletion and whole == recorded[0]
    assert whole.choices[0].message.content == streamed == "fast path"
    assert responses == []


def test_an_http_error_replays_as_the_sdks_error(tmp_path: Path, fake: FakeGroq) -> None:
    """A 404 (an unknown model) is recorded as the model call's answer and replays as the
    SDK's ``NotFoundError`` with the same body, not retried."""
    messages = [{"role": "user", "content": TASK}]
    recorded, replayed = check_error(
        tmp_path / "run.jsonl",
        fake,
        lambda: _client(fake.base_url).chat.completions.create(model=MISSING, messages=messages),
        groq.NotFoundError,
    )
    assert replayed.status_code == recorded.status_code == 404
    assert replayed.body == recorded.body and "model_not_found" in str(replayed.body)


def test_a_connection_failure_replays_as_the_sdks_error(tmp_path: Path, fake: FakeGroq) -> None:
    """A call that got no response (the server is gone) is a decision too: the fast path
    replays it as the SDK raised it, ``APIConnectionError`` caused by httpx's error."""
    path = tmp_path / "run.jsonl"
    fake.stop()
    messages = [{"role": "user", "content": TASK}]
    raised: list[Exception] = []
    sent: list[Any] = []
    for mode in ("record", "replay"):
        hooks = {"event_hooks": {"request": [sent.append]}}
        client = _client(fake.base_url, max_retries=0, http=hooks)
        with (
            Tape(path, mode=mode) as tape,
            patch_sdks(tape),
            pytest.raises(groq.APIConnectionError) as info,
        ):
            client.chat.completions.create(model=MODEL, messages=messages)
        raised.append(info.value)
    assert [type(e.__cause__) for e in raised] == [httpx.ConnectError] * 2
    assert len(sent) == 1  # the replay sent nothing


@pytest.mark.parametrize(
    ("out", "usage"),
    [
        pytest.param(
            {"events": [{"data": {"choices": [], "x_groq": {"id": "req_1"}}},
                        {"data": {"choices": [], "x_groq": {"id": "req_1", "usage": {
                            "prompt_tokens": 12, "completion_tokens": 5}}}},
                        {"text": "[DONE]"}]},
            Usage(12, 5, None),
            id="x-groq",
        ),
        pytest.param(
            {"events": [{"data": {"choices": [], "usage": {"prompt_tokens": 7,
                                                          "completion_tokens": 1}}}]},
            Usage(7, 1, None),
            id="include-usage",
        ),
        pytest.param(
            {"body": {"usage": {"prompt_tokens": 3, "completion_tokens": 2,
                                "prompt_tokens_details": {"cached_tokens": 1}}}},
            Usage(3, 2, 1),
            id="whole",
        ),
        pytest.param({"events": [{"text": "[DONE]"}]}, None, id="none"),
    ],
)  # fmt: skip
def test_usage_is_read_where_groq_puts_it(out: dict[str, Any], usage: Usage | None) -> None:
    """OpenAI's ``usage``, and a stream's ``x_groq.usage``."""
    assert provider("groq").usage(out) == usage


@pytest.mark.parametrize(
    ("host", "path", "api"),
    [
        ("api.groq.com", "/openai/v1/chat/completions", "groq.chat.completions"),
        ("api.groq.com", "/openai/v1/embeddings", "groq.embeddings"),
        ("127.0.0.1", "/openai/v1/chat/completions", "openai.chat.completions"),
    ],
)
def test_routes_are_recognised_by_host(host: str, path: str, api: str) -> None:
    """On api.groq.com the endpoints are Groq's; elsewhere the same path is OpenAI's."""
    found = match_route("POST", host, path)
    assert found is not None and found.api == api


SCRIPT = """\
import json
import sys

import anyio
import groq

client = groq.Groq(base_url=sys.argv[1])  # the key from GROQ_API_KEY
tools = [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}]
messages = [{"role": "user", "content": sys.argv[2]}]
while True:
    reply = client.chat.completions.create(model="m", messages=messages, tools=tools)
    message = reply.choices[0].message
    if not message.tool_calls:
        print(message.content)
        break
    messages.append(message.model_dump(exclude_none=True))
    for call in message.tool_calls:
        args = json.loads(call.function.arguments)
        result = str(args["a"] + args["b"])
        messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
"""


def test_an_unmodified_script_under_tracetape_run(tmp_path: Path, fake: FakeGroq) -> None:
    """``tracetape run`` (default hook) records the script, replays it offline, and exits 3
    on a one-word edit."""
    (tmp_path / "agent.py").write_text(SCRIPT)
    record_replay_miss(
        tmp_path,
        fake,
        lambda task: ["agent.py", fake.base_url, task],
        ANSWER + "\n",
        env={"GROQ_API_KEY": KEY},
    )
    assert KEY not in (tmp_path / "run.jsonl").read_text()
