"""``tracetape proxy``: a local server that speaks the providers' own HTTP APIs, so an agent
in any language (a TypeScript agent, a coding-agent CLI) is taped unmodified: it only takes a
base URL (``OPENAI_BASE_URL``, ``ANTHROPIC_BASE_URL`` …, ``client_env``).

The proxy is one more transport adapter over the capture flow (``flow.aexchange``): a request
is keyed, replayed and recorded exactly as the in-process hooks do (the provider table decides
route, conversation, step, usage and credentials), so a request the openai Python SDK would
send keys the same through either, and a cassette recorded by one replays through the other.
In record the request goes on to the provider (``UPSTREAMS``, or ``--upstream NAME=URL``) with
the client's own credentials, which are never stored; the answer streams back to the client as
it arrives, chunk for chunk, and is stored as it is read. In replay it is answered from the
cassette, with no upstream and no credentials.

Where a request goes: a path under a provider's name (``/anthropic/v1/messages``,
``/groq/openai/v1/chat/completions``) goes to that provider; any other path goes to the
provider whose model route it is (``/v1/messages`` is Anthropic's, ``/v1/chat/completions``
OpenAI's), a model route's path without its version to that route (``/messages``, which the
Vercel AI SDK's Anthropic provider asks), a request that carries ``anthropic-version`` (every
Anthropic client sends it) to Anthropic (``/v1/messages/count_tokens``, ``/v1/models``: taped
as plain HTTP decisions), and the rest of ``/v1`` to OpenAI. The proxy speaks HTTP, not
WebSocket: an upgrade is refused with a 404 (Codex then falls back to HTTP). Bedrock's routes
(``/model/{id}/converse``, at the root or under ``/bedrock``) go to Bedrock, whose host is per
region: ``bedrock-runtime.{region}.amazonaws.com``, the region from ``AWS_REGION`` or
``AWS_DEFAULT_REGION`` where the proxy runs (``regional``).

AWS's SigV4 signs the host and path a request was sent to (the proxy's), with a key derived
from a secret the proxy never sees: such a request cannot be forwarded to AWS, nor signed
again, so one is refused before it is sent (nothing recorded), saying what records instead. A
Bedrock API key (``Authorization: Bearer``) is bound to no host and forwards as it is (boto3
sends one over HTTPS only). An upstream that is not AWS (a gateway, a fake) is sent a signed
request unchanged; where one answers 403 for the signature, the proxy says why.

A miss is answered 400 in the provider's error shape (SDKs retry 408, 409, 429 and 5xx; coding
CLIs show a 400), its message the miss's diagnosis; the proxy also prints it and keeps serving
(the next request may match). A request body beyond ``max_body`` is a 413, a path no provider
answers a 404, an upstream that cannot be reached a 502: a one-line reason each, never a crash.

Engine: a plain ASGI app (``ProxyApp``) served by uvicorn, the upstream reached with httpx's
async client (HTTP/2 where the upstream offers it by ALPN over TLS, else HTTP/1.1), both of the
``server`` extra. The upstream's certificate is checked against certifi's roots, or the file
``SSL_CERT_FILE`` names (the folder ``SSL_CERT_DIR`` names), as httpx reads them.
"""

from __future__ import annotations

import hmac
import json
import os
import re
import sys
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx

from ..errors import ReplayMiss
from ..tape import Tape
from .capture import Capture, Tap, flush_pending, out_content, rebuilt
from .flow import Beyond, Headers, Out, Parts, aexchange
from .framing import content_type_of, framing_of
from .keying import current_keys
from .providers import match_route

__all__ = [
    "UPSTREAMS",
    "ProxyApp",
    "client_env",
    "parse_upstreams",
    "regional",
]

