"""LangGraph over langchain-openai, unmodified, taped against the fake model server and replayed
with it stopped.

The agent adds numbers with ``tool(add)``: the prebuilt ReAct graph (``create_react_agent``;
its successor ``langchain.agents.create_agent`` needs the ``langchain`` package, not installed
here) run with ``invoke``, ``ainvoke`` or ``stream(..., stream_mode="messages")``, and a
hand-written ``bind_tools`` loop. LangSmith tracing is switched off whatever the shell says: it
would post runs to api.smith.langchain.com.
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessageChunk, BaseMessage, HumanMessage
from langchain_core.tools import BaseTool, tool
from langchain_openai import ChatOpenAI
from langgraph.prebuilt import create_react_agent
from langgraph.warnings import LangGraphDeprecatedSinceV10
from pydantic import SecretStr

from tests.integrations.frameworks.conftest import (
    FakeServer,
    agent_steps,
    assert_task_miss,
    record_replay_miss,
    taped,
)
from tracetape import ReplayMiss, read_cassette

TASK = "sum 1 to 3"
NO_LANGSMITH = {"LANGSMITH_TRACING": "false", "LANGCHAIN_TRACING_V2": "false"}


# A run's four model calls are steps 1..4 however LangGraph schedules them (tasks, threads,
# copies of the context): a step is read from the conversation each request carries.
STEPS = [1, 2, 3, 4]


@pytest.fixture(autouse=True)
def _no_langsmith(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in NO_LANGSMITH.items():
        monkeypatch.setenv(name, value)


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def _graph(llm: ChatOpenAI, add_tool: BaseTool) -> Any:
    with warnings.catch_warnings():  # deprecated in favour of a package not installed here
        warnings.simplefilter("ignore", LangGraphDeprecatedSinceV10)
        return create_react_agent(llm, [add_tool])


def _invoke(llm: ChatOpenAI, add_tool: BaseTool, task: str) -> str:
    return str(_graph(llm, add_tool).invoke({"messages": [("user", task)]})["messages"][-1].content)


def _ainvoke(llm: ChatOpenAI, add_tool: BaseTool, task: str) -> str:
    result = asyncio.run(_graph(llm, add_tool).ainvoke({"messages": [("user", task)]}))
    return str(result["messages"][-1].content)


def _stream(llm: ChatOpenAI, add_tool: BaseTool, task: str) -> str:
    """The answer as the graph streams it, token by token."""
    pieces = [
        str(chunk.content)
        for chunk, meta in _graph(llm, add_tool).stream(
            {"messages": [("user", task)]}, stream_mode="messages"
        )
        if isinstance(chunk, AIMessageChunk) and meta["langgraph_node"] == "agent"
    ]
    return "".join(pieces)


def _bind_tools(llm: ChatOpenAI, add_tool: BaseTool, task: str) -> str:
    """A hand-written tool loop: the model with the tool bound, until it answers in text."""
    model = llm.bind_tools([add_tool])
    messages: list[BaseMessage] = [HumanMessage(task)]
    while True:
        reply = model.invoke(messages)
        messages.append(reply)
        if not reply.tool_calls:
            return str(reply.content)
        messages += [add_tool.invoke(call) for call in reply.tool_calls]


def _gather(llm: ChatOpenAI, add_tool: BaseTool, task: str) -> str:
    """``task`` and "sum 1 to 2" at once through one graph, their answers joined."""

    async def both() -> list[dict[str, Any]]:
        graph = _graph(llm, add_tool)
        states: list[dict[str, Any]] = await asyncio.gather(
            graph.ainvoke({"messages": [("user", task)]}),
            graph.ainvoke({"messages": [("user", "sum 1 to 2")]}),
        )
        return states

    return " / ".join(str(state["messages"][-1].content) for state in asyncio.run(both()))


RUNS: dict[str, Callable[[ChatOpenAI, BaseTool, str], str]] = {
    "invoke": _invoke,
    "ainvoke": _ainvoke,
    "stream": _stream,
    "bind_tools": _bind_tools,
    "gather": _gather,
}


def _answer(
    path: Path,
    mode: str,
    base_url: str,
    *,
    how: str,
    task: str = TASK,
    add: Callable[[int, int], int] = add,
) -> str:
    """Run the agent once under a tape, one of ``RUNS``."""
    with taped(path, mode):
        llm = ChatOpenAI(model="gpt-test", base_url=base_url + "/v1", api_key=SecretStr("sk-test"))
        return RUNS[how](llm, tool(add), task)


HOW = pytest.mark.parametrize("how", ["invoke", "ainvoke", "stream", "bind_tools"])


@HOW
def test_agent_replays_with_server_stopped(tmp_path: Path, server: FakeServer, how: str) -> None:
    """A recorded four-call agent run replays to the same answer with the server stopped."""
    path = tmp_path / "run.jsonl"
    answer = _answer(path, "record", server.base_url, how=how)
    assert answer == "The total is 6."
    assert len(server.requests) == 4
    server.stop()
    assert _answer(path, "replay", server.base_url, how=how) == answer
    assert len(server.requests) == 4
    assert agent_steps(path) == {"sum 1 to 3": STEPS}


@HOW
def test_a_changed_tool_result_is_a_miss_at_step_2(
    tmp_path: Path, server: FakeServer, how: str
) -> None:
    """A tool that now returns another result is diagnosed at the second model call, the
    request that first carries it, at the step the cassette gave that call (see ``STEPS``)."""
    path = tmp_path / "run.jsonl"
    _answer(path, "record", server.base_url, how=how)
    server.stop()

    def add(a: int, b: int) -> int:  # the same tool, now off by one
        """Add two integers."""
        return a + b + 1

    with pytest.raises(ReplayMiss) as info:
        _answer(path, "replay", server.base_url, how=how, add=add)
    miss = info.value
    # the task, the add call, its result
    steps = [r.step for r in read_cassette(path).records]
    assert steps == STEPS
    assert miss.expected is not None and miss.step == miss.expected.step == steps[1]
    assert (miss.matched, miss.changes) == (1, ["messages[2].content"])


@HOW
def test_one_word_edit_of_the_task_is_a_replay_miss_at_step_1(
    tmp_path: Path, server: FakeServer, how: str
) -> None:
    """Replaying with one word of the task changed raises ReplayMiss naming both words."""
    path = tmp_path / "run.jsonl"
    _answer(path, "record", server.base_url, how=how, task="sum 1 to 3, carefully")
    server.stop()
    with pytest.raises(ReplayMiss) as info:
        _answer(path, "replay", server.base_url, how=how, task="sum 1 to 3, quickly")
    assert_task_miss(info.value, "messages[0].content")


def test_two_agents_at_once_share_one_tape(tmp_path: Path, server: FakeServer) -> None:
    """Two graph runs gathered under one tape record, then replay with the server stopped."""
    path = tmp_path / "run.jsonl"
    answers = _answer(path, "record", server.base_url, how="gather")
    assert answers == "The total is 6. / The total is 3."
    assert len(server.requests) == 4 + 3
    server.stop()
    assert _answer(path, "replay", server.base_url, how="gather") == answers
    assert agent_steps(path) == {"sum 1 to 3": [1, 2, 3, 4], "sum 1 to 2": [1, 2, 3]}


# An unmodified program: ChatOpenAI's client reads OPENAI_BASE_URL and OPENAI_API_KEY.
AGENT_SCRIPT = '''
import sys

from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.prebuilt import create_react_agent


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


agent = create_react_agent(ChatOpenAI(model="gpt-test"), [add])
print(agent.invoke({"messages": [("user", sys.argv[1])]})["messages"][-1].content)
'''


@pytest.mark.slow
def test_tracetape_run_records_and_replays_the_script(tmp_path: Path, server: FakeServer) -> None:
    """``tracetape run`` tapes the script; replay needs no server; a one-word edit exits 3."""
    (tmp_path / "agent.py").write_text(AGENT_SCRIPT, encoding="utf-8")
    env = {"OPENAI_BASE_URL": server.base_url + "/v1", **NO_LANGSMITH}
    record_replay_miss(
        tmp_path, server, lambda task: ["agent.py", task], "The total is 6.\n", env=env
    )
