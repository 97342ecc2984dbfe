"""Ollama's native API through its official SDK (``ollama``: ``Client``, ``AsyncClient``),
against the fake of ``fake_ollama``: a tool-using agent, sync and async, whole and streamed
(NDJSON); generate and embed as one-shot calls; a plain HTTP client that leaves streaming to
the server's default; errors; an unmodified script under ``tracetape run``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import ollama
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
    usage_for,
)
from .fake_ollama import FakeOllama

KEY = "ollama0123456789abcdefghijklmnopqrstuv"  # an ollama.com key, sent as a bearer token
MODEL = "llama3.2"


@pytest.fixture
def fake() -> Iterator[FakeOllama]:
    server = FakeOllama().start()
    try:
        yield server
    finally:
        server.stop()


def _client(base: str, *, aio: bool = False) -> Any:
    headers = {"Authorization": f"Bearer {KEY}"}
    return (ollama.AsyncClient if aio else ollama.Client)(host=base, headers=headers)


def _step(messages: list[Any], text: str, calls: list[Any]) -> str | None:
    """Append the answer and its tool results; the answer when it called no tool."""
    if not calls:
        return text
    messages.append({"role": "assistant", "content": text, "tool_calls": calls})
    for call in calls:
        result = add(**call.function.arguments)
        messages.append({"role": "tool", "content": str(result), "tool_name": call.function.name})
    return None


def _loop(client: ollama.Client, task: str, stream: bool, **options: Any) -> str:
    messages: list[Any] = [{"role": "user", "content": task}]
    for _ in range(10):
        request = {"model": MODEL, "messages": messages, "tools": TOOLS, **options}
        if stream:
            text, calls = "", []
            for part in client.chat(**request, stream=True):
                text += part.message.content or ""
                calls += part.message.tool_calls or []
        else:
            message = client.chat(**request).message
            text, calls = message.content or "", list(message.tool_calls or ())
        final = _step(messages, text, calls)
        if final is not None:
            return final
    raise AssertionError("no answer after 10 steps")


async def _aloop(client: ollama.AsyncClient, task: str, stream: bool) -> str:
    messages: list[Any] = [{"role": "user", "content": task}]
    for _ in range(10):
        request = {"model": MODEL, "messages": messages, "tools": TOOLS}
        if stream:
            text, calls = "", []
            async for part in await client.chat(**request, stream=True):
                text += part.message.content or ""
                calls += part.message.tool_calls or []
        else:
            message = (await client.chat(**request)).message
            text, calls = message.content or "", list(message.tool_calls or ())
        final = _step(messages, text, calls)
        if final is not None:
            return final
    raise AssertionError("no answer after 10 steps")


def _agent(base: str, **options: Any) -> Agent:
    def run(task: str, aio: bool, stream: bool) -> Any:
        if aio:
            return _aloop(_client(base, aio=True), task, stream)
        return _loop(_client(base), task, stream, **options)

    return run


@pytest.mark.parametrize(("aio", "stream"), WAYS)
def test_agent_records_and_replays_offline(
    tmp_path: Path, fake: FakeOllama, aio: bool, stream: bool
) -> None:
    """A tool loop replays offline: steps 1..4, tools (arguments as objects) at their asking
    step, usage from the counts (streamed: the ``done`` line), ``ollama.chat``, no key."""
    agent = _agent(fake.base_url)
    path = tmp_path / "run.jsonl"
    records = check_agent(path, fake, agent, aio=aio, stream=stream, api="ollama.chat", key=KEY)
    models = [r for r in records if r.kind == "llm"]
    assert all(r.out.get("framing") == ("ndjson" if stream else None) for r in models)


@pytest.mark.parametrize(("aio", "stream"), WAYS)
def test_one_word_edit_is_a_replay_miss(
    tmp_path: Path, fake: FakeOllama, aio: bool, stream: bool
) -> None:
    """Changing one word of the task misses at step 1, naming the message and both words."""
    agent = _agent(fake.base_url)
    check_miss(tmp_path / "run.jsonl", fake, agent, "messages[0].content", aio=aio, stream=stream)


def test_keep_alive_is_not_a_decision(tmp_path: Path, fake: FakeOllama) -> None:
    """``keep_alive`` (how long the server keeps the model loaded) is left out of the key,
    stored beside it: a replay that asks another keeps the recorded answers."""
    path = tmp_path / "run.jsonl"
    with Tape(path, mode="record") as tape, patch_sdks(tape):
        _loop(_client(fake.base_url), TASK, True, keep_alive="5m")
    fake.stop()
    with Tape(path, mode="replay") as tape, patch_sdks(tape):
        assert _loop(_client(fake.base_url), TASK, True, keep_alive=0) == ANSWER
    stored = read_cassette(path).records[0].input
    assert stored["unkeyed"] == {"keep_alive": "5m"} and "keep_alive" not in stored["params"]


def test_a_body_without_stream_is_streamed_and_replayed_line_by_line(
    tmp_path: Path, fake: FakeOllama
) -> None:
    """A plain HTTP client that sends no ``stream`` field gets Ollama's default, a stream:
    recorded as NDJSON events and replayed as the same lines, one chunk each."""
    path = tmp_path / "run.jsonl"
    body = {"model": MODEL, "messages": [{"role": "user", "content": "echo hello world"}]}
    seen = []
    for mode in ("record", "replay"):
        with (
            Tape(path, mode=mode) as tape,
            patch_sdks(tape),
            httpx.Client() as http,
            http.stream("POST", f"{fake.base_url}/api/chat", json=body) as response,
        ):
            seen.append((response.headers["content-type"], list(response.iter_raw())))
        if mode == "record":
            fake.stop()
    (recorded_type, recorded), (replayed_type, replayed) = seen
    assert recorded_type == replayed_type == "application/x-ndjson"
    assert b"".join(replayed) == b"".join(recorded)  # byte for byte, however TCP cut it
    assert [json.loads(line)["done"] for line in replayed] == [False, False, True]
    (rec,) = read_cassette(path).records
    assert (rec.api, rec.step, rec.out["framing"]) == ("ollama.chat", 1, "ndjson")


@pytest.mark.parametrize(
    ("call", "api", "texts"),
    [
        pytest.param(
            lambda c: c.generate(model=MODEL, prompt="hello there").response,
            "ollama.generate",
            1,
            id="generate",
        ),
        pytest.param(
            lambda c: [p.response for p in c.generate(model=MODEL, prompt="hi", stream=True)],
            "ollama.generate",
            1,
            id="generate-stream",
        ),
        pytest.param(
            lambda c: c.embed(model="all-minilm", input=["a", "b"]).embeddings,
            "ollama.embed",
            2,
            id="embed",
        ),
    ],
)
def test_one_shot_calls_are_step_one(
    tmp_path: Path, fake: FakeOllama, call: Any, api: str, texts: int
) -> None:
    """Generate and embed carry no conversation: step 1, their route and usage recorded, and
    replayed offline to the same value."""
    rec = check_one_shot(tmp_path / "run.jsonl", fake, lambda: call(_client(fake.base_url)))
    read, wrote = usage_for(texts)
    usage = {"input": read} if api == "ollama.embed" else {"input": read, "output": wrote}
    assert (rec.api, rec.step, rec.usage) == (api, 1, usage)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_an_http_error_replays_as_the_sdks_error(
    tmp_path: Path, fake: FakeOllama, stream: bool
) -> None:
    """A 404 (a model not pulled) is recorded as the model call's answer and replays as the
    SDK's ``ResponseError`` with the same status and message."""
    messages = [{"role": "user", "content": TASK}]

    def call() -> Any:
        reply = _client(fake.base_url).chat(model=MISSING, messages=messages, stream=stream)
        return list(reply) if stream else reply

    recorded, replayed = check_error(tmp_path / "run.jsonl", fake, call, ollama.ResponseError)
    assert (replayed.status_code, replayed.error) == (recorded.status_code, recorded.error)
    assert replayed.status_code == 404 and MISSING in replayed.error


