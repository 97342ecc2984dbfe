"""Steps: a model call's step read from its conversation, a tool call's from the answer that
asked for it, and cassettes keyed before that re-keyed when a hook takes them."""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import openai
import pytest
from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool, set_tracing_disabled
from fakeserver import FakeServer
from hypothesis import given
from hypothesis import strategies as st
from openai import AsyncOpenAI

import tracetape
from tests.suite import bounded
from tracetape import Tape, read_cassette
from tracetape.integrations.providers import Match, match_route, provider
from tracetape.integrations.steps import KEYS_VERSION, StepBook, conversation_step, migrate

FIXTURE = Path(__file__).parents[1] / "fixtures" / "recorded_before_conversation_steps.jsonl"
# Recorded by the tracetape of e736d9e~1 ("keys": 2, before quotes were read) with the openai
# SDK against a local fake model: a ReAct loop as ``_react_sdk(..., taped=True)`` runs it, and
# two Responses calls as ``_responses_run`` makes them.
KEYS_2_REACT = FIXTURE.with_name("recorded_before_quoted_steps_react.jsonl")
KEYS_2_RESPONSES = FIXTURE.with_name("recorded_before_quoted_steps_responses.jsonl")
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
    assert now.header is not None and now.header["keys"] == KEYS_VERSION
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
    migrated cassette holds today's keys (a recording now makes the same), is keys 3, and
    replays whole, strict, with the server stopped, re-keyed by nothing."""
    from click.testing import CliRunner

    from tracetape.cli import main

    path = tmp_path / "old.jsonl"
    path.write_bytes(FIXTURE.read_bytes())
    done = CliRunner().invoke(main, ["migrate", str(path), "--no-backup"])
    assert (
        done.exit_code == 0
        and f"keys 1 -> {KEYS_VERSION} (steps from the conversation;" in done.output
    )
    migrated = read_cassette(path)
    assert migrated.header is not None and migrated.header["keys"] == KEYS_VERSION
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


# -- flows that flatten their history into one user message (dspy's ReAct) -------------------------

_REACT_SYSTEM = (
    "Your input fields are:\n1. `question` (str): \n2. `trajectory` (str):\nYour output fields "
    "are:\n1. `next_thought` (str): \n2. `next_tool_name` (Literal['search_wikipedia', "
    "'finish']): \n3. `next_tool_args` (dict[str, Any]):\nAll interactions will be structured "
    "in the following way, with the appropriate values filled in.\n\n[[ ## question ## ]]\n"
    "{question}\n\n[[ ## trajectory ## ]]\n{trajectory}\n\n[[ ## next_thought ## ]]\n"
    "{next_thought}\n\n[[ ## completed ## ]]\nIn adhering to this structure, your objective "
    "is: \n        You are an Agent. In each episode, you will be given the fields `question` "
    "as input. And you can see your past trajectory so far."
)
_REACT_ASKS = (
    "Respond with the corresponding output fields, starting with the field "
    "`[[ ## next_thought ## ]]`, then `[[ ## next_tool_name ## ]]` (must be formatted as a valid "
    "Python Literal['search_wikipedia', 'finish']), then `[[ ## next_tool_args ## ]]` (must be "
    "formatted as a valid Python dict[str, Any]), and then ending with the marker for "
    "`[[ ## completed ## ]]`."
)
_EXTRACT_ASKS = (
    "Respond with the corresponding output fields, starting with the field "
    "`[[ ## reasoning ## ]]`, then `[[ ## answer ## ]]`, and then ending with the marker for "
    "`[[ ## completed ## ]]`."
)

# one ReAct iteration: the model's thought, tool and arguments, and the tool's observation
Act = tuple[str, str, dict[str, Any], str]


def _react_request(question: str, done: list[Act], asks: str = _REACT_ASKS) -> dict[str, Any]:
    """The body dspy 3's ReAct sends (ChatAdapter): ``[system, user]``, the user message
    holding the question and the trajectory so far, as ``ReAct._format_trajectory`` writes
    it (a tool's arguments again as ``json.dumps`` of the parsed value)."""
    fields = []
    for i, (thought, tool, args, observation) in enumerate(done):
        fields += [
            f"[[ ## thought_{i} ## ]]\n{thought}",
            f"[[ ## tool_name_{i} ## ]]\n{tool}",
            f"[[ ## tool_args_{i} ## ]]\n{json.dumps(args, ensure_ascii=False)}",
            f"[[ ## observation_{i} ## ]]\n{observation}",
        ]
    trajectory = "\n\n".join(fields)
    user = f"[[ ## question ## ]]\n{question}\n\n[[ ## trajectory ## ]]\n{trajectory}\n\n{asks}"
    messages = [{"role": "system", "content": _REACT_SYSTEM}, {"role": "user", "content": user}]
    return {"model": "gpt-test", "messages": messages, "temperature": 0.0}


def _react_answer(thought: str, tool: str, args: dict[str, Any]) -> str:
    """What the model answers ReAct in dspy's chat format (the arguments as compact JSON, not
    as dspy writes them again)."""
    return (
        f"[[ ## next_thought ## ]]\n{thought}\n\n[[ ## next_tool_name ## ]]\n{tool}\n\n"
        f"[[ ## next_tool_args ## ]]\n{json.dumps(args, separators=(',', ':'))}\n\n"
        "[[ ## completed ## ]]"
    )


def _react_json_answer(thought: str, tool: str, args: dict[str, Any]) -> str:
    """What the model answers dspy's JSON adapter (the chat adapter's fallback), indented in a
    code fence."""
    fields = {"next_thought": thought, "next_tool_name": tool, "next_tool_args": args}
    return f"```json\n{json.dumps(fields, indent=2)}\n```"


def _text_answer(text: str) -> dict[str, Any]:
    message = {"role": "assistant", "content": text}
    return {"status": 200, "body": {"object": "chat.completion", "choices": [{"message": message}]}}


def _react_flow(
    question: str,
    acts: list[Act],
    answer: Callable[[str, str, dict[str, Any]], str] = _react_answer,
) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """The (request, answer) pairs of one ReAct run: an iteration per act (the last one
    calls ``finish``), then the extraction of the answer from the whole trajectory."""
    calls = [
        (_react_request(question, acts[:i]), _text_answer(answer(*act[:3])))
        for i, act in enumerate(acts)
    ]
    extract = _react_request(question, acts, _EXTRACT_ASKS)
    said = "[[ ## reasoning ## ]]\nThe search said so.\n\n[[ ## answer ## ]]\nParis"
    return [*calls, (extract, _text_answer(said + "\n\n[[ ## completed ## ]]"))]


_FRANCE: list[Act] = [
    ("I should look up the capital of France.", "search_wikipedia", {"query": "capital of France"},
     "Paris is the capital and largest city of France."),
    ("The search says Paris; let me confirm its population too.", "search_wikipedia",
     {"query": "population of Paris"}, "About 2.1 million people live in Paris proper."),
    ("I have everything I need to answer.", "finish", {}, "Completed."),
]  # fmt: skip
_PERU: list[Act] = [
    ("Which city is the capital of Peru? Search for it.", "search_wikipedia",
     {"query": "Peru capital"}, "Lima is the capital of Peru."),
    ("I have everything I need to answer.", "finish", {}, "Completed."),
]  # fmt: skip


def _run(book: StepBook, calls: list[tuple[dict[str, Any], dict[str, Any]]]) -> list[int]:
    chat, steps = _route("/v1/chat/completions"), []
    for body, answer in calls:
        steps.append(book.model_step(chat, body))
        book.answered(chat, body, steps[-1], answer)
    return steps


_TERSE: list[Act] = [
    ("Look it up.", "search_wikipedia", {"query": "capital city of the French Republic"},
     "Paris is the capital and largest city of France."),
    ("And its size?", "search_wikipedia", {"query": "population of the city of Paris in 2024"},
     "About 2.1 million people live in Paris proper."),
    ("Done: answer.", "finish", {}, "Completed."),
]  # fmt: skip


@pytest.mark.parametrize(
    ("acts", "answer"),
    [
        pytest.param(_FRANCE, _react_answer, id="chat-format"),
        pytest.param(_FRANCE, _react_json_answer, id="json"),
        pytest.param(_TERSE, _react_answer, id="arguments-longer-than-thoughts"),
    ],
)
def test_a_flow_that_sends_its_history_in_one_user_message_counts_its_steps(
    acts: list[Act], answer: Callable[[str, str, dict[str, Any]], str]
) -> None:
    """dspy's ReAct sends ``[system, user]`` every time, the user message carrying the
    trajectory so far: each request quotes the answers before it (their thought, tool and
    arguments, whether the model answered in dspy's chat format or in JSON, and its arguments
    as dspy writes them again), so it continues the latest: steps 1, 2, 3, then 4 for the
    extraction of the answer."""
    calls = _react_flow("What is the capital of France?", acts, answer)
    assert _run(StepBook(), calls) == [1, 2, 3, 4]


@pytest.mark.parametrize(
    "peru",
    [
        pytest.param(_PERU, id="the-same-closing-words"),
        pytest.param(
            [_PERU[0], ("Lima it is; nothing more to look up.", "finish", {}, "Completed.")],
            id="each-in-its-own-words",
        ),
    ],
)
def test_interleaved_flows_that_flatten_their_history_stay_apart(peru: list[Act]) -> None:
    """Two ReAct runs at once, their calls interleaved, each count their own steps; where
    both close with the same words (a finish at step 3 of one and step 2 of the other), the
    answer whose own predecessor the request quotes too is the one it continues."""
    book, chat = StepBook(), _route("/v1/chat/completions")
    france = _react_flow("What is the capital of France?", _FRANCE)
    peru_calls = _react_flow("What is the capital of Peru?", peru)
    order = [("fr", 0), ("pe", 0), ("fr", 1), ("fr", 2), ("pe", 1), ("fr", 3), ("pe", 2)]
    steps: dict[str, list[int]] = {"fr": [], "pe": []}
    for flow, i in order:
        body, answer = (france if flow == "fr" else peru_calls)[i]
        steps[flow].append(book.model_step(chat, body))
        book.answered(chat, body, steps[flow][-1], answer)
    assert steps == {"fr": [1, 2, 3, 4], "pe": [1, 2, 3]}


def test_a_request_that_quotes_no_earlier_answer_is_step_1() -> None:
    """After a ReAct run and two answers of one message each, a request quoting none of them
    is step 1: a new question; a message holding an answer's tool name and arguments but not
    its thought (flows share tools), or only short lines ("search", "Paris"), or the longest of
    many lines of an answer alone, or the answer of a conversation that chains by its model
    turns (which keeps their count whatever it quotes). The extraction of the run quoted
    again continues it."""
    book, chat = StepBook(), _route("/v1/chat/completions")
    france = _react_flow("What is the capital of France?", _FRANCE)
    _run(book, france)
    plan = "\n".join(f"Line {i} of a long plan that the agent wrote out." for i in range(10))

    def asked(text: str) -> dict[str, Any]:
        return {"model": "m", "messages": [{"role": "user", "content": text}]}

    _run(book, [(asked("Plan it."), _text_answer(plan)),
                (asked("Where?"), _chat_answer(("lookup", {"city": "Paris"})))])  # fmt: skip
    told = "Lima is the capital of Peru, as the search confirmed."
    chat_flow = {"model": "m", "messages": [
        {"role": "user", "content": "q"}, {"role": "assistant", "content": "a"},
        {"role": "user", "content": "and Peru?"},
    ]}  # fmt: skip
    assert _run(book, [(chat_flow, _text_answer(told))]) == [2]
    assert book.model_step(chat, _react_request("What is the capital of Peru?", [])) == 1
    assert book.model_step(chat, asked('search_wikipedia\n{"query": "capital of France"}')) == 1
    assert book.model_step(chat, asked("lookup\n\nParis")) == 1
    assert book.model_step(chat, asked("Line 9 of a long plan that the agent wrote out.")) == 1
    assert book.model_step(chat, asked(told)) == 1  # a flow of model turns: counted by them
    closing = _FRANCE[-1][0]  # the run's answer of step 3
    chained = {"model": "m", "messages": [
        {"role": "user", "content": closing}, {"role": "assistant", "content": "ok"},
        {"role": "user", "content": closing},
    ]}  # fmt: skip
    assert book.model_step(chat, chained) == 2
    assert book.model_step(chat, france[-1][0]) == 4


def _old_records(calls: list[tuple[dict[str, Any], dict[str, Any]]]) -> list[Any]:
    """The records a tracetape of keys 1 wrote for ``calls`` (its steps counted per thread)."""
    from tracetape.record import Record

    records = []
    for n, (body, answer) in enumerate(calls, 1):
        params = {k: v for k, v in body.items() if k != "messages"}
        data = {"messages": body["messages"], "tools": [], "params": params, "step": n}
        records.append(Record(kind="llm", key=f"llm:{n}", step=n, input=data, out=answer,
                              api="openai.chat.completions"))  # fmt: skip
    return records


def test_migrate_counts_the_steps_of_a_flow_that_flattens_its_history() -> None:
    """Re-keying a cassette keyed before conversation steps applies the same rule: a ReAct
    run's requests are steps 1..4, as a live tape keys them."""
    calls = _react_flow("What is the capital of France?", _FRANCE)
    assert [r.step for r in migrate(_old_records(calls))] == [1, 2, 3, 4]


_WORDS = st.sampled_from(["Paris", "Lima", "Oslo", "Quito", "river", "census", "mayor", "map"])
Calls = list[tuple[dict[str, Any], dict[str, Any]]]


@st.composite
def _flows(draw: st.DrawFn) -> tuple[list[Calls], list[int]]:
    """Two or three ReAct runs of one to four iterations each, whose thoughts are their own
    or a closing thought several share, and the order their requests and answers come in
    (each run's own in turn: a request, its answer, the next request...)."""
    flows = []
    for n in range(draw(st.integers(2, 3))):
        acts: list[Act] = []
        for i in range(draw(st.integers(0, 3))):
            words = " ".join(draw(st.lists(_WORDS, min_size=1, max_size=3)))
            acts.append((f"Run {n} looks up {words} (try {i}).", "search_wikipedia",
                         {"query": words}, f"Found {words}."))  # fmt: skip
        closing = draw(
            st.sampled_from(["I have everything I need to answer.", f"Run {n} is done."])
        )
        acts.append((closing, "finish", {}, "Completed."))
        flows.append(_react_flow(f"Question {n}?", acts))
    order = draw(st.permutations([n for n, calls in enumerate(flows) for _ in calls for _ in "qa"]))
    return flows, order


@bounded(deep=1000, ci=100)
@given(_flows())
def test_interleaved_flattened_flows_count_their_own_steps_live_and_migrated(
    drawn: tuple[list[Calls], list[int]],
) -> None:
    """However ReAct runs interleave their requests and answers, each counts steps 1..n, and
    re-keying the cassette they make (the records in the order they were answered) gives the
    same steps."""
    flows, order = drawn
    book, chat = StepBook(), _route("/v1/chat/completions")
    events = [0] * len(flows)
    steps: list[list[int]] = [[] for _ in flows]
    answered: Calls = []
    live: list[int] = []
    for n in order:
        body, answer = flows[n][events[n] // 2]
        if events[n] % 2 == 0:
            steps[n].append(book.model_step(chat, body))
        else:
            book.answered(chat, body, steps[n][-1], answer)
            answered.append((body, answer))
            live.append(steps[n][-1])
        events[n] += 1
    assert steps == [list(range(1, len(calls) + 1)) for calls in flows]
    assert [r.step for r in migrate(_old_records(answered))] == live


def test_a_long_answer_is_quoted_by_its_longest_lines() -> None:
    """An answer of many lines is checked by its 32 longest: a message holding half of those
    quotes it (the memory an answer keeps stays bounded), and one holding fewer does not."""
    book, chat = StepBook(), _route("/v1/chat/completions")
    lines = [f"Line {i:03d} of a long report that the agent wrote out." for i in range(100)]

    def asked(text: str) -> dict[str, Any]:
        return {"model": "m", "messages": [{"role": "user", "content": text}]}

    _run(book, [(asked("Write the report."), _text_answer("\n".join(lines)))])
    assert book.model_step(chat, asked("\n".join(lines[-16:]))) == 2  # the longest: the last
    assert book.model_step(chat, asked("\n".join(lines[-15:]))) == 1


class _ReactModel(BaseHTTPRequestHandler):
    """A chat-completions endpoint that answers ReAct as a model would: the next act of
    ``_FRANCE`` for the trajectory it is sent, then the extracted answer."""

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        user = body["messages"][-1]["content"]
        done = user.count("[[ ## thought_")
        if "[[ ## reasoning ## ]]" in user:
            text = "[[ ## reasoning ## ]]\nThe search said so.\n\n[[ ## answer ## ]]\nParis"
        else:
            text = _react_answer(*_FRANCE[done][:3])
        message = {"role": "assistant", "content": text}
        data = json.dumps({
            "id": f"chatcmpl-{done}", "object": "chat.completion", "created": 1, "model": "m",
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        }).encode()  # fmt: skip
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


def _serve_react() -> tuple[ThreadingHTTPServer, str]:
    """A ``_ReactModel`` server started, and its base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _ReactModel)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/v1"


def _stop(server: ThreadingHTTPServer) -> None:
    server.shutdown()
    server.server_close()


@tracetape.tool(effect="read")
def search_wikipedia(query: str) -> str:
    """The search ReAct calls in ``_react_sdk`` (and in the keys-2 fixture): ``_FRANCE``'s
    observations."""
    return {act[2]["query"]: act[3] for act in _FRANCE if "query" in act[2]}[query]


def _react_sdk(path: Path, url: str, mode: str, *, taped: bool = False, **tape: Any) -> list[str]:
    """A ReAct loop over the OpenAI SDK (each request ``[system, user]`` built from the answers
    it got), run on a tape at ``path``; with ``taped``, its searches are ``search_wikipedia``
    calls on the tape. The answers it got."""
    client = openai.OpenAI(base_url=url, api_key="sk-test", max_retries=0)
    answers: list[str] = []
    done: list[Act] = []
    with Tape(path, mode=mode, **tape) as t, tracetape.patch_sdks(t):
        for i in range(len(_FRANCE) + 1):
            asks = _REACT_ASKS if i < len(_FRANCE) else _EXTRACT_ASKS
            body = _react_request("What is the capital of France?", done, asks)
            reply = client.chat.completions.create(**body).choices[0].message.content
            answers.append(str(reply))
            if i < len(_FRANCE):  # what dspy parses from the answer, and the tool's result
                fields = dict(re.findall(r"\[\[ ## (\w+) ## \]\]\n([^\n]*)", str(reply)))
                args = json.loads(fields["next_tool_args"])
                tool = fields["next_tool_name"]
                seen = search_wikipedia(**args) if taped and tool != "finish" else _FRANCE[i][3]
                done.append((fields["next_thought"], tool, args, seen))
    return answers


def test_a_flattened_flow_records_and_replays_its_steps_through_the_sdk(tmp_path: Path) -> None:
    """A ReAct loop over the OpenAI SDK records steps 1..4 through the hooks, and replays
    whole, strict, with the server stopped: replay reads the same steps from the same
    quotes."""
    server, url = _serve_react()
    path = tmp_path / "react.jsonl"
    try:
        recorded = _react_sdk(path, url, "record")
    finally:
        _stop(server)
    assert [r.step for r in read_cassette(path).records if r.kind == "llm"] == [1, 2, 3, 4]
    assert _react_sdk(path, url, "replay", strict=True) == recorded


# -- cassettes keyed before the quotes were read (keys 2) ------------------------------------------

_NOWHERE = "http://127.0.0.1:9/v1"  # no server: a replay that missed would fail to connect
_REACT_STEPS = [("llm", 1), ("tool", 1), ("llm", 2), ("tool", 2), ("llm", 3), ("llm", 4)]


def _react_replay(path: Path) -> list[str]:
    """The answers ``_react_sdk`` replays from ``path`` (recorded with taped searches) whole,
    strict, with no server."""
    return _react_sdk(path, _NOWHERE, "replay", taped=True, strict=True, harness_sha="fixture")


def test_a_react_cassette_keyed_before_quotes_replays_through_the_sdk(tmp_path: Path) -> None:
    """A ReAct run with taped searches recorded by the tracetape before quotes were read
    (keys 2: every call step 1) replays whole, strict, with no server: the hooks re-key its
    requests that quote an earlier answer, and the searches after them, as a recording keys
    them now (steps 1..4, each search at the step that asked for it)."""
    old = read_cassette(KEYS_2_REACT)
    assert old.header is not None and old.header["keys"] == 2
    assert [r.step for r in old.records] == [1] * 6
    migrated = migrate(old.records, since=2)
    assert [(r.kind, r.step) for r in migrated] == _REACT_STEPS
    server, url = _serve_react()
    try:
        recorded = _react_sdk(tmp_path / "now.jsonl", url, "record", taped=True)
    finally:
        _stop(server)
    assert [r.key for r in read_cassette(tmp_path / "now.jsonl").records] == [
        r.key for r in migrated
    ]
    assert _react_replay(KEYS_2_REACT) == recorded


def _migrate_cli(path: Path) -> str:
    from click.testing import CliRunner

    from tracetape.cli import main

    done = CliRunner().invoke(main, ["migrate", str(path), "--no-backup"])
    assert done.exit_code == 0, done.output
    return done.output


def test_tracetape_migrate_re_steps_a_react_cassette_keyed_before_quotes(tmp_path: Path) -> None:
    """``tracetape migrate`` writes the keys-2 ReAct cassette as keys 3, steps 1..4 (its
    searches with them), and it replays whole, strict, with no server, re-keyed by nothing."""
    path = tmp_path / "old.jsonl"
    path.write_bytes(KEYS_2_REACT.read_bytes())
    assert f"keys 2 -> {KEYS_VERSION} (steps from the conversation;" in _migrate_cli(path)
    migrated = read_cassette(path)
    assert migrated.header is not None and migrated.header["keys"] == KEYS_VERSION
    assert [(r.kind, r.step) for r in migrated.records] == _REACT_STEPS
    assert _react_replay(path)[-1].endswith("Paris")


def _responses_run(path: Path, **tape: Any) -> list[str]:
    """Two Responses calls on a tape at ``path``, the second continuing the first by its
    ``previous_response_id`` (as the keys-2 fixture recorded them): their texts."""
    client = openai.OpenAI(base_url=_NOWHERE, api_key="sk-test", max_retries=0)
    with Tape(path, mode="replay", **tape) as t, tracetape.patch_sdks(t):
        first = client.responses.create(model="gpt-test", input="What is the capital of Norway?")
        second = client.responses.create(
            model="gpt-test", input="How many people live there?", previous_response_id=first.id
        )
    return [first.output_text, second.output_text]


def test_a_responses_cassette_chained_by_its_answers_keeps_its_keys(tmp_path: Path) -> None:
    """A keys-2 Responses cassette whose second request continues the first by
    ``previous_response_id`` (step 2, which its conversation alone does not say) keeps every
    key: replayed by the hooks, strict, with no server, and written by ``tracetape migrate``
    as keys 3, which then replays the same."""
    old = read_cassette(KEYS_2_RESPONSES)
    assert [r.step for r in old.records] == [1, 2]
    assert [r.key for r in migrate(old.records, since=2)] == [r.key for r in old.records]
    said = ["Oslo is the capital of Norway.", "About 700,000 people live there."]
    assert _responses_run(KEYS_2_RESPONSES, strict=True, harness_sha="fixture") == said
    path = tmp_path / "old.jsonl"
    path.write_bytes(KEYS_2_RESPONSES.read_bytes())
    assert f"keys 2 -> {KEYS_VERSION}" in _migrate_cli(path)
    migrated = read_cassette(path)
    assert migrated.header is not None and migrated.header["keys"] == KEYS_VERSION
    assert [r.key for r in migrated.records] == [r.key for r in old.records]
    assert _responses_run(path, strict=True, harness_sha="fixture") == said
