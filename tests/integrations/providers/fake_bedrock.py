"""A fake AWS Bedrock Runtime server on 127.0.0.1 for the integration tests (stdlib only).

It speaks the REST API botocore calls: ``POST /model/{modelId}/converse``, ``/converse-stream``,
``/invoke`` (Anthropic's Messages body, as Bedrock takes it) and
``/invoke-with-response-stream``. Streams are real ``application/vnd.amazon.eventstream``
messages, each with its prelude and message CRC32 (encoded here, independently of tracetape's
writer), sent in chunks that cut messages apart. Signatures are not checked.

The "model" is a deterministic function of the request: for a task "sum 1 to N" it calls the
``add`` tool once per number, then answers with the total; "echo X" answers X; "show header
H" answers with the request's header H (a server that echoes a credential); a Converse
stream whose task is "break X" ends, after one delta, with a ``modelStreamErrorException``
message, as Bedrock's streams fail midway. A model id
``no-such-model`` is answered ``400 ValidationException``, ``busy-model`` ``429
ThrottlingException``, as Bedrock does (the error's type in ``x-amzn-ErrorType``), and
``flaky-model`` ``503 ServiceUnavailableException`` the first time only. ``count-tokens``
answers ``{"inputTokens": <messages>}`` (a call that is not a model call). Every request
(path, headers, body) is kept in ``requests``.
"""

from __future__ import annotations

import base64
import json
import re
import socket
import struct
import threading
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote

REQUEST_ID = "7a6d3c1e-0000-4000-8000-0123456789ab"
ERRORS = {
    "no-such-model": (400, "ValidationException", "The provided model identifier is invalid."),
    "busy-model": (429, "ThrottlingException", "Too many requests, please wait."),
}


def event_message(headers: dict[str, str], payload: bytes) -> bytes:
    """One AWS event-stream message: prelude (total length, headers length, CRC32), string
    headers, payload, and the CRC32 of everything before it."""
    raw_headers = b""
    for name, value in headers.items():
        key, text = name.encode(), value.encode()
        raw_headers += bytes([len(key)]) + key + bytes([7]) + struct.pack(">H", len(text)) + text
    total = 4 + 4 + 4 + len(raw_headers) + len(payload) + 4
    prelude = struct.pack(">II", total, len(raw_headers))
    head = prelude + struct.pack(">I", zlib.crc32(prelude) & 0xFFFFFFFF)
    message = head + raw_headers + payload
    return message + struct.pack(">I", zlib.crc32(message) & 0xFFFFFFFF)


def _event(kind: str, data: dict[str, Any]) -> bytes:
    headers = {":event-type": kind, ":content-type": "application/json", ":message-type": "event"}
    return event_message(headers, json.dumps(data).encode())


def _text_of(blocks: Any) -> str:
    if isinstance(blocks, str):
        return blocks
    return " ".join(str(b.get("text", "")) for b in blocks or () if isinstance(b, dict))


def _task(messages: list[dict[str, Any]]) -> str:
    return next((_text_of(m.get("content")) for m in messages if m.get("role") == "user"), "")


def _n(task: str) -> int:
    found = re.search(r"sum 1 to (\d+)", task)
    return int(found.group(1)) if found else 3


def _converse_results(messages: list[dict[str, Any]]) -> list[int]:
    """The ``add`` results a Converse conversation sent back (``toolResult`` blocks)."""
    found = []
    for message in messages:
        for block in message.get("content") or ():
            result = block.get("toolResult") if isinstance(block, dict) else None
            if isinstance(result, dict):
                part = (result.get("content") or [{}])[0]
                found.append(int(part["json"]["sum"]) if "json" in part else int(part["text"]))
    return found


def _anthropic_results(messages: list[dict[str, Any]]) -> list[int]:
    return [
        int(_text_of(block["content"]))
        for m in messages
        if isinstance(m.get("content"), list)
        for block in m["content"]
        if isinstance(block, dict) and block.get("type") == "tool_result"
    ]


