"""The ``aiohttp`` transport: every ``ClientSession`` request through the tape.

``google-genai``'s async client (``client.aio``) sends over ``aiohttp`` whenever aiohttp is
installed, so an ``httpx``-only hook would miss every async Gemini call. This module tapes
aiohttp with the semantics of ``http.py``'s ``send`` hook: ``capture.taker`` decides who
takes a request (a model request under the SDK hooks, every request inside
``patch_http(tape)``, nobody otherwise); recording taps the response body as the consumer
reads it (``resp.content``'s reads, hence ``read()``, ``text()``, ``json()``, ``iter_any()``,
``iter_chunked()``, line reads) and writes it at the end of the body, or when the response is
released or closed (then as far as it was read: ``"complete": false`` for a stream); replay
answers from the cassette without opening a socket, a recorded failure is raised again, and a
miss raises through ``capture.play``.

The seams are public where aiohttp has them:

* a client middleware (``aiohttp.ClientMiddlewareType``, aiohttp >= 3.12) sees each request
  after the session built it (and after the program's own middlewares) and may answer it
  without calling the next handler, so replay never reaches the connector. Each attempt a
  session makes (a redirect hop, a retry on a dropped keep-alive connection) is its own
  decision, as at the ``httpx`` transport. A request an outer transport took
  (``capture.sending``: litellm's ``httpx`` transport sends over aiohttp) is left to it;
* ``ClientSession.__init__`` (patched at the class, as ``httpx``'s ``send`` is) adds that
  middleware to every session built while a hook level is installed. A session built before
  is not taped (the middleware is a session's, fixed when it is built); ``google-genai``
  builds its session on the first async call, and ``tracetape run`` installs the hooks before
  the program starts. The middleware does nothing once the hooks are removed.
* ``resp.content`` (an ``aiohttp.StreamReader``, a public attribute) is replaced by a reader
  of the same type: while recording one that reads from it and feeds the tap, in replay one
  that serves the recorded chunks (each recorded event is one chunk, as the server sent it).

Limits, said plainly: a request given its own ``middlewares=`` replaces the session's (ours
with them) and is not taped; response headers are not stored, so a recorded redirect replays
as the 3xx response it was, not followed (tape such requests with ``allow_redirects=False``).

One private detail is unavoidable: aiohttp has no public way to make a ``ClientResponse``
without a connection. ``_replayed_response`` builds one with the constructor aiohttp itself
calls in ``ClientRequest.send`` and sets the ``_headers`` and ``_raw_headers`` that its
``headers`` and ``raw_headers`` read; tested on aiohttp 3.14.5.
"""

from __future__ import annotations

import asyncio
import functools
import http
import inspect
import re
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeAlias, cast

import aiohttp
from multidict import CIMultiDict, CIMultiDictProxy
from yarl import URL

from ..record import RAISED
from .capture import Capture, Tap, out_content, passing, rebuilt, taker
from .flow import Beyond, Headers, Out, Parts, aexchange
from .framing import content_type_of, framing_of
from .install import patch_attr
from .providers import dig

__all__ = ["patch_module", "tape_middleware"]


# -- keying ----------------------------------------------------------------------------------------


def _parts(url: URL) -> tuple[str, str, str, str]:
    """Scheme, netloc, path and query as ``httpx`` gives them (a default port left out, the
    path decoded, the query as sent), so one cassette serves both transports."""
    return url.scheme, url.host_port_subcomponent or "", url.path, url.raw_query_string


async def _content(req: aiohttp.ClientRequest) -> bytes:
    """The bytes ``req`` sends (a payload made from an iterator keeps them for the send)."""
    body = req.body
    if isinstance(body, aiohttp.payload.Payload):
        return await body.as_bytes()
    return bytes(body)


def _content_type(req: aiohttp.ClientRequest) -> str:
    found = req.headers.get("Content-Type")
    if found is None and isinstance(req.body, aiohttp.payload.Payload):
        found = req.body.content_type
    return found or ""


_Request: TypeAlias = aiohttp.ClientRequest
_Response: TypeAlias = aiohttp.ClientResponse


