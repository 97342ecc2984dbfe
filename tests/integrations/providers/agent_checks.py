"""What every provider's tests share: a skeleton for the fake servers, the tool-using agent's
task and tool, a transport that sends a real host's requests to a fake, and the checks a
recorded agent must pass.

The fakes (``fake_*.py``) speak each provider's wire format on 127.0.0.1, with the standard
library only; their "model" is ``fakeserver.plan_openai``: for the task "sum 1 to N" it asks
for the ``add`` tool once per number, then answers with the total. Each reports usage as
``10 ×`` the messages it was sent (input) and 3 (output), so a record's usage says which
answer it came from.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from fakeserver import QuietServer, Served

import tracetape
from tracetape import Record, Redactor, ReplayMiss, Tape, read_cassette
from tracetape.integrations.providers import provider

TASK = "sum 1 to 3, carefully"
ANSWER = "The total is 6."
MISSING = "missing"  # the model name every fake answers with its provider's "not found" error
ADD_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    "required": ["a", "b"],
}


@tracetape.tool
def add(a: int, b: int) -> int:
    """The agent's tool, taped: a replay returns the recorded sum without running it."""
    return a + b


def usage_for(messages: int) -> tuple[int, int]:
    """The (input, output) tokens a fake reports for a request carrying ``messages``."""
    return 10 * messages, 3


def pieces(text: str) -> list[str]:
    """``text`` in the pieces a fake streams it in: word by word, spaces kept."""
    words = text.split(" ")
    return [w + " " for w in words[:-1]] + words[-1:]


def compact(data: Any) -> bytes:
    """JSON as the providers' servers write it: no spaces."""
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode()


# -- the fakes' skeleton (standard library only) ---------------------------------------------------


@dataclass
class Reply:
    """A fake's answer: a whole body, or ``chunks`` written one by one (chunked encoding,
    each flushed, as a streaming server sends its events; an iterator may wait between
    them)."""

    status: int = 200
    content_type: str = "application/json"
    body: bytes = b""
    chunks: Iterable[bytes] | None = None
    headers: dict[str, str] = field(default_factory=dict)


class FakeModelServer(Served):
    """A provider's server on 127.0.0.1: ``answer(path, body)`` is the provider's (or
    ``respond(request)``, where the answer depends on more than the path and the body); every
    request (``path``, ``query``, ``headers``, JSON ``body``) is kept in ``requests``.
    ``start()``/``stop()``; ``base_url`` is ``http://127.0.0.1:PORT``."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def setup(self) -> None:
                super().setup()
                # small writes must not wait for delayed ACKs
                self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                url = urlsplit(self.path)
                request = {
                    "path": url.path,
                    "query": {k: v[0] for k, v in parse_qs(url.query).items()},
                    "headers": dict(self.headers),
                    "body": json.loads(raw or b"{}"),
                }
                fake.requests.append(request)
                self._write(fake.respond(request))

            def _write(self, reply: Reply) -> None:
                self.send_response(reply.status)
                self.send_header("content-type", reply.content_type)
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                if reply.chunks is None:
                    self.send_header("content-length", str(len(reply.body)))
                    self.end_headers()
                    self.wfile.write(reply.body)
                    return
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                try:
                    for chunk in reply.chunks:
                        self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                        self.wfile.flush()
                    self.wfile.write(b"0\r\n\r\n")
                except OSError:
                    return  # the client left mid-stream

        self._server = QuietServer(("127.0.0.1", 0), Handler)

    def respond(self, request: dict[str, Any]) -> Reply:
        """The provider's reply to ``request`` (as kept in ``requests``)."""
        return self.answer(request["path"], request["body"])

    def answer(self, path: str, body: dict[str, Any]) -> Reply:
        """The provider's reply to a POST of ``body`` to ``path``."""
        raise NotImplementedError


def json_reply(data: Any, status: int = 200) -> Reply:
    """A whole JSON body."""
    return Reply(status, "application/json", compact(data))


def sse(events: Iterable[tuple[str | None, Any]]) -> list[bytes]:
    """Server-sent events, one chunk each: ``(name or None, data)``; data that is a ``str``
    is sent as it is (``[DONE]``), anything else as compact JSON."""
    chunks = []
    for name, data in events:
        text = data.encode() if isinstance(data, str) else compact(data)
        chunks.append((f"event: {name}\n".encode() if name else b"") + b"data: " + text + b"\n\n")
    return chunks


# -- a real host's requests sent to a fake ---------------------------------------------------------


def to_fake(module: Any, base_url: str, *, aio: bool = False) -> Any:
    """An ``httpx``/``httpx2`` (``module``) transport that sends every request to the fake at
    ``base_url`` whatever host it names: the SDK talks to its real host (``api.mistral.ai``),
    so the provider is recognised by host as in production, and the fake answers. The hooks
    sit at ``Client.send``, above the transport: a replay never reaches it."""
    target = urlsplit(base_url)
    base = module.AsyncHTTPTransport if aio else module.HTTPTransport

    class ToFake(base):  # type: ignore[misc,valid-type]
        def _rewrite(self, request: Any) -> None:
            request.url = request.url.copy_with(
                scheme=target.scheme, host=target.hostname, port=target.port
            )

        def handle_request(self, request: Any) -> Any:
            self._rewrite(request)
            return super().handle_request(request)

        async def handle_async_request(self, request: Any) -> Any:
            self._rewrite(request)
            return await super().handle_async_request(request)

    return ToFake()


