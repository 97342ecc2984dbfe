"""The mechanism every transport shares: who takes a request (``taker``), record its
response as the consumer reads it (``Tap``, ``Capture``), play a recorded one back, and raise
a miss the SDKs let through. A request is keyed by ``keying``; the flow that joins these for
each transport is ``flow``.

A response is stored whole (``{"status", "body" | "text" | "base64"}``), or, streamed, as its
events in its framing (``framing``): the transports replay each event as one chunk.
"""

from __future__ import annotations

import base64
import contextlib
import contextvars
import json
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from functools import cache
from typing import Any, NamedTuple

from ..diagnose import truncated_stream_miss
from ..errors import CassetteError, ReplayMiss, TapeError, TapeWarning
from ..record import RAISED, Decision, Record, raised_record, reraise
from ..tape import Effect, Tape
from .framing import framing_for
from .install import install, uninstall
from .keying import Keyed, model_route
from .providers import providers
from .state import http_tape, resolve_tape, state_of
from .telemetry import is_telemetry

__all__ = [
    "Capture",
    "Tap",
    "Telemetry",
    "beyond_recording",
    "capture_var",
    "flush_pending",
    "hearing",
    "out_content",
    "passing",
    "play",
    "rebuilt",
    "replayed_headers",
    "response_out",
    "sdk_compatible_miss",
    "taker",
]

# Set while an SDK-level hook runs the real call in record mode: the transports then pass
# the request through (it is already being recorded once) and tap its response into it.
capture_var: contextvars.ContextVar[Capture | None] = contextvars.ContextVar(
    "tracetape_capture", default=None
)


# Set while a transport sends a request it took: a transport the request passes through on its
# way (an httpx transport built on aiohttp, as litellm's) takes it no more.
sending: contextvars.ContextVar[bool] = contextvars.ContextVar("tracetape_sending", default=False)


# Set while a hooked transport sends a request no tape took (the library's name), or while a
# taped tool or MCP request runs (""): a recording's network watch tells the connections no
# tape hears from those it does (``hearing``).
heard_by: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "tracetape_heard_by", default=None
)


@contextlib.contextmanager
def passing(library: str) -> Iterator[None]:
    """Mark what happens in the block as ``library``'s (``""``: a tape's)."""
    token = heard_by.set(library)
    try:
        yield
    finally:
        heard_by.reset(token)


def hearing() -> str | None:
    """Who hears a connection being made now: ``""`` a tape (a taped exchange, tool or MCP
    request, or tracetape's own thread: the push to a collector), a hooked library's name for
    its request no tape took, None nobody."""
    if sending.get() or threading.current_thread().name.startswith("tracetape-"):
        return ""
    return heard_by.get()


class Telemetry(NamedTuple):
    """Who takes a request to a telemetry host (``telemetry``): nobody records it; a replay
    of ``tape`` answers it with an empty success."""

    tape: Tape


def taker(method: str, host: str, path: str) -> Capture | Tape | Telemetry | None:
    """Who takes a request a transport is about to send: the SDK fast path recording it (its
    ``Capture``: only the model request itself, not a credential refresh the SDK makes first),
    the tape of ``patch_http`` (every request), the tape of the model routes (a model
    request), the current tape's ``Telemetry`` for a telemetry host, or nobody (also inside
    another transport that took it: ``sending``)."""
    if sending.get():
        return None
    capture = capture_var.get()
    match = model_route(method, host, path)
    if capture is not None:
        return capture if match is not None else None
    tape = http_tape.get()
    if match is not None:
        return tape or resolve_tape()
    if is_telemetry(host):
        found = tape or resolve_tape()
        return Telemetry(found) if found is not None else None
    return tape


# -- recording -------------------------------------------------------------------------------------


def response_out(status: int, content_type: str, body: bytes) -> dict[str, Any]:
    """The stored form of a whole (not streamed) response body: JSON as JSON, else text."""
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
    """The content type and bytes of a stored response that was not streamed."""
    if "body" in out:
        ctype = out.get("content_type", "application/json")
        return ctype, json.dumps(out["body"], separators=(",", ":"), ensure_ascii=False).encode()
    if "text" in out:
        return out.get("content_type", "text/plain; charset=utf-8"), str(out["text"]).encode()
    if "base64" in out:
        return out.get("content_type", "application/octet-stream"), base64.b64decode(out["base64"])
    return out.get("content_type", "application/json"), b""


def _no_end(event: Mapping[str, Any]) -> bool:
    return False


