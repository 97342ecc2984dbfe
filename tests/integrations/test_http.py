"""The httpx and httpx2 transport: tape transports, every client's send patched (patch_http), and,
under the SDK hooks alone, the safety net that tapes the model requests no SDK-level hook saw."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import anthropic
import httpx
import httpx2
import openai
import pytest
from fakeserver import FakeServer
from openai.types.chat import ChatCompletion
from sdk_agents import openai_agent
from sdk_clients import OPENAI_KEY, anthropic_client, openai_client

import tracetape
from tracetape import ReplayMiss, Tape, read_cassette

pytestmark = pytest.mark.usefixtures("no_leftover_patch")


@pytest.mark.parametrize("sdk", ["openai", "anthropic"])
def test_miss_surfaces_unwrapped_without_retries(
    tmp_path: Path, server: FakeServer, sdk: str
) -> None:
    """At the HTTP level a miss is a ReplayMiss, not the SDK's connection error after retries."""
    path = tmp_path / "run.jsonl"
    Tape(path, mode="record").close()
    server.stop()
    messages = [{"role": "user", "content": "hi"}]
    with pytest.raises(ReplayMiss) as again, Tape(path, mode="replay") as tape:
        http_client = httpx2.Client(transport=tracetape.http_transport(tape))
        if sdk == "openai":
            client = openai_client(server.base_url, http_client=http_client).with_options(
                max_retries=5
            )
            call = functools.partial(client.chat.completions.create, model="m", messages=messages)
        else:
            client = anthropic_client(server.base_url, http_client=http_client).with_options(
                max_retries=5
            )
            call = functools.partial(
                client.messages.create, model="m", max_tokens=5, messages=messages
            )
        with pytest.raises(ReplayMiss) as info:
            call()
    assert again.value.key == info.value.key  # caught in the block: raised again at close
    assert len(tape.misses) == 1  # one attempt: the SDK did not retry it
    assert not isinstance(info.value, openai.APIConnectionError | anthropic.APIConnectionError)
    # typed as both SDKs' base errors, which every SDK version re-raises as they are
    assert isinstance(info.value, openai.OpenAIError | anthropic.AnthropicError)
    assert info.value.__cause__ is None


def test_plain_http_requests_are_keyed_without_secret_params(
    tmp_path: Path, server: FakeServer
) -> None:
    """Other requests are kind http, keyed on method, URL minus secret params, and body."""
    path = tmp_path / "run.jsonl"
    url = server.base_url + "/echo?q=1&api_key=hunter2hunter2"
    with (
        Tape(path, mode="record") as tape,
        httpx2.Client(transport=tracetape.http_transport(tape)) as client,
    ):
        live = client.post(url, json={"x": 1}, headers={"Authorization": "Bearer abc"}).json()
    (rec,) = read_cassette(path).records
    assert rec.kind == "http"
    assert rec.input == {
        "method": "POST",
        "url": server.base_url + "/echo?q=1",
        "body": {"x": 1},
    }
    assert b"hunter2" not in path.read_bytes()
    server.stop()
    with (
        Tape(path, mode="replay") as tape,
        httpx2.Client(transport=tracetape.http_transport(tape)) as client,
    ):
        assert client.post(url.replace("hunter2", "other"), json={"x": 1}).json() == live


def test_plain_httpx_client_and_half_read_http_stream(tmp_path: Path, server: FakeServer) -> None:
    """The httpx flavor tapes too, and a half-read stream is kept as far as it was read."""
    path = tmp_path / "run.jsonl"
    body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "sum 1 to 1"}]}
    url = server.base_url + "/v1/chat/completions"
    with (
        Tape(path, mode="record") as tape,
        httpx.Client(transport=tracetape.http_transport(tape, flavor="httpx")) as client,
        client.stream("POST", url, json=body) as response,
    ):
        first = next(response.iter_lines())
    (rec,) = read_cassette(path).records
    assert rec.kind == "llm"
    assert rec.out["complete"] is False
    assert json.loads(first.removeprefix("data: ")) == rec.out["events"][0]["data"]
    server.stop()
    with (
        Tape(path, mode="replay") as tape,
        httpx.Client(transport=tracetape.http_transport(tape, flavor="httpx")) as client,
        client.stream("POST", url, json=body) as response,
    ):
        assert json.loads(next(response.iter_lines())[6:]) == rec.out["events"][0]["data"]


