"""The ``urllib3`` transport: every connection pool's ``urlopen`` through the tape.

``requests`` sends over ``urllib3`` (``HTTPAdapter.send`` calls a pool's ``urlopen``), and so do
the telemetry clients of several frameworks and many agent tools: without this hook they are
invisible in record and blocked in replay. ``HTTPConnectionPool.urlopen`` (public, patched at
the class while a hook level is installed, as ``httpx``'s ``send`` is) is an adapter over the
capture flow (``flow.exchange``): ``capture.taker`` decides who takes a request (a model request
under the SDK hooks, every request inside ``patch_http(tape)``, nobody otherwise), recording
taps the body as the consumer reads it and replay answers from the cassette without opening a
connection. A pool's own retries and same-host redirects happen inside the call it takes
(``capture.sending`` is set while it sends): the response the call ends with is its answer.
botocore sends over ``urllib3`` too; its events take its requests first (``botocore_events``).

The answer is a ``urllib3.HTTPResponse`` over a body of the recorded chunks (one recorded event
per read, as the server sent them; a whole body at once), or while recording, over the live
response read one read at a time (``read1``), so a stream reaches the program as it arrives.
A recorded connection failure is raised again as its ``urllib3`` type with its recorded
message and the ``reason`` it names (``requests`` maps a ``MaxRetryError`` by its reason:
``ConnectTimeout``, ``SSLError``, ``ConnectionError``). Tested on urllib3 2.8.0 with
requests 2.34.2; urllib3 before 2.0 is not hooked.
"""

from __future__ import annotations

import contextlib
import functools
import http
import io
import re
from collections import deque
from collections.abc import Callable, Generator, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import urllib3.exceptions
import urllib3.response

from ..record import RAISED
from .capture import Capture, Tap, out_content, passing, rebuilt, taker
from .flow import Beyond, Headers, Out, Parts, exchange
from .framing import content_type_of, framing_of
from .install import patch_attr
from .providers import dig

__all__ = ["patch_module"]

_DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass
class _Request:
    """One ``urlopen`` call: its pool, its arguments, its body as bytes."""

    pool: Any
    method: str
    url: str
    body: bytes | None
    headers: dict[Any, Any]  # a copy, never the pool's own nor the caller's
    kwargs: dict[str, Any] = field(default_factory=dict)

    def parts(self) -> tuple[str, str, str, str]:
        """Scheme, netloc, path and query as ``httpx`` gives them (a default port left out)."""
        split = urlsplit(self.url)
        if split.scheme:  # an absolute URL (a proxy's request)
            return split.scheme, split.netloc, split.path or "/", split.query
        scheme, host, port = str(self.pool.scheme), str(self.pool.host), self.pool.port
        if ":" in host:
            host = f"[{host}]"
        netloc = host if port in (None, _DEFAULT_PORTS.get(scheme)) else f"{host}:{port}"
        return scheme, netloc, split.path or "/", split.query


def _text(value: Any) -> str:
    return value.decode("latin-1") if isinstance(value, bytes | bytearray) else str(value)


def _body(body: Any) -> bytes | None:
    """A request body's bytes; a file-like body is read and put back where it was, an
    iterable of chunks read whole (then sent as the bytes read)."""
    if body is None:
        return None
    if isinstance(body, bytes | bytearray | memoryview):
        return bytes(body)
    if isinstance(body, str):
        return body.encode()
    read = getattr(body, "read", None)
    if callable(read):
        seek, tell = getattr(body, "seek", None), getattr(body, "tell", None)
        position = tell() if callable(tell) and callable(seek) else None
        data = read()
        if position is not None and callable(seek):
            seek(position)
        return data.encode() if isinstance(data, str) else bytes(data)
    if isinstance(body, Iterable):
        return b"".join(c.encode() if isinstance(c, str) else bytes(c) for c in body)
    return None


class _Body(io.RawIOBase):
    """A body urllib3 reads with ``read``, ``read1`` and ``readinto``."""

    def readable(self) -> bool:
        return True

    def read1(self, size: int = -1) -> bytes:
        """What one read gives: at most ``size`` bytes (any size when negative)."""
        buffer = bytearray(size if size > 0 else 2**16)
        return bytes(buffer[: self.readinto(buffer)])


class _Replayed(_Body):
    """A recorded body: one recorded chunk (or part of one) a read; past the end of a stream
    the recorded run abandoned, ``beyond()`` is raised."""

    def __init__(self, chunks: Iterable[bytes], beyond: Callable[[], BaseException] | None):
        self._chunks: deque[bytes] = deque(c for c in chunks if c)
        self._beyond = beyond

    def readinto(self, buffer: Any) -> int:
        if not self._chunks:
            if self._beyond is not None:
                raise self._beyond()
            return 0
        chunk = self._chunks.popleft()
        size = len(buffer)
        if len(chunk) > size:
            self._chunks.appendleft(chunk[size:])
            chunk = chunk[:size]
        buffer[: len(chunk)] = chunk
        return len(chunk)


class _Tapped(_Body):
    """The live response's body, decoded, one read of it at a time, fed to a ``Tap``; the
    tap is finished at the end of the body, or when the body is closed before it."""

    def __init__(self, inner: Any, tap: Tap):
        self._inner, self._tap = inner, tap

    def readinto(self, buffer: Any) -> int:
        data = self._inner.read1(len(buffer), decode_content=True)
        if not data:
            self._tap.finish(complete=True)
            return 0
        self._tap.feed(data)
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        if not self.closed:
            try:
                if self._tap.done:  # read to its end: the connection goes back to its pool
                    self._inner.release_conn()
                else:  # abandoned: what is unread is dropped with the connection
                    self._inner.close()
            finally:
                self._tap.finish(complete=False)
        super().close()


