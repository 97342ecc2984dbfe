"""Failures are decisions too: a request that got no response is recorded, and replay raises
the same exception, so a program that handles it replays (offline, no socket)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest

import tracetape
from tests.span.helpers import Decider, tool_call_reply
from tracetape import Tape, read_cassette
from tracetape.record import RAISED

sys.path.insert(0, str(Path(__file__).parent))


def _fetch(tape: Tape, url: str) -> str:
    """What a program does with a fetch that may fail: fall back (litellm's price list)."""
    with httpx2.Client(transport=tracetape.http_transport(tape)) as client:
        try:
            return client.get(url).text
        except httpx2.ConnectError as exc:
            return f"fallback after {type(exc).__name__}"


def test_a_connection_error_is_recorded_and_replayed(tmp_path: Path, refused_port: int) -> None:
    path = tmp_path / "run.jsonl"
    url = f"http://127.0.0.1:{refused_port}/prices.json"
    with Tape(path, mode="record") as tape:
        assert _fetch(tape, url) == "fallback after ConnectError"
    (rec,) = read_cassette(path).records
    assert rec.kind == "http" and rec.out[RAISED]["type"].endswith("ConnectError")

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("replay touched the network")

    with pytest.MonkeyPatch.context() as m:
        m.setattr(httpx2.HTTPTransport, "handle_request", refuse)
        with Tape(path, mode="replay") as tape:
            assert _fetch(tape, url) == "fallback after ConnectError"


def test_an_sdk_connection_error_replays_as_the_same_sdk_error(
    tmp_path: Path, refused_port: int
) -> None:
    """Through the openai SDK (no retries): APIConnectionError in both runs."""
    path = tmp_path / "run.jsonl"
    base = f"http://127.0.0.1:{refused_port}/v1"

    def ask(tape: Tape) -> type[BaseException]:
        http_client = httpx2.Client(transport=tracetape.http_transport(tape))
        client = openai.OpenAI(base_url=base, api_key="sk-test", http_client=http_client,
                               max_retries=0)  # fmt: skip
        with pytest.raises(openai.APIConnectionError) as info:
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        return type(info.value)

    with Tape(path, mode="record") as tape:
        recorded = ask(tape)
    assert read_cassette(path).records[0].kind == "llm"
    with Tape(path, mode="replay") as tape:
        assert ask(tape) is recorded


def test_an_anthropic_miss_is_not_retried_whatever_the_user_agent(
    tmp_path: Path, refused_port: int
) -> None:
    """A framework that builds the anthropic client with its own User-Agent (pydantic-ai):
    the miss is still raised once as a ReplayMiss, not retried into APIConnectionError."""
    import anthropic

    from tracetape import ReplayMiss

    path = tmp_path / "run.jsonl"
    Tape(path, mode="record").close()
    with pytest.raises(ReplayMiss) as outer, Tape(path, mode="replay") as tape:
        client = anthropic.Anthropic(
            base_url=f"http://127.0.0.1:{refused_port}", api_key="sk-ant-test",
            http_client=httpx2.Client(transport=tracetape.http_transport(tape)), max_retries=5,
            default_headers={"User-Agent": "pydantic-ai/1.0"},
        )  # fmt: skip
        with pytest.raises(ReplayMiss) as info:
            client.messages.create(
                model="m", max_tokens=5, messages=[{"role": "user", "content": "hi"}]
            )
    assert not isinstance(info.value, anthropic.APIConnectionError)
    assert len(tape.misses) == 1  # one attempt: no retry
    assert outer.value.key == info.value.key


@pytest.mark.parametrize("retries", [0, 2])
@pytest.mark.parametrize("aio", [False, True], ids=["sync", "async"])
def test_an_sdk_level_connection_error_is_one_decision(
    tmp_path: Path, retries: int, aio: bool, refused_port: int
) -> None:
    """At the SDK level, the call that ended in APIConnectionError (after its retries) is one
    decision; replay raises the same SDK error, caused by the recorded one, with no socket."""
    import asyncio

    path = tmp_path / "run.jsonl"
    base = f"http://127.0.0.1:{refused_port}/v1"
    messages = [{"role": "user", "content": "hi"}]

    def ask(tape: Tape) -> BaseException:
        with tracetape.patch_sdks(tape):
            if aio:
                client: Any = openai.AsyncOpenAI(base_url=base, api_key="k", max_retries=retries)
                call = client.chat.completions.create(model="m", messages=messages)
                with pytest.raises(openai.APIConnectionError) as info:
                    asyncio.run(call)
            else:
                client = openai.OpenAI(base_url=base, api_key="k", max_retries=retries)
                with pytest.raises(openai.APIConnectionError) as info:
                    client.chat.completions.create(model="m", messages=messages)
        return info.value

    with pytest.MonkeyPatch.context() as m:
        m.setattr(openai.OpenAI, "_calculate_retry_timeout", lambda *a, **k: 0.0)
        m.setattr(openai.AsyncOpenAI, "_calculate_retry_timeout", lambda *a, **k: 0.0)
        with Tape(path, mode="record") as tape:
            recorded = ask(tape)
    (rec,) = read_cassette(path).records
    assert rec.kind == "llm" and rec.out[RAISED]["type"] == "httpx2.ConnectError"

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("replay touched the network")

    with pytest.MonkeyPatch.context() as m:
        m.setattr(httpx2.HTTPTransport, "handle_request", refuse)
        m.setattr(httpx2.AsyncHTTPTransport, "handle_async_request", refuse)
        with Tape(path, mode="replay") as tape:
            replayed = ask(tape)
    assert type(replayed) is type(recorded)
    assert isinstance(replayed.__cause__, httpx2.ConnectError)


RETRIED = [
    pytest.param(500, id="500"),
    pytest.param(429, id="429"),
    pytest.param(None, id="connection-refused"),
]


@pytest.mark.parametrize("failure", RETRIED)
def test_sdk_retries_of_a_missed_request_keep_its_step(
    tmp_path: Path,
    decider: Decider,
    refused_port: int,
    monkeypatch: pytest.MonkeyPatch,
    failure: int | None,
) -> None:
    """An attempt that got no answer (an error status, a refused connection) and the SDK's
    retry of it are two records of one request at the same step, step 1, not 'step: 1 -> 2';
    replay retries as the recording did (a replayed error status says to retry, at once)
    and plays both attempts at step 1. A changed request then misses at step 1, once: a
    miss is never retried."""
    from tracetape import ReplayMiss

    path = tmp_path / "run.jsonl"
    if failure is None:
        base = f"http://127.0.0.1:{refused_port}/v1"
    else:
        answers = iter([(failure, {"error": {"message": "busy", "type": "x"}}),
                        tool_call_reply("add", {"a": 1, "b": 2})])  # fmt: skip
        decider.reply = lambda body: next(answers)
        base = decider.base_url
    both = [(1, failure or RAISED), (1, 200 if failure else RAISED)]  # (step, status)
    retry_counts: list[str | None] = []  # each attempt's x-stainless-retry-count, as sent
    played: list[tuple[int | None, Any]] = []  # each replayed attempt's (step, status)
    play = Tape.play

    def spy(tape: Tape, decision: Any) -> Any:
        rec = play(tape, decision)
        played.append((decision.step, rec.out.get("status", RAISED)))
        return rec

    def ask(content: str, retries: int) -> Any:
        def sent(request: Any) -> None:
            retry_counts.append(request.headers.get("x-stainless-retry-count"))

        client = openai.OpenAI(
            base_url=base, api_key="k", max_retries=retries,
            http_client=httpx2.Client(event_hooks={"request": [sent]}),
        )  # fmt: skip
        return client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": content}]
        )

    def answered() -> str:
        if failure is not None:
            return str(ask("a", retries=1).choices[0].message.tool_calls[0].function.name)
        with pytest.raises(openai.APIConnectionError):
            ask("a", retries=1)
        return "refused"

    with (
        Tape(path, mode="record") as tape,
        tracetape.patch_http(tape),
        pytest.MonkeyPatch.context() as m,
    ):
        m.setattr(openai.OpenAI, "_calculate_retry_timeout", lambda *a, **k: 0.0)  # no backoff
        recorded = answered()
    assert retry_counts == ["0", "1"]  # the SDK retried the first attempt
    records = read_cassette(path).records
    assert [(r.step, r.out.get("status", RAISED)) for r in records] == both
    assert records[0].key == records[1].key
    heard = len(decider.requests)

    monkeypatch.setattr(Tape, "play", spy)
    with (
        Tape(path, mode="replay", strict=True) as tape,
        tracetape.patch_http(tape),
        pytest.MonkeyPatch.context() as m,
    ):
        if failure is None:  # a refused connection says nothing of when to retry
            m.setattr(openai.OpenAI, "_calculate_retry_timeout", lambda *a, **k: 0.0)
        assert answered() == recorded
    assert played == both
    assert tape.misses == []
    with (
        pytest.raises(ReplayMiss) as info,
        Tape(path, mode="replay") as tape,
        tracetape.patch_http(tape),
    ):
        ask("b", retries=2)
    assert len(decider.requests) == heard  # replay reached no server
    assert info.value.step == 1
    assert len(tape.misses) == 1  # the miss was not retried
    assert info.value.changes == ["messages[0].content"]


