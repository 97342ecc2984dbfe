"""The ``httpx``/``httpx2`` transport: tape transports, the clients' ``send``, ``patch_http()``.

``http_transport(tape)`` / ``async_http_transport(tape)`` return transports to give any client
built on ``httpx2`` (current ``openai``, ``anthropic``, ``groq``, ``google-genai``) or ``httpx``
(``mistralai``, ``cohere``, ``ollama``)::

    client = openai.OpenAI(http_client=httpx2.Client(transport=http_transport(tape)))

``with patch_http(tape):`` does it for every client of the thread or task, whenever it was
built. A request to a model route of the provider table is an ``llm`` decision, any other an
``http`` decision (``capture``). In replay the transport answers from the cassette and never
calls the inner transport, so no socket is opened; a miss raises ``ReplayMiss`` there, typed so
that the SDKs re-raise it as it is instead of retrying it as a connection error.

Every client's ``send`` is patched at the class while a hook level is installed (``send`` is
the clients' public method), so a client built before the tape became active (an SDK client, a
framework's own client) is taped all the same:

* while an SDK fast path records a call (``capture.capture_var``), its response is tapped as
  it is read;
* inside ``patch_http(tape)``, every request of this thread or task is a decision;
* under the SDK hooks alone, a request to a model route that no fast path handled
  (``client.post``, beta resources, a stream helper, an SDK without a fast path) is the same
  ``llm`` decision.

One private name, tested on httpx 0.29.0 and httpx2 2.16.2: a client's ``_transport`` (a
client given a tape transport tapes its requests there, not again at ``send``).
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import importlib
import importlib.util
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from functools import cache
from types import ModuleType
from typing import Any

from ..record import Record
from ..tape import Tape
from .capture import (
    Capture,
    capture_var,
    flush_pending,
    hooked,
    out_content,
    passing,
    rebuilt,
    taker,
)
from .flow import Beyond, Headers, Out, Parts, Taker, aexchange, exchange
from .framing import content_type_of, framing_of
from .install import patch_attr
from .state import http_tape

__all__ = [
    "async_http_transport",
    "http_transport",
    "patch_http",
]


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


def _parts(url: Any) -> tuple[str, str, str, str]:
    query = url.query.decode() if isinstance(url.query, bytes) else str(url.query)
    netloc = url.netloc.decode() if isinstance(url.netloc, bytes) else str(url.netloc)
    return str(url.scheme), netloc, str(url.path), query


def replay_response(
    module: ModuleType,
    request: Any,
    rec: Record | Mapping[str, Any],
    *,
    aio: bool,
    beyond: Callable[[], BaseException] | None = None,
    headers: Mapping[str, str] | None = None,
) -> Any:
    """An ``httpx`` response (of ``module``) built from a recorded output."""
    out: Mapping[str, Any] = rec.out if isinstance(rec, Record) else rec
    status = int(out.get("status", 200))
    if "events" in out:
        chunks = framing_of(out).encode(out)
        stream = _event_stream_class(module, aio)(chunks, beyond)
        all_headers = {"content-type": content_type_of(out), **(headers or {})}
        return module.Response(status, headers=all_headers, stream=stream, request=request)
    ctype, content = out_content(out)
    return module.Response(
        status, headers={"content-type": ctype, **(headers or {})}, content=content, request=request
    )


@cache
def _event_stream_class(module: ModuleType, aio: bool) -> type:
    """A byte stream that yields one recorded event per chunk, as the server sent them, and
    raises ``beyond()`` if read past the end of a stream the recorded run abandoned."""
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


class _Adapter:
    """The flow's adapter for ``httpx`` (``module``) requests and responses."""

    def __init__(self, module: ModuleType, aio: bool):
        self.module, self.aio = module, aio

    def parts(self, request: Any) -> Parts:
        return Parts(
            request.method,
            _parts(request.url),
            request.headers.get("content-type", ""),
            request.headers,
        )

    def identity(self, request: Any) -> None:
        request.headers["accept-encoding"] = "identity"

    def answer(self, request: Any, out: Out, headers: Headers, beyond: Beyond) -> Any:
        return replay_response(
            self.module, request, out, aio=self.aio, beyond=beyond, headers=headers
        )

    def raised(self, request: Any, out: Mapping[str, Any]) -> BaseException:
        return rebuilt(out, request)

    def tapped(self, request: Any, response: Any, capture: Capture) -> Any:
        tap = capture.new_tap(response.status_code, response.headers.get("content-type", ""))
        sync_cls, async_cls = _tap_stream_classes(self.module)
        response.stream = (async_cls if self.aio else sync_cls)(response.stream, tap)
        return response


