"""A run as it reads: messages of every provider's shape, answers, calls, costs, word diffs."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tracetape.record import Record
from tracetape.views import _WORD, Said, call_text, read_steps, word_diff


def _llm(
    messages: list[Any], out: Any, api: str | None = "openai.chat.completions", **kw: Any
) -> Record:
    data = {"messages": messages, "tools": [], "params": {"model": "gpt-4o-mini"}, "step": 1}
    return Record(kind="llm", key="llm:1", name="gpt-4o-mini", input=data, out=out, api=api, **kw)


CHAT_ANSWER = {"status": 200, "body": {"choices": [{"message": {"content": "It is sunny."}}]}}


@pytest.mark.parametrize(
    ("item", "said"),
    [
        pytest.param({"role": "user", "content": "hi"}, Said("user", "hi"), id="chat"),
        pytest.param({"role": "tool", "tool_call_id": "c", "content": "21°C"}, Said("tool", "21°C"),
                     id="chat-tool"),
        pytest.param({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t",
                      "content": [{"type": "text", "text": "21°C"}]}]}, Said("tool", "21°C"),
                     id="anthropic-tool-result"),
        pytest.param({"role": "user", "parts": [{"functionResponse": {"name": "w",
                      "response": {"t": 21}}}]}, Said("tool", '{"t": 21}'), id="gemini-response"),
        pytest.param({"role": "user", "content": [{"toolResult": {"toolUseId": "t",
                      "content": [{"text": "21°C"}]}}]}, Said("tool", "21°C"), id="bedrock-result"),
        pytest.param({"type": "function_call_output", "call_id": "c", "output": "21°C"},
                     Said("tool", "21°C"), id="responses-output"),
        pytest.param({"type": "message", "role": "user",
                      "content": [{"type": "input_text", "text": "hi"}]}, Said("user", "hi"),
                     id="responses-message"),
        pytest.param({"role": "assistant", "content": "earlier answer"}, None, id="assistant"),
        pytest.param({"role": "model", "parts": [{"text": "x"}]}, None, id="gemini-model"),
        pytest.param({"type": "function_call", "name": "w", "arguments": "{}"}, None,
                     id="responses-call"),
    ],
)  # fmt: skip
def test_every_providers_messages_read_alike(item: Any, said: Said | None) -> None:
    view = read_steps([_llm([item], CHAT_ANSWER)])[0]
    assert view.said == ([said] if said else [])


def test_a_model_call_shows_what_is_new_since_the_call_before() -> None:
    first = [{"role": "user", "content": "weather in Paris?"}]
    asked = {"status": 200, "body": {"choices": [{"message": {"content": None, "tool_calls": [
        {"id": "c", "type": "function",
         "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]}}]}}  # fmt: skip
    second = [*first, {"role": "assistant", "tool_calls": []}, {"role": "tool", "content": "21"}]
    tool = Record(kind="tool", key="tool:1", name="get_weather",
                  input={"name": "get_weather", "args": {"city": "Paris"}}, out="21")  # fmt: skip
    views = read_steps([
        _llm(first, asked, usage={"input": 5, "output": 2}),
        tool,
        _llm(second, CHAT_ANSWER, usage={"input": 9, "output": 4}),
    ])  # fmt: skip
    assert [s.text for s in views[0].said] == ["weather in Paris?"]
    assert views[0].answer is None and views[0].calls == ['get_weather(city="Paris")']
    assert (views[0].tokens_in, views[0].tokens_out, views[0].tokens) == (5, 2, 7)
    assert views[1].calls == ['get_weather(city="Paris")'] and views[1].result == "21"
    assert views[2].said == [Said("tool", "21")] and views[2].answer == "It is sunny."
    assert views[2].priced == "priced" and views[2].cost is not None and views[2].cost > 0


def test_an_edited_conversation_is_shown_whole_and_tape_call_answers_read_too() -> None:
    views = read_steps([
        _llm(["first"], {"content": "a", "tool": "search", "args": {"q": "x"}}, api=None),
        _llm(["other"], "plain text", api=None),
    ])  # fmt: skip
    assert views[0].answer == "a" and views[0].calls == ['search(q="x")']
    assert views[1].said == [Said("user", "other")] and views[1].answer == "plain text"


def test_call_text_reads_as_a_call() -> None:
    assert call_text("f", {"s": "é", "n": [1]}) == 'f(s="é", n=[1])'
    assert call_text("f", [1, 2]) == "f([1, 2])"


WORDS = st.lists(st.sampled_from(["Paris", "Rome", " ", "the", ",", "weather", "\n", "21°C"]))


@given(WORDS.map("".join), WORDS.map("".join))
def test_a_word_diff_rebuilds_both_texts_and_never_splits_a_word(a: str, b: str) -> None:
    runs = word_diff(a, b)
    assert "".join(t for op, t in runs if op != "+") == a
    assert "".join(t for op, t in runs if op != "-") == b
    for source, skip in ((a, "+"), (b, "-")):  # each run holds whole words of its text
        assert _WORD.findall(source) == [
            word for op, text in runs if op != skip for word in _WORD.findall(text)
        ]


@given(WORDS.map("".join), WORDS.map("".join))
def test_a_word_diff_too_big_to_match_marks_its_middle_whole(a: str, b: str) -> None:
    """Past ``_MATCHED_WORDS`` the middle (after the shared first and last words) is marked
    removed and added whole: both texts still rebuild."""
    from tracetape import views

    kept = views._MATCHED_WORDS
    views._MATCHED_WORDS = 0
    try:
        runs = word_diff(a, b)
    finally:
        views._MATCHED_WORDS = kept
    assert "".join(t for op, t in runs if op != "+") == a
    assert "".join(t for op, t in runs if op != "-") == b
    assert len([op for op, _ in runs if op == "-"]) <= 1


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(
        st.sampled_from(["role", "content", "parts", "type", "text", "toolResult", "tool_result",
                         "functionResponse", "output", "message", "choices", "body", "events",
                         "status", "tool_calls", "function"]),
        inner,
        max_size=4,
    ),
    max_leaves=15,
)  # fmt: skip


@given(st.lists(JSON, max_size=4), JSON, st.sampled_from([None, "openai.chat.completions",
       "anthropic.messages", "gemini.generate", "bedrock.converse", "cohere.chat"]))  # fmt: skip
def test_any_recorded_shape_reads_without_an_error(messages: Any, out: Any, api: Any) -> None:
    """Whatever a trace holds (a page must never answer 500), it reads: texts are strings."""
    views = read_steps([_llm(messages, out, api=api), _llm([*messages, "x"], out, api=api)])
    for view in views:
        assert all(isinstance(text, str) for _, text in view.texts())
