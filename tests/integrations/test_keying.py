"""Keying a request: model routes, secret query parameters, and the payload every hook
level builds alike."""

from __future__ import annotations

from pathlib import Path

import httpx2
import pytest
from openai.types.chat import ChatCompletionMessage

from tracetape import Tape
from tracetape.integrations.keying import clean_url
from tracetape.integrations.providers import match_route


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
def test_model_routes_are_recognised_by_path(path: str, name: str | None) -> None:
    """Known model routes are recognized by their path suffix, behind any prefix."""
    match = match_route("POST", "127.0.0.1", path)
    assert (match.route.name if match else None) == name


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
    parsed = httpx2.URL(url)
    parts = (parsed.scheme, parsed.netloc.decode(), parsed.path, parsed.query.decode())
    assert clean_url(*parts) == kept