# -- running an agent on a tape --------------------------------------------------------------------

# An agent: (task, aio, stream) -> its answer; async agents return a coroutine.
Agent = Callable[[str, bool, bool], Any]

WAYS = [
    pytest.param(aio, stream, id=f"{'async' if aio else 'sync'}-{'stream' if stream else 'json'}")
    for aio in (False, True)
    for stream in (False, True)
]


def taped(path: Path, mode: str, agent: Agent, *, aio: bool, stream: bool, task: str = TASK) -> Any:
    """Run ``agent`` under the SDK hooks on a tape in ``mode``; an async agent enters the tape
    in its own task, as an async program would."""
    if not aio:
        with Tape(path, mode=mode) as tape, tracetape.patch_sdks(tape):
            return agent(task, aio, stream)

    async def main() -> Any:
        async with Tape(path, mode=mode) as tape:
            with tracetape.patch_sdks(tape):
                return await agent(task, aio, stream)

    return asyncio.run(main())


def check_agent(
    path: Path,
    server: Any,
    agent: Agent,
    *,
    aio: bool,
    stream: bool,
    api: str,
    key: str,
    usage: Callable[[int], tuple[int, int]] = usage_for,
) -> list[Any]:
    """Record the agent's "sum 1 to 3" run, then replay it with the server stopped, and check
    what every provider's tape must hold:

    * the same answer, replayed without a request reaching the server;
    * its model calls (``api``) at steps 1..4, each tool call at the step of the model call
      that asked for it, and each answer asking (``Provider.asks``) for the tool call that
      follows it, and the last answer's text (``Provider.text``) the agent's answer;
    * each model call's usage (``tokens`` too) as its answer reported it (``usage`` of the
      number of messages it sent);
    * whole or streamed answers as asked, and the API key nowhere in the cassette.

    Returns the records."""
    assert taped(path, "record", agent, aio=aio, stream=stream) == ANSWER
    sent = len(server.requests)
    assert sent == 4, server.requests  # three add calls, then the answer
    server.stop()
    assert taped(path, "replay", agent, aio=aio, stream=stream) == ANSWER
    assert len(server.requests) == sent

    records = read_cassette(path).records
    assert [(r.kind, r.step) for r in records] == [
        ("llm", 1), ("tool", 1), ("llm", 2), ("tool", 2), ("llm", 3), ("tool", 3), ("llm", 4)
    ]  # fmt: skip
    models = [r for r in records if r.kind == "llm"]
    assert {r.api for r in models} == {api}
    assert all(("events" in r.out) == stream for r in models)
    prov = provider(api.split(".", 1)[0])
    for step, rec in enumerate(models, 1):
        tokens_in, tokens_out = usage(2 * step - 1)  # the task, then a call and its result
        assert rec.usage == {"input": tokens_in, "output": tokens_out}, rec.usage
        assert rec.tokens == tokens_in + tokens_out
        following = records[records.index(rec) + 1 :][:1]
        asked = [(a.name, a.args) for a in prov.asks(rec.out)]
        assert asked == [(t.input["name"], t.input["args"]) for t in following if t.kind == "tool"]
    assert prov.text(models[-1].out) == ANSWER  # the answer's text, whole or streamed
    assert key.encode() not in path.read_bytes()
    return records


def check_miss(
    path: Path, server: Any, agent: Agent, field: str, *, aio: bool, stream: bool
) -> None:
    """Record the agent, then replay it with one word of its task changed, the server stopped:
    the replay raises the ``ReplayMiss`` at step 1, naming ``field`` and both words."""
    taped(path, "record", agent, aio=aio, stream=stream)
    server.stop()
    with pytest.raises(ReplayMiss) as info:
        taped(
            path, "replay", agent, aio=aio, stream=stream, task=TASK.replace("carefully", "quickly")
        )
    miss = info.value
    assert type(miss).__name__ == "ReplayMiss"
    assert (miss.step, miss.matched, miss.changes) == (1, 0, [field])
    text = str(miss)
    assert f"changed: {field}" in text and "carefully" in text and "quickly" in text


def check_error(
    path: Path, server: Any, call: Callable[[], Any], error: type[BaseException]
) -> tuple[Any, Any]:
    """Record ``call``, which the server answers with an HTTP error, then replay it with the
    server stopped: both raise the SDK's own ``error``, and the error is one recorded decision.
    Returns the recorded and the replayed exception."""
    raised = []
    for mode in ("record", "replay"):
        with (
            Tape(path, mode=mode) as tape,
            tracetape.patch_sdks(tape),
            pytest.raises(error) as info,
        ):
            call()
        raised.append(info.value)
        if mode == "record":
            sent = len(server.requests)
            server.stop()
    assert len(server.requests) == sent
    (rec,) = read_cassette(path).records
    assert rec.kind == "llm" and rec.out["status"] >= 400
    return raised[0], raised[1]


