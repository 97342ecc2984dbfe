"""Quotes: the lines an answer can be quoted by, and which earlier answer a flattened
history continues (``integrations.quotes``)."""

from __future__ import annotations

import pytest

from tracetape.integrations import quotes as quotes_module
from tracetape.integrations.providers import Ask, provider
from tracetape.integrations.quotes import Quotes, answer_text, args_text, quotable, user_text

LONG = "I should look up the capital of France."


@pytest.mark.parametrize(
    ("text", "lines"),
    [
        pytest.param(None, set(), id="none"),
        pytest.param("short\nParis\n{}", set(), id="short-lines-say-nothing"),
        pytest.param(f"  {LONG}  \n\n{LONG}", {LONG}, id="stripped-and-once"),
        pytest.param(
            '{"query": "capital of France", "page": 1}', {"capital of France"}, id="json-line"
        ),
        pytest.param(
            '{\n  "query": "capital of France"\n}', {"capital of France"}, id="json-over-lines"
        ),
        pytest.param(
            f"[[ ## next_thought ## ]] {LONG} [[ ## next_tool_name ## ]] search",
            {LONG},
            id="dspy-markers-end-lines",
        ),
        pytest.param(
            "[1] a footnote of the report", {"[1] a footnote of the report"}, id="not-json"
        ),
    ],
)
def test_the_lines_a_text_can_be_quoted_by(text: str | None, lines: set[str]) -> None:
    assert quotable(text) == lines


def test_an_answer_is_quoted_by_its_longest_line_and_half_of_its_lines() -> None:
    """A message holding the answer's longest line but fewer than half its lines quotes it
    not; holding half of them, it does, at the answer's step."""
    quotes = Quotes()
    found = [f"line {i:02d} of what the agent found out" for i in range(4)]
    quotes.note(3, lambda: "\n".join([*found, LONG]))
    assert quotes.quoted(frozenset({LONG, found[0]})) is None  # 2 of its 5 lines
    assert quotes.quoted(frozenset(found[:3])) is None  # not its longest line
    assert quotes.quoted(frozenset({LONG, *found[:2]})) == (3, 0)
    assert quotes.quoted(quotable("nothing of it at all here")) is None


def test_flows_saying_the_same_are_told_apart_by_their_predecessor() -> None:
    """Two flows whose answers say the same: the one whose own predecessor the message
    quotes too is continued, not merely the latest."""
    quotes = Quotes()
    first = quotes.note(1, lambda: "Flow A began by reading the issue tracker.")
    quotes.note(1, lambda: "Flow B began by reading the build logs.")
    mine = quotes.note(2, lambda: LONG, parent=first)
    quotes.note(2, lambda: LONG, parent=1)
    message = quotable(f"Flow A began by reading the issue tracker.\n{LONG}")
    assert quotes.quoted(message) == (2, mine)


def test_an_answer_is_read_only_when_a_request_may_quote_it() -> None:
    """``said`` is called at the first ``quoted``, once; one that raises or says nothing is
    forgotten."""
    calls: list[str] = []

    def said() -> str:
        calls.append("read")
        return LONG

    def broken() -> str:
        raise ValueError("an answer of an unexpected shape")

    quotes = Quotes()
    quotes.note(1, said)
    quotes.note(1, broken)
    quotes.note(1, lambda: None)  # type: ignore[arg-type, return-value]
    assert calls == []
    assert quotes.quoted(frozenset({LONG})) == (1, 0)
    assert quotes.quoted(frozenset({LONG})) == (1, 0)
    assert calls == ["read"]


def test_what_quotes_keep_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Beyond ``_MAX_QUOTED`` answers the oldest go; an answer keeps its 32 longest lines."""
    monkeypatch.setattr(quotes_module, "_MAX_QUOTED", 3)
    quotes = Quotes()
    for i in range(5):
        quotes.note(i + 1, lambda i=i: f"Answer number {i} says something long enough.")
    assert quotes.quoted(quotable("Answer number 0 says something long enough.")) is None
    assert quotes.quoted(quotable("Answer number 4 says something long enough.")) == (5, 4)
    many = "\n".join(f"line {i:03d} of a long report that the agent wrote out" for i in range(100))
    quotes.note(9, lambda: many)
    assert quotes.quoted(quotable("\n".join(many.splitlines()[-16:]))) == (9, 5)
    assert quotes.quoted(quotable("\n".join(many.splitlines()[-15:]))) is None


def test_the_text_of_the_users_last_message_and_of_an_answer() -> None:
    conversation = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "a"},
        {"role": "user", "content": [{"type": "text", "text": "second"}]},
    ]
    assert user_text(conversation) == "second"
    assert user_text("a bare string") is None and user_text(["embedding input"]) is None
    message = {"role": "assistant", "content": "It is Paris."}
    out = {"status": 200, "body": {"choices": [{"message": message}]}}
    asked = [Ask("search", {"q": "x", "n": 1})]
    assert answer_text([provider("openai")], out, asked) == (
        'It is Paris.\n\nsearch\n\n{"n":1,"q":"x"}'
    )
    assert answer_text([provider("openai")], "not an answer", []) is None
    assert args_text({"b": [1], "a": None}) == '{"a":null,"b":[1]}'
