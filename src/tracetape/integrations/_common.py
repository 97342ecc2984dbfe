"""What the SDK and HTTP hooks share: which tape a call uses, the model-call counter, the
canonical ``llm`` payload, SSE parsing and the taps that record a response as it is read.

One payload for both hook levels: the SDK level builds it from the resource method's keyword
arguments, the HTTP level from the request's JSON body, and both give::

    {"messages": <the conversation field>, "tools": <tool schemas sorted by name>,
     "params": <every other body field>, "step": <n-th model call of the run>}

so a cassette recorded at one level replays at the other. Headers, the API key and the base
URL never enter it.

The key is hashed by ``Tape.prepare`` from the canonical JSON text (``canonical.canonical_json``,
the one keying code), with a memo per kind so a growing conversation is checked only where it
grew: keying is most of an SDK-level replay's cost.

The SSE parser is our own (about 60 lines) rather than ``httpx-sse`` because it must run
incrementally over raw byte chunks inside a transport, keep ``event``/``id``/``retry`` exactly,
and serialize back to the same events; the SDKs' own decoders are private.
"""

from __future__ import annotations

import base64
import contextvars
import json
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

from ..diagnose import truncated_stream_miss as _truncated
from ..errors import CassetteError, ReplayMiss, TapeError, TapeWarning
from ..record import Decision, Record
from ..tape import Effect, Tape, current_tape
from .tools import raised_record

__all__ = [
    "ENDPOINTS",
    "Capture",
    "Endpoint",
    "SSEParser",
    "Tap",
    "endpoint_for_path",
    "flush_pending",
    "llm_payload",
    "model_calls",
    "next_model_step",
    "resolve_tape",
    "sse_encode",
]

# The process-wide tape of ``tracetape.patch(tape)``; a tape bound in the current context
# (``with tape:``, ``with tape.patch_sdks():``) always wins over it.
_default_tape: Tape | None = None
_default_lock = threading.Lock()

# Set while an SDK-level hook runs the real call in record mode: the HTTP hooks then pass the
# request through (it is already being recorded once) and the send hook taps its response.
capture_var: contextvars.ContextVar[Capture | None] = contextvars.ContextVar(
    "tracetape_capture", default=None
)


def resolve_tape() -> Tape | None:
    """The tape an SDK call made now goes through: this context's tape, else the process one."""
    return current_tape() or _default_tape


def set_default_tape(tape: Tape | None) -> Tape | None:
    """Install ``tape`` as the process-wide default; returns the previous one."""
    global _default_tape
    with _default_lock:
        previous, _default_tape = _default_tape, tape
    return previous


# -- the model-call counter (kept on the tape) ------------------------------------------------


def next_model_step(tape: Tape) -> int:
    """Count one more model call in this flow on ``tape`` and return its step number
    (``Tape.next_model_step``: each thread and asyncio task counts its own)."""
    return tape.next_model_step()


def model_calls(tape: Tape) -> int:
    """How many model calls this flow made on ``tape`` so far (the step of the latest one)."""
    return tape.model_calls


# -- the canonical llm payload ----------------------------------------------------------------


class Endpoint(NamedTuple):
    """A known model endpoint: its URL path suffix and the body field holding the conversation."""

    name: str
    path: str
    messages: str


ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint("chat.completions", "/chat/completions", "messages"),
    Endpoint("responses", "/responses", "input"),
    Endpoint("completions", "/completions", "prompt"),
    Endpoint("embeddings", "/embeddings", "input"),
    Endpoint("messages", "/v1/messages", "messages"),
)
_BY_NAME = {e.name: e for e in ENDPOINTS}


def endpoint(name: str) -> Endpoint:
    """The endpoint called ``name`` (``"chat.completions"``, ``"messages"``, ...)."""
    return _BY_NAME[name]


def endpoint_for_path(path: str) -> Endpoint | None:
    """The model endpoint a request path ends with (any prefix: proxies, ``/v1``), or None."""
    path = path.rstrip("/")
    for ep in ENDPOINTS:  # "/chat/completions" is tried before "/completions"
        if path.endswith(ep.path):
            return ep
    return None


def _tool_name(tool: Any) -> str:
    if type(tool) is dict or isinstance(tool, Mapping):
        name = tool.get("name")
        if not name:
            function = tool.get("function")
            if type(function) is dict or isinstance(function, Mapping):
                name = function.get("name")
        return str(name or tool.get("type") or "")
    function = getattr(tool, "function", None)
    return str(getattr(tool, "name", None) or getattr(function, "name", None) or "")


def llm_payload(ep: Endpoint, body: Mapping[str, Any], step: int) -> dict[str, Any]:
    """The key payload of a model request body: messages, tools sorted by name, params, step.

    >>> llm_payload(endpoint("messages"), {"model": "m", "messages": [], "tools": [
    ...     {"name": "b"}, {"name": "a"}]}, 3)
    {'messages': [], 'tools': [{'name': 'a'}, {'name': 'b'}], 'params': {'model': 'm'}, 'step': 3}
    """
    params = dict(body)
    messages = params.pop(ep.messages, None)
    tools = params.pop("tools", None)
    schemas = sorted(tools, key=_tool_name) if tools else []
    return {"messages": messages, "tools": schemas, "params": params, "step": step}


