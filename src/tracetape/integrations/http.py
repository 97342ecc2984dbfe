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
import importlib
import importlib.util
import json
import re
import sys
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from functools import cache
from types import ModuleType
from typing import Any
from urllib.parse import parse_qsl, urlencode

from ..errors import ReplayMiss, TapeError
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
    sse_encode,
    truncated_stream_miss,
)
from .tools import RAISED, raised_record, reraise

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
            return tape.prepare("llm", llm_payload(ep, body, next_model_step(tape)), finite=True)
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


def _anthropic_request(request: Any) -> bool:
    """Whether a request is the anthropic SDK's, whoever built the client (pydantic-ai sends
    its own User-Agent): the API's version header, which the SDK always sends."""
    return request is None or "anthropic-version" in request.headers


def sdk_compatible_miss(miss: ReplayMiss, request: Any = None) -> ReplayMiss:
    """The same miss, also typed as the calling SDK's base error when that SDK would otherwise
    wrap it.

    ``anthropic`` turns any exception from its HTTP client that is not its own into
    ``APIConnectionError`` and retries it; ``openai`` lets other exceptions through, so its
    misses stay plain (an agent's ``except openai.OpenAIError`` never swallows one).
    """
    cls = getattr(sys.modules.get("anthropic"), "AnthropicError", None)
    if not isinstance(cls, type) or isinstance(miss, cls) or not _anthropic_request(request):
        return miss
    typed = _miss_class((type(miss), cls))
    new = typed.__new__(typed)
    new.__dict__.update(miss.__dict__)
    new.args = miss.args
    return new


def _record_failure(tape: Tape, decision: Decision, exc: Exception) -> None:
    """A request that got no response (a connection error, a timeout) is a decision too:
    its exception is recorded, and replay raises the same type, so a program that handles
    it (a retry, a fallback) replays. Our own errors (a blocked network) are not recorded."""
    if isinstance(exc, TapeError):
        return
    tape.record(decision, raised_record(exc))


def _replayed(module: Any, tape: Tape, decision: Decision, request: Any, *, aio: bool) -> Any:
    """The recorded response to ``request``; a miss is raised the way the SDKs let it through,
    a recorded failure (no response) as the exception it was."""
    try:
        rec = tape.play(decision)
    except ReplayMiss as miss:
        raise sdk_compatible_miss(miss, request) from None
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
            try:
                response = self.inner.handle_request(request)
            except Exception as exc:
                _record_failure(self.tape, decision, exc)
                raise
            tap_response(module, response, Capture(self.tape, decision, final=True), aio=False)
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
            try:
                response = await self.inner.handle_async_request(request)
            except Exception as exc:
                _record_failure(self.tape, decision, exc)
                raise
            tap_response(module, response, Capture(self.tape, decision, final=True), aio=True)
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


# -- patch_http: wrap the transports of clients created inside the block -----------------------

_http_tape: contextvars.ContextVar[Tape | None] = contextvars.ContextVar(
    "tracetape_http", default=None
)
_lock = threading.Lock()
_installs = 0
_saved: list[tuple[type, Any]] = []


def _wrap_client(module: ModuleType, client: Any, aio: bool) -> None:
    tape = _http_tape.get()
    if tape is None:
        return
    sync_cls, async_cls = _transport_classes(module)
    cls = async_cls if aio else sync_cls
    client._transport = cls(tape, client._transport)
    mounts = getattr(client, "_mounts", None)
    if mounts:
        client._mounts = {k: (cls(tape, v) if v is not None else v) for k, v in mounts.items()}


def _install_http() -> None:
    global _installs  # noqa: PLW0603 - the patch is process-wide and reference counted
    with _lock:
        _installs += 1
        if _installs > 1:
            return
        for name in ("httpx2", "httpx"):
            try:
                module = importlib.import_module(name)
            except ImportError:
                continue
            for cls, aio in ((module.Client, False), (module.AsyncClient, True)):
                original = cls.__init__

                def __init__(
                    self: Any,
                    *args: Any,
                    __original: Any = original,
                    __module: ModuleType = module,
                    __aio: bool = aio,
                    **kwargs: Any,
                ) -> None:
                    __original(self, *args, **kwargs)
                    _wrap_client(__module, self, __aio)

                _saved.append((cls, original))
                cls.__init__ = __init__


def _uninstall_http() -> None:
    global _installs  # noqa: PLW0603
    with _lock:
        _installs -= 1
        if _installs:
            return
        while _saved:
            cls, original = _saved.pop()
            cls.__init__ = original  # type: ignore[misc]


@contextlib.contextmanager
def patch_http(tape: Tape) -> Iterator[Tape]:
    """Within the block, ``httpx``/``httpx2`` clients created in this thread or task go
    through ``tape`` (as with ``http_transport``); the tape is also this context's current tape.
    """
    token = _http_tape.set(tape)
    current = _current.set(tape)
    _install_http()
    try:
        yield tape
    finally:
        flush_pending(tape)
        _uninstall_http()
        _current.reset(current)
        _http_tape.reset(token)
