"""pydantic-ai, unmodified, taped against the fake model server: its OpenAI chat model and its
Anthropic model (which calls ``client.beta.messages``), recorded, then replayed offline."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from pydantic_ai import Agent
from pydantic_ai.exceptions import ModelAPIError
from pydantic_ai.models.anthropic import AnthropicModel
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.anthropic import AnthropicProvider
from pydantic_ai.providers.openai import OpenAIProvider

from tests.integrations.frameworks.conftest import (
    FAKE_KEYS,
    FakeServer,
    agent_steps,
    assert_task_miss,
    record_replay_miss,
    taped,
)
from tracetape import ReplayMiss, read_cassette

TASK = "sum 1 to 3"
ANSWER = "The total is 6."
MODELS = ["openai", "anthropic"]
# where the task is in the request: the OpenAI model sends the instructions as messages[0],
# the Anthropic model as ``system`` and the prompt as a list of content blocks
TASK_FIELD = {"openai": "messages[1].content", "anthropic": "messages[0].content[0].text"}

# A run's four model calls are steps 1..4 however pydantic-ai schedules them (tasks, threads,
# copies of the context): a step is read from the conversation each request carries.
STEPS = [1, 2, 3, 4]

# An unmodified pydantic-ai program: both models sum with the add tool, keys from the environment.
SCRIPT = '''\
import sys

from pydantic_ai import Agent
from pydantic_ai.models.anthropic import AnthropicModel
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.anthropic import AnthropicProvider
from pydantic_ai.providers.openai import OpenAIProvider


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


base, task = sys.argv[1], sys.argv[2]
for model in (
    OpenAIChatModel("gpt-test", provider=OpenAIProvider(base_url=base + "/v1")),
    AnthropicModel("claude-test", provider=AnthropicProvider(base_url=base)),
):
    print(Agent(model, tools=[add], instructions="You add numbers.").run_sync(task).output)
'''


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def _agent(kind: str, base_url: str, tool: Callable[[int, int], int] = add) -> Agent[None, str]:
    """A fresh agent on a fresh provider, as a new process would build it."""
    model: OpenAIChatModel | AnthropicModel
    if kind == "openai":
        provider = OpenAIProvider(base_url=base_url + "/v1", api_key=FAKE_KEYS["OPENAI_API_KEY"])
        model = OpenAIChatModel("gpt-test", provider=provider)
    else:
        key = FAKE_KEYS["ANTHROPIC_API_KEY"]
        model = AnthropicModel(
            "claude-test", provider=AnthropicProvider(base_url=base_url, api_key=key)
        )
    return Agent(model, tools=[tool], instructions="You add numbers.")


async def _run(agent: Agent[None, str], task: str) -> str:
    return (await agent.run(task)).output


async def _run_stream(agent: Agent[None, str], task: str) -> str:
    async with agent.run_stream(task) as result:
        return "".join([t async for t in result.stream_text(delta=True, debounce_by=None)])


async def _iter(agent: Agent[None, str], task: str) -> str:
    """Drive the graph node by node and stream every model request's events."""
    async with agent.iter(task) as run:
        async for node in run:
            if Agent.is_model_request_node(node):
                async with node.stream(run.ctx) as events:
                    async for _ in events:
                        pass
    assert run.result is not None
    return run.result.output


def _run_sync(agent: Agent[None, str], task: str) -> str:
    return agent.run_sync(task).output


def _run_stream_sync(agent: Agent[None, str], task: str) -> str:
    with agent.run_stream_sync(task) as result:
        return "".join(result.stream_text(delta=True, debounce_by=None))


SYNC_WAYS: dict[str, Callable[[Agent[None, str], str], str]] = {
    "run_sync": _run_sync,
    "run_stream_sync": _run_stream_sync,
}
ASYNC_WAYS: dict[str, Callable[[Agent[None, str], str], Awaitable[str]]] = {
    "run": _run,
    "run_stream": _run_stream,
    "iter": _iter,
}
STREAMED = {"run_stream_sync", "run_stream", "iter"}
WAYS = [*SYNC_WAYS, *ASYNC_WAYS]
CASES = [pytest.param(kind, way, id=f"{kind}-{way}") for kind in MODELS for way in WAYS]


def _taped_run(
    path: Path,
    mode: str,
    kind: str,
    way: str,
    *,
    base_url: str,
    task: str = TASK,
    tool: Callable[[int, int], int] = add,
) -> str:
    """One agent run in ``way``, inside a tape in ``mode``; the async ways enter the tape in
    their own task, as an async program would."""
    agent = _agent(kind, base_url, tool)
    if way in SYNC_WAYS:
        with taped(path, mode):
            return SYNC_WAYS[way](agent, task)

    async def main() -> str:
        with taped(path, mode):
            return await ASYNC_WAYS[way](agent, task)

    return asyncio.run(main())


