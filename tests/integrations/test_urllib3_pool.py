"""The urllib3 transport: ``requests`` and ``urllib3`` against a tiny local server, recorded
under the hooks, then replayed with the network blocked and the server stopped."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import urllib3

import tracetape
from tracetape import ReplayMiss, Tape, read_cassette
from tracetape.integrations.network import block_network

from .test_aiohttp_client import CHAT, EVENTS, KEY, Server

pytestmark = pytest.mark.usefixtures("no_leftover_patch")


@pytest.fixture
def server() -> Iterator[Server]:
    srv = Server()
    try:
        yield srv
    finally:
        srv.stop()


def taped(path: Path, mode: str, program: Callable[[], Any], level: str = "http") -> Any:
    """Run ``program`` under ``patch_http`` (or ``patch_sdks``); a replay runs with the
    network blocked, and must not have tried to reach it."""
    hook = tracetape.patch_http if level == "http" else tracetape.patch_sdks
    with contextlib.ExitStack() as stack:
        guard = stack.enter_context(block_network()) if mode == "replay" else None
        with Tape(path, mode=mode) as tape, hook(tape):
            result = program()
    assert guard is None or guard.attempts == []
    return result


def test_a_requests_get_is_recorded_and_replayed(tmp_path: Path, server: Server) -> None:
    path = tmp_path / "run.jsonl"

    def program() -> Any:
        with requests.Session() as session:
            response = session.get(f"{server.url}/json?q=1", timeout=5)
            return response.status_code, response.json(), response.headers["Content-Type"]

    live = taped(path, "record", program)
    assert live == (200, {"hello": "world"}, "application/json")
    (rec,) = read_cassette(path).records
    assert rec.kind == "http" and rec.input["url"] == f"{server.url}/json?q=1"
    assert rec.out == {"status": 200, "body": {"hello": "world"}}
    server.stop()
    assert taped(path, "replay", program) == live
    assert server.requests == ["/json?q=1"]


def test_urllib3_preloads_as_asked_and_streams_as_asked(tmp_path: Path, server: Server) -> None:
    path = tmp_path / "run.jsonl"

    def program() -> Any:
        pool = urllib3.PoolManager()
        whole = pool.request("GET", f"{server.url}/teapot")
        streamed = pool.request("GET", f"{server.url}/sse", preload_content=False)
        chunks = list(streamed.stream(1024))
        streamed.release_conn()
        return whole.status, whole.data, b"".join(chunks)

    live = taped(path, "record", program)
    assert live == (418, b"short and stout", b"".join(EVENTS))
    teapot, sse = read_cassette(path).records
    assert teapot.out == {"status": 418, "text": "short and stout", "content_type": "text/plain"}
    assert sse.out["events"] == [
        {"data": {"n": 1}},
        {"event": "tick", "data": {"n": 2}},
        {"text": "done"},
    ]
    server.stop()
    assert taped(path, "replay", program) == live


def test_a_live_stream_reaches_the_program_as_it_arrives(tmp_path: Path, server: Server) -> None:
    """While recording, the first event is read before the server sends the next (a read is
    not held back to fill its size), and the stream is stored whole."""
    path = tmp_path / "run.jsonl"
    first: list[bytes] = []

    def program() -> list[bytes]:
        with requests.get(f"{server.url}/hold", stream=True, timeout=5) as response:
            lines = response.iter_lines()
            first.append(next(lines))
            server.release.set()
            return [first[0], *(line for line in lines if line)]

    result = taped(path, "record", program)
    assert first == [b'data: {"n":1}']
    assert result == [b'data: {"n":1}', b"event: tick", b'data: {"n":2}', b"data: done"]
    (rec,) = read_cassette(path).records
    assert rec.out.get("complete", True) is True and len(rec.out["events"]) == 3


def test_an_abandoned_stream_is_stored_as_far_as_it_was_read(
    tmp_path: Path, server: Server
) -> None:
    path = tmp_path / "run.jsonl"

    def program() -> bytes:
        with requests.get(f"{server.url}/hold", stream=True, timeout=5) as response:
            return next(response.iter_lines())

    assert taped(path, "record", program) == b'data: {"n":1}'
    server.release.set()
    (rec,) = read_cassette(path).records
    assert rec.out == {"status": 200, "events": [{"data": {"n": 1}}], "complete": False}

    def past_the_end() -> list[bytes]:
        with requests.get(f"{server.url}/hold", stream=True, timeout=5) as response:
            return list(response.iter_lines())

    server.stop()
    with pytest.raises(ReplayMiss, match="stopped reading"):
        taped(path, "replay", past_the_end)


def test_a_model_request_is_an_llm_decision_without_its_key(tmp_path: Path, server: Server) -> None:
    path = tmp_path / "run.jsonl"
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}

    def program() -> Any:
        headers = {"Authorization": f"Bearer {KEY}"}
        url = f"{server.url}/v1/chat/completions"
        return requests.post(url, json=body, headers=headers, timeout=5).json()

    assert taped(path, "record", program, level="sdk") == CHAT
    (rec,) = read_cassette(path).records
    assert rec.kind == "llm" and rec.input["messages"] == body["messages"]
    assert KEY not in path.read_text()
    server.stop()
    assert taped(path, "replay", program, level="sdk") == CHAT


def test_a_changed_request_misses_through_requests(tmp_path: Path, server: Server) -> None:
    path = tmp_path / "run.jsonl"

    def program(word: str) -> Callable[[], Any]:
        return lambda: requests.post(f"{server.url}/echo", json={"w": word}, timeout=5).json()

    taped(path, "record", program("sun"))
    server.stop()
    with pytest.raises(ReplayMiss) as miss:
        taped(path, "replay", program("rain"))
    assert "body.w" in str(miss.value) and "sun" in str(miss.value)


def test_a_refused_connection_is_raised_again_as_requests_raised_it(
    tmp_path: Path, refused_port: int
) -> None:
    path = tmp_path / "run.jsonl"
    raised: list[BaseException] = []

    def program() -> None:
        try:
            requests.get(f"http://127.0.0.1:{refused_port}/x", timeout=5)
        except requests.ConnectionError as exc:
            raised.append(exc)

    taped(path, "record", program)
    taped(path, "replay", program)
    live, replayed = raised
    assert type(replayed) is type(live)
    reason = replayed.args[0].reason  # the MaxRetryError's cause, as requests read it
    assert isinstance(reason, urllib3.exceptions.NewConnectionError)


def test_a_head_request_with_a_length_and_no_body(tmp_path: Path, server: Server) -> None:
    path = tmp_path / "run.jsonl"

    def program() -> Any:
        response = requests.head(f"{server.url}/json", timeout=5)
        return response.status_code, response.content

    assert taped(path, "record", program) == (200, b"")
    (rec,) = read_cassette(path).records
    assert rec.input["method"] == "HEAD" and rec.out == {"status": 200}
    server.stop()
    assert taped(path, "replay", program) == (200, b"")
