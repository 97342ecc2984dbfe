"""openai-agents, unmodified, taped against the fake model server and replayed with it stopped.

The agent adds numbers with a function tool, through the Responses model (the SDK's default) or
the Chat Completions model, run with ``Runner.run_sync``, ``Runner.run`` or
``Runner.run_streamed``. In-process runs disable the SDK's tracing, which would export to
api.openai.com; ``tracetape run`` subprocesses get ``OPENAI_AGENTS_DISABLE_TRACING`` instead
(``FAKE_KEYS``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest
from agents import (
    Agent,
    OpenAIChatCompletionsModel,
    OpenAIResponsesModel,
    Runner,
    function_tool,
    set_tracing_disabled,
)
from openai import AsyncOpenAI

from tests.integrations.frameworks.conftest import (
    FakeServer,
    agent_steps,
    assert_task_miss,
    record_replay_miss,
    taped,
)
from tracetape import ReplayMiss, read_cassette

# A run's four model calls are steps 1..4 however openai-agents schedules them (tasks, threads,
# copies of the context): a step is read from the conversation each request carries.
STEPS = [1, 2, 3, 4]


set_tracing_disabled(True)  # in-process runs export no trace to api.openai.com

TASK = "sum 1 to 3"
MODELS: dict[str, Any] = {"responses": OpenAIResponsesModel, "chat": OpenAIChatCompletionsModel}
# where the task sits in the keyed request: the Chat Completions model sends the
# instructions as a system message first
TASK_FIELD = {"responses": "messages[0].content", "chat": "messages[1].content"}
# where the first tool result sits in the second request
RESULT_FIELD = {"responses": "messages[2].output", "chat": "messages[3].content"}


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def _agent(client: AsyncOpenAI, api: str, add: Callable[[int, int], int]) -> Any:
    model = MODELS[api](model="gpt-test", openai_client=client)
    return Agent(
        name="adder",
        instructions="Add with the add tool.",
        tools=[function_tool(add)],
        model=model,
    )


async def _run(agent: Any, task: str) -> str:
    return str((await Runner.run(agent, task)).final_output)


async def _run_streamed(agent: Any, task: str) -> str:
    result = Runner.run_streamed(agent, task)
    async for _ in result.stream_events():
        pass
    return str(result.final_output)


async def _run_two(agent: Any, task: str) -> str:
    """``task`` and "sum 1 to 2" at once, their answers joined."""
    answers = await asyncio.gather(_run(agent, task), _run(agent, "sum 1 to 2"))
    return " / ".join(answers)


RUNS: dict[str, Callable[[Any, str], Coroutine[Any, Any, str]]] = {
    "run": _run,
    "run_streamed": _run_streamed,
    "gather": _run_two,
}


def _answer(
    path: Path,
    mode: str,
    base_url: str,
    *,
    api: str,
    how: str,
    task: str = TASK,
    add: Callable[[int, int], int] = add,
) -> str:
    """Run the agent once under a tape, with ``Runner.run_sync`` or one of ``RUNS``."""
    with taped(path, mode):
        return _run_on_a_loop(base_url, api, how, task, add)


def _run_on_a_loop(
    base_url: str, api: str, how: str, task: str, add: Callable[[int, int], int]
) -> str:
    """On a loop of its own: ``run_sync`` runs on the thread's default loop and leaves it open,
    and the client's connections must be closed on the loop that opened them."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    client = AsyncOpenAI(base_url=base_url + "/v1", api_key="sk-test")
    try:
        agent = _agent(client, api, add)
        if how == "run_sync":
            return str(Runner.run_sync(agent, task).final_output)
        return loop.run_until_complete(RUNS[how](agent, task))
    finally:
        loop.run_until_complete(client.close())
        asyncio.set_event_loop(None)
        loop.close()


API = pytest.mark.parametrize("api", ["responses", "chat"])
HOW = pytest.mark.parametrize("how", ["run_sync", "run", "run_streamed"])


