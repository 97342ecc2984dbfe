"""openai-agents, unmodified, taped against the fake model server and replayed with it stopped.

The agent adds numbers with a function tool, through the Responses model (the SDK's default) or
the Chat Completions model, run with ``Runner.run_sync``, ``Runner.run`` or
``Runner.run_streamed``. In-process runs disable the SDK's tracing, which would export to
api.openai.com; ``tracetape run`` subprocesses get ``OPENAI_AGENTS_DISABLE_TRACING`` instead
(``FAKE_KEYS``).
"""

from __future__ import annotations

import asyncio
import importlib
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import pytest
from openai import AsyncOpenAI

from tests.integrations.frameworks.conftest import taped, tracetape_run
from tracetape import ReplayMiss, read_cassette

if TYPE_CHECKING:
    from tests.integrations.fakeserver import FakeServer

_INTEGRATIONS = Path(__file__).resolve().parent.parent


def _import_openai_agents() -> ModuleType:
    """openai-agents' ``agents`` package. ``tests/integrations/agents.py`` (the SDK tests' agent
    loop, put first on ``sys.path`` by ``../conftest.py``) holds the same top-level name, so
    import the package past it and leave ``sys.modules["agents"]`` as it was for those tests."""
    shadow = sys.modules.pop("agents", None)
    path = sys.path[:]
    sys.path[:] = [p for p in path if Path(p or ".").resolve() != _INTEGRATIONS]
    try:
        return importlib.import_module("agents")
    finally:
        sys.path[:] = path
        if shadow is not None:
            sys.modules["agents"] = shadow
        else:
            del sys.modules["agents"]


oa = _import_openai_agents()
oa.set_tracing_disabled(True)  # in-process runs export no trace to api.openai.com

MODELS = {"responses": oa.OpenAIResponsesModel, "chat": oa.OpenAIChatCompletionsModel}
# where the task sits in the keyed request: the Chat Completions model sends the
# instructions as a system message first
TASK_FIELD = {"responses": "messages[0].content", "chat": "messages[1].content"}


@pytest.fixture(autouse=True)
def _openai_agents_by_its_name(monkeypatch: pytest.MonkeyPatch) -> None:
    """The real package under its own name while a test runs, for the SDK's lazy imports."""
    monkeypatch.setitem(sys.modules, "agents", oa)


@oa.function_tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def _agent(client: AsyncOpenAI, api: str) -> Any:
    model = MODELS[api](model="gpt-test", openai_client=client)
    return oa.Agent(name="adder", instructions="Add with the add tool.", tools=[add], model=model)


async def _run(agent: Any, task: str) -> str:
    return str((await oa.Runner.run(agent, task)).final_output)


async def _run_streamed(agent: Any, task: str) -> str:
    result = oa.Runner.run_streamed(agent, task)
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


def _answer(base_url: str, api: str, how: str, task: str) -> str:
    """Run the agent once with ``Runner.run_sync`` or one of ``RUNS``, on a loop of its own:
    ``run_sync`` uses the thread's default loop and leaves it open, and the client's
    connections must be closed on the loop that opened them."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    client = AsyncOpenAI(base_url=base_url + "/v1", api_key="sk-test")
    try:
        agent = _agent(client, api)
        if how == "run_sync":
            return str(oa.Runner.run_sync(agent, task).final_output)
        return loop.run_until_complete(RUNS[how](agent, task))
    finally:
        loop.run_until_complete(client.close())
        asyncio.set_event_loop(None)
        loop.close()


def _taped_answer(path: Path, mode: str, base_url: str, api: str, how: str, task: str) -> str:
    with taped(path, mode):
        return _answer(base_url, api, how, task)


API = pytest.mark.parametrize("api", ["responses", "chat"])
HOW = pytest.mark.parametrize("how", ["run_sync", "run", "run_streamed"])


@API
@HOW
def test_agent_replays_with_server_stopped(
    tmp_path: Path, server: FakeServer, api: str, how: str
) -> None:
    """A recorded four-turn agent run replays to the same answer with the server stopped."""
    path = tmp_path / "run.jsonl"
    answer = _taped_answer(path, "record", server.base_url, api, how, "sum 1 to 3")
    assert answer == "The total is 6."
    assert len(server.requests) == 4
    server.stop()
    assert _taped_answer(path, "replay", server.base_url, api, how, "sum 1 to 3") == answer
    assert len(server.requests) == 4


@API
@HOW
def test_cassette_numbers_the_model_calls_in_order(
    tmp_path: Path, server: FakeServer, api: str, how: str
) -> None:
    """The cassette numbers the run's four model calls 1 to 4, as a miss would report them."""
    path = tmp_path / "run.jsonl"
    _taped_answer(path, "record", server.base_url, api, how, "sum 1 to 3")
    assert [r.step for r in read_cassette(path).records] == [1, 2, 3, 4]


@API
@HOW
def test_one_word_edit_of_the_task_is_a_replay_miss_at_step_1(
    tmp_path: Path, server: FakeServer, api: str, how: str
) -> None:
    """Replaying with one word of the task changed raises ReplayMiss naming both words."""
    path = tmp_path / "run.jsonl"
    _taped_answer(path, "record", server.base_url, api, how, "sum 1 to 3, carefully")
    server.stop()
    with pytest.raises(ReplayMiss) as info:
        _taped_answer(path, "replay", server.base_url, api, how, "sum 1 to 3, quickly")
    miss = info.value
    assert type(miss) is ReplayMiss
    assert miss.step == 1
    assert miss.matched == 0
    assert miss.changes == [TASK_FIELD[api]]
    assert "carefully" in str(miss)
    assert "quickly" in str(miss)


@API
def test_two_agents_at_once_share_one_tape(tmp_path: Path, server: FakeServer, api: str) -> None:
    """Two runs gathered under one tape record, then replay with the server stopped."""
    path = tmp_path / "run.jsonl"
    answers = _taped_answer(path, "record", server.base_url, api, "gather", "sum 1 to 3")
    assert answers == "The total is 6. / The total is 3."
    assert len(server.requests) == 4 + 3
    server.stop()
    assert _taped_answer(path, "replay", server.base_url, api, "gather", "sum 1 to 3") == answers


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


def test_tracetape_run_records_and_replays_the_script(tmp_path: Path, server: FakeServer) -> None:
    """``tracetape run`` tapes the script; replay needs no server; a one-word edit exits 3."""
    (tmp_path / "agent.py").write_text(AGENT_SCRIPT, encoding="utf-8")
    env = {"OPENAI_BASE_URL": server.base_url + "/v1"}

    def run(mode: str, task: str) -> Any:
        return tracetape_run(tmp_path, "run.jsonl", mode, ["agent.py", task], env=env)

    recorded = run("record", "sum 1 to 3, carefully")
    assert recorded.returncode == 0, recorded.stderr
    assert recorded.stdout == "The total is 6.\n"
    server.stop()
    replayed = run("replay", "sum 1 to 3, carefully")
    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stdout == recorded.stdout
    edited = run("replay", "sum 1 to 3, quickly")
    assert edited.returncode == 3, edited.stderr
    assert "carefully" in edited.stderr
    assert "quickly" in edited.stderr

