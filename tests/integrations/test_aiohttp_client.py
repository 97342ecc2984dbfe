"""The aiohttp transport: a plain ``aiohttp.ClientSession`` against a tiny local server,
recorded under the hooks, then replayed with the server stopped."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import aiohttp
import httpx2
import pytest

import tracetape
from tracetape import ReplayMiss, Tape, read_cassette
from tracetape.integrations import unpatch_all
from tracetape.integrations.network import block_network

# compact JSON, as the providers send it: a replayed event is the stored JSON, written compactly
EVENTS = [b'data: {"n":1}\n\n', b'event: tick\ndata: {"n":2}\n\n', b"data: done\n\n"]
CHAT = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 1,
    "model": "m",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}}],
    "usage": {"prompt_tokens": 3, "completion_tokens": 1},
}
KEY = "sk-proj-aiohttp0123456789abcdefghijklmn"


class Server:
    """A tiny HTTP server: ``/json`` (a JSON body), ``/echo`` (the request's JSON back),
    ``/teapot`` (418, text), ``/sse`` (three events), ``/hold`` (one event, then waits for
    ``release``: ``holding`` while it waits), ``/v1/chat/completions`` (a chat answer); a HEAD
    has a length and no body. ``requests`` counts what reached it."""

    def __init__(self) -> None:
        self.requests: list[str] = []
        self.release = threading.Event()
        self.holding = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def setup(self) -> None:
                super().setup()
                self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def _send(self, status: int, ctype: str, raw: bytes) -> None:
                self.send_response(status)
                self.send_header("content-type", ctype)
                self.send_header("content-length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def _events(self, events: list[bytes], hold: bool) -> None:
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                for i, raw in enumerate(events):
                    self.wfile.write(f"{len(raw):x}\r\n".encode() + raw + b"\r\n")
                    self.wfile.flush()
                    if hold and i == 0:
                        outer.holding.set()
                        outer.release.wait(5)
                        outer.holding.clear()
                self.wfile.write(b"0\r\n\r\n")

            def do_GET(self) -> None:
                outer.requests.append(self.path)
                path = self.path.split("?")[0]
                if path == "/json":
                    self._send(200, "application/json", json.dumps({"hello": "world"}).encode())
                elif path == "/teapot":
                    self._send(418, "text/plain", b"short and stout")
                elif path in ("/sse", "/hold"):
                    self._events(EVENTS, hold=path == "/hold")
                else:
                    self._send(404, "text/plain", b"no")

            def do_HEAD(self) -> None:
                outer.requests.append(self.path)
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", "18")  # the length a GET's body would have
                self.end_headers()

            def do_POST(self) -> None:
                outer.requests.append(self.path)
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                if self.path == "/echo":
                    self._send(
                        200, "application/json", json.dumps({"echo": json.loads(body)}).encode()
                    )
                elif self.path == "/v1/chat/completions":
                    self._send(200, "application/json", json.dumps(CHAT).encode())
                else:
                    self._send(404, "text/plain", b"no")

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        ).start()

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def stop(self) -> None:
        self.release.set()
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def server() -> Iterator[Server]:
    srv = Server()
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture(autouse=True)
def _no_leftover_patch() -> Iterator[None]:
    yield
    unpatch_all()


def taped(path: Path, mode: str, program: Callable[[], Awaitable[Any]], level: str = "http") -> Any:
    """Run ``program`` in a fresh event loop under ``patch_http`` (or ``patch_sdks``); a
    replay runs with the network blocked, and must not have tried to reach it."""
    hook = tracetape.patch_http if level == "http" else tracetape.patch_sdks
    with contextlib.ExitStack() as stack:
        guard = stack.enter_context(block_network()) if mode == "replay" else None
        with Tape(path, mode=mode) as tape, hook(tape):
            result = asyncio.run(program())
    assert guard is None or guard.attempts == []
    return result


READS: dict[str, Callable[[aiohttp.ClientResponse], Awaitable[Any]]] = {
    "json": lambda r: r.json(),
    "text": lambda r: r.text(),
    "read": lambda r: r.read(),
}


async def _lines(resp: aiohttp.ClientResponse) -> list[bytes]:
    return [line async for line in resp.content]


async def _any(resp: aiohttp.ClientResponse) -> list[bytes]:
    return [chunk async for chunk in resp.content.iter_any()]


async def _chunked(resp: aiohttp.ClientResponse) -> list[bytes]:
    return [chunk async for chunk in resp.content.iter_chunked(5)]


async def _chunks(resp: aiohttp.ClientResponse) -> list[bytes]:
    return [chunk async for chunk, _ in resp.content.iter_chunks()]


async def _exactly(resp: aiohttp.ClientResponse) -> bytes:
    return await resp.content.readexactly(4) + await resp.content.read()


def _parsed(value: Any) -> Any:
    """A JSON body however it was read (a replayed body is the stored JSON, written
    compactly)."""
    if isinstance(value, list):
        value = b"".join(value)
    return json.loads(value) if isinstance(value, str | bytes) else value


@pytest.mark.parametrize(
    "read",
    [
        pytest.param(READS["json"], id="json"),
        pytest.param(READS["text"], id="text"),
        pytest.param(READS["read"], id="read"),
        pytest.param(_lines, id="lines"),
        pytest.param(_chunked, id="iter_chunked"),
        pytest.param(_exactly, id="readexactly"),
    ],
)
def test_a_whole_body_replays_however_it_is_read(
    tmp_path: Path, server: Server, read: Callable[[aiohttp.ClientResponse], Awaitable[Any]]
) -> None:
    """Under ``patch_http`` a GET is an ``http`` decision stored as JSON, whichever way the
    body was read, and replays to the same value with the server stopped."""
    path = tmp_path / "run.jsonl"

    async def program() -> Any:
        async with (
            aiohttp.ClientSession() as session,
            session.get(server.url + "/json?q=1") as resp,
        ):
            assert isinstance(resp, aiohttp.ClientResponse)
            return resp.status, resp.headers["Content-Type"], await read(resp)

    status, _, value = taped(path, "record", program)
    (rec,) = read_cassette(path).records
    assert (rec.kind, rec.input["url"], rec.out) == (
        "http",
        server.url + "/json?q=1",
        {"status": 200, "body": {"hello": "world"}},
    )
    server.stop()
    again = taped(path, "replay", program)
    assert again[0] == status and again[1].startswith("application/json")
    assert _parsed(again[2]) == _parsed(value) == {"hello": "world"}
    assert server.requests == ["/json?q=1"]


def test_a_post_and_an_error_status_replay(tmp_path: Path, server: Server) -> None:
    """A JSON POST is keyed on its body, and a 418 replays as a real response whose
    ``raise_for_status`` raises aiohttp's own error."""
    path = tmp_path / "run.jsonl"

    async def program() -> tuple[Any, int, str]:
        async with aiohttp.ClientSession() as session:
            async with session.post(server.url + "/echo", json={"a": 1}) as resp:
                echoed = await resp.json()
            async with session.get(server.url + "/teapot") as resp:
                with pytest.raises(aiohttp.ClientResponseError) as info:
                    resp.raise_for_status()
                return echoed, info.value.status, await resp.text()

    recorded = taped(path, "record", program)
    assert recorded == ({"echo": {"a": 1}}, 418, "short and stout")
    records = read_cassette(path).records
    assert [r.input["body"] for r in records] == [{"a": 1}, None]
    server.stop()
    assert taped(path, "replay", program) == recorded
    assert len(server.requests) == 2


@pytest.mark.parametrize(
    "read",
    [
        pytest.param(_any, id="iter_any"),
        pytest.param(_chunks, id="iter_chunks"),
    ],
)
def test_a_stream_replays_one_chunk_per_event(
    tmp_path: Path, server: Server, read: Callable[[aiohttp.ClientResponse], Awaitable[Any]]
) -> None:
    """An SSE body is stored as its events and replayed one event per chunk, byte for byte."""
    path = tmp_path / "run.jsonl"

    async def program() -> Any:
        async with aiohttp.ClientSession() as session, session.get(server.url + "/sse") as resp:
            return await read(resp)

    assert b"".join(taped(path, "record", program)) == b"".join(EVENTS)
    (rec,) = read_cassette(path).records
    assert rec.out == {
        "status": 200,
        "events": [{"data": {"n": 1}}, {"event": "tick", "data": {"n": 2}}, {"text": "done"}],
    }
    server.stop()
    assert taped(path, "replay", program) == EVENTS


def test_a_half_read_stream_is_recorded_as_far_as_read(tmp_path: Path, server: Server) -> None:
    """A stream released after its first event is stored incomplete; a replay that reads
    further raises the truncated-stream miss."""
    path = tmp_path / "run.jsonl"

    async def first_event() -> bytes:
        async with aiohttp.ClientSession() as session, session.get(server.url + "/hold") as resp:
            return await resp.content.readuntil(b"\n\n")

    async def everything() -> bytes:
        async with aiohttp.ClientSession() as session, session.get(server.url + "/hold") as resp:
            return await resp.read()

    assert taped(path, "record", first_event) == EVENTS[0]
    (rec,) = read_cassette(path).records
    assert rec.out == {"status": 200, "events": [{"data": {"n": 1}}], "complete": False}
    server.stop()
    assert taped(path, "replay", first_event) == EVENTS[0]
    with pytest.raises(ReplayMiss, match="stopped reading this stream"):
        taped(path, "replay", everything)


def test_model_routes_are_taped_under_the_sdk_hooks(tmp_path: Path, server: Server) -> None:
    """Under ``patch_sdks`` a request to a model route is an ``llm`` decision (step, usage,
    route); any other request passes through untaped, and the key is never stored."""
    path = tmp_path / "run.jsonl"
    chat = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}

    async def program(also_other: bool) -> Any:
        headers = {"Authorization": f"Bearer {KEY}"}
        async with aiohttp.ClientSession(headers=headers) as session:
            if also_other:
                async with session.get(server.url + "/json") as resp:
                    await resp.read()
            async with session.post(server.url + "/v1/chat/completions", json=chat) as resp:
                return await resp.json()

    assert taped(path, "record", lambda: program(True), "sdk") == CHAT
    (rec,) = read_cassette(path).records
    assert (rec.kind, rec.step, rec.api, rec.usage) == (
        "llm",
        1,
        "openai.chat.completions",
        {"input": 3, "output": 1},
    )
    assert rec.input["messages"] == chat["messages"]
    assert KEY not in path.read_text()
    server.stop()
    assert taped(path, "replay", lambda: program(False), "sdk") == CHAT
    assert server.requests == ["/json", "/v1/chat/completions"]


