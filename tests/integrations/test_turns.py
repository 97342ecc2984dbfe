"""A tape counts a conversation's model turns incrementally (``steps.Turns``): always the count
of ``providers.turns``, however the program changes its conversations between requests."""

from __future__ import annotations

import copy
import threading
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracetape.canonical import common_prefix
from tracetape.integrations.providers import match_route, provider, turns
from tracetape.integrations.steps import StepBook, Turns, conversation_step

RULES = {
    "openai": provider("openai").turn,  # role assistant, reasoning and *_call items
    "anthropic": provider("anthropic").turn,  # role assistant
    "gemini": provider("gemini").turn,  # role model
}


class Message:
    """An SDK's message object: not a dict, changed in place through its attributes."""

    def __init__(self, role: str | None, type: str | None = None) -> None:
        self.role = role
        self.type = type


class Loud:
    """A value whose comparison raises (a numpy array's does)."""

    def __eq__(self, other: object) -> bool:
        raise ValueError("the truth value of an array is ambiguous")

    __hash__ = object.__hash__


_ROLES = st.sampled_from(["system", "user", "assistant", "tool", "model", None])
_TYPES = st.sampled_from([None, "message", "reasoning", "function_call", "function_call_output"])


@st.composite
def _items(draw: st.DrawFn) -> Any:
    role, kind = draw(_ROLES), draw(_TYPES)
    shape = draw(st.sampled_from(["dict", "dict", "string", "object"]))
    if shape == "string":
        return draw(st.sampled_from(["hi", "assistant", ""]))
    if shape == "object":
        return Message(role, kind)
    item: dict[str, Any] = {"role": role, "content": [{"type": "text", "text": "x"}]}
    if kind is not None:
        item["type"] = kind
    return item


_CONVERSATION = st.integers(0, 2)
_AT = st.integers(0, 40)
_CHANGES = st.one_of(
    st.tuples(st.just("append"), st.lists(_items(), max_size=3)),
    st.tuples(st.just("role"), _AT, _ROLES),
    st.tuples(st.just("role"), st.integers(-3, -1), _ROLES),  # of a latest item
    st.tuples(st.just("type"), _AT, _TYPES),
    st.tuples(st.just("content"), _AT),
    st.tuples(st.just("replace"), _AT, _items()),
    st.tuples(st.just("insert"), _AT, _items()),
    st.tuples(st.just("delete"), _AT),
    st.tuples(st.just("truncate"), _AT),
    st.tuples(st.just("reuse")),
    st.tuples(st.just("branch"), _CONVERSATION, _AT),
)
# a change to one conversation, then a request that sends it: under which rule (most often
# its provider's, sometimes another's), and whether parsed anew (as a transport sees it)
_OPS = st.tuples(
    _CONVERSATION,
    _CHANGES,
    st.sampled_from(["openai"] * 3 + sorted(RULES)),
    st.sampled_from([False, False, False, True]),
)


def _apply(change: tuple[Any, ...], items: list[Any], conversations: list[list[Any]]) -> None:
    """Change a conversation as a program may between two requests."""
    name = change[0]
    at = change[1] % len(items) if len(change) > 1 and type(change[1]) is int and items else None
    if name == "append":
        items.extend(change[1])
    elif name == "reuse":  # the same list object, another conversation
        items.clear()
        items.append({"role": "system", "content": "again"})
    elif name == "branch":  # another conversation sharing the items of this one's beginning
        conversations[change[1]] = items[: change[2]]
    elif name == "truncate":
        del items[change[1] :]
    elif name == "insert":
        items.insert(change[1], change[2])
    elif at is None:
        return
    elif name == "delete":
        del items[at]
    elif name == "replace":
        items[at] = change[2]
    elif name in ("role", "type"):
        if isinstance(items[at], dict):
            items[at][name] = change[2]
        elif isinstance(items[at], Message):
            setattr(items[at], name, change[2])
    elif name == "content" and isinstance(items[at], dict):
        content = items[at].get("content")
        if isinstance(content, list):  # what a field holds, changed in place
            content.append({"type": "text", "text": "more"})
        else:
            items[at]["content"] = f"{content} more"


