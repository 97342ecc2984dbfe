"""Causes: a model request split into its parts by every provider's own wire format (where its
system instructions and user turns are), the cause each changed part names, and two answers
to the same call compared by what they say."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tracetape.analysis import diff_traces
from tracetape.analysis.causes import (
    CAUSES,
    answer_changes,
    brief_value,
    change_row,
    input_causes,
    output_cause,
    part_of,
    request_parts,
    same_answer,
)
from tracetape.canonical import changed_paths
from tracetape.integrations.providers import modules, provider_of, providers
from tracetape.record import Record

SYSTEM, USER, RESULT = "You are a travel assistant.", "What should I pack?", '{"temp_c": 9}'


def _chat(role: str = "system") -> dict[str, Any]:
    """An OpenAI-style chat request (OpenAI, Cohere, Mistral, Ollama, Groq)."""
    return {
        "messages": [
            {"role": role, "content": SYSTEM},
            {"role": "user", "content": USER},
            {"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "w"}}]},
            {"role": "tool", "tool_call_id": "c", "content": RESULT},
        ],
        "tools": [{"type": "function", "function": {"name": "w"}}],
        "params": {"model": "m", "temperature": 0},
    }


# Each provider's request as ``llm_payload`` keys it: its api, and its arguments. The paths of
# the system text, the user's text, a setting and the tool result fed back.
REQUESTS: dict[str, tuple[str, dict[str, Any], dict[str, tuple[Any, ...]]]] = {
    "openai": ("openai.chat.completions", _chat("developer"), {}),
    "openai-responses": (
        "openai.responses",
        {
            "messages": [
                {"role": "user", "content": USER},
                {"type": "function_call", "call_id": "c", "name": "w", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c", "output": RESULT},
            ],
            "tools": [],
            "params": {"instructions": SYSTEM, "model": "m", "temperature": 0},
        },
        {
            "system": ("params", "instructions"),
            "user": ("messages", 0, "content"),
            "result": ("messages", 2, "output"),
        },
    ),
    "anthropic": (
        "anthropic.messages",
        {
            "messages": [
                {"role": "user", "content": USER},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "w"}]},
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "t", "content": RESULT}],
                },
            ],
            "tools": [],
            "params": {"system": SYSTEM, "model": "m", "max_tokens": 100, "temperature": 0},
        },
        {
            "system": ("params", "system"),
            "user": ("messages", 0, "content"),
            "result": ("messages", 2, "content", 0, "content"),
        },
    ),
    "gemini": (
        "gemini.generate_content",
        {
            "messages": [
                {"role": "user", "parts": [{"text": USER}]},
                {"role": "model", "parts": [{"functionCall": {"name": "w", "args": {}}}]},
                {
                    "role": "user",
                    "parts": [{"functionResponse": {"name": "w", "response": {"r": RESULT}}}],
                },
            ],
            "tools": [],
            "params": {
                "systemInstruction": {"parts": [{"text": SYSTEM}]},
                "generationConfig": {"temperature": 0},
                "model": "m",
            },
        },
        {
            "system": ("params", "systemInstruction", "parts", 0, "text"),
            "user": ("messages", 0, "parts", 0, "text"),
            "result": ("messages", 2, "parts", 0, "functionResponse", "response", "r"),
            "setting": ("params", "generationConfig", "temperature"),
        },
    ),
    "bedrock": (
        "bedrock.converse",
        {
            "messages": [
                {"role": "user", "content": [{"text": USER}]},
                {"role": "assistant", "content": [{"toolUse": {"toolUseId": "t", "name": "w"}}]},
                {
                    "role": "user",
                    "content": [{"toolResult": {"toolUseId": "t", "content": [{"text": RESULT}]}}],
                },
            ],
            "tools": [],
            "params": {"system": [{"text": SYSTEM}], "inferenceConfig": {"temperature": 0}},
        },
        {
            "system": ("params", "system", 0, "text"),
            "user": ("messages", 0, "content", 0, "text"),
            "result": ("messages", 2, "content", 0, "toolResult", "content", 0, "text"),
            "setting": ("params", "inferenceConfig", "temperature"),
        },
    ),
    "cohere": ("cohere.chat", _chat(), {}),
    "mistral": ("mistral.chat.completions", _chat(), {}),
    "ollama": ("ollama.chat", _chat(), {}),
    "ollama-generate": (
        "ollama.generate",
        {"messages": USER, "tools": [], "params": {"system": SYSTEM, "temperature": 0}},
        {"system": ("params", "system"), "user": ("messages",), "result": None},
    ),
    "groq": ("groq.chat.completions", _chat(), {}),
}
_CHAT_PATHS = {
    "system": ("messages", 0, "content"),
    "user": ("messages", 1, "content"),
    "result": ("messages", 3, "content"),
    "setting": ("params", "temperature"),
}


def _changed(args: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    out = copy.deepcopy(args)
    node: Any = out
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return out


def _paths(name: str) -> dict[str, tuple[Any, ...] | None]:
    return {**_CHAT_PATHS, **REQUESTS[name][2]}


def test_every_provider_of_the_table_has_a_request_here() -> None:
    """The table's providers and these requests are the same set: a new provider needs its
    request shape here."""
    assert {name.split("-")[0] for name in REQUESTS} == set(modules())


_PARTS = {
    "system": ("You are a terse assistant.", "prompt"),
    "user": ("What should I pack for Rome?", "input"),
    "setting": (0.7, "config"),
    "result": ('{"temp_c": 21}', "code"),
}


@pytest.mark.parametrize(
    ("name", "part"),
    [
        pytest.param(name, part, id=f"{name}-{part}")
        for name in sorted(REQUESTS)
        for part in _PARTS
        if _paths(name)[part] is not None  # a one-shot generate request has no earlier turn
    ],
)
def test_each_part_of_a_providers_request_names_its_cause(name: str, part: str) -> None:
    """Changing the system instructions names ``prompt``, the user's turn ``input``, a setting
    ``config``, a tool result fed back (an earlier turn) ``code``: where each provider keeps
    them, from the provider table."""
    api, args, _ = REQUESTS[name]
    path = _paths(name)[part]
    assert path is not None
    value, cause = _PARTS[part]
    after = _changed(args, path, value)
    assert input_causes(("llm", "m", args, api), ("llm", "m", after, api)) == [cause]


def test_a_request_with_several_changes_lists_each_cause_in_table_order() -> None:
    """The user turn and the temperature changed: causes input, config; the cause is input."""
    args = _chat()
    after = _changed(_changed(args, ("params", "temperature"), 1), ("messages", 1, "content"), "x")
    assert input_causes(("llm", "m", args, None), ("llm", "m", after, None)) == ["input", "config"]
    assert input_causes(("llm", "m", args, None), ("llm", "m2", args, None)) == ["config"]
    assert input_causes(("tool", "w", {"c": 1}, None), ("llm", "m", args, None)) == ["code"]


def test_the_parts_of_a_request_and_of_a_changed_path() -> None:
    """An Anthropic tool result travels as a user message but is an earlier turn; a request
    of an unknown provider is read with every provider's declarations."""
    api, args, _ = REQUESTS["anthropic"]
    parts = request_parts(args, api)
    assert parts["prompt"] == [{"system": SYSTEM}]
    assert [m["role"] for m in parts["user"]] == ["user"] and len(parts["history"]) == 2
    assert part_of("messages[2].content[0].content", args, api) == "history"
    assert part_of("params.system", args, api) == "prompt"
    assert part_of("params.max_tokens", args, api) == "config"
    assert part_of("messages[9]", args, api) == "history"  # an item only the other run has
    unknown = request_parts(_chat("developer"), None)
    assert unknown["prompt"] == [{"role": "developer", "content": SYSTEM}]


