"""litellm, unmodified, taped against the fake model server: ``openai/...`` (litellm calls the
openai SDK's ``client.post``) and ``anthropic/...`` (litellm's own httpx client), recorded, then
replayed offline. litellm is not an agent framework, so a small tool loop drives it."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integrations.frameworks.conftest import (
    FAKE_KEYS,
    FakeServer,
    agent_steps,
    assert_task_miss,
    record_replay_miss,
    taped,
)
from tracetape import ReplayMiss, read_cassette
from tracetape.record import RAISED

TASK = "sum 1 to 3"
ANSWER = "The total is 6."
KINDS = ["openai", "anthropic"]
MAX_STEPS = 10
TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add two integers.",
            "parameters": {
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "required": ["a", "b"],
            },
        },
    }
]
# where the task is in the request litellm sends (to anthropic, as a list of content blocks)
TASK_FIELD = {"openai": "messages[0].content", "anthropic": "messages[0].content[0].text"}

# An unmodified litellm program: the same tool loop through both providers, keys from the
# environment.
SCRIPT = """\
import json
import sys

import litellm

litellm.suppress_debug_info = True
TOOLS = json.loads(sys.argv[3])

base, task = sys.argv[1], sys.argv[2]
for params in (
    {"model": "openai/gpt-test", "api_base": base + "/v1"},
    {"model": "anthropic/claude-test", "api_base": base},
):
    messages = [{"role": "user", "content": task}]
    while True:
        response = litellm.completion(**params, messages=messages, tools=TOOLS, max_tokens=100)
        message = response.choices[0].message
        if not message.tool_calls:
            print(message.content)
            break
        messages.append(message.model_dump())
        for call in message.tool_calls:
            args = json.loads(call.function.arguments)
            messages.append(
                {"role": "tool", "tool_call_id": call.id, "content": str(args["a"] + args["b"])}
            )
"""


@pytest.fixture(scope="module")
def litellm() -> Iterator[Any]:
    """litellm imported offline: its bundled price list (no fetch at import), no debug banner."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        import litellm
    litellm.suppress_debug_info = True
    yield litellm


def _params(kind: str, base_url: str) -> dict[str, Any]:
    if kind == "openai":
        key = FAKE_KEYS["OPENAI_API_KEY"]
        return {"model": "openai/gpt-test", "api_base": base_url + "/v1", "api_key": key}
    key = FAKE_KEYS["ANTHROPIC_API_KEY"]
    return {"model": "anthropic/claude-test", "api_base": base_url, "api_key": key}


def _step(messages: list[dict[str, Any]], response: Any) -> str | None:
    """Append the assistant turn and its tool results; the answer when it called no tool."""
    message = response.choices[0].message
    if not message.tool_calls:
        return str(message.content)
    messages.append(message.model_dump())
    for call in message.tool_calls:
        args = json.loads(call.function.arguments)
        messages.append(
            {"role": "tool", "tool_call_id": call.id, "content": str(args["a"] + args["b"])}
        )
    return None


def _loop(litellm: Any, params: dict[str, Any], task: str, *, stream: bool) -> str:
    """The tool loop with ``completion``: call, run add, append its result, call again."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": task}]
    for _ in range(MAX_STEPS):
        response = litellm.completion(
            **params, messages=messages, tools=TOOLS, max_tokens=100, stream=stream
        )
        if stream:
            response = litellm.stream_chunk_builder(list(response), messages=messages)
        answer = _step(messages, response)
        if answer is not None:
            return answer
    raise AssertionError(f"no answer after {MAX_STEPS} steps")


async def _aloop(litellm: Any, params: dict[str, Any], task: str, *, stream: bool) -> str:
    """The same loop with ``await acompletion``."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": task}]
    for _ in range(MAX_STEPS):
        response = await litellm.acompletion(
            **params, messages=messages, tools=TOOLS, max_tokens=100, stream=stream
        )
        if stream:
            chunks = [chunk async for chunk in response]
            response = litellm.stream_chunk_builder(chunks, messages=messages)
        answer = _step(messages, response)
        if answer is not None:
            return answer
    raise AssertionError(f"no answer after {MAX_STEPS} steps")


def _taped_loop(
    litellm: Any, path: Path, mode: str, kind: str, way: str, *, base_url: str, task: str = TASK
) -> str:
    """One tool loop in ``way`` inside a tape in ``mode``; the async ways enter the tape in
    their own task, as an async program would."""
    params = _params(kind, base_url)
    stream = way.endswith("-stream")
    if way.startswith("completion"):
        with taped(path, mode):
            return _loop(litellm, params, task, stream=stream)

    async def main() -> str:
        with taped(path, mode):
            return await _aloop(litellm, params, task, stream=stream)

    return asyncio.run(main())


WAYS = ["completion", "completion-stream", "acompletion", "acompletion-stream"]
CASES = [pytest.param(kind, way, id=f"{kind}-{way}") for kind in KINDS for way in WAYS]


