"""Canonical llm payloads, keys and the SSE parser shared by the SDK and HTTP hooks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx2
import pytest
from hypothesis import given
from hypothesis import strategies as st
from openai.types.chat import ChatCompletionMessage

from tracetape import Tape
from tracetape.integrations._common import (
    SSEParser,
    endpoint_for_path,
    sse_encode,
)
from tracetape.integrations.http import _clean_url

json_scalars = st.none() | st.booleans() | st.integers() | st.text(max_size=20)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


def test_sdk_models_are_keyed_as_the_json_the_sdk_sends(tmp_path: Path) -> None:
    """A response message appended to the conversation keys like its JSON form."""
    message = ChatCompletionMessage.construct(role="assistant", content="4")
    with Tape(tmp_path / "t.jsonl", mode="record", harness_sha="x") as tape:
        as_model = tape.prepare(
            "llm", {"messages": [message], "tools": [], "params": {}, "step": 1}
        )
        as_json = tape.prepare(
            "llm",
            {
                "messages": [{"role": "assistant", "content": "4"}],
                "tools": [],
                "params": {},
                "step": 1,
            },
        )
    assert as_model.key == as_json.key


events = st.lists(
    st.fixed_dictionaries(
        {"data": st.dictionaries(st.text(max_size=5), json_scalars, max_size=3)},
        optional={"event": st.from_regex(r"[a-z_.]{1,12}", fullmatch=True)},
    )
    | st.builds(lambda t: {"text": t}, st.from_regex(r"\[DONE\]|[a-z ]{1,10}", fullmatch=True)),
    max_size=6,
)


@given(events, st.lists(st.integers(1, 40), max_size=8))
def test_sse_round_trip_any_chunking(recorded: list[dict[str, Any]], cuts: list[int]) -> None:
    """Encoded events parse back to the same events however the bytes are split."""
    wire = b"".join(sse_encode(e) for e in recorded)
    parser, out, pos = SSEParser(), [], 0
    for cut in cuts:
        out += parser.feed(wire[pos : pos + cut])
        pos += cut
    out += parser.feed(wire[pos:]) + parser.close()
    assert out == recorded


@pytest.mark.parametrize(
    ("path", "name"),
    [
        pytest.param("/v1/chat/completions", "chat.completions", id="chat"),
        pytest.param("/openai/deployments/x/chat/completions", "chat.completions", id="azure"),
        pytest.param("/v1/completions", "completions", id="legacy"),
        pytest.param("/v1/responses", "responses", id="responses"),
        pytest.param("/v1/embeddings", "embeddings", id="embeddings"),
        pytest.param("/v1/messages", "messages", id="anthropic"),
        pytest.param("/v1/messages/count_tokens", None, id="count-tokens"),
        pytest.param("/v1/threads/t/messages", None, id="threads"),
        pytest.param("/v1/models", None, id="models"),
    ],
)
def test_endpoint_detection(path: str, name: str | None) -> None:
    """Known model endpoints are recognized by their path suffix, behind any prefix."""
    ep = endpoint_for_path(path)
    assert (ep.name if ep else None) == name


@pytest.mark.parametrize(
    ("url", "kept"),
    [
        pytest.param("https://h/p?q=1&api_key=s", "https://h/p?q=1", id="api-key"),
        pytest.param("https://h/p?access_token=s&page=2", "https://h/p?page=2", id="token"),
        pytest.param("https://h/p?X-Amz-Signature=s&a=b", "https://h/p?a=b", id="signature"),
        pytest.param(
            "https://h/p?sig=s&code=c&author=me", "https://h/p?author=me", id="short-names"
        ),
        pytest.param("https://h:8080/p?key=s", "https://h:8080/p", id="port-all-dropped"),
    ],
)
def test_secret_query_params_are_dropped_from_the_url(url: str, kept: str) -> None:
    """Secret-looking query parameters never reach an http key; ordinary ones stay."""
    assert _clean_url(httpx2.URL(url)) == kept


def test_unknown_transport_flavor_is_refused(tmp_path: Path) -> None:
    """An unknown HTTP library is refused with the valid choices named."""
    with (
        Tape(tmp_path / "t.jsonl", mode="record", harness_sha="x") as tape,
        pytest.raises(ValueError, match="use 'httpx2' or 'httpx'"),
    ):
        tape.http_transport(flavor="requests")