def test_a_change_in_instructions_through_the_whole_analysis(tmp_path: Path) -> None:
    """Cassettes of every provider's request, diffed as two runs: the origin is the model
    call, on the input side, with cause ``prompt``, its change named at the provider's own
    path."""
    for name, (api, args, _) in sorted(REQUESTS.items()):
        path = _paths(name)["system"]
        assert path is not None
        files = []
        for run, request in (("a", args), ("b", _changed(args, path, "Be terse."))):
            header = {"tracetape": 1, "version": "0.1.0", "run_id": run}
            record = {
                "seq": 1,
                "key": "llm:0000000000000001",
                "kind": "llm",
                "name": "m",
                "step": 1,
                "api": api,
                "input": {**request, "step": 1},
                "out": {"ok": 1},
            }
            files.append(tmp_path / f"{name}-{run}.jsonl")
            files[-1].write_text(f"{json.dumps(header)}\n{json.dumps(record)}\n")
        origin = diff_traces(*files).to_dict()["origin"]
        assert origin is not None, name
        assert (origin["side"], origin["cause"], origin["kind"]) == ("input", "prompt", "llm"), name
        assert origin["changes"][0]["after"].endswith("Be terse."), name


def _openai(message: dict[str, Any], rid: str) -> dict[str, Any]:
    body = {"id": rid, "created": int(rid[-1]), "choices": [{"index": 0, "message": message}]}
    return {"status": 200, "body": body}