class Tap:
    """Watches a response's bytes as the consumer reads them and builds the stored output.

    A streamed response (``framing.framing_for`` its content type) is parsed event by event;
    anything else is kept whole. ``on_done`` runs once: when the body was read to its end, the
    response was closed, or the recording was flushed. ``terminal`` says which event ends a
    stream: an SDK stops reading there, and the stream is whole.
    """

    def __init__(
        self,
        status: int,
        content_type: str,
        on_done: Callable[[Tap], None],
        terminal: Callable[[Mapping[str, Any]], bool] = _no_end,
    ):
        self.status = status
        self.content_type = content_type
        self.framing = framing_for(content_type)
        self.events: list[dict[str, Any]] = []
        self._parser = self.framing.parser() if self.framing is not None else None
        self._chunks: list[bytes] = []
        self._terminal = terminal
        self.complete = False
        self.done = False
        self._lock = threading.Lock()
        self._on_done = on_done

    @property
    def streamed(self) -> bool:
        return self._parser is not None

    def feed(self, chunk: bytes) -> None:
        """Account for one chunk the consumer read."""
        self._chunks.append(chunk)
        if self._parser is not None:
            try:
                self.events += self._parser.feed(chunk)
            except ValueError:  # not the framing it announced: stored whole instead
                self._parser = None

    def finish(self, *, complete: bool) -> None:
        """The body ended (``complete``) or was abandoned: build the output and report it once."""
        with self._lock:
            if self.done:
                return
            self.done = True
        if self._parser is not None:
            try:
                self.events += self._parser.close()
            except ValueError:
                self._parser = None
            else:
                complete = complete or (bool(self.events) and self._terminal(self.events[-1]))
        self.complete = complete
        self._on_done(self)

    # Response headers a transport keeps with the output (``"headers"``), where its client
    # reads what an answer means from one: botocore reads an AWS error's code from
    # ``x-amzn-errortype``, not from the body.
    headers: Mapping[str, str] | None = None

    def out(self) -> dict[str, Any]:
        """The output to store for this response."""
        if self._parser is None or self.framing is None:
            out = response_out(self.status, self.content_type, b"".join(self._chunks))
        else:
            out = {"status": self.status, "events": self.events}
            if self.framing.name != "sse":
                out["framing"] = self.framing.name
            elif getattr(self._parser, "crlf", False):
                out["eol"] = "crlf"
            if not self.complete:
                out["complete"] = False
        if self.headers:
            out["headers"] = dict(self.headers)
        return out


class Capture:
    """One decision being recorded: the response that answers it is written when it is read.

    An SDK retries on a 429 or 5xx: each attempt's response replaces the previous one, and
    only the one the call ends with (``finish()``) is written; a transport's capture is
    ``final`` (each request is its own decision).
    """

    def __init__(self, tape: Tape, keyed: Keyed, *, final: bool = False):
        self.tape = tape
        self.keyed = keyed
        self.decision = keyed.decision
        self.started = time.perf_counter()
        self.tap: Tap | None = None
        self.final = final
        self.written = False
        self.error: Exception | None = None
        self._lock = threading.Lock()

    def new_tap(self, status: int, content_type: str) -> Tap:
        """Start watching the response of one attempt."""
        match = self.keyed.match
        terminal = match.provider.terminal if match is not None else _no_end
        tap = Tap(status, content_type, self._tap_done, terminal)
        with self._lock:
            self.tap = tap
        if self.final:
            state_of(self.tape).pending.add(self)
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
            state_of(self.tape).pending.add(self)

    def abandon(self) -> None:
        """Write what was read so far of a response nobody finished reading."""
        if self.tap is not None:
            self.tap.finish(complete=False)

    def _write(self) -> None:
        with self._lock:
            if self.written or (self.tap is None and self.error is None):
                return
            self.written = True
        state_of(self.tape).pending.discard(self)
        ms = (time.perf_counter() - self.started) * 1000
        if self.tap is not None:
            out = self.tap.out()
        else:
            assert self.error is not None
            out = raised_record(self.error)
        match, decision = self.keyed.match, self.decision
        usage = stream_text = api = None
        if match is not None:
            api = match.api
            stream_text = match.provider.stream_text
            if decision.step is not None:
                state_of(self.tape).steps.answered(match, self.keyed.body, decision.step, out)
            with contextlib.suppress(Exception):  # an answer of an unexpected shape: no usage
                usage = match.provider.usage(out)
        try:
            self.tape.record(
                decision,
                out,
                ms=ms,
                effect=Effect.READ,
                usage=usage.stored() if usage is not None else None,
                api=api,
                stream_text=stream_text,
            )
        except CassetteError as exc:
            # The tape closed before the stream did: say so rather than fail the consumer.
            warnings.warn(f"a response finished after its tape closed: {exc}", TapeWarning, 2)


