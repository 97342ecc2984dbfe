"""A fake Gemini API on 127.0.0.1 for the tests (stdlib only), speaking its wire format.

``POST /v1/models/M:generateContent`` (or ``/v1beta/``) answers a ``GenerateContentResponse``;
``:streamGenerateContent?alt=sse`` the same as SSE events ending in CRLF, one whole response
each, the last with a ``finishReason``, no ``[DONE]``. The key is taken from the
``x-goog-api-key`` header or ``?key=``; a request with neither gets a 403.

The "model" is a function of the request: for a task "sum 1 to N" it calls ``add`` once per
number (a ``functionCall`` part with a ``thoughtSignature``), reading each result from the
``functionResponse`` parts the request sends back, then answers with the total. Every
``functionCall`` part a request sends back must carry the signature this server gave it, byte
for byte, or the request gets a 400 (as the real API refuses a lost or altered signature).
Other tasks: "echo X" answers X (streamed word by word), "show key" quotes the key it was
sent, "hold X" streams its first word and then waits for ``release`` (an abandoned stream).
The model "missing" gets a 404. Every request (path, query, headers, body) is kept in
``requests``.
"""

from __future__ import annotations

import base64
import json
import re
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

ROUTE = re.compile(
    r"/v1(?:beta)?/models/(?P<model>[^/:]+):(?P<method>generateContent|streamGenerateContent)$"
)


def signature(step: int) -> str:
    """The ``thoughtSignature`` of the function call answered at ``step`` (plain base64 that
    the SDK's base64url round trip leaves as it is)."""
    return base64.b64encode(b"thought-sig-%03d" % step).decode()


def _text(content: Any) -> str:
    parts = content.get("parts") if isinstance(content, dict) else None
    return "".join(str(p.get("text", "")) for p in parts or () if isinstance(p, dict))


def _parts(contents: list[Any], key: str) -> list[dict[str, Any]]:
    return [
        part
        for content in contents
        if isinstance(content, dict)
        for part in content.get("parts") or ()
        if isinstance(part, dict) and key in part
    ]


def bad_signature(contents: list[Any]) -> str | None:
    """Why the function calls a request sends back do not carry the signatures this server
    gave them (the n-th call was answered at step n), or None."""
    for n, part in enumerate(_parts(contents, "functionCall"), start=1):
        if part.get("thoughtSignature") != signature(n):
            return f"function call {n}: thoughtSignature {part.get('thoughtSignature')!r}"
    return None


def plan(contents: list[Any]) -> tuple[str, Any]:
    """("call", args) for the next ``add`` call, or ("text", answer)."""
    task = next((_text(c) for c in contents if c.get("role", "user") == "user"), "")
    if task.startswith(("echo ", "hold ")):
        return "text", task[5:]
    found = re.search(r"sum 1 to (\d+)", task)
    n = int(found.group(1)) if found else 3
    results = [
        p["functionResponse"]["response"]["result"] for p in _parts(contents, "functionResponse")
    ]
    total = results[-1] if results else 0
    if len(results) < n:
        return "call", {"a": total, "b": len(results) + 1}
    return "text", f"The total is {total}."


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client leaving a stream half-read is not an error


class FakeGemini:
    """Start with ``start()``, stop with ``stop()``; ``base_url`` is ``http://127.0.0.1:PORT``."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.release = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def setup(self) -> None:
                super().setup()
                # small writes must not wait for delayed ACKs
                self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                url = urlsplit(self.path)
                query = {k: v[0] for k, v in parse_qs(url.query).items()}
                body = json.loads(raw or b"{}")
                server.requests.append(
                    {"path": url.path, "query": query, "headers": dict(self.headers), "body": body}
                )
                key = self.headers.get("x-goog-api-key") or query.get("key")
                route = ROUTE.search(url.path)
                if route is None:
                    self._error(404, "NOT_FOUND", f"{url.path} is not found")
                elif not key:
                    self._error(
                        403, "PERMISSION_DENIED", "Method doesn't allow unregistered callers"
                    )
                elif route["model"] == "missing":
                    self._error(404, "NOT_FOUND", "models/missing is not found for API version v1")
                elif (why := bad_signature(body.get("contents") or [])) is not None:
                    self._error(400, "INVALID_ARGUMENT", f"Corrupted thought signature: {why}")
                else:
                    self._answer(route["model"], route["method"], body, key)

            def _json(self, data: Any, status: int = 200) -> None:
                raw = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json; charset=UTF-8")
                self.send_header("content-length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def _error(self, code: int, status: str, message: str) -> None:
                self._json({"error": {"code": code, "message": message, "status": status}}, code)

            def _answer(self, model: str, method: str, body: dict[str, Any], key: str) -> None:
                contents = body.get("contents") or []
                kind, value = plan(contents)
                task = _text(contents[0]) if contents else ""
                if task == "show key":
                    kind, value = "text", f"you sent {key}"
                step = 1 + sum(1 for c in contents if c.get("role") == "model")
                if kind == "call":
                    pieces = [
                        {
                            "functionCall": {"name": "add", "args": value},
                            "thoughtSignature": signature(step),
                        }
                    ]
                else:
                    words = value.split(" ")
                    pieces = [
                        {"text": w + (" " if i < len(words) - 1 else "")}
                        for i, w in enumerate(words)
                    ]
                if method == "generateContent":
                    text = "".join(p.get("text", "") for p in pieces)
                    self._json(
                        self._response(
                            model,
                            step,
                            [{"text": text}] if kind == "text" else pieces,
                            len(contents),
                            1,
                            last=True,
                        )
                    )
                    return
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                chunks = [pieces] if kind == "call" else [[p] for p in pieces]
                for i, parts in enumerate(chunks):
                    last = i == len(chunks) - 1
                    event = self._response(model, step, parts, len(contents), i + 1, last=last)
                    raw = f"data: {json.dumps(event)}\r\n\r\n".encode()
                    try:
                        self.wfile.write(f"{len(raw):x}\r\n".encode() + raw + b"\r\n")
                        self.wfile.flush()
                    except OSError:
                        return  # the client left
                    if i == 0 and task.startswith("hold "):
                        server.release.wait(5)
                self.wfile.write(b"0\r\n\r\n")

            def _response(
                self,
                model: str,
                step: int,
                parts: list[Any],
                prompt: int,
                output: int,
                *,
                last: bool,
            ) -> dict[str, Any]:
                candidate: dict[str, Any] = {
                    "content": {"parts": parts, "role": "model"},
                    "index": 0,
                }
                if last:
                    candidate["finishReason"] = "STOP"
                usage = {
                    "promptTokenCount": prompt,
                    "candidatesTokenCount": output,
                    "thoughtsTokenCount": 2,
                    "totalTokenCount": prompt + output + 2,
                }
                return {
                    "candidates": [candidate],
                    "usageMetadata": usage,
                    "modelVersion": model,
                    "responseId": f"resp-{step}",
                }

        self._server = _Server(("127.0.0.1", 0), Handler)
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> FakeGemini:
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self.release.set()
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(5)