def plan(messages: list[dict[str, Any]], results: list[int], headers: Any) -> tuple[str, Any]:
    """("tool", {"a", "b"}) for the next add call, or ("text", answer)."""
    task = _task(messages)
    if task.startswith("echo "):
        return "text", task[5:]
    if task.startswith("show header "):
        return "text", f"you sent {headers.get(task.removeprefix('show header '))}"
    total = results[-1] if results else 0
    if len(results) < _n(task):
        return "tool", {"a": total, "b": len(results) + 1}
    return "text", f"The total is {total}."


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client closing its connection after the last event is not an error


class FakeBedrock:
    """Start with ``start()``, stop with ``stop()``; ``base_url`` is ``http://127.0.0.1:PORT``."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.flaked = False
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def setup(self) -> None:
                super().setup()
                self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                body = json.loads(raw or b"{}")
                fake.requests.append(
                    {"path": self.path, "headers": dict(self.headers), "body": body}
                )
                found = re.fullmatch(r"/model/([^/]+)/([a-z-]+)", self.path.split("?")[0])
                if found is None:
                    self._error(404, "ResourceNotFoundException", "no such route")
                    return
                model, method = unquote(found.group(1)), found.group(2)
                if model in ERRORS:
                    self._error(*ERRORS[model])
                elif model == "flaky-model" and not fake.flaked:
                    fake.flaked = True
                    self._error(503, "ServiceUnavailableException", "try again")
                elif method == "count-tokens":
                    messages = body["input"]["converse"]["messages"]
                    self._json({"inputTokens": len(messages)})
                elif method == "converse":
                    self._json(self._converse(model, body))
                elif method == "converse-stream":
                    self._stream(self._converse_events(body))
                elif method == "invoke":
                    self._json(self._anthropic(model, body))
                elif method == "invoke-with-response-stream":
                    self._stream(self._invoke_events(model, body))
                else:
                    self._error(404, "ResourceNotFoundException", "no such route")

            def _json(self, data: Any, status: int = 200, headers: Any = ()) -> None:
                raw = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(raw)))
                self.send_header("x-amzn-RequestId", REQUEST_ID)
                for name, value in headers:
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(raw)

            def _error(self, status: int, kind: str, message: str) -> None:
                suffix = ":http://internal.amazon.com/coral/com.amazon.bedrock/"
                self._json({"message": message}, status, [("x-amzn-ErrorType", kind + suffix)])

            def _stream(self, messages: list[bytes]) -> None:
                self.send_response(200)
                self.send_header("content-type", "application/vnd.amazon.eventstream")
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                data = b"".join(messages)
                # cut across message boundaries, as a network does
                for start in range(0, len(data), 97):
                    piece = data[start : start + 97]
                    self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")

            def _converse_plan(self, body: dict[str, Any]) -> tuple[str, Any, int]:
                messages = body.get("messages") or []
                kind, value = plan(messages, _converse_results(messages), self.headers)
                return kind, value, len(messages)

            def _converse(self, model: str, body: dict[str, Any]) -> dict[str, Any]:
                kind, value, step = self._converse_plan(body)
                if kind == "tool":
                    use = {"toolUseId": f"tooluse_{step}", "name": "add", "input": value}
                    content: list[dict[str, Any]] = [{"toolUse": use}]
                else:
                    content = [{"text": value}]
                return {
                    "output": {"message": {"role": "assistant", "content": content}},
                    "stopReason": "tool_use" if kind == "tool" else "end_turn",
                    "usage": {"inputTokens": step, "outputTokens": 1, "totalTokens": step + 1},
                    "metrics": {"latencyMs": 1},
                }

            def _converse_events(self, body: dict[str, Any]) -> list[bytes]:
                kind, value, step = self._converse_plan(body)
                events = [_event("messageStart", {"role": "assistant", "p": "abcd"})]
                if kind == "tool":
                    start = {"toolUse": {"toolUseId": f"tooluse_{step}", "name": "add"}}
                    events.append(
                        _event("contentBlockStart", {"contentBlockIndex": 0, "start": start})
                    )
                    args = json.dumps(value)
                    pieces = [{"toolUse": {"input": args[:6]}}, {"toolUse": {"input": args[6:]}}]
                else:
                    words = value.split(" ")
                    pieces = [
                        {"text": w + (" " if i < len(words) - 1 else "")}
                        for i, w in enumerate(words)
                    ]
                events += [
                    _event("contentBlockDelta", {"contentBlockIndex": 0, "delta": d, "p": "ab"})
                    for d in pieces
                ]
                if _task(body.get("messages") or []).startswith("break "):
                    headers = {
                        ":exception-type": "modelStreamErrorException",
                        ":content-type": "application/json",
                        ":message-type": "exception",
                    }
                    error = {"message": "The model stopped.", "originalStatusCode": 500}
                    return [*events[:2], event_message(headers, json.dumps(error).encode())]
                events.append(_event("contentBlockStop", {"contentBlockIndex": 0}))
                stop = "tool_use" if kind == "tool" else "end_turn"
                events.append(_event("messageStop", {"stopReason": stop}))
                usage = {"inputTokens": step, "outputTokens": 1, "totalTokens": step + 1}
                events.append(_event("metadata", {"usage": usage, "metrics": {"latencyMs": 1}}))
                return events

            def _anthropic(self, model: str, body: dict[str, Any]) -> dict[str, Any]:
                messages = body.get("messages") or []
                kind, value = plan(messages, _anthropic_results(messages), self.headers)
                step = len(messages)
                if kind == "tool":
                    block: dict[str, Any] = {
                        "type": "tool_use",
                        "id": f"toolu_{step}",
                        "name": "add",
                        "input": value,
                    }
                else:
                    block = {"type": "text", "text": value}
                return {
                    "id": f"msg_bdrk_{step}",
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [block],
                    "stop_reason": "tool_use" if kind == "tool" else "end_turn",
                    "stop_sequence": None,
                    "usage": {"input_tokens": step, "output_tokens": 1},
                }

            def _invoke_events(self, model: str, body: dict[str, Any]) -> list[bytes]:
                message = self._anthropic(model, body)
                start = {**message, "content": [], "stop_reason": None}
                block = message["content"][0]
                parts: list[dict[str, Any]]
                if block["type"] == "tool_use":
                    first, args = {**block, "input": {}}, json.dumps(block["input"])
                    parts = [{"type": "input_json_delta", "partial_json": args[:5]}]
                    parts.append({"type": "input_json_delta", "partial_json": args[5:]})
                else:
                    first = {"type": "text", "text": ""}
                    parts = [{"type": "text_delta", "text": block["text"]}]
                usage = message["usage"]
                metrics = {
                    "inputTokenCount": usage["input_tokens"],
                    "outputTokenCount": usage["output_tokens"],
                    "invocationLatency": 1,
                    "firstByteLatency": 1,
                }
                events: list[dict[str, Any]] = [
                    {"type": "message_start", "message": start},
                    {"type": "content_block_start", "index": 0, "content_block": first},
                    *({"type": "content_block_delta", "index": 0, "delta": p} for p in parts),
                    {"type": "content_block_stop", "index": 0},
                    {
                        "type": "message_delta",
                        "delta": {"stop_reason": message["stop_reason"]},
                        "usage": {"output_tokens": 1},
                    },
                    {"type": "message_stop", "amazon-bedrock-invocationMetrics": metrics},
                ]
                return [
                    _event("chunk", {"bytes": base64.b64encode(json.dumps(e).encode()).decode()})
                    for e in events
                ]

        self._httpd = _Server(("127.0.0.1", 0), Handler)
        # a short poll: ``stop()`` waits for the serving loop to look up
        serve = lambda: self._httpd.serve_forever(poll_interval=0.01)  # noqa: E731
        self._thread = threading.Thread(target=serve, daemon=True)

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def start(self) -> FakeBedrock:
        """Serve in a background thread."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket (idempotent)."""
        if self._thread.is_alive():
            self._httpd.shutdown()
        self._httpd.server_close()