def test_two_answers_are_compared_by_what_they_say_not_their_envelope() -> None:
    """Another id and timestamp: the same answer. A final answer instead of a tool call: the
    changes name the tool calls and the text, as a person reads them."""
    ask = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function",
         "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]}  # fmt: skip
    api = "openai.chat.completions"
    a = Record(kind="llm", api=api, out=_openai(ask, "chatcmpl-1"))
    again = Record(kind="llm", api=api, out=_openai(ask | {"tool_calls": [
        {**ask["tool_calls"][0], "id": "call_9"}]}, "chatcmpl-2"))  # fmt: skip
    final = Record(
        kind="llm", api=api, out=_openai({"role": "assistant", "content": "Pack."}, "x3")
    )
    assert same_answer(a, again) and not same_answer(a, final)
    assert answer_changes("llm", a, final, ("1", "2")) == [
        {"path": "answer.calls", "before": 'get_weather(city="Paris")', "after": None},
        {"path": "answer.text", "before": None, "after": "Pack."},
    ]
    anthropic = Record(kind="llm", api="anthropic.messages", out={"status": 200, "body": {
        "content": [{"type": "text", "text": "Pack a coat."}]}})  # fmt: skip
    other = Record(kind="llm", api="anthropic.messages", out={"status": 200, "body": {
        "content": [{"type": "text", "text": "Pack a hat."}]}})  # fmt: skip
    assert answer_changes("llm", anthropic, other, (None, None)) == [
        {"path": "answer.text", "before": "Pack a coat.", "after": "Pack a hat."}
    ]


def test_outputs_without_records_are_compared_by_their_digests() -> None:
    """A seed line holds the output's digest only: the change is ``output_sha``."""
    assert answer_changes("tool", None, None, ("a1", "b2")) == [
        {"path": "output_sha", "before": "a1", "after": "b2"}
    ]
    a, b = Record(kind="tool", out="9°C"), Record(kind="tool", out="21°C")
    assert answer_changes("tool", a, b, ("1", "2")) == [
        {"path": "output", "before": "9°C", "after": "21°C"}
    ]