# Where each provider's API lives: the proxy's upstream for it unless ``--upstream`` says.
UPSTREAMS: dict[str, str] = {
    "openai": "https://api.openai.com",
    "anthropic": "https://api.anthropic.com",
    "gemini": "https://generativelanguage.googleapis.com",
    "mistral": "https://api.mistral.ai",
    "cohere": "https://api.cohere.com",
    "groq": "https://api.groq.com",
    "ollama": "http://127.0.0.1:11434",
    "bedrock": "https://bedrock-runtime.{region}.amazonaws.com",  # ``regional`` fills it in
}
# Where AWS SDKs read the region, in their order: the proxy reads it from the same place.
REGION_ENV = ("AWS_REGION", "AWS_DEFAULT_REGION")

# The variables that point each known client at the proxy, and the path they point at.
CLIENT_ENV: tuple[tuple[str, str], ...] = (
    ("OPENAI_BASE_URL", "/v1"),  # openai (Python, Node), the Vercel AI SDK, Codex
    ("ANTHROPIC_BASE_URL", ""),  # anthropic (Python, Node), Claude Code
    ("GOOGLE_GEMINI_BASE_URL", "/gemini"),  # Gemini CLI, @google/genai
    ("GROQ_BASE_URL", "/groq"),
    ("CO_API_URL", "/cohere"),
    # AWS SDKs' endpoint for one service (boto3, @aws-sdk/client-bedrock-runtime); they keep
    # its path and put the route below it
    ("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", "/bedrock"),
    ("OLLAMA_HOST", "/ollama"),
)

# Headers of one hop, not forwarded (RFC 9110 7.6.1), and those httpx sets itself.
_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
        "x-tracetape-token",
    }
)
# Headers of the upstream's answer not handed on: the body handed on is decoded and framed anew.
_ANSWER_DROPPED = frozenset({*_HOP, "content-encoding"})


def client_env(address: str) -> dict[str, str]:
    """The environment that points each known client at the proxy at ``address``."""
    return {name: f"{address}{path}" for name, path in CLIENT_ENV}


_REGION = re.compile(r"[a-z]{2}(?:-[a-z0-9]+)+-[0-9]{1,2}")  # us-east-1, ap-southeast-2


def regional(url: str, environ: Mapping[str, str] = os.environ) -> str:
    """``url`` with ``{region}`` filled in from the region ``environ`` sets for AWS SDKs; left
    as it is where none is set, or none that names a region (the proxy then refuses to record
    to it, saying so): a host is never built from anything else.

    >>> regional("https://bedrock-runtime.{region}.amazonaws.com", {"AWS_REGION": "eu-west-3"})
    'https://bedrock-runtime.eu-west-3.amazonaws.com'
    >>> regional("https://b.{region}.amazonaws.com", {"AWS_REGION": "x.evil.example/#"})
    'https://b.{region}.amazonaws.com'
    """
    region = next((environ[name].strip() for name in REGION_ENV if environ.get(name)), "")
    return url.replace("{region}", region) if _REGION.fullmatch(region) else url


def parse_upstreams(given: Iterable[str]) -> dict[str, str]:
    """``NAME=URL`` pairs over the defaults; a bad pair is a ``ValueError`` saying why."""
    upstreams = dict(UPSTREAMS)
    for pair in given:
        name, sep, url = pair.partition("=")
        name = name.strip().lower()
        if not sep or name not in UPSTREAMS:
            raise ValueError(
                f"--upstream {pair!r}: use PROVIDER=URL with PROVIDER one of {', '.join(UPSTREAMS)}"
            )
        split = urlsplit(url.strip())
        if split.scheme not in ("http", "https") or not split.netloc:
            raise ValueError(f"--upstream {pair!r}: {url!r} is not an http(s) URL")
        upstreams[name] = url.strip().rstrip("/")
    return upstreams


@dataclass
class ProxyRequest:
    """One request the proxy took, as it goes upstream."""

    method: str
    provider: str
    url: tuple[str, str, str, str]  # the upstream's scheme, netloc, path and query
    headers: dict[str, str]
    body: bytes

    @property
    def target(self) -> str:
        scheme, netloc, path, query = self.url
        return f"{scheme}://{netloc}{path}" + (f"?{query}" if query else "")