def check_one_shot(path: Path, server: Any, call: Callable[[], Any]) -> Record:
    """Record ``call``, a request that carries no conversation, then replay it with the server
    stopped to the same value: one decision, at step 1. Returns its record."""
    with Tape(path, mode="record") as tape, tracetape.patch_sdks(tape):
        recorded = call()
    server.stop()
    with Tape(path, mode="replay") as tape, tracetape.patch_sdks(tape):
        assert call() == recorded
    assert len(server.requests) == 1
    (rec,) = read_cassette(path).records
    assert (rec.kind, rec.step) == ("llm", 1)
    return rec


def check_split_secret(
    name: str, event: Callable[[str], Any], text_of: Callable[[Any], str]
) -> None:
    """A stream of provider ``name`` whose text carries a key in 7-character pieces (none
    long enough to be recognised alone; ``event(piece)`` is one event's data, ``text_of``
    its piece) is redacted on the text the provider's ``stream_text`` assembles: no event
    keeps a piece of the key, and the stream keeps its events."""
    secret = "sk-proj-Qq1Ww2Ee3Rr4Tt5Yy6Uu7Ii8Oo9Pp0"
    text = f"your key is {secret} keep it safe"
    events = [{"data": event(text[i : i + 7])} for i in range(0, len(text), 7)]
    redacted, changed = Redactor().redact_value(
        {"status": 200, "events": events}, provider(name).stream_text
    )
    assembled = "".join(text_of(e["data"]) for e in redacted["events"])
    assert changed and len(redacted["events"]) == len(events)
    assert assembled.startswith("your key is [REDACTED:openai_key:")
    assert assembled.endswith("] keep it safe") and secret[7:14] not in json.dumps(redacted)


# -- the agent of an OpenAI-style SDK (openai, groq) -----------------------------------------------

# the ``add`` tool as a function tool: the shape every SDK here takes
TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {"name": "add", "description": "Add two integers.", "parameters": ADD_SCHEMA},
    }
]


def _chat_step(messages: list[Any], text: str | None, calls: list[dict[str, Any]]) -> str | None:
    """Append the answer and its tool results; the answer when it called no tool."""
    if not calls:
        return str(text)
    messages.append({"role": "assistant", "content": text, "tool_calls": calls})
    for call in calls:
        result = add(**json.loads(call["function"]["arguments"]))
        messages.append({"role": "tool", "tool_call_id": call["id"], "content": str(result)})
    return None


def _assembled(chunks: Iterable[Any]) -> tuple[str | None, list[dict[str, Any]]]:
    """A streamed answer's text and tool calls, from its chunks' deltas."""
    text, calls = "", {}
    for chunk in chunks:
        for choice in chunk.choices:
            text += choice.delta.content or ""
            for tc in choice.delta.tool_calls or ():
                call = calls.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
                call["id"] = tc.id or call["id"]
                call["name"] += tc.function.name or ""
                call["arguments"] += tc.function.arguments or ""
    tool_calls = [
        {
            "id": c["id"],
            "type": "function",
            "function": {"name": c["name"], "arguments": c["arguments"]},
        }
        for _, c in sorted(calls.items())
    ]
    return text or None, tool_calls


def _whole(reply: Any) -> tuple[str | None, list[dict[str, Any]]]:
    message = reply.choices[0].message
    return message.content, [
        tc.model_dump(include={"id", "type", "function"}) for tc in message.tool_calls or ()
    ]


def chat_agent(make: Callable[[bool], Any], model: str, **options: Any) -> Agent:
    """The tool loop on ``client.chat.completions.create`` of the client ``make(aio)`` builds
    (``openai``, ``groq``), with ``options`` added to each request."""

    def loop(task: str, stream: bool) -> str:
        client = make(False)
        messages: list[Any] = [{"role": "user", "content": task}]
        for _ in range(10):
            request = {"model": model, "messages": messages, "tools": TOOLS, **options}
            if stream:
                answer = _assembled(client.chat.completions.create(**request, stream=True))
            else:
                answer = _whole(client.chat.completions.create(**request))
            final = _chat_step(messages, *answer)
            if final is not None:
                return final
        raise AssertionError("no answer after 10 steps")

    async def aloop(task: str, stream: bool) -> str:
        client = make(True)
        messages: list[Any] = [{"role": "user", "content": task}]
        for _ in range(10):
            request = {"model": model, "messages": messages, "tools": TOOLS, **options}
            if stream:
                reply = await client.chat.completions.create(**request, stream=True)
                answer = _assembled([chunk async for chunk in reply])
            else:
                answer = _whole(await client.chat.completions.create(**request))
            final = _chat_step(messages, *answer)
            if final is not None:
                return final
        raise AssertionError("no answer after 10 steps")

    def run(task: str, aio: bool, stream: bool) -> Any:
        return aloop(task, stream) if aio else loop(task, stream)

    return run