def _bound_before_patch(base: str) -> Any:
    """What instructor's ``from_openai`` keeps: the bound ``create`` of a client built before
    any tape, so the patched class method is never reached."""
    create = openai_client(base).chat.completions.create

    class Kept:
        class chat:
            class completions:
                pass

    Kept.chat.completions.create = staticmethod(create)  # type: ignore[attr-defined]
    return Kept


def _raw_post(base: str) -> Any:
    """What litellm does for ``openai/`` models: ``client.post`` with its own cast type."""
    client = openai_client(base)

    class Raw:
        class chat:
            class completions:
                @staticmethod
                def create(**body: Any) -> Any:
                    return client.post("/chat/completions", body=body, cast_to=ChatCompletion)

    return Raw


@pytest.mark.parametrize("make", [_bound_before_patch, _raw_post], ids=["bound-before", "post"])
def test_model_requests_the_sdk_level_misses_are_taped_at_send(
    tmp_path: Path, server: FakeServer, make: Any
) -> None:
    """Under the SDK hooks alone, a model request that no SDK-level capture handled is the
    same llm decision at the HTTP level: recorded, replayed offline, and a replay of an empty
    cassette misses instead of silently going live."""
    path = tmp_path / "run.jsonl"
    client = make(server.base_url)
    with Tape(path, mode="record") as tape, tracetape.patch_sdks(tape):
        assert openai_agent(client, "sum 1 to 3") == "The total is 6."
    records = read_cassette(path).records
    assert [(r.kind, r.step) for r in records] == [("llm", n) for n in (1, 2, 3, 4)]
    assert records[0].input["messages"] == [{"role": "user", "content": "sum 1 to 3"}]
    assert OPENAI_KEY not in path.read_text()  # the key went in a header: never stored
    live = len(server.requests)
    with Tape(path, mode="replay") as tape, tracetape.patch_sdks(tape):
        assert openai_agent(client, "sum 1 to 3") == "The total is 6."
    empty = tmp_path / "empty.jsonl"
    Tape(empty, mode="record").close()
    with pytest.raises(ReplayMiss), Tape(empty, mode="replay") as tape, tracetape.patch_sdks(tape):
        openai_agent(client, "sum 1 to 3")
    assert len(server.requests) == live


def test_anthropic_beta_messages_are_taped_under_the_sdk_hooks(
    tmp_path: Path, server: FakeServer
) -> None:
    """pydantic-ai's Anthropic model calls ``client.beta.messages``: taped all the same."""
    path = tmp_path / "run.jsonl"

    def ask() -> str:
        client = anthropic_client(server.base_url)
        reply = client.beta.messages.create(
            model="m", max_tokens=10, messages=[{"role": "user", "content": "sum 1 to 0"}]
        )
        return str(reply.content[0].text)

    with Tape(path, mode="record") as tape, tracetape.patch_sdks(tape):
        assert ask() == "The total is 0."
    (rec,) = read_cassette(path).records
    assert rec.kind == "llm" and rec.step == 1
    server.stop()
    with Tape(path, mode="replay") as tape, tracetape.patch_sdks(tape):
        assert ask() == "The total is 0."


def test_the_safety_net_leaves_other_requests_alone(tmp_path: Path, server: FakeServer) -> None:
    """Under the SDK hooks alone only model requests are taped: a program's other HTTP
    traffic (here a POST to /echo) goes out untouched, in record and in replay."""
    path = tmp_path / "run.jsonl"
    with Tape(path, mode="record") as tape, tracetape.patch_sdks(tape):
        reply = httpx2.post(server.base_url + "/echo", json={"a": 1})
    assert reply.json() == {"echo": {"a": 1}}
    assert read_cassette(path).records == []


def test_the_safety_net_redacts_before_writing(tmp_path: Path, server: FakeServer) -> None:
    """A secret in a request the safety net tapes (here in the prompt of a raw
    ``client.post``) never reaches the cassette, as at either hook level."""
    path = tmp_path / "run.jsonl"
    secret = "AKIAIOSFODNN7EXAMPLE"
    client = _raw_post(server.base_url)
    with Tape(path, mode="record") as tape, tracetape.patch_sdks(tape):
        reply = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": f"sum 1 to 0, key {secret}"}]
        )
    assert reply.choices[0].message.content == "The total is 0."
    text = path.read_text()
    assert secret not in text and OPENAI_KEY not in text
    assert "REDACTED" in text.upper()
