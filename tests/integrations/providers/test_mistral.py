"""Mistral through its official SDK (``mistralai``), against the fake of ``fake_mistral``: a
tool-using agent on Chat and Agents completions, sync and async, whole and streamed; FIM and
embeddings as one-shot calls; errors; an unmodified script under ``tracetape run``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mistralai.client import Mistral
from mistralai.client.errors import SDKError

from tests.integrations.frameworks.conftest import record_replay_miss
from tracetape.integrations.providers import match_route

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
    to_fake,
    usage_for,
)
from .fake_mistral import FakeMistral

KEY = "mstrl0123456789abcdefghijklmnopqr"


@pytest.fixture
def fake() -> Iterator[FakeMistral]:
    server = FakeMistral().start()
    try:
        yield server
    finally:
        server.stop()


def _client(base: str, *, real_host: bool = True) -> Mistral:
    """A client of ``api.mistral.ai`` whose requests reach the fake (``real_host``), or of
    the fake's own URL."""
    if not real_host:
        return Mistral(api_key=KEY, server_url=base)
    return Mistral(
        api_key=KEY,
        client=httpx2.Client(transport=to_fake(httpx2, base)),
        async_client=httpx2.AsyncClient(transport=to_fake(httpx2, base, aio=True)),
    )


def _request(route: str, messages: list[Any]) -> dict[str, Any]:
    if route == "agents":
        return {"agent_id": "ag_0123456789", "messages": messages, "tools": TOOLS}
    return {"model": "mistral-medium-latest", "messages": messages, "tools": TOOLS}


def _step(messages: list[Any], text: str, calls: list[Any]) -> str | None:
    """Append the answer and its tool results; the answer when it called no tool."""
    if not calls:
        return text
    messages.append({"role": "assistant", "content": text, "tool_calls": calls})
    for call in calls:
        args = call.function.arguments
        result = add(**(args if isinstance(args, dict) else json.loads(args)))
        messages.append({"role": "tool", "tool_call_id": call.id, "content": str(result)})
    return None


def _loop(client: Mistral, route: str, task: str, stream: bool) -> str:
    resource: Any = client.agents if route == "agents" else client.chat
    messages: list[Any] = [{"role": "user", "content": task}]
    for _ in range(10):
        request = _request(route, messages)
        if stream:
            text, calls = "", []
            for event in resource.stream(**request):
                delta = event.data.choices[0].delta
                text += delta.content or ""
                calls += delta.tool_calls or []
        else:
            message = resource.complete(**request).choices[0].message
            text, calls = message.content or "", message.tool_calls or []
        answer = _step(messages, str(text), list(calls))
        if answer is not None:
            return answer
    raise AssertionError("no answer after 10 steps")


async def _aloop(client: Mistral, route: str, task: str, stream: bool) -> str:
    resource: Any = client.agents if route == "agents" else client.chat
    messages: list[Any] = [{"role": "user", "content": task}]
    for _ in range(10):
        request = _request(route, messages)
        if stream:
            text, calls = "", []
            async for event in await resource.stream_async(**request):
                delta = event.data.choices[0].delta
                text += delta.content or ""
                calls += delta.tool_calls or []
        else:
            message = (await resource.complete_async(**request)).choices[0].message
            text, calls = message.content or "", message.tool_calls or []
        answer = _step(messages, str(text), list(calls))
        if answer is not None:
            return answer
    raise AssertionError("no answer after 10 steps")


def _agent(base: str, route: str = "chat", *, real_host: bool = True) -> Agent:
    def run(task: str, aio: bool, stream: bool) -> Any:
        client = _client(base, real_host=real_host)
        return (_aloop if aio else _loop)(client, route, task, stream)

    return run


@pytest.mark.parametrize("route", ["chat", "agents"])
@pytest.mark.parametrize(("aio", "stream"), WAYS)
def test_agent_records_and_replays_offline(
    tmp_path: Path, fake: FakeMistral, route: str, aio: bool, stream: bool
) -> None:
    """A tool loop on api.mistral.ai replays offline: steps 1..4, tools at their asking step,
    usage, ``mistral.*`` routes, no key stored."""
    api = f"mistral.{route}.completions"
    agent = _agent(fake.base_url, route)
    check_agent(tmp_path / "run.jsonl", fake, agent, aio=aio, stream=stream, api=api, key=KEY)


@pytest.mark.parametrize(("aio", "stream"), WAYS)
def test_one_word_edit_is_a_replay_miss(
    tmp_path: Path, fake: FakeMistral, aio: bool, stream: bool
) -> None:
    """Changing one word of the task misses at step 1, naming the message and both words."""
    agent = _agent(fake.base_url)
    check_miss(tmp_path / "run.jsonl", fake, agent, "messages[0].content", aio=aio, stream=stream)