_PLAIN = frozenset({str, int, float, bool, type(None), list, tuple, dict})


def one_shot(value: Any) -> bool:
    """Whether a call argument (not of a ``_PLAIN`` type) is an iterable that may be read only
    once (a generator, an iterator): ``materialize`` turns it into a list."""
    return isinstance(value, Iterable) and not (
        isinstance(value, str | bytes | bytearray | Mapping | list | tuple)
        or hasattr(value, "model_dump")
    )


def materialize(kwargs: dict[str, Any]) -> None:
    """Turn one-shot iterables among call arguments into lists, for the key and the real call."""
    for name, value in kwargs.items():
        if type(value) not in _PLAIN and one_shot(value):
            kwargs[name] = list(value)


# -- SSE ---------------------------------------------------------------------------------------


class SSEParser:
    """Incremental server-sent-events parser: feed byte chunks, get complete events.

    An event is ``{"event"?: name, "id"?: id, "retry"?: ms, "data": <JSON>}``, or ``"text"``
    instead of ``"data"`` when the data is not JSON (``[DONE]``).

    >>> p = SSEParser()
    >>> p.feed(b'event: ping\\ndata: {"a": 1}\\n\\ndata: [DO')
    [{'event': 'ping', 'data': {'a': 1}}]
    >>> p.feed(b'NE]\\n\\n')
    [{'text': '[DONE]'}]
    """

    def __init__(self) -> None:
        self._buf = b""
        self._fields: dict[str, Any] = {}
        self._data: list[str] = []

    def feed(self, chunk: bytes) -> list[dict[str, Any]]:
        """Parse ``chunk`` and return the events it completed."""
        self._buf += chunk
        lines = self._buf.splitlines(keepends=True)
        if (lines and not lines[-1].endswith((b"\n", b"\r"))) or (
            lines and lines[-1].endswith(b"\r") and not lines[-1].endswith(b"\r\n")
        ):
            # an unterminated line, or a "\r" whose "\n" may still come
            self._buf = lines.pop()
        else:
            self._buf = b""
        out: list[dict[str, Any]] = []
        for raw in lines:
            line = raw.rstrip(b"\r\n").decode("utf-8", "replace")
            if not line:
                event = self._dispatch()
                if event is not None:
                    out.append(event)
                continue
            if line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if name == "data":
                self._data.append(value)
            elif name == "event":
                self._fields["event"] = value
            elif name == "id":
                self._fields["id"] = value
            elif name == "retry" and value.isdigit():
                self._fields["retry"] = int(value)
        return out

    def _dispatch(self) -> dict[str, Any] | None:
        if not self._data and not self._fields:
            return None
        event = self._fields
        text = "\n".join(self._data)
        self._fields, self._data = {}, []
        try:
            event["data"] = json.loads(text)
        except ValueError:
            event["text"] = text
        return event

    def close(self) -> list[dict[str, Any]]:
        """Finish the stream: an event left without its blank line is dispatched."""
        out = self.feed(b"\n\n") if self._buf or self._data or self._fields else []
        return out


def sse_encode(event: Mapping[str, Any]) -> bytes:
    """Serialize one recorded event back to its SSE wire form.

    >>> sse_encode({"event": "ping", "data": {"a": 1}})
    b'event: ping\\ndata: {"a":1}\\n\\n'
    """
    parts = []
    if "event" in event:
        parts.append(f"event: {event['event']}")
    if "id" in event:
        parts.append(f"id: {event['id']}")
    if "retry" in event:
        parts.append(f"retry: {event['retry']}")
    if "data" in event:
        text = json.dumps(event["data"], separators=(",", ":"), ensure_ascii=False)
    else:
        text = str(event.get("text", ""))
    parts += [f"data: {line}" for line in text.split("\n")]
    return ("\n".join(parts) + "\n\n").encode()


# -- recording taps ----------------------------------------------------------------------------


def response_out(status: int, content_type: str, body: bytes) -> dict[str, Any]:
    """The stored form of a whole (non-streamed) response body: JSON as JSON, else text."""
    out: dict[str, Any] = {"status": status}
    if body:
        try:
            out["body"] = json.loads(body)
        except ValueError:
            try:
                out["text"] = body.decode()
            except UnicodeDecodeError:
                out["base64"] = base64.b64encode(body).decode()
    if content_type and "json" not in content_type:
        out["content_type"] = content_type
    return out


def out_content(out: Mapping[str, Any]) -> tuple[str, bytes]:
    """The content type and bytes of a stored non-streamed response."""
    if "body" in out:
        ctype = out.get("content_type", "application/json")
        return ctype, json.dumps(out["body"], separators=(",", ":"), ensure_ascii=False).encode()
    if "text" in out:
        return out.get("content_type", "text/plain; charset=utf-8"), str(out["text"]).encode()
    if "base64" in out:
        return out.get("content_type", "application/octet-stream"), base64.b64decode(out["base64"])
    return out.get("content_type", "application/json"), b""