class _Adapter:
    """The flow's adapter for ``aiohttp`` requests and responses."""

    def parts(self, request: aiohttp.ClientRequest) -> Parts:
        return Parts(request.method, _parts(request.url), _content_type(request), request.headers)

    def identity(self, request: aiohttp.ClientRequest) -> None:
        request.headers["Accept-Encoding"] = "identity"

    def answer(self, request: _Request, out: Out, headers: Headers, beyond: Beyond) -> _Response:
        status = int(out.get("status", 200))
        if "events" in out:
            reader = _ReplayReader(framing_of(out).encode(out), beyond)
            ctype = content_type_of(out)
        else:
            ctype, content = out_content(out)
            reader = _ReplayReader([content], None)
        return _replayed_response(request, status, {"Content-Type": ctype, **headers}, reader)

    def raised(self, request: aiohttp.ClientRequest, out: Mapping[str, Any]) -> BaseException:
        return _failure(out, request)

    def tapped(
        self, request: aiohttp.ClientRequest, response: aiohttp.ClientResponse, capture: Capture
    ) -> aiohttp.ClientResponse:
        tap = capture.new_tap(response.status, response.headers.get("Content-Type", ""))
        response.content = _TapReader(response.content, tap)
        return response


_ADAPTER = _Adapter()


# -- the middleware --------------------------------------------------------------------------------


def _hooked() -> bool:
    """Whether a hook level is installed: the sessions' constructor is patched."""
    init = aiohttp.ClientSession.__dict__.get("__init__")
    return "__tracetape_original__" in getattr(init, "__dict__", {})


async def tape_middleware(
    req: aiohttp.ClientRequest, handler: aiohttp.ClientHandlerType
) -> aiohttp.ClientResponse:
    """The client middleware every session built under the hooks gets: records a request's
    response as it is read, or answers it from the tape (see the module doc)."""
    if not _hooked():
        return await handler(req)
    found = taker(req.method, req.url.host or "", req.url.path)
    if found is None:
        with passing("aiohttp"):
            return await handler(req)
    return await aexchange(_ADAPTER, found, req, await _content(req), handler)


def _failure(out: Mapping[str, Any], req: aiohttp.ClientRequest) -> BaseException:
    """The recorded exception. An aiohttp connector error is built again from the request's
    connection key and its OS error, which its ``args`` keep only as text
    (``[Errno 111] Connect call failed ...``)."""
    exc = rebuilt(out)
    name = str(dig(out, RAISED, "type") or "").rpartition(".")[2]
    cls = getattr(aiohttp, name, None)
    if (
        not isinstance(cls, type)
        or not issubclass(cls, aiohttp.ClientConnectorError)
        or isinstance(exc, cls)
    ):
        return exc
    args = dig(out, RAISED, "args") or [""]
    found = _ERRNO.match(str(args[-1]))
    os_error = OSError(int(found[1]), found[2]) if found else OSError(str(args[-1]))
    return cast(BaseException, cls(req.connection_key, os_error))


_ERRNO = re.compile(r"\[Errno (-?\d+)\] (.*)", re.DOTALL)


@functools.cache
def _response_parameters() -> frozenset[str]:
    return frozenset(inspect.signature(aiohttp.ClientResponse.__init__).parameters)


class _Sent:
    """What a response built without a connection says of its request's upload: it is sent
    (the constructor reads ``output_size`` from its stream writer)."""

    output_size = 0


def _replayed_response(
    req: aiohttp.ClientRequest, status: int, headers: Mapping[str, str], reader: _ReplayReader
) -> aiohttp.ClientResponse:
    """A ``ClientResponse`` (of the session's response class) built from a recording, with no
    connection. The only place private aiohttp names are used (see the module doc)."""
    kwargs: dict[str, Any] = {
        "writer": None,
        "continue100": None,
        "timer": None,
        "request_info": req.request_info,
        "traces": [],
        "loop": req.loop,
        "session": req.session,
    }
    if "stream_writer" in _response_parameters():  # where the constructor takes it (3.14.5)
        kwargs["stream_writer"] = _Sent()
    resp = req.response_class(req.method, req.original_url, **kwargs)
    resp.version = aiohttp.HttpVersion11
    resp.status = status
    try:
        resp.reason = http.HTTPStatus(status).phrase
    except ValueError:
        resp.reason = ""
    resp._headers = CIMultiDictProxy(CIMultiDict(headers))
    resp._raw_headers = tuple((k.encode(), v.encode()) for k, v in headers.items())
    resp.content = reader
    return resp


# -- the readers -----------------------------------------------------------------------------------