def test_the_vocabulary_and_its_sides() -> None:
    """Eight causes, in the table's order; an answer's cause follows its call's kind."""
    assert list(CAUSES) == ["model", "tool", "env", "input", "prompt", "config", "code", "ending"]
    assert [CAUSES[c].side for c in CAUSES] == ["output"] * 3 + ["input"] * 4 + ["ending"]
    assert [output_cause(k) for k in ("llm", "tool", "env", "http", "mcp")] == [
        "model", "tool", "env", "env", "tool",
    ]  # fmt: skip
    assert all("freshness" not in CAUSES[c].fix for c in ("model", "prompt", "input", "config"))


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        pytest.param("a", "b", ("a", "b"), id="short-texts-whole"),
        pytest.param(None, {"k": 1}, (None, '{"k": 1}'), id="absent-and-json"),
        pytest.param("w " * 100, "w " * 100 + "x", ("…" + "w " * 20, "…" + "w " * 20 + "x"),
                     id="long-cut-to-change"),
    ],
)  # fmt: skip
def test_a_change_row_is_short(before: Any, after: Any, expected: tuple[Any, Any]) -> None:
    """Short values whole, long texts cut around where they differ, at most 120 characters."""
    row = change_row("p", before, after)
    assert (row["before"], row["after"]) == expected
    assert all(v is None or len(v) <= 120 for v in (row["before"], row["after"]))


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=20,
)
ROLES = st.sampled_from(["system", "developer", "user", "USER", "assistant", "tool", "model"])
ITEMS = st.one_of(
    JSON,
    st.fixed_dictionaries({"role": ROLES, "content": JSON}),
    st.fixed_dictionaries({"role": ROLES, "parts": JSON}),
)
REQUEST = (
    st.fixed_dictionaries(
        {
            "messages": st.lists(ITEMS, max_size=5) | st.text(max_size=8),
            "params": JSON,
            "tools": JSON,
        }
    )
    | JSON
)
APIS = st.sampled_from([None, "openai.chat.completions", "anthropic.messages",
                        "gemini.generate_content", "bedrock.converse", "nobody.chat"])  # fmt: skip


@given(a=REQUEST, b=REQUEST, api=APIS)
def test_any_two_requests_name_causes_from_the_vocabulary(a: Any, b: Any, api: str | None) -> None:
    """Whatever a trace holds where a request should be, the causes are named, never raised:
    input side causes only, in table order, and none where nothing changed."""
    causes = input_causes(("llm", "m", a, api), ("llm", "m", b, api))
    assert causes and set(causes) <= {"input", "prompt", "config", "code"}
    assert causes == [c for c in CAUSES if c in causes]
    parts = request_parts(a, api)
    assert set(parts) == {"prompt", "user", "history", "config"}
    for change in changed_paths(a, b, limit=10):
        assert part_of(change.path, a, api) in ("prompt", "user", "history", "config")


@given(a=REQUEST, api=APIS)
def test_a_request_split_in_parts_loses_nothing(a: Any, api: str | None) -> None:
    """Every conversation item lands in exactly one part, in order; a request equal to
    itself names no part changed."""
    parts = request_parts(a, api)
    if isinstance(a, dict) and isinstance(a.get("messages"), list):
        params = a["params"] if isinstance(a.get("params"), dict) else {}
        prov = provider_of(api)
        fields = {f for p in ([prov] if prov else providers()) for f in p.instructions}
        from_params = sum(1 for f in fields if f in params)
        items = [*parts["prompt"][from_params:], *parts["user"], *parts["history"]]
        assert sorted(map(repr, items)) == sorted(map(repr, a["messages"]))
    assert input_causes(("llm", "m", a, api), ("llm", "m", a, api)) == ["code"]


@given(a=JSON, b=JSON, api=APIS, kind=st.sampled_from(["llm", "tool", "env"]))
def test_any_two_outputs_compare_without_raising(
    a: Any, b: Any, api: str | None, kind: str
) -> None:
    """Whatever a record holds as its output, two of them compare: short rows, each a path
    and two texts (or null), and the same output twice has the same answer."""
    ra, rb = Record(kind=kind, api=api, out=a), Record(kind=kind, api=api, out=b)
    for row in answer_changes(kind, ra, rb, ("x", "y")):
        assert set(row) == {"path", "before", "after"}
        assert all(v is None or (isinstance(v, str) and len(v) <= 120) for v in row.values())
    assert same_answer(ra, ra)


