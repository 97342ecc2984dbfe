"""HTTP-level hooks: tape transports for ``httpx`` and ``httpx2``, and ``patch_http()``.

``tape.http_transport()`` / ``tape.async_http_transport()`` return transports to give any
client built on ``httpx2`` (current ``openai`` and ``anthropic``) or ``httpx``::

    client = openai.OpenAI(http_client=httpx2.Client(transport=tape.http_transport()))

``with tape.patch_http():`` does it for every client created inside the block, in this thread
or task. A POST to a known model endpoint (``/chat/completions``, ``/responses``,
``/completions``, ``/embeddings``, ``/v1/messages``) is an ``llm`` decision keyed on the same
payload as the SDK hooks; any other request is an ``http`` decision keyed on method, URL without
secret query parameters, and body. Headers are never keyed nor stored.

In replay the transport answers from the cassette and never calls the inner transport, so no
socket is opened; a miss raises ``ReplayMiss`` there, typed so that the SDKs re-raise it as it is
instead of retrying it as a connection error.
"""

from __future__ import annotations

import base64
import contextlib
import contextvars
import datetime
import functools
import importlib
import importlib.util
import json
import re
import sys
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from functools import cache
from types import ModuleType
from typing import Any
from urllib.parse import parse_qsl, urlencode

from ..errors import ReplayMiss
from ..record import Decision, Record
from ..tape import Tape, _current
from ._common import (
    Capture,
    capture_var,
    endpoint_for_path,
    flush_pending,
    llm_payload,
    next_model_step,
    out_content,
    resolve_tape,
    sse_encode,
    truncated_stream_miss,
)
from .tools import RAISED, reraise

__all__ = [
    "async_http_transport",
    "http_decision",
    "http_transport",
    "patch_http",
    "sdk_compatible_miss",
]

_SECRET_PARAM = re.compile(
    r"(?i)key|token|secret|passw|signature|credential|^(sig|auth|authorization|session|sessionid|code)$"
)


def _module(flavor: str | ModuleType | None, inner: Any = None) -> ModuleType:
    if isinstance(flavor, ModuleType):
        return flavor
    if flavor is None and inner is not None:
        flavor = type(inner).__module__.split(".")[0]
    if flavor is None:
        flavor = "httpx2" if importlib.util.find_spec("httpx2") else "httpx"
    if flavor not in ("httpx", "httpx2"):
        raise ValueError(f"flavor {flavor!r} is not supported; use 'httpx2' or 'httpx'")
    return importlib.import_module(flavor)


def _clean_url(url: Any) -> str:
    """The URL without secret query parameters (``?api_key=``, ``&token=``...)."""
    query = url.query.decode() if isinstance(url.query, bytes) else str(url.query)
    kept = [
        (k, v) for k, v in parse_qsl(query, keep_blank_values=True) if not _SECRET_PARAM.search(k)
    ]
    base = f"{url.scheme}://{url.netloc.decode() if isinstance(url.netloc, bytes) else url.netloc}"
    return str(base + url.path + (f"?{urlencode(kept)}" if kept else ""))


def _body_value(content: bytes, content_type: str) -> Any:
    if not content:
        return None
    if "boundary=" in content_type:
        # a multipart body's boundary is random per request: key it as a constant
        boundary = content_type.split("boundary=", 1)[1].split(";", maxsplit=1)[0].strip('"')
        content = content.replace(boundary.encode(), b"BOUNDARY")
    if "json" in content_type or content[:1] in (b"{", b"["):
        try:
            return json.loads(content)
        except ValueError:
            pass
    try:
        return content.decode()
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(content).decode()}


def _model_step(tape: Tape, request: Any) -> int:
    """The step of a model request: the next one, but an SDK's retry of a request (its
    ``x-stainless-retry-count`` header, which the openai and anthropic SDKs send on every
    attempt) keeps the step of the attempt it repeats, so retries of a missed or failed
    request are never numbered as new steps."""
    retry = request.headers.get("x-stainless-retry-count", "0")
    if retry not in ("", "0") and tape.model_calls:
        return tape.model_calls
    return next_model_step(tape)


def http_decision(tape: Tape, request: Any) -> Decision:
    """Key a request: ``llm`` for a known model endpoint, else ``http``. Counts model calls."""
    content: bytes = request.content
    ctype = request.headers.get("content-type", "")
    ep = endpoint_for_path(request.url.path) if request.method == "POST" else None
    if ep is not None:
        try:
            body = json.loads(content) if content else None
        except ValueError:
            body = None
        if isinstance(body, Mapping):
            payload = llm_payload(ep, body, _model_step(tape, request))
            return tape.prepare("llm", payload, finite=True)
    payload = {
        "method": request.method,
        "url": _clean_url(request.url),
        "body": _body_value(content, ctype),
    }
    return tape.prepare("http", payload)