@cache
def _adapter(module: ModuleType, aio: bool) -> _Adapter:
    return _Adapter(module, aio)


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
            content = request.read()
            return exchange(_adapter(module, False), self.tape, request, content, self._send)

        def _send(self, request: Any) -> Any:
            return self.inner.handle_request(request)

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
            content = await request.aread()
            adapter = _adapter(module, True)
            return await aexchange(adapter, self.tape, request, content, self._send)

        async def _send(self, request: Any) -> Any:
            return await self.inner.handle_async_request(request)

        async def aclose(self) -> None:
            flush_pending(self.tape)
            await self.inner.aclose()

    return TapeTransport, AsyncTapeTransport


def http_transport(tape: Tape, inner: Any = None, *, flavor: str | ModuleType | None = None) -> Any:
    """A sync transport recording to / replaying from ``tape``, wrapping ``inner``.

    ``flavor`` is ``"httpx2"`` or ``"httpx"`` (default: ``inner``'s library, else ``httpx2``
    when installed). In replay ``inner`` is never called.
    """
    tape.hooks += 1  # for good: the transport lives as long as its client
    return _transport_classes(_module(flavor, inner))[0](tape, inner)


def async_http_transport(
    tape: Tape, inner: Any = None, *, flavor: str | ModuleType | None = None
) -> Any:
    """The async twin of ``http_transport``, for ``AsyncClient``."""
    tape.hooks += 1
    return _transport_classes(_module(flavor, inner))[1](tape, inner)


# -- the clients' ``send`` -------------------------------------------------------------------------


def _taker(module: ModuleType, client: Any, request: Any) -> Taker | None:
    """Who takes ``request`` at ``send`` (``capture.taker``), unless the client was given a
    tape transport: it tapes the request there."""
    found = taker(request.method, request.url.host, request.url.path)
    if isinstance(found, Tape) and isinstance(
        getattr(client, "_transport", None), _transport_classes(module)
    ):
        return None
    return found


def _replayed(taker: Taker, response: Any) -> bool:
    """Whether ``response`` was answered from the tape (no client sent it): then it gets
    what a sent one has, its ``elapsed`` time (set by ``httpx`` once a response is closed),
    and the client's response hooks are run on it."""
    if not (taker if isinstance(taker, Tape) else taker.tape).replaying:  # a Capture records
        return False
    response.elapsed = datetime.timedelta(0)
    return True


def wrap_send(module: ModuleType, original: Callable[..., Any], aio: bool) -> Callable[..., Any]:
    """``Client.send`` (``AsyncClient.send`` when ``aio``) of ``module``, through the tape."""
    adapter = _adapter(module, aio)
    if aio:

        @functools.wraps(original)
        async def asend(self: Any, request: Any, *, stream: bool = False, **kwargs: Any) -> Any:
            taker = _taker(module, self, request)
            if taker is None:
                with passing(module.__name__):
                    return await original(self, request, stream=stream, **kwargs)

            def send(request: Any) -> Any:
                return original(self, request, stream=True, **kwargs)

            content = await request.aread()
            response = await aexchange(adapter, taker, request, content, send)
            if _replayed(taker, response):
                for hook in self.event_hooks["response"]:
                    await hook(response)
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
            with passing(module.__name__):
                return original(self, request, stream=stream, **kwargs)

        def sent(request: Any) -> Any:
            return original(self, request, stream=True, **kwargs)

        response = exchange(adapter, taker, request, request.read(), sent)
        if _replayed(taker, response):
            for hook in self.event_hooks["response"]:
                hook(response)
        if not stream:
            try:
                response.read()
            except BaseException:
                response.close()
                raise
        return response

    return send


def patch_module(module: ModuleType) -> None:
    """Patch the ``send`` of ``module``'s ``Client`` and ``AsyncClient`` (the installer's
    watch of ``httpx`` and ``httpx2``)."""
    for client_cls, aio in ((module.Client, False), (module.AsyncClient, True)):
        patch_attr(client_cls, "send", wrap_send(module, client_cls.__dict__["send"], aio))


@contextlib.contextmanager
def patch_http(tape: Tape) -> Iterator[Tape]:
    """Within the block, every request an HTTP client sends in this thread or task goes
    through ``tape`` (``httpx``/``httpx2`` as with ``http_transport``, and every other
    transport the installer watches), whenever the client was built; the tape is also this
    context's current tape.

        >>> import tracetape, tempfile, pathlib
        >>> tape = tracetape.Tape(pathlib.Path(tempfile.mkdtemp()) / "run.jsonl")
        >>> with tape, patch_http(tape):
        ...     pass  # any httpx2.Client(...).get(...) is taped here
    """
    token = http_tape.set(tape)
    try:
        with hooked(tape, "http"):
            yield tape
    finally:
        http_tape.reset(token)
