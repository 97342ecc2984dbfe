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
ThrottlingException``, ``signed-elsewhere`` ``403 InvalidSignatureException`` (AWS's answer
to a signature made for another host), as Bedrock does (the error's type in
``x-amzn-ErrorType``), and
``flaky-model`` ``503 ServiceUnavailableException`` the first time only. ``count-tokens``
answers ``{"inputTokens": <messages>}`` (a call that is not a model call). Every request
(path, query, headers, body) is kept in ``requests``.
"""

from __future__ import annotations

import base64
import json
import re
import struct
import zlib
from typing import Any
from urllib.parse import unquote

from .agent_checks import FakeModelServer, Reply

REQUEST_ID = "7a6d3c1e-0000-4000-8000-0123456789ab"
ERRORS = {
    "no-such-model": (400, "ValidationException", "The provided model identifier is invalid."),
    "busy-model": (429, "ThrottlingException", "Too many requests, please wait."),
    "signed-elsewhere": (
        403,
        "InvalidSignatureException",
        "The request signature we calculated does not match the signature you provided.",
    ),
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
        return "text", f"you sent {headers.get(task.removeprefix('show header ').lower())}"
    total = results[-1] if results else 0
    if len(results) < _n(task):
        return "tool", {"a": total, "b": len(results) + 1}
    return "text", f"The total is {total}."


class FakeBedrock(FakeModelServer):
    """The Bedrock Runtime (see the module doc)."""

    def __init__(self) -> None:
        super().__init__()
        self.flaked = False

    def respond(self, request: dict[str, Any]) -> Reply:
        body = request["body"]
        found = re.fullmatch(r"/model/([^/]+)/([a-z-]+)", request["path"])
        if found is None:
            return _error(404, "ResourceNotFoundException", "no such route")
        headers = {k.lower(): v for k, v in request["headers"].items()}
        model, method = unquote(found.group(1)), found.group(2)
        if model in ERRORS:
            return _error(*ERRORS[model])
        if model == "flaky-model" and not self.flaked:
            self.flaked = True
            return _error(503, "ServiceUnavailableException", "try again")
        if method == "count-tokens":
            return _json({"inputTokens": len(body["input"]["converse"]["messages"])})
        if method == "converse":
            return _json(self._converse(model, body, headers))
        if method == "converse-stream":
            return _stream(self._converse_events(body, headers))
        if method == "invoke":
            return _json(self._anthropic(model, body, headers))
        if method == "invoke-with-response-stream":
            return _stream(self._invoke_events(model, body, headers))
        return _error(404, "ResourceNotFoundException", "no such route")

    def _converse_plan(self, body: dict[str, Any], headers: dict[str, str]) -> tuple[str, Any, int]:
        messages = body.get("messages") or []
        kind, value = plan(messages, _converse_results(messages), headers)
        return kind, value, len(messages)

    def _converse(
        self, model: str, body: dict[str, Any], headers: dict[str, str]
    ) -> dict[str, Any]:
        kind, value, step = self._converse_plan(body, headers)
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

    def _converse_events(self, body: dict[str, Any], headers: dict[str, str]) -> list[bytes]:
        kind, value, step = self._converse_plan(body, headers)
        events = [_event("messageStart", {"role": "assistant", "p": "abcd"})]
        if kind == "tool":
            start = {"toolUse": {"toolUseId": f"tooluse_{step}", "name": "add"}}
            events.append(_event("contentBlockStart", {"contentBlockIndex": 0, "start": start}))
            args = json.dumps(value)
            pieces = [{"toolUse": {"input": args[:6]}}, {"toolUse": {"input": args[6:]}}]
        else:
            words = value.split(" ")
            pieces = [
                {"text": w + (" " if i < len(words) - 1 else "")} for i, w in enumerate(words)
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

    def _anthropic(
        self, model: str, body: dict[str, Any], headers: dict[str, str]
    ) -> dict[str, Any]:
        messages = body.get("messages") or []
        kind, value = plan(messages, _anthropic_results(messages), headers)
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

    def _invoke_events(
        self, model: str, body: dict[str, Any], headers: dict[str, str]
    ) -> list[bytes]:
        message = self._anthropic(model, body, headers)
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


def _json(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> Reply:
    extra = {"x-amzn-RequestId": REQUEST_ID, **(headers or {})}
    return Reply(status, "application/json", json.dumps(data).encode(), headers=extra)


def _error(status: int, kind: str, message: str) -> Reply:
    suffix = ":http://internal.amazon.com/coral/com.amazon.bedrock/"
    return _json({"message": message}, status, {"x-amzn-ErrorType": kind + suffix})


def _stream(messages: list[bytes]) -> Reply:
    """The event stream, cut across message boundaries as a network does."""
    data = b"".join(messages)
    chunks = [data[start : start + 97] for start in range(0, len(data), 97)]
    return Reply(200, "application/vnd.amazon.eventstream", chunks=chunks)