class _Response(urllib3.response.HTTPResponse):
    """A response whose ``stream()`` yields each read as it comes: a live stream is not held
    back to fill a read's size (the body handed on is no longer chunked on the wire)."""

    def stream(
        self, amt: int | None = 2**16, decode_content: bool | None = None
    ) -> Generator[bytes, None, None]:
        while True:
            data = self.read1(amt, decode_content=decode_content)
            if not data:
                return
            yield data


def _response(
    method: str, url: str, body: io.RawIOBase, status: int, headers: Mapping[str, str]
) -> _Response:
    """The answer handed to the program, its body read as the program reads it."""
    try:
        reason = http.HTTPStatus(status).phrase
    except ValueError:
        reason = ""
    return _Response(
        body=body,
        headers=dict(headers),
        status=status,
        version=11,
        version_string="HTTP/1.1",
        reason=reason,
        preload_content=False,
        request_method=method,
        request_url=url,
    )


# The error a urllib3 error's message names as its cause: ``(Caused by X("its message"))``.
_CAUSE = re.compile(r"\(Caused by (\w+)\((['\"]?)(.*?)\2\)\)$", re.DOTALL)


def _urllib3_error(name: str, message: str) -> BaseException | None:
    """A ``urllib3.exceptions`` error of class ``name`` carrying ``message`` (their
    constructors take a pool or a connection, which a recording does not hold), its
    ``reason`` the error its message names as its cause."""
    cls = getattr(urllib3.exceptions, name, None)
    if not (isinstance(cls, type) and issubclass(cls, urllib3.exceptions.HTTPError)):
        return None
    exc = cls.__new__(cls)
    Exception.__init__(exc, message)
    for attribute in ("conn", "pool", "url", "reason"):
        with contextlib.suppress(AttributeError):  # some are read-only aliases
            setattr(exc, attribute, None)
    cause = _CAUSE.search(message)
    if cause is not None and cause[1] != name:
        with contextlib.suppress(AttributeError):
            exc.reason = _urllib3_error(cause[1], cause[3])  # type: ignore[attr-defined]
    return exc


# Headers of how the live body was framed on the wire: the body handed on is decoded.
_FRAMING_HEADERS = frozenset({"transfer-encoding", "content-encoding"})


class _Adapter:
    """The flow's adapter for a pool's ``urlopen``."""

    def parts(self, request: _Request) -> Parts:
        headers = {_text(k).lower(): _text(v) for k, v in request.headers.items()}
        return Parts(request.method, request.parts(), headers.get("content-type", ""), headers)

    def identity(self, request: _Request) -> None:
        for name in [k for k in request.headers if _text(k).lower() == "accept-encoding"]:
            del request.headers[name]
        request.headers["Accept-Encoding"] = "identity"

    def answer(self, request: _Request, out: Out, headers: Headers, beyond: Beyond) -> _Response:
        status = int(out.get("status", 200))
        if "events" in out:
            body = _Replayed(framing_of(out).encode(out), beyond)
            all_headers = {"Content-Type": content_type_of(out), **headers}
        else:
            ctype, content = out_content(out)
            body = _Replayed([content], None)
            all_headers = {"Content-Type": ctype, "Content-Length": str(len(content)), **headers}
        return _response(request.method, request.url, body, status, all_headers)

    def raised(self, request: _Request, out: Mapping[str, Any]) -> BaseException:
        name = str(dig(out, RAISED, "type") or "")
        if name.startswith("urllib3."):
            message = str(dig(out, RAISED, "message") or "")
            found = _urllib3_error(name.rpartition(".")[2], message)
            if found is not None:
                return found
        return rebuilt(out)

    def tapped(self, request: _Request, response: Any, capture: Capture) -> _Response:
        tap = capture.new_tap(response.status, str(response.headers.get("Content-Type", "")))
        kept = {k: v for k, v in response.headers.items() if k.lower() not in _FRAMING_HEADERS}
        body = _Tapped(response, tap)
        answer = _response(request.method, request.url, body, response.status, kept)
        answer.retries = response.retries
        return answer


_ADAPTER = _Adapter()


def _wrap_urlopen(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def urlopen(
        self: Any, method: str, url: str, body: Any = None, headers: Any = None, **kwargs: Any
    ) -> Any:
        found = taker(method, str(self.host), urlsplit(url).path or "/")
        if found is None:
            with passing("urllib3"):
                return original(self, method, url, body, headers, **kwargs)
        content = _body(body)
        given = headers if headers is not None else self.headers
        request = _Request(self, method, url, content, dict(given.items()), kwargs)

        def send(request: _Request) -> Any:
            live = {**request.kwargs, "preload_content": False}  # read through the tap
            return original(
                self, request.method, request.url, request.body, request.headers, **live
            )

        response = exchange(_ADAPTER, found, request, content or b"", send)
        if kwargs.get("preload_content", True):
            _ = response.data  # read now, as urllib3 does when asked to preload
        return response

    return urlopen


def patch_module(module: Any) -> None:
    """Patch ``HTTPConnectionPool.urlopen`` (the installer's watch of
    ``urllib3.connectionpool``); urllib3 before 2.0 is left alone."""
    if not hasattr(urllib3.response, "BaseHTTPResponse"):  # before 2.0
        return
    cls = module.HTTPConnectionPool
    patch_attr(cls, "urlopen", _wrap_urlopen(cls.__dict__["urlopen"]))