@dataclass
class Answer:
    """What the proxy answers: a status, headers, and the body's chunks (an iterator of the
    upstream's, being recorded, or the recorded ones); past the end of a stream the recorded
    run abandoned, ``beyond()`` is the miss."""

    status: int
    headers: list[tuple[str, str]]
    chunks: AsyncIterator[bytes] | Sequence[bytes] = ()
    beyond: Callable[[], BaseException] | None = None


class _Failed(Exception):
    """The upstream could not be reached (now, or when the recording was made)."""


class _Adapter:
    """The flow's adapter for the proxy's requests and answers."""

    def parts(self, request: ProxyRequest) -> Parts:
        return Parts(
            request.method, request.url, request.headers.get("content-type", ""), request.headers
        )

    def identity(self, request: ProxyRequest) -> None:
        request.headers["accept-encoding"] = "identity"

    def answer(self, request: ProxyRequest, out: Out, headers: Headers, beyond: Beyond) -> Answer:
        status = int(out.get("status", 200))
        if "events" in out:
            chunks = framing_of(out).encode(out)
            all_headers = [("content-type", content_type_of(out)), *headers.items()]
            return Answer(status, all_headers, chunks, beyond)
        ctype, content = out_content(out)
        return Answer(status, [("content-type", ctype), *headers.items()], [content])

    def raised(self, request: ProxyRequest, out: Mapping[str, Any]) -> BaseException:
        return _Failed(str(rebuilt(out)))

    def tapped(self, request: ProxyRequest, response: Any, capture: Capture) -> Answer:
        tap = capture.new_tap(response.status_code, response.headers.get("content-type", ""))
        headers = [(k, v) for k, v in response.headers.items() if k.lower() not in _ANSWER_DROPPED]
        return Answer(response.status_code, headers, _tapped(response, tap))


async def _tapped(response: Any, tap: Tap) -> AsyncIterator[bytes]:
    """The upstream's body, decoded, as it arrives, fed to ``tap``; finished at its end, or
    as far as it was read when the client went away."""
    try:
        async for chunk in response.aiter_bytes():
            tap.feed(chunk)
            yield chunk
        tap.finish(complete=True)
    finally:
        tap.finish(complete=False)  # no-op once finished
        await response.aclose()


_ADAPTER = _Adapter()


def _error_headers(provider: str, status: int) -> list[tuple[str, str]]:
    """The headers of an error answer: AWS SDKs read an error's type from
    ``x-amzn-ErrorType`` (a ``ValidationException`` they neither retry nor hide)."""
    headers = [("content-type", "application/json"), ("x-should-retry", "false")]
    if provider == "bedrock":
        kind = "ValidationException" if status < 500 else "ServiceUnavailableException"
        headers.append(("x-amzn-errortype", kind))
    return headers


def _signature_refused(response: httpx.Response) -> bool:
    """Whether an AWS answer says the request's signature did not check out."""
    kind = response.headers.get("x-amzn-errortype", "").split(":", 1)[0]
    return response.status_code == 403 and kind in (
        "InvalidSignatureException",
        "SignatureDoesNotMatch",
    )


# What records Bedrock where a SigV4 signature cannot travel through the proxy.
_SIGV4_WAY = (
    "a SigV4 signature is bound to the host it was made for (this proxy) and the proxy holds "
    "no key to sign again: record in-process (tracetape run without --proxy) or through an "
    "upstream that signs with credentials of its own (--upstream bedrock=URL); replay "
    "through the proxy needs only placeholder credentials"
)


def _error_body(provider: str, status: int, message: str, kind: str) -> bytes:
    """An error in the provider's own shape, which its SDKs read the message of."""
    if provider == "anthropic":
        body: dict[str, Any] = {
            "type": "error",
            "error": {"type": "invalid_request_error", "message": message},
        }
    elif provider == "gemini":
        body = {"error": {"code": status, "message": message, "status": "FAILED_PRECONDITION"}}
    elif provider == "ollama":
        body = {"error": message}
    elif provider in ("cohere", "bedrock"):
        body = {"message": message}
    else:
        body = {"error": {"message": message, "type": kind, "param": None, "code": kind}}
    return json.dumps(body).encode()