class Tap:
    """Watches a response's bytes as the consumer reads them and builds the stored output.

    SSE responses are parsed event by event; anything else is kept whole. ``on_done`` runs once,
    when the body was read to its end, the response was closed, or the recording was flushed.
    """

    def __init__(self, status: int, content_type: str, on_done: Callable[[Tap], None]):
        self.status = status
        self.content_type = content_type
        self.sse = content_type.startswith("text/event-stream")
        self.events: list[dict[str, Any]] = []
        self._parser = SSEParser() if self.sse else None
        self._chunks: list[bytes] = []
        self.complete = False
        self.done = False
        self._lock = threading.Lock()
        self._on_done = on_done

    def feed(self, chunk: bytes) -> None:
        """Account for one chunk the consumer read."""
        if self._parser is not None:
            self.events += self._parser.feed(chunk)
        else:
            self._chunks.append(chunk)

    def finish(self, *, complete: bool) -> None:
        """The body ended (``complete``) or was abandoned: build the output and report it once."""
        with self._lock:
            if self.done:
                return
            self.done = True
        if self._parser is not None:
            self.events += self._parser.close()
            # The SDKs stop reading at the terminal event and close: that is a whole stream.
            complete = complete or (bool(self.events) and _terminal(self.events[-1]))
        self.complete = complete
        self._on_done(self)

    def out(self) -> dict[str, Any]:
        """The output to store for this response."""
        if not self.sse:
            return response_out(self.status, self.content_type, b"".join(self._chunks))
        out: dict[str, Any] = {"status": self.status, "events": self.events}
        if not self.complete:
            out["complete"] = False
        return out


_TERMINAL_TYPES = frozenset(
    {"message_stop", "response.completed", "response.failed", "response.incomplete", "error"}
)


def _terminal(event: Mapping[str, Any]) -> bool:
    if event.get("text") == "[DONE]":
        return True
    data = event.get("data")
    kind = data.get("type") if isinstance(data, Mapping) else None
    return event.get("event") in _TERMINAL_TYPES or kind in _TERMINAL_TYPES


class Capture:
    """One decision being recorded: the response that answers it is written when it is read.

    The SDK retries on a 429 or 5xx: each attempt's response replaces the previous one, and
    only the one the call ends with (``finish()``) is written.
    """

    def __init__(self, tape: Tape, decision: Decision, *, final: bool = False):
        self.tape = tape
        self.decision = decision
        self.started = time.perf_counter()
        self.tap: Tap | None = None
        self.final = final
        self.written = False
        self.error: Exception | None = None
        self._lock = threading.Lock()

    def new_tap(self, status: int, content_type: str) -> Tap:
        """Start watching the response of one attempt."""
        tap = Tap(status, content_type, self._tap_done)
        with self._lock:
            self.tap = tap
        if self.final:
            self.tape.hooks.pending.add(self)
        return tap

    def _tap_done(self, tap: Tap) -> None:
        if self.final and tap is self.tap:
            self._write()

    def failed(self, exc: Exception) -> None:
        """An attempt got no response at all (a connection error, a timeout): a decision too,
        recorded as the exception (the last attempt's, once the call ends) so that replay
        raises the same type and a program that handles it replays. Our own errors (a blocked
        network, a miss) are not decisions."""
        if isinstance(exc, TapeError):
            return
        with self._lock:
            self.error, self.tap = exc, None
        if self.final:
            self._write()

    def finish(self) -> None:
        """The call returned or raised: its last response (or failure) is the one to record."""
        self.final = True
        tap = self.tap
        if tap is None or tap.done:
            self._write()
        else:
            self.tape.hooks.pending.add(self)

    def abandon(self) -> None:
        """Write what was read so far of a response nobody finished reading."""
        if self.tap is not None:
            self.tap.finish(complete=False)

    def _write(self) -> None:
        with self._lock:
            if self.written or (self.tap is None and self.error is None):
                return
            self.written = True
        self.tape.hooks.pending.discard(self)
        ms = (time.perf_counter() - self.started) * 1000
        if self.tap is not None:
            out = self.tap.out()
        else:
            assert self.error is not None
            out = raised_record(self.error)
        try:
            self.tape.record(self.decision, out, ms=ms, effect=Effect.READ)
        except CassetteError as exc:
            # The tape closed before the stream did: say so rather than fail the consumer.
            warnings.warn(f"a response finished after its tape closed: {exc}", TapeWarning, 2)


def truncated_stream_miss(tape: Tape, decision: Decision, rec: Record) -> ReplayMiss:
    """The miss raised when a replay reads a stream past where the recorded run abandoned it."""
    return _truncated(
        decision, rec, matched=tape.matched, recorded=len(tape.records), rerecord=tape.rerecord
    )


def flush_pending(tape: Tape) -> int:
    """Record every response of ``tape`` still being read, as far as it was read.

    Called when a patch scope ends, so an abandoned stream is written to its own tape and
    never leaks into the next test's. Returns how many were flushed.
    """
    pending = list(tape.hooks.pending)
    for capture in pending:
        capture.abandon()
    return len(pending)