@pytest.mark.parametrize(
    ("event", "text_of"),
    [
        pytest.param(
            lambda piece: {"model": MODEL, "message": {"role": "assistant", "content": piece}},
            lambda data: data["message"]["content"],
            id="chat",
        ),
        pytest.param(
            lambda piece: {"model": MODEL, "response": piece, "done": False},
            lambda data: data["response"],
            id="generate",
        ),
    ],
)
def test_a_secret_split_over_streamed_lines_is_redacted(event: Any, text_of: Any) -> None:
    """A key streamed in pieces over several lines is found in the text they assemble."""
    check_split_secret("ollama", event, text_of)


@pytest.mark.parametrize(
    ("out", "usage"),
    [
        pytest.param({"body": {"done": True, "prompt_eval_count": 26, "eval_count": 298}},
                     Usage(26, 298), id="whole"),
        pytest.param({"events": [{"data": {"done": False}},
                                 {"data": {"done": True, "prompt_eval_count": 8,
                                           "eval_count": 2}}]},
                     Usage(8, 2), id="stream"),
        pytest.param({"body": {"error": "model not found"}}, None, id="error"),
    ],
)  # fmt: skip
def test_usage_is_read_from_the_counts(out: dict[str, Any], usage: Usage | None) -> None:
    """``prompt_eval_count`` and ``eval_count`` of the answer or its ``done`` line."""
    assert provider("ollama").usage(out) == usage


@pytest.mark.parametrize(
    ("host", "path", "api"),
    [
        ("localhost", "/api/chat", "ollama.chat"),
        ("ollama.com", "/api/generate", "ollama.generate"),
        ("127.0.0.1", "/api/embed", "ollama.embed"),
        ("localhost", "/v1/chat/completions", "openai.chat.completions"),
        ("localhost", "/api/tags", None),
    ],
)
def test_routes(host: str, path: str, api: str | None) -> None:
    """The native endpoints are Ollama's on any host; its OpenAI-compatible one is OpenAI's."""
    found = match_route("POST", host, path)
    assert (found.api if found else None) == api


SCRIPT = """\
import sys

import ollama

client = ollama.Client(host=sys.argv[1])
tools = [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}]
messages = [{"role": "user", "content": sys.argv[2]}]
while True:
    message = client.chat(model="llama3.2", messages=messages, tools=tools).message
    if not message.tool_calls:
        print(message.content)
        break
    messages.append(message)
    for call in message.tool_calls:
        args = call.function.arguments
        messages.append({"role": "tool", "content": str(args["a"] + args["b"])})
"""


def test_an_unmodified_script_under_tracetape_run(tmp_path: Path, fake: FakeOllama) -> None:
    """``tracetape run`` (default hook) records the script, replays it offline, and exits 3
    on a one-word edit."""
    (tmp_path / "agent.py").write_text(SCRIPT)
    record_replay_miss(
        tmp_path, fake, lambda task: ["agent.py", fake.base_url, task], ANSWER + "\n"
    )
