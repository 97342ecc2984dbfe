"""What keeps a browser from being turned against the collector.

* **Host allowlist** (DNS rebinding): a request whose ``Host`` is not one the collector was
  told it answers to (``--allowed-host``; by default the address it listens on, ``localhost``
  and the loopback addresses) is refused, so a web page whose name an attacker pointed at
  127.0.0.1 cannot read a loopback collector's traces (``/healthz`` excepted: it tells
  nothing, and probes reach it by any address).
* **Cross-site writes**: a request that changes state (``POST``) must not come from another
  site: ``Sec-Fetch-Site`` other than ``same-origin``/``none``, or an ``Origin`` whose host is
  not allowed, is refused, and the body must be declared JSON (``application/json``,
  ``application/x-ndjson``...), which a page cannot send cross-site without a preflight this
  collector never grants.
* **Headers** on every answer: ``X-Content-Type-Options: nosniff``, ``Referrer-Policy:
  no-referrer``, ``X-Frame-Options: DENY``, and on pages the ``Content-Security-Policy``
  (``pages.CSP``: ``frame-ancestors 'none'``, only the pages' own hashed script and style).
* **Sessions**: the page cookie holds a signed session (issue time and an HMAC keyed by the
  token), never the token; it lasts ``SESSION_S`` and dies with a new token.

Every refusal is the collector's one error shape: ``{"error": "..."}``.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Iterable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..errors import ConfigError

__all__ = [
    "JSON_TYPES",
    "MIN_TOKEN",
    "SESSION_S",
    "Guard",
    "allowed_hosts",
    "check_session",
    "clean_token",
    "new_session",
]

SESSION_S = 7 * 24 * 3600
MIN_TOKEN = 16
JSON_TYPES = frozenset(
    {"application/json", "application/x-ndjson", "application/jsonl", "application/json-seq"}
)
_LOOPBACK = ("localhost", "127.0.0.1", "::1")
_HEADERS = [
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
]


def allowed_hosts(bind: str | None, extra: Iterable[str] = ()) -> frozenset[str]:
    """The host names a collector bound to ``bind`` answers to: ``bind`` itself, the
    loopback names and ``extra`` (``--allowed-host``), lower-case, without ports or brackets.

    >>> sorted(allowed_hosts("0.0.0.0", ["traces.internal"]))
    ['0.0.0.0', '127.0.0.1', '::1', 'localhost', 'traces.internal']
    """
    names = {*_LOOPBACK, *(h.strip().lower().strip("[]") for h in extra if h.strip())}
    if bind:
        names.add(bind.lower().strip("[]"))
    return frozenset(names)


def host_of(value: str) -> str:
    """The host of a ``Host`` header or an origin's authority, without port or brackets.

    >>> host_of("[::1]:8750"), host_of("Example.COM:80"), host_of("localhost")
    ('::1', 'example.com', 'localhost')
    """
    value = value.strip().lower()
    if value.startswith("["):
        return value[1:].partition("]")[0]
    return value.rpartition(":")[0] if value.count(":") == 1 else value


def clean_token(token: str | None) -> str | None:
    """The token without surrounding whitespace; None when none is given. A token given
    but blank is a ``ConfigError`` (it would open the collector to anyone sending a space)."""
    if token is None:
        return None
    stripped = token.strip()
    if not stripped:
        raise ConfigError(
            "the token is blank (only whitespace); set TRACETAPE_TOKEN (or --token) to a "
            f"secret of at least {MIN_TOKEN} characters, or unset it on loopback"
        )
    return stripped


def new_session(token: str, now: float | None = None) -> str:
    """A session cookie's value: its issue time and an HMAC of it keyed by ``token``."""
    issued = str(int(time.time() if now is None else now))
    return f"{issued}.{_mac(token, issued)}"


def check_session(token: str, value: str | None, now: float | None = None) -> bool:
    """Whether ``value`` is a session this token signed, issued in the last ``SESSION_S``."""
    if not value:
        return False
    issued, _, mac = value.partition(".")
    if not issued.isdigit() or not hmac.compare_digest(mac.encode(), _mac(token, issued).encode()):
        return False
    return 0 <= (time.time() if now is None else now) - int(issued) <= SESSION_S


def _mac(token: str, issued: str) -> str:
    return hmac.new(
        token.encode(), f"tracetape-session:{issued}".encode(), hashlib.sha256
    ).hexdigest()


class Guard:
    """The ASGI middleware that applies the rules of the module docstring."""

    def __init__(self, app: ASGIApp, *, hosts: frozenset[str], csp: str):
        self.app, self.hosts, self.csp = app, hosts, csp.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        problem = self._refusal(scope["method"], scope["path"], headers)
        if problem is not None:
            status, message = problem
            await _answer(send, status, message)
            return

        async def secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                extra = list(_HEADERS)
                kind = dict(message.get("headers", [])).get(b"content-type", b"")
                if kind.startswith(b"text/html"):
                    extra.append((b"content-security-policy", self.csp))
                message["headers"] = [*message.get("headers", []), *extra]
            await send(message)

        await self.app(scope, receive, secured)

    def _refusal(self, method: str, path: str, headers: dict[str, str]) -> tuple[int, str] | None:
        host = host_of(headers.get("host", ""))
        # /healthz tells nothing a rebound page could use, and probes (a container
        # orchestrator's) reach it by whatever address the collector has
        if host not in self.hosts and path != "/healthz":
            return 421, (
                f"this collector does not answer to the host name {host[:100]!r}; start it "
                f"with --allowed-host {host[:100] or 'NAME'} if that name is meant to reach it"
            )
        if method in ("GET", "HEAD", "OPTIONS"):
            return None
        site = headers.get("sec-fetch-site")
        if site is not None and site not in ("same-origin", "none"):
            return 403, f"a cross-site request ({site}) may not change this collector"
        origin = headers.get("origin")
        if origin is not None and host_of(origin.partition("://")[2]) not in self.hosts:
            return 403, "a request from another site's page may not change this collector"
        kind = headers.get("content-type", "").split(";")[0].strip().lower()
        # only a POST sends a body here: another method goes on to its 405
        if method == "POST" and kind not in JSON_TYPES:
            return 415, (
                "send the body as JSON: Content-Type: application/x-ndjson (JSONL) or "
                "application/json"
            )
        return None


async def _answer(send: Send, status: int, message: str) -> None:
    import json

    body = json.dumps({"error": message}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *_HEADERS,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