def _chat_answer(text: str) -> dict[str, Any]:
    return {"id": "x", "choices": [{"index": 0, "message": {"role": "assistant", "content": text}}]}


# Each provider's answer as it sends it whole, saying ``text``, with an envelope id of its own.
ANSWERS: dict[str, Any] = {
    "openai": _chat_answer,
    "openai-responses": lambda t: {"id": "resp_1", "object": "response", "output": [
        {"type": "message", "content": [{"type": "output_text", "text": t}]}]},
    "anthropic": lambda t: {"id": "msg_1", "content": [{"type": "text", "text": t}]},
    "gemini": lambda t: {"responseId": "r1", "candidates": [
        {"content": {"role": "model", "parts": [{"text": t}]}}]},
    "bedrock": lambda t: {"output": {"message": {"role": "assistant", "content": [{"text": t}]}}},
    "cohere": lambda t: {"id": "c1", "message": {"role": "assistant",
                                                 "content": [{"type": "text", "text": t}]}},
    "mistral": _chat_answer,
    "ollama": lambda t: {"model": "m", "message": {"role": "assistant", "content": t}},
    "ollama-generate": lambda t: {"model": "m", "response": t},
    "groq": _chat_answer,
}  # fmt: skip


def test_another_answer_to_the_same_request_of_every_provider(tmp_path: Path) -> None:
    """Cassettes of every provider's request answered twice: a new envelope id alone is no
    difference (its answer's digest is what it says); another text is the origin, on the
    output side, cause ``model``, its change named ``answer.text``."""
    assert set(ANSWERS) == set(REQUESTS)
    for name, (api, args, _) in sorted(REQUESTS.items()):
        files = []
        for run, text, rid in (("a", "Pack a coat.", "1"), ("b", "Pack a coat.", "2"),
                               ("c", "Pack a hat.", "1")):  # fmt: skip
            body = ANSWERS[name](text)
            body = {**body, "id": f"id-{rid}"} if "id" in body else body
            header = {"tracetape": 1, "version": "0.1.0", "run_id": run}
            record = {"seq": 1, "key": "llm:0000000000000001", "kind": "llm", "name": "m",
                      "step": 1, "api": api, "input": {**args, "step": 1},
                      "out": {"status": 200, "body": body}}  # fmt: skip
            files.append(tmp_path / f"{name}-{run}.jsonl")
            files[-1].write_text(f"{json.dumps(header)}\n{json.dumps(record)}\n")
        same = diff_traces(files[0], files[1]).to_dict()
        assert same["origin"] is None and "model-drift" not in same["counts"], name
        other = diff_traces(files[0], files[2]).to_dict()["origin"]
        assert other is not None, name
        assert (other["side"], other["cause"], other["call"]) == ("output", "model", 1), name
        assert other["changes"] == [
            {"path": "answer.text", "before": "Pack a coat.", "after": "Pack a hat."}
        ], name


@pytest.mark.parametrize("lead", [50, 54, 56, 120], ids=lambda n: f"{n}-chars-before")
def test_a_secret_cut_by_the_width_is_redacted_first(lead: int) -> None:
    """A key where a short text is cut (a change's value, an excerpt around a change, a
    final answer): redacted whole before the cut, so no piece of it is left to read."""
    key = "sk-proj-" + "Q1w2E3r4T5y6U7i8O9p0A1s2D3f4"
    text = "x " * lead + key + " tail"
    shown = [
        brief_value(text),
        *change_row("p", text, text.replace("tail", "TAIL")).values(),
        *change_row("p", text + " a" * 80, text + " b" * 80).values(),
    ]
    for value in shown:
        assert value is not None and key[:11] not in value, value