def _rebuilt(out: Mapping[str, Any], request: Any) -> BaseException:
    """The recorded exception, with the request it failed on (httpx's errors carry one)."""
    try:
        reraise(out)
    except Exception as exc:
        if "httpx" in type(exc).__module__:
            with contextlib.suppress(AttributeError, TypeError):
                exc.request = request  # type: ignore[attr-defined]
        return exc
    return RuntimeError(f"a recorded failure could not be rebuilt: {out!r}")


@cache
def _miss_class(bases: tuple[type[Exception], ...]) -> type[ReplayMiss]:
    cls = type("ReplayMiss", bases, {"__module__": ReplayMiss.__module__})
    return cls


# The SDKs' base errors, which their current releases re-raise as they are; any other exception
# from their HTTP client they turn into ``APIConnectionError`` and retry (openai 1.x and anthropic
# 0.x retry their own errors too: see ``sdk._no_retry_of_a_miss``).
_SDK_ERRORS = (("openai", "OpenAIError"), ("anthropic", "AnthropicError"))


def sdk_compatible_miss(miss: ReplayMiss) -> ReplayMiss:
    """The same miss, also typed as the base error of each SDK this process imported, so that
    no SDK version wraps it into a connection error or retries it, whoever built the client
    (no User-Agent is looked at). An agent's ``except openai.OpenAIError`` may then catch a
    miss: the tape raises it again when it closes, with its diagnosis."""
    bases = tuple(
        cls
        for module, name in _SDK_ERRORS
        if isinstance(cls := getattr(sys.modules.get(module), name, None), type)
        and not isinstance(miss, cls)
    )
    if not bases:
        return miss
    typed = _miss_class((type(miss), *bases))
    new = typed.__new__(typed)
    new.__dict__.update(miss.__dict__)
    new.args = miss.args
    return new


def _replayed(module: Any, tape: Tape, decision: Decision, request: Any, *, aio: bool) -> Any:
    """The recorded response to ``request``; a miss is raised the way the SDKs let it through,
    a recorded failure (no response) as the exception it was."""
    again = tape.failed_again(decision)
    if again is not None:
        raise _rebuilt(again.out, request)
    try:
        rec = tape.play(decision)
    except ReplayMiss as miss:
        raise sdk_compatible_miss(miss) from None
    if isinstance(rec.out, dict) and RAISED in rec.out:
        raise _rebuilt(rec.out, request)
    beyond = beyond_recording(tape, decision, rec)
    return _replay_response(module, request, rec.out, aio=aio, beyond=beyond)


def _replay_response(
    module: ModuleType,
    request: Any,
    out: Mapping[str, Any],
    aio: bool,
    beyond: Callable[[], BaseException] | None = None,
) -> Any:
    status = int(out.get("status", 200))
    if "events" in out:
        chunks = [sse_encode(e) for e in out["events"]]
        stream = _event_stream_class(module, aio)(chunks, beyond)
        headers = {"content-type": "text/event-stream; charset=utf-8"}
        return module.Response(status, headers=headers, stream=stream, request=request)
    ctype, content = out_content(out)
    return module.Response(
        status, headers={"content-type": ctype}, content=content, request=request
    )


def beyond_recording(tape: Tape, decision: Decision, rec: Record) -> Any:
    """For a stream the recorded run abandoned: what raises if this run reads past its end."""
    if rec.out.get("complete") is not False:
        return None
    return lambda: truncated_stream_miss(tape, decision, rec)


@cache
def _event_stream_class(module: ModuleType, aio: bool) -> type:
    """A byte stream that yields one recorded SSE event per chunk, as the server sent them,
    and raises ``beyond()`` if read past the end of a stream the recorded run abandoned.
    """
    if aio:

        class AsyncEvents(module.AsyncByteStream):  # type: ignore[name-defined,misc]
            def __init__(self, chunks: list[bytes], beyond: Any = None):
                self._chunks, self._beyond = chunks, beyond

            async def __aiter__(self) -> AsyncIterator[bytes]:
                for chunk in self._chunks:
                    yield chunk
                if self._beyond is not None:
                    raise self._beyond()

        return AsyncEvents

    class Events(module.SyncByteStream):  # type: ignore[name-defined,misc]
        def __init__(self, chunks: list[bytes], beyond: Any = None):
            self._chunks, self._beyond = chunks, beyond

        def __iter__(self) -> Iterator[bytes]:
            yield from self._chunks
            if self._beyond is not None:
                raise self._beyond()

    return Events