@pytest.mark.parametrize(("kind", "way"), CASES)
def test_tool_loop_replays_with_server_stopped(
    litellm: Any, tmp_path: Path, server: FakeServer, kind: str, way: str
) -> None:
    """A tool loop recorded against the server replays to the same answer with it stopped."""
    path = tmp_path / "run.jsonl"
    assert _taped_loop(litellm, path, "record", kind, way, base_url=server.base_url) == ANSWER
    assert len(server.requests) == 4  # three add calls, then the answer
    server.stop()
    assert _taped_loop(litellm, path, "replay", kind, way, base_url=server.base_url) == ANSWER
    assert len(server.requests) == 4  # replay sent nothing
    records = read_cassette(path).records
    assert [(r.kind, r.step) for r in records] == [("llm", step) for step in (1, 2, 3, 4)]
    assert all(("events" in r.out) == way.endswith("-stream") for r in records)


@pytest.mark.parametrize(("kind", "way"), CASES)
def test_one_word_edit_of_the_task_is_a_replay_miss(
    litellm: Any, tmp_path: Path, server: FakeServer, kind: str, way: str
) -> None:
    """Replaying with one word of the task changed raises the ReplayMiss itself, at step 1,
    naming the changed message with both words, not litellm's or an SDK's error.

    litellm turns the miss into its own ``InternalServerError``; the tape raises the miss
    again when its block exits."""
    path = tmp_path / "run.jsonl"
    base_url = server.base_url
    _taped_loop(litellm, path, "record", kind, way, base_url=base_url, task=f"{TASK}, carefully")
    server.stop()
    with pytest.raises(ReplayMiss) as info:
        _taped_loop(litellm, path, "replay", kind, way, base_url=base_url, task=f"{TASK}, quickly")
    # litellm's own errors (its InternalServerError, APIConnectionError) are openai.APIError
    assert_task_miss(info.value, TASK_FIELD[kind])


@pytest.mark.parametrize(
    ("kind", "stream"),
    [
        pytest.param(kind, stream, id=f"{kind}-{'stream' if stream else 'json'}")
        for kind in KINDS
        for stream in (False, True)
    ],
)
def test_two_loops_at_once_under_one_tape(
    litellm: Any, tmp_path: Path, server: FakeServer, kind: str, stream: bool
) -> None:
    """Two async loops gathered under one tape are recorded together and both replay offline."""
    path = tmp_path / "run.jsonl"
    params = _params(kind, server.base_url)

    async def both(mode: str) -> list[str]:
        with taped(path, mode):
            return list(
                await asyncio.gather(
                    _aloop(litellm, params, "sum 1 to 3", stream=stream),
                    _aloop(litellm, params, "sum 1 to 2", stream=stream),
                )
            )

    expected = ["The total is 6.", "The total is 3."]
    assert asyncio.run(both("record")) == expected
    assert len(server.requests) == 7
    server.stop()
    assert asyncio.run(both("replay")) == expected
    assert len(read_cassette(path).records) == 7
    assert agent_steps(path) == {"sum 1 to 3": [1, 2, 3, 4], "sum 1 to 2": [1, 2, 3]}


def _script(tmp_path: Path, server: FakeServer) -> Callable[[str], list[str]]:
    (tmp_path / "loop.py").write_text(SCRIPT)
    return lambda task: ["loop.py", server.base_url, task, json.dumps(TOOLS)]


@pytest.mark.slow
def test_tracetape_run_records_and_replays_an_unmodified_script(
    tmp_path: Path, server: FakeServer
) -> None:
    """``tracetape run`` records both providers' loops of a plain script, replays them with the
    server stopped to the same output, and exits 3 with the diagnosis when the task changes."""
    record_replay_miss(tmp_path, server, _script(tmp_path, server), f"{ANSWER}\n{ANSWER}\n")
    records = read_cassette(tmp_path / "run.jsonl").records
    # two loops, one after the other: each is its own conversation, steps 1..4
    assert [(r.kind, r.step) for r in records] == [("llm", n) for n in (1, 2, 3, 4)] * 2


def _fetch_failures(stderr: str) -> list[str]:
    """litellm's own account of its failed price-list fetch at import: the exception's name."""
    return re.findall(r"Failed to fetch remote model cost map from \S+: (\w+) fetching", stderr)


@pytest.mark.slow
def test_tracetape_run_replays_litellm_fetching_its_price_list(
    tmp_path: Path, server: FakeServer
) -> None:
    """Without ``LITELLM_LOCAL_MODEL_COST_MAP``, ``import litellm`` fetches its price list from
    the internet: that fetch is a decision too, recorded and replayed, so the run replays."""
    # an empty value is litellm's "unset" (FAKE_KEYS sets it for every other run)
    recorded, replayed = record_replay_miss(
        tmp_path,
        server,
        _script(tmp_path, server),
        f"{ANSWER}\n{ANSWER}\n",
        env={"LITELLM_LOCAL_MODEL_COST_MAP": ""},
        miss=False,
    )
    fetches = [
        r
        for r in read_cassette(tmp_path / "run.jsonl").records
        if r.kind == "http" and "model_prices" in str(r.input["url"])
    ]
    # the fetch at import; litellm retries it in a background thread 2-3 s later (and 4-5 s after
    # that) if the program still runs then, so a longer program records more of them
    assert fetches
    failures = _fetch_failures(recorded.stderr)
    assert _fetch_failures(replayed.stderr) == failures  # replayed as the same exception type
    if RAISED in fetches[0].out:  # offline, as here: the fetch failed, recorded as its exception
        assert failures == [fetches[0].out[RAISED]["type"].rpartition(".")[2]]
