"""Steps: a model call's step read from its conversation, a tool call's from the answer that
asked for it, and cassettes keyed before that re-keyed when a hook takes them."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool, set_tracing_disabled
from fakeserver import FakeServer
from openai import AsyncOpenAI

import tracetape
from tracetape import Tape, read_cassette
from tracetape.integrations.providers import Match, match_route, provider
from tracetape.integrations.steps import StepBook, conversation_step, migrate

FIXTURE = Path(__file__).parents[1] / "fixtures" / "recorded_before_conversation_steps.jsonl"
set_tracing_disabled(True)


def _route(path: str) -> Match:
    found = match_route("POST", "127.0.0.1", path)
    assert found is not None
    return found


@pytest.mark.parametrize(
    ("name", "conversation", "step"),
    [
        pytest.param("openai", [], 1, id="empty"),
        pytest.param(
            "openai",
            [
                {"role": "system", "content": "s"},
                {"role": "user", "content": "q"},
                {"role": "assistant", "tool_calls": []},
                {"role": "tool", "content": "1"},
                {"role": "assistant", "tool_calls": []},
                {"role": "tool", "content": "2"},
            ],
            3,
            id="chat",
        ),
        pytest.param(
            "openai",
            [
                {"type": "message", "role": "user", "content": "q"},
                {"type": "reasoning", "summary": []},
                {"type": "function_call", "name": "add", "arguments": "{}"},
                {"type": "function_call", "name": "add", "arguments": "{}"},
                {"type": "function_call_output", "output": "1"},
                {"type": "function_call_output", "output": "2"},
            ],
            2,
            id="responses-one-turn-of-three-items",
        ),
        pytest.param(
            "anthropic",
            [
                {"role": "user", "content": "q"},
                {"role": "assistant", "content": [{"type": "tool_use"}]},
                {"role": "user", "content": [{"type": "tool_result"}]},
            ],
            2,
            id="anthropic",
        ),
        pytest.param("openai", "a one-shot prompt", 1, id="one-shot"),
    ],
)
def test_a_step_is_the_turns_of_the_conversation_plus_one(
    name: str, conversation: Any, step: int
) -> None:
    """A request's step is 1 + the model turns its conversation holds; several model items in
    a row (a reasoning item and two tool calls) are one turn."""
    assert conversation_step(provider(name), conversation) == step


def test_a_responses_request_continues_the_step_of_its_previous_response() -> None:
    """A Responses request that names ``previous_response_id`` (the server keeps the
    conversation) is one step after the answer it continues."""
    book, route = StepBook(), _route("/v1/responses")
    first = {"model": "m", "input": "q"}
    assert book.model_step(route, first) == 1
    book.answered(route, first, 1, {"status": 200, "body": {"object": "response", "id": "r1"}})
    second = {"model": "m", "input": [{"type": "function_call_output"}]}
    assert book.model_step(route, {**second, "previous_response_id": "r1"}) == 2
    assert book.model_step(route, {**second, "previous_response_id": "unknown"}) == 1


@pytest.mark.parametrize(
    "conversation",
    [pytest.param("conv_1", id="by-id"), pytest.param({"id": "conv_1"}, id="as-object")],
)
def test_a_responses_request_in_a_stored_conversation_continues_its_last_step(
    conversation: Any,
) -> None:
    """Requests that add to a stored ``conversation`` (the server keeps it) each take the
    step after the latest answer in it; another conversation starts at step 1."""
    book, route = StepBook(), _route("/v1/responses")
    answer = {"status": 200, "body": {"object": "response", "id": "r"}}
    first = {"model": "m", "input": "q", "conversation": conversation}
    assert book.model_step(route, first) == 1
    book.answered(route, first, 1, answer)
    second = {
        "model": "m",
        "input": [{"type": "function_call_output"}],
        "conversation": conversation,
    }
    assert book.model_step(route, second) == 2
    book.answered(route, second, 2, answer)
    assert book.model_step(route, {**second, "input": "and then?"}) == 3
    assert book.model_step(route, {**second, "conversation": "conv_2"}) == 1


def _chat_answer(*calls: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    tool_calls = [
        {"id": f"c{i}", "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
        for i, (n, a) in enumerate(calls)
    ]
    message = {"role": "assistant", "content": None, "tool_calls": tool_calls}
    return {"status": 200, "body": {"object": "chat.completion", "choices": [{"message": message}]}}


def test_a_tool_call_takes_the_step_of_the_answer_that_asked_for_it() -> None:
    """Answers of steps 1 and 2 ask for the same tool with other arguments: each call takes
    the step of the answer that asked for its arguments, in any order; arguments a tool adds
    (its defaults) still match; a tool no answer asked for takes the latest model step."""
    book, chat = StepBook(), _route("/v1/chat/completions")
    book.answered(chat, {}, 1, _chat_answer(("add", {"a": 1, "b": 2})))
    book.answered(chat, {}, 2, _chat_answer(("add", {"a": 3, "b": 3})))
    book.saw(2)
    assert book.tool_step("add", {"a": 3, "b": 3}) == 2
    assert book.tool_step("add", {"a": 1, "b": 2, "units": "metric"}) == 1
    assert book.tool_step("add", {"a": 1, "b": 2}) == 2  # asked by none left: the latest
    assert book.tool_step("clock", {}) == 2


def test_a_tool_call_no_arguments_match_takes_the_oldest_waiting_ask() -> None:
    """Where no waiting ask has the call's arguments (nor arguments the call includes), the
    call takes the oldest ask of that tool, so asks are used up in the order they came."""
    book, chat = StepBook(), _route("/v1/chat/completions")
    book.answered(chat, {}, 1, _chat_answer(("read", {"path": "a.py"})))
    book.answered(chat, {}, 2, _chat_answer(("read", {"path": "b.py"})))
    book.saw(5)
    assert book.tool_step("read", {"path": "c.py"}) == 1  # the oldest
    assert book.tool_step("read", {"file": "x"}) == 2  # the next oldest
    assert book.tool_step("read", {"path": "a.py"}) == 5  # none left: the latest step


def test_each_thread_falls_back_to_its_own_latest_step() -> None:
    """A tool no answer asked for takes the latest model step of its own thread."""
    book = StepBook()
    book.saw(5)
    seen: list[int] = []

    def worker() -> None:
        book.saw(2)
        seen.append(book.tool_step("clock", {}))

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    assert seen == [2]
    assert book.tool_step("clock", {}) == 5


@tracetape.tool(effect="read")
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def _agent_run(path: Path, mode: str, base_url: str, **tape: Any) -> str:
    """The openai-agents Chat model run the fixture was recorded from (``add`` taped)."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    client = AsyncOpenAI(base_url=base_url + "/v1", api_key="sk-test")
    agent = Agent(
        name="adder",
        instructions="Add with the add tool.",
        tools=[function_tool(add)],
        model=OpenAIChatCompletionsModel(model="gpt-test", openai_client=client),
    )
    try:
        with Tape(path, mode=mode, harness_sha="fixture", **tape) as t, tracetape.patch_sdks(t):
            return str(loop.run_until_complete(Runner.run(agent, "sum 1 to 3")).final_output)
    finally:
        loop.run_until_complete(client.close())
        asyncio.set_event_loop(None)
        loop.close()