@dataclass
class ProxyApp:
    """The ASGI app: routes each request to its provider through ``tape``."""

    tape: Tape
    upstreams: Mapping[str, str] = field(default_factory=lambda: dict(UPSTREAMS))
    max_body: int = 32 * 2**20
    token: str | None = None
    say: Callable[[str], None] = field(default=lambda line: print(line, file=sys.stderr))
    misses: list[ReplayMiss] = field(default_factory=list)
    _client: httpx.AsyncClient | None = None

    def __post_init__(self) -> None:
        current_keys(self.tape)  # a cassette keyed before today's keys replays as the hooks'
        self.upstreams = {name: regional(url) for name, url in self.upstreams.items()}

    def route(self, path: str, headers: Mapping[str, str] | None = None) -> tuple[str, str] | None:
        """The provider a path goes to, and the path it has upstream (``headers``, lower-cased
        names, decide a path of no model route: ``anthropic-version`` is Anthropic's)."""
        first, _, rest = path.lstrip("/").partition("/")
        if first in self.upstreams:
            return first, "/" + rest
        match = match_route("POST", "", path)
        if match is not None:
            return match.provider.name, path
        # @ai-sdk/anthropic wants the version in ANTHROPIC_BASE_URL, which the anthropic SDKs
        # and Claude Code add themselves: its /messages is Anthropic's /v1/messages
        match = match_route("POST", "", "/v1" + path)
        if match is not None:
            return match.provider.name, "/v1" + path
        # a route beyond the model's (count_tokens, models, batches) of an Anthropic client
        if headers and "anthropic-version" in headers and "anthropic" in self.upstreams:
            return "anthropic", path
        if path.startswith("/v1/") or path == "/v1":
            return "openai", path
        return None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] == "websocket":
            await self._no_websocket(scope, receive, send)
            return
        if scope["type"] != "http":
            return
        answer = await self._answer(scope, receive)
        await self._send(answer, send)

    async def _no_websocket(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """Refuse a WebSocket upgrade with a 404 saying why (Codex's Responses WebSocket: it
        falls back to HTTP), or close it where the server cannot answer it in HTTP."""
        await receive()  # websocket.connect
        if "websocket.http.response" not in scope.get("extensions", {}):
            await send({"type": "websocket.close", "code": 1003})
            return
        message = f"tracetape proxy: {scope['path']} is served over HTTP, not WebSocket"
        headers = [(b"content-type", b"application/json")]
        await send({"type": "websocket.http.response.start", "status": 404, "headers": headers})
        body = _error_body("openai", 404, message, "not_found")
        await send({"type": "websocket.http.response.body", "body": body})

    async def _lifespan(self, receive: Any, send: Any) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def aclose(self) -> None:
        """Close the upstream client and record what responses were left half read."""
        flush_pending(self.tape)
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    def _refused(self, status: int, provider: str, message: str, kind: str) -> Answer:
        body = _error_body(provider, status, message, kind)
        return Answer(status, _error_headers(provider, status), [body])

    def _unsendable(self, request: ProxyRequest) -> str | None:
        """Why a request to be recorded cannot go to its upstream, if it cannot: Bedrock's
        host wants a region, and AWS checks a SigV4 signature against its own host."""
        if request.provider != "bedrock" or self.tape.replaying:
            return None
        if "{region}" in request.url[1]:
            return (
                "tracetape proxy: Bedrock's host is per region: set AWS_REGION (or "
                "AWS_DEFAULT_REGION) to one such as us-east-1 where the proxy runs, or "
                "--upstream bedrock=URL"
            )
        signed = request.headers.get("authorization", "").startswith("AWS4-HMAC-SHA256")
        if signed and request.url[1].partition(":")[0].endswith(".amazonaws.com"):
            return f"tracetape proxy: cannot record this request to AWS: {_SIGV4_WAY}"
        return None

    async def _answer(self, scope: dict[str, Any], receive: Any) -> Answer:
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        given = headers.get("x-tracetape-token", "").encode()
        if self.token is not None and not hmac.compare_digest(given, self.token.encode()):
            return self._refused(401, "openai", "tracetape proxy: a token is needed", "auth")
        parts: list[bytes] = []
        size, more = 0, True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return Answer(499, [])
            chunk = message.get("body", b"")
            parts.append(chunk)
            size += len(chunk)
            more = message.get("more_body", False)
            if size > self.max_body:
                return self._refused(
                    413,
                    "openai",
                    f"tracetape proxy: request body over {self.max_body} bytes",
                    "too_large",
                )
        body = b"".join(parts)
        # as the client sent it: a model id's "/" and ":" travel percent-encoded (Bedrock's)
        raw = scope.get("raw_path")
        path = raw.decode("latin-1") if raw else scope["path"]
        routed = self.route(path, headers)
        if routed is None:
            return self._refused(
                404,
                "openai",
                f"tracetape proxy: no provider answers {path}; put the provider's name first "
                f"({', '.join(f'/{name}/' for name in self.upstreams)})",
                "not_found",
            )
        provider, upstream_path = routed
        base = urlsplit(self.upstreams[provider])
        request = ProxyRequest(
            method=scope["method"],
            provider=provider,
            url=(
                base.scheme,
                base.netloc,
                base.path.rstrip("/") + upstream_path,
                scope.get("query_string", b"").decode("latin-1"),
            ),
            headers={k: v for k, v in headers.items() if k not in _HOP},
            body=body,
        )
        unsendable = self._unsendable(request)
        if unsendable is not None:
            self.say(unsendable)
            return self._refused(400, provider, unsendable, "unsendable")
        try:
            return await aexchange(_ADAPTER, self.tape, request, body, self._upstream)
        except ReplayMiss as miss:
            self.misses.append(miss)
            self.say(f"tracetape proxy: replay miss at {scope['method']} {path}:\n{miss}")
            return self._refused(400, provider, f"tracetape replay miss: {miss}", "replay_miss")
        except (_Failed, httpx.HTTPError) as exc:
            message = f"tracetape proxy: the upstream {request.target} failed: {exc}"
            return self._refused(502, provider, message, "upstream_failed")

    async def _upstream(self, request: ProxyRequest) -> Any:
        if self._client is None:
            self._client = httpx.AsyncClient(http2=True, timeout=httpx.Timeout(600, connect=30))
        sent = self._client.build_request(
            request.method, request.target, headers=request.headers, content=request.body
        )
        response = await self._client.send(sent, stream=True)
        if request.provider == "bedrock" and _signature_refused(response):
            self.say(f"tracetape proxy: {request.target} refused the signature: {_SIGV4_WAY}")
        return response

    async def _send(self, answer: Answer, send: Any) -> None:
        if answer.status == 499:  # the client left before it asked
            return
        await send(
            {
                "type": "http.response.start",
                "status": answer.status,
                "headers": [(k.encode(), v.encode()) for k, v in answer.headers],
            }
        )
        chunks = answer.chunks
        try:
            if isinstance(chunks, AsyncIterator):
                async for chunk in chunks:
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
            else:
                for chunk in chunks:
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
        finally:
            if isinstance(chunks, AsyncIterator):
                await chunks.aclose()  # type: ignore[attr-defined]
        if answer.beyond is not None:
            miss = answer.beyond()
            if isinstance(miss, ReplayMiss):
                self.misses.append(miss)
            self.say(f"tracetape proxy: replay miss past the recorded stream:\n{miss}")
            raise miss  # the connection is cut: the client sees the stream broken, not ended
        await send({"type": "http.response.body", "body": b"", "more_body": False})