@settings(max_examples=1000, deadline=None)
@given(st.lists(_OPS, min_size=1, max_size=80))
def test_the_incremental_count_is_the_full_count(ops: list[tuple[Any, ...]]) -> None:
    """Whatever a program does to its conversations between requests (appends, edits of an
    item's role or type or content in place, replacements, insertions, removals, cuts, a list
    reused for another conversation, branches sharing a beginning, several sent in turn, under
    several rules, or parsed anew as a transport sees them), each request's count is the full
    count."""
    shared = {"role": "system", "content": "You are an agent."}  # one object in every one
    conversations: list[list[Any]] = [[shared, {"role": "user", "content": "q"}] for _ in range(3)]
    counter = Turns()
    for which, change, rule, parsed in ops:
        _apply(change, conversations[which], conversations)
        items = conversations[which]
        sent = copy.deepcopy(items) if parsed else items
        assert counter.count(sent, RULES[rule]) == turns(items, RULES[rule])


@given(st.lists(st.integers(0, 1), max_size=40), st.integers(0, 40), st.lists(st.integers(0, 1)))
def test_the_shared_beginning_of_two_lists_is_found_by_bisection(
    a: list[int], cut: int, tail: list[int]
) -> None:
    """The bisection finds how many first items two lists share."""
    b = a[:cut] + tail
    expected = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), None)
    assert common_prefix(a, b) == (min(len(a), len(b)) if expected is None else expected)


def test_more_conversations_than_are_kept_are_each_counted() -> None:
    """Conversations sent in turn beyond those kept are counted whole again, exactly."""
    rule, counter = RULES["openai"], Turns()
    conversations = [[{"role": "user", "content": str(i)}] for i in range(20)]
    for _ in range(3):
        for items in conversations:
            items += [{"role": "assistant"}, {"role": "tool"}]
            assert counter.count(items, rule) == turns(items, rule)


def test_an_item_whose_comparison_raises_is_counted_whole() -> None:
    """An item holding a value that refuses comparison (an array) is counted by the rule,
    each time, whatever replaced it."""
    rule, counter = RULES["openai"], Turns()
    items = [{"role": "user", "content": Loud()}, {"role": "assistant"}]
    assert counter.count(items, rule) == 1
    items[0] = {"role": "assistant", "content": Loud()}
    items.append({"role": "tool"})
    assert counter.count(items, rule) == turns(items, rule) == 1


@pytest.mark.parametrize("value", ["not a list", None, ("a", "tuple")], ids=repr)
def test_a_conversation_that_is_not_a_list_has_no_turns(value: Any) -> None:
    """A prompt string, a missing conversation or a tuple holds no model turn."""
    assert Turns().count(value, RULES["openai"]) == 0


def test_threads_each_sending_their_own_conversation_get_their_own_steps() -> None:
    """Agents in threads, each growing its own conversation on one tape, each get the step
    their conversation says, request after request."""
    book, match = StepBook(), match_route("POST", "127.0.0.1", "/v1/chat/completions")
    assert match is not None
    wrong: list[tuple[int, int]] = []
    start = threading.Barrier(6)

    def agent(n: int) -> None:
        messages: list[Any] = [{"role": "user", "content": f"task {n}"}]
        start.wait()
        for _ in range(40):
            body = {"model": "m", "messages": messages}
            step = book.model_step(match, body)
            expected = conversation_step(match.provider, messages)
            if step != expected:
                wrong.append((step, expected))
            messages += [{"role": "assistant", "content": "a"}, {"role": "tool", "content": "t"}]

    threads = [threading.Thread(target=agent, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wrong == []