def test_an_unrecorded_request_is_a_miss(tmp_path: Path, server: Server) -> None:
    """A request never recorded raises ``ReplayMiss`` from the session, naming the field
    that changed."""
    path = tmp_path / "run.jsonl"

    def program(value: int) -> Callable[[], Awaitable[Any]]:
        async def post() -> Any:
            async with (
                aiohttp.ClientSession() as session,
                session.post(server.url + "/echo", json={"a": value}) as resp,
            ):
                return await resp.json()

        return post

    taped(path, "record", program(1))
    server.stop()
    with pytest.raises(ReplayMiss) as info:
        taped(path, "replay", program(2))
    assert info.value.changes == ["body.a"]


def test_a_connection_failure_replays_as_the_same_error(tmp_path: Path, refused_port: int) -> None:
    """A request that got no response is recorded as its exception and raised again, of
    the same aiohttp type, without touching the network."""
    port = refused_port
    path = tmp_path / "run.jsonl"

    async def program() -> Any:
        async with aiohttp.ClientSession() as session:
            with pytest.raises(aiohttp.ClientConnectorError) as info:
                await session.get(f"http://127.0.0.1:{port}/x")
            return type(info.value), info.value.errno

    recorded = taped(path, "record", program)
    assert taped(path, "replay", program) == recorded