@API
@HOW
def test_agent_replays_with_server_stopped(
    tmp_path: Path, server: FakeServer, api: str, how: str
) -> None:
    """A recorded four-turn agent run replays to the same answer with the server stopped."""
    path = tmp_path / "run.jsonl"
    answer = _answer(path, "record", server.base_url, api=api, how=how)
    assert answer == "The total is 6."
    assert len(server.requests) == 4
    server.stop()
    assert _answer(path, "replay", server.base_url, api=api, how=how) == answer
    assert len(server.requests) == 4
    assert agent_steps(path) == {"sum 1 to 3": STEPS}


@API
@HOW
def test_a_changed_tool_result_is_a_miss_at_step_2(
    tmp_path: Path, server: FakeServer, api: str, how: str
) -> None:
    """A tool that now returns another result is diagnosed at the second model call, the
    request that first carries it, at the step the cassette gave that call (see ``STEPS``)."""
    path = tmp_path / "run.jsonl"
    _answer(path, "record", server.base_url, api=api, how=how)
    server.stop()

    def add(a: int, b: int) -> int:  # the same tool, now off by one
        """Add two integers."""
        return a + b + 1

    with pytest.raises(ReplayMiss) as info:
        _answer(path, "replay", server.base_url, api=api, how=how, add=add)
    miss = info.value
    steps = [r.step for r in read_cassette(path).records]
    assert steps == STEPS
    assert miss.expected is not None and miss.step == miss.expected.step == steps[1]
    assert (miss.matched, miss.changes) == (1, [RESULT_FIELD[api]])


@API
@HOW
def test_one_word_edit_of_the_task_is_a_replay_miss_at_step_1(
    tmp_path: Path, server: FakeServer, api: str, how: str
) -> None:
    """Replaying with one word of the task changed raises ReplayMiss naming both words."""
    path = tmp_path / "run.jsonl"
    _answer(path, "record", server.base_url, api=api, how=how, task="sum 1 to 3, carefully")
    server.stop()
    with pytest.raises(ReplayMiss) as info:
        _answer(path, "replay", server.base_url, api=api, how=how, task="sum 1 to 3, quickly")
    assert_task_miss(info.value, TASK_FIELD[api])


@API
def test_two_agents_at_once_share_one_tape(tmp_path: Path, server: FakeServer, api: str) -> None:
    """Two runs gathered under one tape record, then replay with the server stopped."""
    path = tmp_path / "run.jsonl"
    answers = _answer(path, "record", server.base_url, api=api, how="gather")
    assert answers == "The total is 6. / The total is 3."
    assert len(server.requests) == 4 + 3
    server.stop()
    assert _answer(path, "replay", server.base_url, api=api, how="gather") == answers
    assert agent_steps(path) == {"sum 1 to 3": [1, 2, 3, 4], "sum 1 to 2": [1, 2, 3]}


# An unmodified script: the SDK's default model (the Responses API) and its default client,
# which reads OPENAI_BASE_URL and OPENAI_API_KEY from the environment.
AGENT_SCRIPT = '''
import sys

from agents import Agent, Runner, function_tool


@function_tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


agent = Agent(name="adder", instructions="Add with the add tool.", tools=[add])
print(Runner.run_sync(agent, sys.argv[1]).final_output)
'''


@pytest.mark.slow
def test_tracetape_run_records_and_replays_the_script(tmp_path: Path, server: FakeServer) -> None:
    """``tracetape run`` tapes the script; replay needs no server; a one-word edit exits 3."""
    (tmp_path / "agent.py").write_text(AGENT_SCRIPT, encoding="utf-8")
    env = {"OPENAI_BASE_URL": server.base_url + "/v1"}
    record_replay_miss(
        tmp_path, server, lambda task: ["agent.py", task], "The total is 6.\n", env=env
    )