def test_a_server_of_another_host_is_read_as_openai(tmp_path: Path, fake: FakeMistral) -> None:
    """A Mistral-format server on another host (a self-hosted proxy) shares OpenAI's paths:
    its chat is read as ``openai.chat.completions``, with the same steps and usage."""
    agent = _agent(fake.base_url, real_host=False)
    path = tmp_path / "run.jsonl"
    check_agent(path, fake, agent, aio=False, stream=True, api="openai.chat.completions", key=KEY)


@pytest.mark.parametrize(
    ("call", "api", "messages"),
    [
        pytest.param(
            lambda c: (
                c.fim.complete(
                    model="codestral-latest", prompt="def add(a, b):", suffix="print(add(1, 2))"
                )
                .choices[0]
                .message.content
            ),
            "mistral.fim.completions",
            1,
            id="fim",
        ),
        pytest.param(
            lambda c: [
                e.data.choices[0].delta.content
                for e in c.fim.stream(model="codestral-latest", prompt="def add(a, b):")
            ],
            "mistral.fim.completions",
            1,
            id="fim-stream",
        ),
        pytest.param(
            lambda c: c.embeddings.create(model="mistral-embed", inputs=["a", "b"]).data[1].index,
            "mistral.embeddings",
            2,
            id="embeddings",
        ),
    ],
)
def test_one_shot_calls_are_step_one(
    tmp_path: Path, fake: FakeMistral, call: Any, api: str, messages: int
) -> None:
    """FIM and embeddings carry no conversation: step 1, their route and usage recorded, and
    replayed offline to the same value."""
    rec = check_one_shot(tmp_path / "run.jsonl", fake, lambda: call(_client(fake.base_url)))
    prompt, completion = usage_for(messages)
    output = 0 if api.endswith("embeddings") else completion
    assert (rec.api, rec.step, rec.usage) == (api, 1, {"input": prompt, "output": output})


def test_an_http_error_replays_as_the_sdks_error(tmp_path: Path, fake: FakeMistral) -> None:
    """A 400 (an unknown model) is recorded as the model call's answer and replays as the
    SDK's ``SDKError`` with the same status and body."""
    request = {"model": MISSING, "messages": [{"role": "user", "content": TASK}]}
    recorded, replayed = check_error(
        tmp_path / "run.jsonl",
        fake,
        lambda: _client(fake.base_url).chat.complete(**request),
        SDKError,
    )
    assert (
        (replayed.status_code, replayed.body)
        == (recorded.status_code, recorded.body)
        == (
            400,
            recorded.body,
        )
    )
    assert "invalid_model" in replayed.body


@pytest.mark.parametrize(
    ("method", "host", "path", "api"),
    [
        ("POST", "api.mistral.ai", "/v1/chat/completions", "mistral.chat.completions"),
        ("POST", "api.mistral.ai", "/v1/agents/completions", "mistral.agents.completions"),
        ("POST", "api.mistral.ai", "/v1/fim/completions", "mistral.fim.completions"),
        ("POST", "api.mistral.ai", "/v1/embeddings", "mistral.embeddings"),
        ("POST", "127.0.0.1", "/v1/chat/completions", "openai.chat.completions"),
        ("GET", "api.mistral.ai", "/v1/models", None),
    ],
)
def test_routes_are_recognised_by_host(method: str, host: str, path: str, api: str | None) -> None:
    """On api.mistral.ai each endpoint is Mistral's; elsewhere a shared path is OpenAI's."""
    found = match_route(method, host, path)
    assert (found.api if found else None) == api


SCRIPT = """\
import json
import sys

from mistralai.client import Mistral

client = Mistral(server_url=sys.argv[1])  # the key from MISTRAL_API_KEY
tools = [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}]
messages = [{"role": "user", "content": sys.argv[2]}]
while True:
    message = client.chat.complete(model="m", messages=messages, tools=tools).choices[0].message
    if not message.tool_calls:
        print(message.content)
        break
    messages.append(message)
    for call in message.tool_calls:
        args = json.loads(call.function.arguments)
        result = str(args["a"] + args["b"])
        messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
"""


@pytest.mark.slow
def test_an_unmodified_script_under_tracetape_run(tmp_path: Path, fake: FakeMistral) -> None:
    """``tracetape run`` (default hook) records the script, replays it offline, and exits 3
    on a one-word edit."""
    (tmp_path / "agent.py").write_text(SCRIPT)
    record_replay_miss(
        tmp_path,
        fake,
        lambda task: ["agent.py", fake.base_url, task],
        ANSWER + "\n",
        env={"MISTRAL_API_KEY": KEY},
    )
    assert KEY not in (tmp_path / "run.jsonl").read_text()