class _TapReader(aiohttp.StreamReader):
    """A response's body reader that feeds a ``Tap`` with what each read returns, and
    finishes it at the end of the body, or when the response is released or closed (aiohttp
    then sets an exception on its reader); a body left unread and open is finished when the
    hook's scope ends (``capture.flush_pending``). Every method delegates to the reader
    aiohttp made (``__init__`` makes no buffer of its own, as aiohttp's ``EmptyStreamReader``
    does not)."""

    __slots__ = ("_inner", "_tap")

    def __init__(self, inner: aiohttp.StreamReader, tap: Tap) -> None:
        self._inner = inner
        self._tap = tap

    def __repr__(self) -> str:
        return f"<{type(self).__name__} of {self._inner!r}>"

    def _took(self, data: bytes) -> bytes:
        if data:
            self._tap.feed(data)
        if self._inner.at_eof():
            self._tap.finish(complete=True)
        return data

    async def readline(self, *, max_line_length: int | None = None) -> bytes:
        return self._took(await self._inner.readline(max_line_length=max_line_length))

    async def readuntil(self, separator: bytes = b"\n", *, max_size: int | None = None) -> bytes:
        return self._took(await self._inner.readuntil(separator, max_size=max_size))

    async def read(self, n: int = -1) -> bytes:
        return self._took(await self._inner.read(n))

    async def readany(self) -> bytes:
        return self._took(await self._inner.readany())

    async def readexactly(self, n: int) -> bytes:
        return self._took(await self._inner.readexactly(n))

    async def readchunk(self) -> tuple[bytes, bool]:
        data, end = await self._inner.readchunk()
        return self._took(data), end

    def read_nowait(self, n: int = -1) -> bytes:
        return self._took(self._inner.read_nowait(n))

    def exception(self) -> BaseException | None:
        return self._inner.exception()

    def set_exception(self, exc: BaseException, *args: Any, **kwargs: Any) -> None:
        self._inner.set_exception(exc, *args, **kwargs)
        self._tap.finish(complete=False)

    def on_eof(self, callback: Callable[[], None]) -> None:
        self._inner.on_eof(callback)

    def feed_eof(self) -> None:
        self._inner.feed_eof()

    def feed_data(self, data: bytes, size: int = 0) -> bool:
        return self._inner.feed_data(data, size)

    def is_eof(self) -> bool:
        return self._inner.is_eof()

    def at_eof(self) -> bool:
        return self._inner.at_eof()

    async def wait_eof(self) -> None:
        await self._inner.wait_eof()

    def unread_data(self, data: bytes) -> None:
        self._inner.unread_data(data)

    def begin_http_chunk_receiving(self) -> None:
        self._inner.begin_http_chunk_receiving()

    def end_http_chunk_receiving(self) -> None:
        self._inner.end_http_chunk_receiving()

    def get_read_buffer_limits(self) -> tuple[int, int]:
        return self._inner.get_read_buffer_limits()

    def set_read_chunk_size(self, n: int) -> None:
        self._inner.set_read_chunk_size(n)

    @property
    def total_bytes(self) -> int:  # type: ignore[override]
        return self._inner.total_bytes

    @property
    def total_compressed_bytes(self) -> int | None:  # type: ignore[override]
        return self._inner.total_compressed_bytes


_LIMIT = 2**16  # aiohttp's default read buffer size, reported by a replayed reader