@pytest.mark.parametrize(("recorded", "replayed"), [(1, 3), (3, 1)])
def test_a_failed_request_retried_in_the_background_replays_whatever_the_count(
    tmp_path: Path, recorded: int, replayed: int, refused_port: int
) -> None:
    """litellm fetches its price list again on a timer while the program runs: a failed
    request is repeated as often as the run's timing allows. Replay raises the last failure
    again for extra attempts, and a strict replay does not count missing ones as unplayed."""
    path = tmp_path / "run.jsonl"
    url = f"http://127.0.0.1:{refused_port}/prices.json"
    with Tape(path, mode="record") as tape:
        assert {_fetch(tape, url) for _ in range(recorded)} == {"fallback after ConnectError"}
    assert len(read_cassette(path).records) == recorded
    with Tape(path, mode="replay", strict=True) as tape:
        assert {_fetch(tape, url) for _ in range(replayed)} == {"fallback after ConnectError"}


def test_a_request_that_got_a_response_is_not_repeated(tmp_path: Path) -> None:
    """Only failures repeat: a request answered once and asked for twice is a miss."""
    from tests.echo_server import fake_openai
    from tracetape import ReplayMiss

    path = tmp_path / "run.jsonl"
    with fake_openai() as base, Tape(path, mode="record") as tape:
        _fetch(tape, base + "/models")
    with pytest.raises(ReplayMiss), Tape(path, mode="replay") as tape:
        _fetch(tape, base + "/models")
        _fetch(tape, base + "/models")
