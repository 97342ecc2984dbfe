"""Helpers of the span tests: spans of commands, and a second model on 127.0.0.1."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tracetape.span import Span

PY = sys.executable


class Decider:
    """An OpenAI-compatible chat endpoint whose answer each test sets: ``reply(body)`` returns
    ``(status, payload)``; while ``answering`` is cleared, it holds every request unanswered
    (a timeout test) until it is set again. Requests are kept."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.raw: list[bytes] = []
        self.answering = threading.Event()
        self.answering.set()
        self.reply: Callable[[dict[str, Any]], tuple[int, Any]] = lambda body: (200, {})
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                outer.raw.append(raw)
                body = json.loads(raw)
                outer.requests.append(
                    {"path": self.path, "headers": dict(self.headers), "body": body}
                )
                outer.answering.wait()
                status, payload = outer.reply(body)
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:  # the client gave up (a timeout test)
                    pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"


def tool_call_reply(name: str, args: Any) -> tuple[int, Any]:
    """A chat completion that calls ``name`` with ``args``."""
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    return 200, {
        "id": "c1",
        "object": "chat.completion",
        "model": "m",
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
    }


def write_span(path: Path, **fields: Any) -> Path:
    """Write one span as indented JSON, as ``tracetape span extract -o`` does."""
    path.write_text(json.dumps(fields, indent=2), encoding="utf-8")
    return path


def command(code: str, result: Any = None, **call: Any) -> Span:
    """A span whose tool is ``python -c code``, recorded with ``result``."""
    return Span.from_dict(
        {
            "span_id": "7f3c",
            "tool_call": {"argv": [PY, "-c", code], **call},
            "tool_result": result,
        }
    )


def printed(text: str, code: int = 0) -> dict[str, Any]:
    """A command's recorded result: ``text`` on stdout, exit ``code``."""
    return {"exit_code": code, "stdout": text, "stderr": ""}