@pytest.mark.parametrize(("kind", "way"), CASES)
def test_run_replays_with_server_stopped(
    tmp_path: Path, server: FakeServer, kind: str, way: str
) -> None:
    """A tool-using run recorded against the server replays to the same answer with it stopped."""
    path = tmp_path / "run.jsonl"
    assert _taped_run(path, "record", kind, way, base_url=server.base_url) == ANSWER
    assert len(server.requests) == 4  # three add calls, then the answer
    server.stop()
    assert _taped_run(path, "replay", kind, way, base_url=server.base_url) == ANSWER
    assert len(server.requests) == 4  # replay sent nothing
    records = read_cassette(path).records
    assert [r.kind for r in records] == ["llm"] * 4
    assert agent_steps(path) == {"sum 1 to 3": STEPS}
    assert all(("events" in r.out) == (way in STREAMED) for r in records)


@pytest.mark.parametrize(("kind", "way"), CASES)
def test_one_word_edit_of_the_task_is_a_replay_miss(
    tmp_path: Path, server: FakeServer, kind: str, way: str
) -> None:
    """Replaying with one word of the task changed raises the ReplayMiss itself, at step 1,
    naming the changed message with both words, not a framework's connection error."""
    path = tmp_path / "run.jsonl"
    _taped_run(path, "record", kind, way, base_url=server.base_url, task="sum 1 to 3, carefully")
    server.stop()
    with pytest.raises(ReplayMiss) as info:
        _taped_run(path, "replay", kind, way, base_url=server.base_url, task="sum 1 to 3, quickly")
    assert not isinstance(info.value, ModelAPIError)
    assert_task_miss(info.value, TASK_FIELD[kind])


@pytest.mark.parametrize(
    ("kind", "way"),
    [pytest.param(kind, way, id=f"{kind}-{way}") for kind in MODELS for way in ("run", "iter")],
)
def test_two_agents_at_once_under_one_tape(
    tmp_path: Path, server: FakeServer, kind: str, way: str
) -> None:
    """Two runs gathered under one tape are recorded together and both replay offline."""
    path = tmp_path / "run.jsonl"

    async def both(mode: str) -> list[str]:
        run = ASYNC_WAYS[way]
        first, second = _agent(kind, server.base_url), _agent(kind, server.base_url)
        with taped(path, mode):
            return list(await asyncio.gather(run(first, "sum 1 to 3"), run(second, "sum 1 to 2")))

    expected = ["The total is 6.", "The total is 3."]
    assert asyncio.run(both("record")) == expected
    assert len(server.requests) == 7
    server.stop()
    assert asyncio.run(both("replay")) == expected
    assert len(read_cassette(path).records) == 7
    assert agent_steps(path) == {"sum 1 to 3": [1, 2, 3, 4], "sum 1 to 2": [1, 2, 3]}


@pytest.mark.parametrize("way", WAYS)
def test_a_changed_tool_result_is_a_miss_at_step_2(
    tmp_path: Path, server: FakeServer, way: str
) -> None:
    """A tool that now returns another result is diagnosed at the second model call, the
    request that first carries it, at the step the cassette gave that call (see ``STEPS``)."""
    path = tmp_path / "run.jsonl"
    _taped_run(path, "record", "openai", way, base_url=server.base_url)
    server.stop()

    def add(a: int, b: int) -> int:  # the same tool, now off by one
        """Add two integers."""
        return a + b + 1

    with pytest.raises(ReplayMiss) as info:
        _taped_run(path, "replay", "openai", way, base_url=server.base_url, tool=add)
    miss = info.value
    # instructions, task, the add call, its result
    steps = [r.step for r in read_cassette(path).records]
    assert steps == STEPS
    assert miss.expected is not None and miss.step == miss.expected.step == steps[1]
    assert (miss.matched, miss.changes) == (1, ["messages[3].content"])


@pytest.mark.slow
def test_tracetape_run_records_and_replays_an_unmodified_script(
    tmp_path: Path, server: FakeServer
) -> None:
    """``tracetape run`` records both models' runs of a plain script, replays them with the
    server stopped to the same output, and exits 3 with the diagnosis when the task changes."""
    (tmp_path / "agent.py").write_text(SCRIPT)
    base = server.base_url
    answer = f"{ANSWER}\n{ANSWER}\n"
    record_replay_miss(tmp_path, server, lambda task: ["agent.py", base, task], answer)
    records = read_cassette(tmp_path / "run.jsonl").records
    assert [r.kind for r in records] == ["llm"] * 8