class _ReplayReader(aiohttp.StreamReader):
    """A response's body reader serving recorded chunks: one recorded event (or the whole
    body) per chunk, as the server sent them. Reading past the end of a stream the recorded
    run abandoned raises ``beyond()`` (the truncated-stream miss)."""

    __slots__ = ("_beyond", "_callbacks", "_chunks", "_error", "_served")

    def __init__(self, chunks: Iterable[bytes], beyond: Callable[[], BaseException] | None) -> None:
        self._chunks: deque[bytes] = deque(c for c in chunks if c)
        self._beyond = beyond
        self._error: BaseException | None = None
        self._callbacks: list[Callable[[], None]] = []
        self._served = 0

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {len(self._chunks)} chunks left>"

    def _check(self) -> None:
        if self._error is not None:
            raise self._error

    def _take(self, data: bytes) -> bytes:
        self._served += len(data)
        if self.at_eof():
            callbacks, self._callbacks = self._callbacks, []
            for callback in callbacks:
                callback()
        return data

    def _end(self) -> bytes:
        """Nothing is left: the end of the body, or past where the recorded run stopped."""
        if self._beyond is not None:
            raise self._beyond()
        return self._take(b"")

    def _first(self, n: int) -> bytes:
        chunk = self._chunks.popleft()
        if 0 <= n < len(chunk):
            self._chunks.appendleft(chunk[n:])
            chunk = chunk[:n]
        return self._take(chunk)

    async def readany(self) -> bytes:
        self._check()
        return self._first(-1) if self._chunks else self._end()

    async def read(self, n: int = -1) -> bytes:
        self._check()
        if n == 0:
            return b""
        if n > 0:
            return self._first(n) if self._chunks else self._end()
        data = b"".join(self._chunks)
        self._chunks.clear()
        if self._beyond is not None:
            raise self._beyond()
        return self._take(data)

    async def readuntil(self, separator: bytes = b"\n", *, max_size: int | None = None) -> bytes:
        self._check()
        if not separator:
            raise ValueError("Separator should be at least one-byte string")
        line = b""
        while self._chunks:
            start = max(0, len(line) - len(separator) + 1)
            line += self._chunks.popleft()
            found = line.find(separator, start)
            if found >= 0:
                end = found + len(separator)
                if end < len(line):
                    self._chunks.appendleft(line[end:])
                return self._take(line[:end])
        if self._beyond is not None:
            raise self._beyond()
        return self._take(line)

    async def readline(self, *, max_line_length: int | None = None) -> bytes:
        return await self.readuntil(b"\n", max_size=max_line_length)

    async def readchunk(self) -> tuple[bytes, bool]:
        self._check()
        if self._chunks:
            return self._first(-1), True
        return self._end(), False

    async def readexactly(self, n: int) -> bytes:
        self._check()
        blocks: list[bytes] = []
        while n > 0:
            block = await self.read(n)
            if not block:
                partial = b"".join(blocks)
                raise asyncio.IncompleteReadError(partial, len(partial) + n)
            blocks.append(block)
            n -= len(block)
        return b"".join(blocks)

    def read_nowait(self, n: int = -1) -> bytes:
        self._check()
        if not self._chunks:
            return b""
        if n >= 0:
            return self._first(n)
        data = b"".join(self._chunks)
        self._chunks.clear()
        return self._take(data)

    def exception(self) -> BaseException | None:
        return self._error

    def set_exception(self, exc: BaseException, *args: Any, **kwargs: Any) -> None:
        self._error = exc

    def on_eof(self, callback: Callable[[], None]) -> None:
        if self.at_eof():
            callback()
        else:
            self._callbacks.append(callback)

    def feed_eof(self) -> None:
        self._beyond = None

    def feed_data(self, data: bytes, size: int = 0) -> bool:
        if data:
            self._chunks.append(data)
        return False

    def is_eof(self) -> bool:
        return self._beyond is None

    def at_eof(self) -> bool:
        return self._beyond is None and not self._chunks

    async def wait_eof(self) -> None:
        return None

    def unread_data(self, data: bytes) -> None:
        if data:
            self._chunks.appendleft(data)
            self._served -= len(data)

    def begin_http_chunk_receiving(self) -> None:
        return None

    def end_http_chunk_receiving(self) -> None:
        return None

    def get_read_buffer_limits(self) -> tuple[int, int]:
        return _LIMIT, 2 * _LIMIT

    def set_read_chunk_size(self, n: int) -> None:
        return None

    @property
    def total_bytes(self) -> int:  # type: ignore[override]
        return self._served

    @property
    def total_compressed_bytes(self) -> int | None:  # type: ignore[override]
        return None


# -- installing ------------------------------------------------------------------------------------


def _wrap_init(original: Callable[..., None]) -> Callable[..., None]:
    @functools.wraps(original)
    def __init__(
        self: aiohttp.ClientSession,
        *args: Any,
        middlewares: Sequence[aiohttp.ClientMiddlewareType] | None = (),
        **kwargs: Any,
    ) -> None:
        middlewares = tuple(middlewares or ())
        if tape_middleware not in middlewares:
            middlewares = (*middlewares, tape_middleware)  # last: after the program's own
        original(self, *args, middlewares=middlewares, **kwargs)

    return __init__


def patch_module(module: Any) -> None:
    """Patch ``aiohttp.ClientSession``'s constructor (the installer's watch of ``aiohttp``)."""
    cls = module.ClientSession
    patch_attr(cls, "__init__", _wrap_init(cls.__dict__["__init__"]))