def test_a_cassette_keyed_before_conversation_steps_replays(
    tmp_path: Path, server: FakeServer
) -> None:
    """A cassette recorded by the tracetape before this change (openai-agents' Chat model,
    whose task scheduling numbered the model calls 1, 1, 2, 3) replays whole, strict, with the
    server stopped: the hooks re-key it as it would be keyed now (model calls 1..4, each
    tool call at the step that asked for it), the same keys a recording makes today."""
    old = read_cassette(FIXTURE)
    assert "keys" not in (old.header or {})
    assert [r.step for r in old.records if r.kind == "llm"] == [1, 1, 2, 3]
    migrated = migrate(old.records)
    assert [(r.kind, r.step) for r in migrated] == [
        ("llm", 1), ("tool", 1), ("llm", 2), ("tool", 2), ("llm", 3), ("tool", 3), ("llm", 4)
    ]  # fmt: skip
    path = tmp_path / "now.jsonl"
    assert _agent_run(path, "record", server.base_url) == "The total is 6."
    now = read_cassette(path)
    assert now.header is not None and now.header["keys"] == 2
    assert [r.key for r in now.records] == [r.key for r in migrated]
    server.stop()
    assert _agent_run(FIXTURE, "replay", server.base_url, strict=True) == "The total is 6."


def test_migrating_keeps_what_it_cannot_rekey() -> None:
    """Records without a stored input, and ``tape.call`` payloads of the user's own shape,
    keep their keys; a cassette already keyed by conversation is left as it is."""
    records = read_cassette(FIXTURE).records
    bare = [r.__class__(kind=r.kind, key=r.key, step=r.step, out=r.out) for r in records]
    assert [r.key for r in migrate(bare)] == [r.key for r in records]
    own = records[0].__class__(
        kind="llm", key="llm:own", step=7, input={"messages": [], "step": 7}, out="x"
    )
    assert migrate([own]) == [own]
    again = migrate(records)
    assert [r.key for r in migrate(again)] == [r.key for r in again]


def test_tracetape_migrate_re_keys_a_hooked_cassette_for_good(
    tmp_path: Path, server: FakeServer
) -> None:
    """``tracetape migrate`` writes the re-keying the hooks do on the fly into the file: the
    migrated cassette holds today's keys (a recording now makes the same), is keys 2, and
    replays whole, strict, with the server stopped, re-keyed by nothing."""
    from click.testing import CliRunner

    from tracetape.cli import main

    path = tmp_path / "old.jsonl"
    path.write_bytes(FIXTURE.read_bytes())
    done = CliRunner().invoke(main, ["migrate", str(path), "--no-backup"])
    assert done.exit_code == 0 and "keys 1 -> 2 (steps from the conversation)" in done.output
    migrated = read_cassette(path)
    assert migrated.header is not None and migrated.header["keys"] == 2
    now = tmp_path / "now.jsonl"
    assert _agent_run(now, "record", server.base_url) == "The total is 6."
    assert [r.key for r in migrated.records] == [r.key for r in read_cassette(now).records]
    server.stop()
    assert _agent_run(path, "replay", server.base_url, strict=True) == "The total is 6."


def test_migrate_gives_a_tool_call_no_arguments_match_the_oldest_waiting_ask() -> None:
    """Re-keying a cassette keyed before conversation steps: a tool call whose arguments no
    waiting ask has takes the oldest ask of its tool, as a live tape does."""
    from tracetape.record import Record

    def model(turn: int, path: str) -> Record:
        messages = [{"role": "user", "content": "q"}] + [{"role": "assistant"}] * (turn - 1)
        data = {"messages": messages, "tools": [], "params": {}, "step": 9}
        return Record(kind="llm", key="llm:x", step=9, input=data,
                      out=_chat_answer(("read", {"path": path})))  # fmt: skip

    def tool(path: str) -> Record:
        data = {"name": "read", "args": {"path": path}, "step": 9}
        return Record(kind="tool", key="tool:x", name="read", step=9, input=data, out="text")

    out = migrate([model(1, "a.py"), model(2, "b.py"), tool("c.py"), tool("d.py"), tool("e.py")])
    assert [r.step for r in out] == [1, 2, 1, 2, 2]  # the oldest, the next, then the latest