def test_sessions_are_left_alone_once_the_hooks_are_off(tmp_path: Path, server: Server) -> None:
    """Leaving the hooks restores the constructor, and a session built under them no longer
    tapes anything."""
    original = aiohttp.ClientSession.__init__
    path = tmp_path / "run.jsonl"

    async def program() -> None:
        with Tape(path, mode="record") as tape, tracetape.patch_http(tape):
            assert aiohttp.ClientSession.__init__ is not original
            session = aiohttp.ClientSession()
        async with session, session.get(server.url + "/json") as resp:
            await resp.read()

    asyncio.run(program())
    assert aiohttp.ClientSession.__init__ is original
    assert read_cassette(path).records == []
    assert server.requests == ["/json"]


class AiohttpBody(httpx2.AsyncByteStream):
    """An aiohttp response's body, streamed to ``httpx2``."""

    def __init__(self, resp: aiohttp.ClientResponse) -> None:
        self.resp = resp

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self.resp.content.iter_any():
            yield chunk

    async def aclose(self) -> None:
        self.resp.release()


class OverAiohttp(httpx2.AsyncBaseTransport):
    """An ``httpx2`` transport that sends over an aiohttp session, as litellm's does."""

    def __init__(self) -> None:
        self.session = aiohttp.ClientSession()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        headers = {"Content-Type": request.headers["content-type"]}
        resp = await self.session.post(
            str(request.url), data=await request.aread(), headers=headers
        )
        ctype = {"content-type": resp.content_type}
        return httpx2.Response(resp.status, headers=ctype, stream=AiohttpBody(resp))

    async def aclose(self) -> None:
        await self.session.close()


def test_an_httpx_transport_over_aiohttp_is_taped_once(tmp_path: Path, server: Server) -> None:
    """A request the ``httpx`` hook took is not taken again by the aiohttp session its
    transport sends it through: one decision, replayed at ``httpx``."""
    path = tmp_path / "run.jsonl"

    async def program() -> Any:
        async with httpx2.AsyncClient(transport=OverAiohttp()) as client:
            return (await client.post(server.url + "/echo", json={"a": 1})).json()

    assert taped(path, "record", program) == {"echo": {"a": 1}}
    assert len(read_cassette(path).records) == 1
    server.stop()
    assert taped(path, "replay", program) == {"echo": {"a": 1}}
