"""The provider table: every module of the package is a provider, found by its name; a request
goes to the first provider whose route answers its path, unless a later one names its host;
and the helpers provider modules read answers with."""

from __future__ import annotations

import pkgutil
import re
from pathlib import Path
from typing import Any

import pytest

from tracetape.integrations import providers as table
from tracetape.integrations.providers import (
    FIRST,
    Route,
    Usage,
    body_of,
    dig,
    events_of,
    item_field,
    json_args,
    last_usage,
    match_route,
    modules,
    parts_text,
    provider,
    providers,
    role_in,
    turns,
)

FOLDER = Path(table.__file__).parent


def test_every_module_is_a_provider_of_its_name_the_first_ones_first() -> None:
    """Adding a provider is one module: the table lists every module of the folder (the
    private ones aside), ``FIRST`` first, the others by name, each declaring itself."""
    found = sorted(
        m.name for m in pkgutil.iter_modules([str(FOLDER)]) if not m.name.startswith("_")
    )
    assert modules()[: len(FIRST)] == FIRST
    assert sorted(modules()) == found
    assert list(modules()[len(FIRST) :]) == sorted(set(found) - set(FIRST))
    assert [p.name for p in providers()] == list(modules())
    assert all(provider(name) is p for name, p in zip(modules(), providers(), strict=True))
    with pytest.raises(KeyError):
        provider("no-such-provider")


@pytest.mark.parametrize("prov", providers(), ids=lambda p: p.name)
def test_a_declaration_holds_together(prov: Any) -> None:
    """Route names are unique and their patterns compile; an SDK fast path's targets name
    routes of their provider; credentials are names."""
    names = [r.name for r in prov.routes]
    assert len(names) == len(set(names)) and names
    for route in prov.routes:
        assert isinstance(route.pattern, re.Pattern) and route.method in {"GET", "POST"}
    if prov.sdk is not None:
        assert {t.route for t in prov.sdk.targets} <= set(names)
    assert all(isinstance(c, str) and c for c in prov.credentials)


@pytest.mark.parametrize(
    ("host", "api"),
    [
        pytest.param("api.groq.com", "groq.chat.completions", id="its-host"),
        pytest.param("EU.API.GROQ.COM", "groq.chat.completions", id="a-subdomain-any-case"),
        pytest.param("evilapi.groq.com", "openai.chat.completions", id="not-a-subdomain"),
        pytest.param("127.0.0.1", "openai.chat.completions", id="no-host-the-first"),
    ],
)
def test_a_path_two_providers_answer_goes_to_the_first_unless_the_host_says(
    host: str, api: str
) -> None:
    """groq's path ends the way openai's does: openai (first) takes it, except on groq's host
    or a host under it."""
    found = match_route("POST", host, "/openai/v1/chat/completions")
    assert found is not None and found.api == api


def test_a_route_matches_at_the_end_of_the_path_with_its_fields() -> None:
    """Behind any prefix, a trailing slash allowed; the method must be the route's; named
    groups are the URL's fields, unquoted; a copy is returned each time."""
    found = match_route(
        "POST", "bedrock-runtime.us-east-1.amazonaws.com", "/model/eu.anthropic%3Av1/converse/"
    )
    assert found is not None and found.api == "bedrock.converse"
    assert found.fields == {"model": "eu.anthropic:v1", "method": "converse"}
    found.fields["model"] = "changed"
    again = match_route(
        "POST", "bedrock-runtime.us-east-1.amazonaws.com", "/model/eu.anthropic%3Av1/converse/"
    )
    assert again is not None and again.fields["model"] == "eu.anthropic:v1"
    assert match_route("GET", "api.openai.com", "/v1/chat/completions") is None
    assert match_route("POST", "api.openai.com", "/v1/chat/completions/extra") is None
    route = Route("r", "/a/(?P<x>[^/]+)")
    assert route.match("/prefix/a/1") == {"x": "1"} and route.match("/a/1/b") is None


def test_usage_keeps_what_the_answer_said() -> None:
    """The stored usage holds only the counts given; the total counts a missing one as 0."""
    assert Usage(input=10, output=5).stored() == {"input": 10, "output": 5}
    assert Usage(input=7, cached=3).stored() == {"input": 7, "cached": 3}
    assert (Usage(input=7).total, Usage().total, Usage(input=7, output=2, cached=5).total) == (
        7,
        0,
        9,
    )
    assert last_usage([Usage(input=1), None, Usage(input=2, output=3), None]) == Usage(2, 3)
    assert last_usage([None, None]) is None


def test_a_conversation_counts_runs_of_model_items_as_turns() -> None:
    """A reasoning item and two tool calls in a row are one turn; not a list: none."""
    assistant = role_in("assistant", "model")
    items = [
        {"role": "user"},
        {"role": "assistant"},
        {"role": "model"},
        {"role": "tool"},
        {"role": "assistant"},
    ]
    assert turns(items, assistant) == 2
    assert turns({"role": "assistant"}, assistant) == 0

    class Item:
        role = "assistant"

    assert assistant(Item()) and item_field(Item(), "role") == "assistant"
    assert item_field({"role": "user"}, "role") == "user" and item_field(object(), "role") is None


def test_an_answer_is_read_from_a_body_or_a_stream() -> None:
    """``body_of`` takes a whole answer's JSON, ``events_of`` a stream's events' data."""
    whole: dict[str, Any] = {"status": 200, "body": {"id": "a"}}
    streamed: dict[str, Any] = {
        "events": [{"data": {"n": 1}}, {"event": "ping"}, {"data": "[DONE]"}]
    }
    assert body_of(whole) == {"id": "a"} and body_of(streamed) is None
    assert events_of(streamed) == [{"n": 1}, "[DONE]"] and events_of(whole) == []


@pytest.mark.parametrize(
    ("parts", "kind", "text"),
    [
        pytest.param("plain", None, "plain", id="a-string"),
        pytest.param(
            [{"type": "text", "text": "a"}, "b", {"type": "image"}], None, "ab", id="parts"
        ),
        pytest.param(
            [{"type": "thinking", "text": "x"}, {"type": "text", "text": "y"}],
            "text",
            "y",
            id="of-a-kind",
        ),
        pytest.param([{"type": "tool_use"}], None, None, id="no-text"),
        pytest.param({"text": "a"}, None, None, id="not-a-list"),
    ],
)
def test_the_text_of_content_parts(parts: Any, kind: str | None, text: str | None) -> None:
    """Text parts and bare strings joined (only those of ``kind`` when given); none: None."""
    assert parts_text(parts, kind) == text


def test_values_are_dug_out_of_nested_answers() -> None:
    """A path of keys and indexes (negative ones too) gives the value, or None on any miss;
    tool arguments sent as JSON text are parsed, other text kept."""
    answer = {"choices": [{"message": {"tool_calls": [{"function": {"arguments": '{"a": 1}'}}]}}]}
    assert (
        dig(answer, "choices", -1, "message", "tool_calls", 0, "function", "arguments")
        == '{"a": 1}'
    )
    assert dig(answer, "choices", 1) is None and dig(answer, "choices", "x") is None
    assert json_args('{"a": 1}') == {"a": 1} and json_args("not json") == "not json"
    assert json_args({"a": 1}) == {"a": 1}
