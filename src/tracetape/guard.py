"""The replay guard: no request of a replaying tape goes live unnoticed.

A tape that replays with no hook serving it (``patch_sdks`` or ``patch_http`` forgotten) would
let an SDK send its request live. While such a tape is active (``arm``), an audit hook
(``socket.connect``, ``socket.getaddrinfo``, and ``http.client.send`` for a kept-alive
connection of ``http.client``: urllib3, requests, botocore) and httpx's network transports (a
kept-alive httpx connection sends without a connect) ask ``find()`` for the tape of the
calling thread or task that refuses, and it refuses (``Refuser.refuse``). The audit hook is
installed on first use (Python cannot remove one) and returns at once while nothing is
armed; httpx (``httpx``, ``httpx2``) is patched where it is already imported, as it is by any
SDK built before a tape replays.

This module imports nothing of tracetape's: the tape arms it.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

__all__ = ["Refuser", "arm"]


class Refuser(Protocol):
    """What ``find()`` returns: the tape that refuses a request of its context."""

    def refuse(self, what: str, address: object) -> None:
        """Refuse the request described by ``what`` (raises)."""
        ...


def _nobody() -> Refuser | None:
    return None


_find: Callable[[], Refuser | None] = _nobody
_armed = 0  # tapes armed: the audit hook returns at once at 0
_installed = False
_lock = threading.Lock()
_EVENTS = frozenset({"socket.connect", "socket.getaddrinfo", "http.client.send"})


def arm(delta: int, find: Callable[[], Refuser | None]) -> None:
    """Count one more armed tape (``delta`` 1) or one less (-1); ``find`` names the refusing
    tape of the calling context, or None."""
    global _armed, _installed, _find  # noqa: PLW0603 - one process-wide audit hook
    with _lock:
        if not _installed:
            sys.addaudithook(_audit)
            _installed = True
        _armed += delta
        _find = find
        if delta > 0:
            _patch_httpx()


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if not _armed or event not in _EVENTS:
        return
    refuser = _find()
    if refuser is None:
        return
    if event == "http.client.send":
        connection = args[0]
        host = getattr(connection, "host", "?")
        refuser.refuse(f"a request to {host}:{getattr(connection, 'port', '')}", host)
    elif event == "socket.connect":
        family = getattr(args[0], "family", None)
        if family is None or family.name not in ("AF_INET", "AF_INET6"):
            return  # AF_UNIX and friends are local IPC, not the network
        refuser.refuse(f"a connection to {args[1][0]}:{args[1][1]}", args[1])
    elif args[0] is not None:
        raw = args[0]
        host = raw.decode() if isinstance(raw, bytes | bytearray) else str(raw)
        refuser.refuse(f"a connection to {host}:{args[1]} (its address lookup)", host)


def _patch_httpx() -> None:
    for name in ("httpx", "httpx2"):
        module = sys.modules.get(name)
        if module is None or getattr(module, "__tracetape_guarded__", False):
            continue
        module.__tracetape_guarded__ = True  # type: ignore[attr-defined]
        sync = getattr(module, "HTTPTransport", None)
        if sync is not None and "handle_request" in sync.__dict__:
            sync.handle_request = _guarded_sync(sync.__dict__["handle_request"])
        aio = getattr(module, "AsyncHTTPTransport", None)
        if aio is not None and "handle_async_request" in aio.__dict__:
            aio.handle_async_request = _guarded_async(aio.__dict__["handle_async_request"])


def _check(request: Any) -> None:
    refuser = _find() if _armed else None
    if refuser is not None:
        url = request.url
        port = f":{url.port}" if url.port else ""
        where = f"{url.scheme}://{url.host}{port}{url.path}"  # no query: it may hold a key
        refuser.refuse(f"a request {request.method} {where}", url.host)


def _guarded_sync(original: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    def handle_request(self: Any, request: Any) -> Any:
        _check(request)
        return original(self, request)

    handle_request.__wrapped__ = original  # type: ignore[attr-defined]
    return handle_request


def _guarded_async(
    original: Callable[[Any, Any], Awaitable[Any]],
) -> Callable[[Any, Any], Awaitable[Any]]:
    async def handle_async_request(self: Any, request: Any) -> Any:
        _check(request)
        return await original(self, request)

    handle_async_request.__wrapped__ = original  # type: ignore[attr-defined]
    return handle_async_request