@cache
def _tap_stream_classes(module: ModuleType) -> tuple[type, type]:
    """Byte-stream wrappers feeding a ``Tap`` with what the consumer reads."""

    class SyncTap(module.SyncByteStream):  # type: ignore[name-defined,misc]
        def __init__(self, inner: Any, tap: Any):
            self._inner, self._tap = inner, tap

        def __iter__(self) -> Iterator[bytes]:
            for chunk in self._inner:
                self._tap.feed(chunk)
                yield chunk
            self._tap.finish(complete=True)

        def close(self) -> None:
            try:
                self._inner.close()
            finally:
                self._tap.finish(complete=False)

    class AsyncTap(module.AsyncByteStream):  # type: ignore[name-defined,misc]
        def __init__(self, inner: Any, tap: Any):
            self._inner, self._tap = inner, tap

        async def __aiter__(self) -> AsyncIterator[bytes]:
            async for chunk in self._inner:
                self._tap.feed(chunk)
                yield chunk
            self._tap.finish(complete=True)

        async def aclose(self) -> None:
            try:
                await self._inner.aclose()
            finally:
                self._tap.finish(complete=False)

    return SyncTap, AsyncTap


def tap_response(module: ModuleType, response: Any, capture: Capture, aio: bool) -> None:
    """Make ``response`` report its body to ``capture`` as it is read."""
    tap = capture.new_tap(response.status_code, response.headers.get("content-type", ""))
    sync_cls, async_cls = _tap_stream_classes(module)
    response.stream = (async_cls if aio else sync_cls)(response.stream, tap)


def _identity(request: Any) -> None:
    # Recorded bodies are stored decoded: ask the server not to compress them.
    request.headers["accept-encoding"] = "identity"


@cache
def _transport_classes(module: ModuleType) -> tuple[type, type]:
    class TapeTransport(module.BaseTransport):  # type: ignore[name-defined,misc]
        """An ``httpx`` transport that records to, or replays from, a tape."""

        def __init__(self, tape: Tape, inner: Any = None):
            self.tape = tape
            self.inner = inner if inner is not None else module.HTTPTransport()

        def handle_request(self, request: Any) -> Any:
            if capture_var.get() is not None:
                return self.inner.handle_request(request)  # the SDK hook records this call
            request.read()
            decision = http_decision(self.tape, request)
            if self.tape.replaying:
                return _replayed(module, self.tape, decision, request, aio=False)
            _identity(request)
            capture = Capture(self.tape, decision, final=True)
            try:
                response = self.inner.handle_request(request)
            except Exception as exc:
                capture.failed(exc)
                raise
            tap_response(module, response, capture, aio=False)
            return response

        def close(self) -> None:
            flush_pending(self.tape)
            self.inner.close()

    class AsyncTapeTransport(module.AsyncBaseTransport):  # type: ignore[name-defined,misc]
        """The async twin of ``TapeTransport``."""

        def __init__(self, tape: Tape, inner: Any = None):
            self.tape = tape
            self.inner = inner if inner is not None else module.AsyncHTTPTransport()

        async def handle_async_request(self, request: Any) -> Any:
            if capture_var.get() is not None:
                return await self.inner.handle_async_request(request)
            await request.aread()
            decision = http_decision(self.tape, request)
            if self.tape.replaying:
                return _replayed(module, self.tape, decision, request, aio=True)
            _identity(request)
            capture = Capture(self.tape, decision, final=True)
            try:
                response = await self.inner.handle_async_request(request)
            except Exception as exc:
                capture.failed(exc)
                raise
            tap_response(module, response, capture, aio=True)
            return response

        async def aclose(self) -> None:
            flush_pending(self.tape)
            await self.inner.aclose()

    return TapeTransport, AsyncTapeTransport


def http_transport(tape: Tape, inner: Any = None, *, flavor: str | ModuleType | None = None) -> Any:
    """A sync transport recording to / replaying from ``tape``, wrapping ``inner``.

    ``flavor`` is ``"httpx2"`` or ``"httpx"`` (default: ``inner``'s library, else ``httpx2``
    when installed). In replay ``inner`` is never called.
    """
    return _transport_classes(_module(flavor, inner))[0](tape, inner)


def async_http_transport(
    tape: Tape, inner: Any = None, *, flavor: str | ModuleType | None = None
) -> Any:
    """The async twin of ``http_transport``, for ``AsyncClient``."""
    return _transport_classes(_module(flavor, inner))[1](tape, inner)