def flush_pending(tape: Tape) -> int:
    """Record every response of ``tape`` still being read, as far as it was read.

    Called when a patch scope ends, so an abandoned stream is written to its own tape and
    never leaks into the next test's. Returns how many were flushed.
    """
    pending = list(state_of(tape).pending)
    for capture in pending:
        capture.abandon()
    return len(pending)


@contextlib.contextmanager
def hooked(tape: Tape, level: str = "sdk") -> Iterator[Tape]:
    """``tape`` bound in this context with the hooks of ``level`` installed (``install``)
    for the block; on exit, what it left half read is recorded (``flush_pending``)."""
    token = tape.bind()
    install(level)
    tape.hooks += 1
    try:
        yield tape
    finally:
        tape.hooks -= 1
        try:
            flush_pending(tape)
        finally:
            uninstall(level)
            tape.unbind(token)


# -- replaying -------------------------------------------------------------------------------------


def play(tape: Tape, keyed: Keyed) -> Record:
    """The recorded record of a keyed request (what its answer asks for noted, as when it was
    recorded); a miss is raised the way the SDKs let it through."""
    try:
        rec = tape.play(keyed.decision)
    except ReplayMiss as miss:
        raise sdk_compatible_miss(miss) from None
    if keyed.match is not None and keyed.decision.step is not None and isinstance(rec.out, dict):
        state_of(tape).steps.answered(keyed.match, keyed.body, keyed.decision.step, rec.out)
    return rec


def failed(out: Any) -> bool:
    """Whether a recorded output is a request that got no response (an exception)."""
    return isinstance(out, dict) and RAISED in out


def rebuilt(out: Mapping[str, Any], request: Any = None) -> BaseException:
    """The recorded exception, with the request it failed on (httpx's errors carry one)."""
    try:
        reraise(out)
    except Exception as exc:
        if request is not None and "httpx" in type(exc).__module__:
            with contextlib.suppress(AttributeError, TypeError):
                exc.request = request  # type: ignore[attr-defined]
        return exc
    return RuntimeError(f"a recorded failure could not be rebuilt: {out!r}")


def replayed_headers(tape: Tape, keyed: Keyed, out: Mapping[str, Any]) -> dict[str, str]:
    """The headers of a replayed response besides its content type: for an error status,
    whether the SDK should retry (``x-should-retry``, ``retry-after-ms``, which the
    openai-style SDKs honour): at once when the recording holds the retry, never when it
    holds none, so a replay retries exactly as the recorded run did and never sleeps."""
    status = int(out.get("status", 200))
    if status < 400:
        return {}
    if tape.peek(keyed.decision) is not None:
        return {"x-should-retry": "true", "retry-after-ms": "1"}
    return {"x-should-retry": "false"}


def beyond_recording(tape: Tape, decision: Decision, rec: Record) -> Any:
    """For a stream the recorded run abandoned: what raises if this run reads past its end."""
    if not isinstance(rec.out, dict) or rec.out.get("complete") is not False:
        return None
    return lambda: truncated_stream_miss(
        decision, rec, matched=tape.matched, recorded=len(tape.records), rerecord=tape.rerecord
    )


@cache
def _miss_class(bases: tuple[type[Exception], ...]) -> type[ReplayMiss]:
    cls = type("ReplayMiss", bases, {"__module__": ReplayMiss.__module__})
    return cls


def sdk_compatible_miss(miss: ReplayMiss) -> ReplayMiss:
    """The same miss, also typed as the base error of each SDK this process imported that
    re-raises its own errors as they are (``Provider.errors``), so that no SDK wraps it into a
    connection error or retries it. An agent's ``except openai.OpenAIError`` may then catch a
    miss: the tape raises it again when it closes, with its diagnosis. The copy names the miss
    it copies (``copy_of``, ``ReplayMiss.same``): a program that stopped at it stopped at the
    tape's miss."""
    bases = tuple(
        cls
        for module, name in _sdk_errors()
        if isinstance(cls := getattr(sys.modules.get(module), name, None), type)
        and not isinstance(miss, cls)
    )
    if not bases:
        return miss
    typed = _miss_class((type(miss), *bases))
    new = typed.__new__(typed)
    new.__dict__.update(miss.__dict__)
    new.args = miss.args
    new.copy_of = miss.copy_of or miss
    return new


@cache
def _sdk_errors() -> tuple[tuple[str, str], ...]:
    return tuple(error for p in providers() for error in p.errors)
