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
The model "missing" gets a 404. A request offering ``run_shell_command`` and no ``add``
(Gemini CLI's) has each addition done by the shell instead: ``expr A + B``, its result
read from the tool's output. Every request (path, query, headers, body) is kept in
``requests``.
"""

from __future__ import annotations

import base64
import json
import re
import threading
from collections.abc import Iterator
from typing import Any

from fakeserver import shell_number

from .agent_checks import FakeModelServer, Reply, pieces

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
        _result(p["functionResponse"]["response"]) for p in _parts(contents, "functionResponse")
    ]
    total = results[-1] if results else 0
    if len(results) < n:
        return "call", {"a": total, "b": len(results) + 1}
    return "text", f"The total is {total}."


def _result(response: dict[str, Any]) -> int:
    """A function's result: ``add``'s number, or what a shell printed (``output``)."""
    if "result" in response:
        return int(response["result"])
    return shell_number(str(response.get("output", "")))


class FakeGemini(FakeModelServer):
    """The Gemini API (see the module doc)."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()

    def respond(self, request: dict[str, Any]) -> Reply:
        path, query, body = request["path"], request["query"], request["body"]
        key = request["headers"].get("x-goog-api-key") or query.get("key")
        route = ROUTE.search(path)
        if route is None:
            return _error(404, "NOT_FOUND", f"{path} is not found")
        if not key:
            return _error(403, "PERMISSION_DENIED", "Method doesn't allow unregistered callers")
        if route["model"] == "missing":
            return _error(404, "NOT_FOUND", "models/missing is not found for API version v1")
        if (why := bad_signature(body.get("contents") or [])) is not None:
            return _error(400, "INVALID_ARGUMENT", f"Corrupted thought signature: {why}")
        return self._answer(route["model"], route["method"], body, key)

    def _answer(self, model: str, method: str, body: dict[str, Any], key: str) -> Reply:
        contents = body.get("contents") or []
        kind, value = plan(contents)
        task = _text(contents[0]) if contents else ""
        if task == "show key":
            kind, value = "text", f"you sent {key}"
        step = 1 + sum(1 for c in contents if c.get("role") == "model")
        if kind == "call":
            call = {"name": "add", "args": value}
            tools = {
                declaration.get("name")
                for tool in body.get("tools") or ()
                for declaration in tool.get("functionDeclarations") or ()
            }
            if "run_shell_command" in tools and "add" not in tools:  # a coding agent's shell
                # Gemini CLI refuses a command substitution: expr, not echo $((…))
                command = f"expr {value['a']} + {value['b']}"
                args = {"command": command, "description": "Add two numbers"}
                call = {"name": "run_shell_command", "args": args}
            parts = [{"functionCall": call, "thoughtSignature": signature(step)}]
        else:
            parts = [{"text": piece} for piece in pieces(value)]
        if method == "generateContent":
            whole = [{"text": value}] if kind == "text" else parts
            return _json(_response(model, step, whole, len(contents), 1, last=True))
        chunks = [parts] if kind == "call" else [[p] for p in parts]
        events = [
            _response(model, step, chunk, len(contents), i + 1, last=i == len(chunks) - 1)
            for i, chunk in enumerate(chunks)
        ]
        return Reply(200, "text/event-stream", chunks=self._sse(events, task.startswith("hold ")))

    def _sse(self, events: list[dict[str, Any]], hold: bool) -> Iterator[bytes]:
        """The events in CRLF-ended SSE, one chunk each; held after the first until
        ``release`` when ``hold``."""
        for i, event in enumerate(events):
            yield f"data: {json.dumps(event)}\r\n\r\n".encode()
            if i == 0 and hold:
                self.release.wait(5)

    def stop(self) -> None:
        self.release.set()
        super().stop()


def _json(data: Any, status: int = 200) -> Reply:
    return Reply(status, "application/json; charset=UTF-8", json.dumps(data).encode())


def _error(code: int, status: str, message: str) -> Reply:
    return _json({"error": {"code": code, "message": message, "status": status}}, code)


def _response(
    model: str, step: int, parts: list[Any], prompt: int, output: int, *, last: bool
) -> dict[str, Any]:
    """A ``GenerateContentResponse``: one candidate with ``parts``, finished if ``last``."""
    candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}, "index": 0}
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