# -- the httpx clients' ``send``: SDK capture, safety net and ``patch_http`` -----------------------
#
# Every ``httpx``/``httpx2`` client's ``send`` is patched at the class while a hook level is
# installed, so a client built before the tape became active (an SDK client, a bound method an
# instructor kept, a framework's own client) is taped all the same:
#
# * while an SDK-level call records (``capture_var``), its response is tapped as it is read;
# * inside ``tape.patch_http()``, every request of this thread or task is a decision;
# * under the SDK hooks alone, a POST to a model endpoint that no SDK-level capture handled
#   (``client.post``, beta resources, a framework's own client) is the same ``llm`` decision:
#   the safety net that keeps a recording from silently missing model calls.

_http_tape: contextvars.ContextVar[Tape | None] = contextvars.ContextVar(
    "tracetape_http", default=None
)


def _net_tape(module: ModuleType, client: Any, request: Any) -> Tape | None:
    """The tape that takes ``request`` at ``send``, if any."""
    tape = _http_tape.get()
    if tape is None:
        if request.method != "POST" or endpoint_for_path(request.url.path) is None:
            return None
        tape = resolve_tape()
        if tape is None:
            return None
    if isinstance(getattr(client, "_transport", None), _transport_classes(module)):
        return None  # the client was given a tape transport: it tapes the request there
    return tape


def _taker(module: ModuleType, client: Any, request: Any) -> Capture | Tape | None:
    """Who takes ``request`` at ``send``: the SDK-level call recording it (a ``Capture``), the
    tape of the safety net or of ``patch_http`` (a ``Tape``), or nobody."""
    capture = capture_var.get()
    if capture is not None:
        # not the model request itself (say, a credential refresh the SDK makes first)
        return capture if endpoint_for_path(request.url.path) is not None else None
    return _net_tape(module, client, request)


def _replayed_at_send(
    module: ModuleType, tape: Tape, decision: Decision, request: Any, *, aio: bool
) -> Any:
    response = _replayed(module, tape, decision, request, aio=aio)
    response.elapsed = datetime.timedelta(0)  # what httpx sets once a response is closed
    return response


def wrap_send(module: ModuleType, original: Callable[..., Any], aio: bool) -> Callable[..., Any]:
    """``Client.send`` (``AsyncClient.send`` when ``aio``) of ``module``, through the tape."""
    if aio:

        @functools.wraps(original)
        async def asend(self: Any, request: Any, *, stream: bool = False, **kwargs: Any) -> Any:
            taker = _taker(module, self, request)
            if taker is None:
                return await original(self, request, stream=stream, **kwargs)
            if isinstance(taker, Tape):
                await request.aread()
                decision = http_decision(taker, request)
                if taker.replaying:
                    response = _replayed_at_send(module, taker, decision, request, aio=True)
                    for hook in self._event_hooks.get("response", ()):
                        await hook(response)
                    if not stream:
                        await response.aread()
                    return response
                taker = Capture(taker, decision, final=True)
            _identity(request)
            try:
                response = await original(self, request, stream=True, **kwargs)
            except Exception as exc:
                taker.failed(exc)
                raise
            tap_response(module, response, taker, aio=True)
            if not stream:
                try:
                    await response.aread()
                except BaseException:
                    await response.aclose()
                    raise
            return response

        return asend

    @functools.wraps(original)
    def send(self: Any, request: Any, *, stream: bool = False, **kwargs: Any) -> Any:
        taker = _taker(module, self, request)
        if taker is None:
            return original(self, request, stream=stream, **kwargs)
        if isinstance(taker, Tape):
            request.read()
            decision = http_decision(taker, request)
            if taker.replaying:
                response = _replayed_at_send(module, taker, decision, request, aio=False)
                for hook in self._event_hooks.get("response", ()):
                    hook(response)
                if not stream:
                    response.read()
                return response
            taker = Capture(taker, decision, final=True)
        _identity(request)
        try:
            response = original(self, request, stream=True, **kwargs)
        except Exception as exc:
            taker.failed(exc)
            raise
        tap_response(module, response, taker, aio=False)
        if not stream:
            try:
                response.read()
            except BaseException:
                response.close()
                raise
        return response

    return send


@contextlib.contextmanager
def patch_http(tape: Tape) -> Iterator[Tape]:
    """Within the block, every request an ``httpx``/``httpx2`` client sends in this thread or
    task goes through ``tape`` (as with ``http_transport``), whenever the client was built; the
    tape is also this context's current tape.
    """
    from .sdk import install, uninstall

    token = _http_tape.set(tape)
    current = tape.bind()
    install("http")
    try:
        yield tape
    finally:
        flush_pending(tape)
        uninstall("http")
        _current.reset(current)
        _http_tape.reset(token)
