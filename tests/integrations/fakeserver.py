"""A fake OpenAI + Anthropic server on 127.0.0.1 for the integration tests (stdlib only).

The "model" is a deterministic function of the request: for a task "sum 1 to N" it calls the
``add`` tool once per number, then answers with the total. JSON and SSE streaming both work,
for ``/v1/chat/completions``, ``/v1/responses``, ``/v1/completions``, ``/v1/embeddings`` and
Anthropic's ``/v1/messages``. Every request (path, headers, body) is kept in ``requests``.

A Messages request offering a ``Bash`` tool and no ``add`` (Claude Code's) has each addition
done by the shell instead: ``echo $((A + B))``, its result read from the tool's output; so has
a Responses request offering ``exec_command`` and no ``add`` (Codex's), its task read from any
of its user messages (Codex sends its environment first).
"""

from __future__ import annotations

import json
import re
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self


def _task_n(text: str) -> int:
    match = re.search(r"sum 1 to (\d+)", text)
    return int(match.group(1)) if match else 3


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return ""


def _task_of(messages: list[dict[str, Any]]) -> str:
    """The task: the first user message's text (frameworks put their instructions first)."""
    for message in messages:
        if message.get("role", "user") == "user":
            return _text_of(message.get("content"))
    return ""


def shell_number(text: str) -> int:
    """The number a shell printed, from a coding agent's tool output (what follows its
    ``Output:`` line where it has one: Codex and Gemini CLI put the exit code and timing
    first or after)."""
    return _number_in(text.split("Output:", 1)[-1])


def plan_responses(items: list[dict[str, Any]]) -> tuple[str, Any]:
    """The Responses API twin of ``plan_openai``: tool results are ``function_call_output``."""
    users = [
        _text_of(i.get("content"))
        for i in items
        if i.get("type", "message") == "message" and i.get("role", "user") == "user"
    ]
    n = _task_n(" ".join(users))
    results = [
        shell_number(_text_of(i["output"]))
        for i in items
        if i.get("type") == "function_call_output"
    ]
    total = results[-1] if results else 0
    if len(results) < n:
        return "tool", {"a": total, "b": len(results) + 1}
    return "text", f"The total is {total}."


def _forced_tool(body: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """The name and parameter schema of the function a request forces, if not ``add``."""
    choice = body.get("tool_choice")
    name = choice.get("function", {}).get("name") if isinstance(choice, dict) else None
    for tool in body.get("tools") or []:
        function = tool.get("function", {})
        if name not in (None, "add") and function.get("name") == name:
            return name, function.get("parameters") or {}
    return None


def _fill(schema: dict[str, Any]) -> dict[str, Any]:
    """Arguments fitting a flat JSON schema: 42 for a number, "ok" for anything else."""
    return {
        name: 42 if prop.get("type") in ("integer", "number") else "ok"
        for name, prop in (schema.get("properties") or {}).items()
    }


def plan_openai(messages: list[dict[str, Any]]) -> tuple[str, Any]:
    """("tool", {"a", "b"}) for the next add call, or ("text", answer); a task "echo X" is
    answered X (streamed in 7-character pieces); a task asking the "weather in CITY" calls
    ``get_weather`` for it ("call", (name, args)), then answers from the tool's result."""
    task = _task_of(messages)
    if task.startswith("echo "):
        return "echo", task[5:]
    weather = re.search(r"weather in ([A-Z][a-z]+)", task)
    if weather:
        results = [_text_of(m["content"]) for m in messages if m.get("role") == "tool"]
        if not results:
            return "call", ("get_weather", {"city": weather.group(1)})
        return "text", (
            f"In {weather.group(1)} it is {results[-1]} right now, so a light jacket is enough "
            "for a walk along the river this afternoon."
        )
    n = _task_n(task)
    results = [int(_text_of(m["content"])) for m in messages if m.get("role") == "tool"]
    total = results[-1] if results else 0
    if len(results) < n:
        return "tool", {"a": total, "b": len(results) + 1}
    return "text", f"The total is {total}."


def _number_in(text: str) -> int:
    """The first integer of a tool's output (a shell's output may end in a newline)."""
    found = re.search(r"-?\d+", text)
    return int(found.group()) if found else 0


def plan_anthropic(messages: list[dict[str, Any]]) -> tuple[str, Any]:
    n = _task_n(_task_of(messages))
    results = [
        _number_in(_text_of(block["content"]))
        for m in messages
        if isinstance(m.get("content"), list)
        for block in m["content"]
        if isinstance(block, dict) and block.get("type") == "tool_result"
    ]
    total = results[-1] if results else 0
    if len(results) < n:
        return "tool", {"a": total, "b": len(results) + 1}
    return "text", f"The total is {total}."


class QuietServer(ThreadingHTTPServer):
    """A threading HTTP server whose handler threads never keep a test alive."""

    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client closing its connection after the last event is not an error


class Served:
    """A fake's lifecycle: its ``_server`` (a ``QuietServer`` on 127.0.0.1) is served in a
    thread from ``start()`` to ``stop()``; ``base_url`` is ``http://127.0.0.1:PORT``."""

    _server: QuietServer
    _thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> Self:
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(5)


class FakeServer(Served):
    """Start with ``start()``, stop with ``stop()``; ``base_url`` is ``http://127.0.0.1:PORT``."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def setup(self) -> None:
                super().setup()
                # small header/body writes must not wait for delayed ACKs (40 ms each)
                self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                if "json" in self.headers.get("content-type", "json"):
                    body = json.loads(raw or b"{}")
                else:
                    body = {"raw": raw.decode("utf-8", "replace")}
                server.requests.append(
                    {"path": self.path, "headers": dict(self.headers), "body": body}
                )
                path = self.path.split("?")[0]
                if body.get("fail"):
                    self._json({"error": {"message": "no such model", "type": "x"}}, 404)
                elif path.endswith("/chat/completions"):
                    self._chat(body)
                elif path.endswith("/v1/messages"):
                    self._messages(body)
                elif path.endswith("/responses"):
                    self._responses(body)
                elif path.endswith("/embeddings"):
                    self._json(
                        {
                            "object": "list",
                            "model": body["model"],
                            "data": [
                                {
                                    "object": "embedding",
                                    "index": 0,
                                    "embedding": [0.5, -0.25, 0.125],
                                }
                            ],
                            "usage": {"prompt_tokens": 1, "total_tokens": 1},
                        }
                    )
                elif path.endswith("/completions"):
                    self._json(
                        {
                            "id": "cmpl-1",
                            "object": "text_completion",
                            "created": 1,
                            "model": body["model"],
                            "choices": [
                                {
                                    "index": 0,
                                    "text": "ok",
                                    "finish_reason": "stop",
                                    "logprobs": None,
                                }
                            ],
                        }
                    )
                elif path.endswith("/echo"):
                    self._json({"echo": body})
                else:
                    self._json({"error": {"message": "not found", "type": "x"}}, 404)

            def _json(self, data: Any, status: int = 200) -> None:
                raw = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def _sse(self, events: list[tuple[str | None, str]]) -> None:
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                for name, data in events:
                    text = (f"event: {name}\n" if name else "") + f"data: {data}\n\n"
                    raw = text.encode()
                    self.wfile.write(f"{len(raw):x}\r\n".encode() + raw + b"\r\n")
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")

            def _chat(self, body: dict[str, Any]) -> None:
                kind, value = plan_openai(body["messages"])
                tool = "add"
                if kind == "call":
                    kind, (tool, value) = "tool", value
                forced = _forced_tool(body)
                if forced is not None:  # structured output through a forced tool (instructor)
                    kind, tool, value = "tool", forced[0], _fill(forced[1])
                pieces = None
                if kind == "echo":
                    kind, pieces = "text", [value[i : i + 7] for i in range(0, len(value), 7)]
                if body.get("response_format"):
                    kind, value = "text", json.dumps({"answer": 42})
                if _task_of(body["messages"]).startswith("show header "):
                    # a server that echoes a request header (an error page quoting the key)
                    header = _task_of(body["messages"]).removeprefix("show header ")
                    kind, value = "text", f"you sent {self.headers.get(header)}"
                step = len(body["messages"])
                base = {"id": f"chatcmpl-{step}", "created": 1700000000, "model": body["model"]}
                if kind == "tool":
                    call = {
                        "id": f"call_{step}",
                        "type": "function",
                        "function": {"name": tool, "arguments": json.dumps(value)},
                    }
                    message: dict[str, Any] = {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [call],
                    }
                    finish = "tool_calls"
                else:
                    message = {"role": "assistant", "content": value}
                    finish = "stop"
                if not body.get("stream"):
                    self._json(
                        {
                            **base,
                            "object": "chat.completion",
                            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                            "usage": {
                                "prompt_tokens": step,
                                "completion_tokens": 1,
                                "total_tokens": step + 1,
                            },
                        }
                    )
                    return
                chunk = {**base, "object": "chat.completion.chunk"}
                deltas: list[dict[str, Any]] = [{"role": "assistant", "content": None}]
                if kind == "tool":
                    args = call["function"]["arguments"]
                    deltas.append(
                        {
                            "tool_calls": [
                                {
                                    "index": 0,
                                    "id": call["id"],
                                    "type": "function",
                                    "function": {"name": tool, "arguments": args[:5]},
                                }
                            ]
                        }
                    )
                    deltas.append(
                        {"tool_calls": [{"index": 0, "function": {"arguments": args[5:]}}]}
                    )
                elif pieces is not None:
                    deltas += [{"content": piece} for piece in pieces]
                else:
                    words = value.split(" ")
                    deltas += [
                        {"content": w + (" " if i < len(words) - 1 else "")}
                        for i, w in enumerate(words)
                    ]
                events = [
                    (
                        None,
                        json.dumps(
                            {**chunk, "choices": [{"index": 0, "delta": d, "finish_reason": None}]}
                        ),
                    )
                    for d in deltas
                ]
                events.append(
                    (
                        None,
                        json.dumps(
                            {
                                **chunk,
                                "choices": [{"index": 0, "delta": {}, "finish_reason": finish}],
                            }
                        ),
                    )
                )
                if (body.get("stream_options") or {}).get("include_usage"):
                    usage = {
                        "prompt_tokens": step,
                        "completion_tokens": 1,
                        "total_tokens": step + 1,
                    }
                    events.append((None, json.dumps({**chunk, "choices": [], "usage": usage})))
                events.append((None, "[DONE]"))
                self._sse(events)

            def _messages(self, body: dict[str, Any]) -> None:
                kind, value = plan_anthropic(body["messages"])
                step = len(body["messages"])
                usage = {"input_tokens": step, "output_tokens": 1}
                if kind == "tool":
                    tools = {tool.get("name") for tool in body.get("tools") or ()}
                    name = "add"
                    if "Bash" in tools and "add" not in tools:  # a coding agent's shell
                        name = "Bash"
                        value = {
                            "command": f"echo $(({value['a']} + {value['b']}))",
                            "description": "Add two numbers",
                        }
                    block: dict[str, Any] = {
                        "type": "tool_use",
                        "id": f"toolu_{step}",
                        "name": name,
                        "input": value,
                    }
                    stop = "tool_use"
                else:
                    block = {"type": "text", "text": value}
                    stop = "end_turn"
                message = {
                    "id": f"msg_{step}",
                    "type": "message",
                    "role": "assistant",
                    "model": body["model"],
                    "content": [block],
                    "stop_reason": stop,
                    "stop_sequence": None,
                    "usage": usage,
                }
                if not body.get("stream"):
                    self._json(message)
                    return
                start = {**message, "content": [], "stop_reason": None}
                events: list[tuple[str | None, str]] = [
                    ("message_start", json.dumps({"type": "message_start", "message": start})),
                    ("ping", json.dumps({"type": "ping"})),
                ]
                if kind == "tool":
                    args = json.dumps(value)
                    first = {**block, "input": {}}
                    parts = [
                        {"type": "input_json_delta", "partial_json": args[:5]},
                        {"type": "input_json_delta", "partial_json": args[5:]},
                    ]
                else:
                    first = {"type": "text", "text": ""}
                    words = value.split(" ")
                    parts = [
                        {"type": "text_delta", "text": w + (" " if i < len(words) - 1 else "")}
                        for i, w in enumerate(words)
                    ]
                events.append(
                    (
                        "content_block_start",
                        json.dumps(
                            {"type": "content_block_start", "index": 0, "content_block": first}
                        ),
                    )
                )
                events += [
                    (
                        "content_block_delta",
                        json.dumps({"type": "content_block_delta", "index": 0, "delta": p}),
                    )
                    for p in parts
                ]
                events.append(
                    ("content_block_stop", json.dumps({"type": "content_block_stop", "index": 0}))
                )
                events.append(
                    (
                        "message_delta",
                        json.dumps(
                            {
                                "type": "message_delta",
                                "delta": {"stop_reason": stop, "stop_sequence": None},
                                "usage": {"output_tokens": 1},
                            }
                        ),
                    )
                )
                events.append(("message_stop", json.dumps({"type": "message_stop"})))
                self._sse(events)

            def _responses(self, body: dict[str, Any]) -> None:
                if body.get("tools"):
                    self._responses_agent(body)
                    return
                text = f"echo: {_text_of(body.get('input'))}"
                response = {
                    "id": "resp_1",
                    "object": "response",
                    "created_at": 1,
                    "model": body["model"],
                    "status": "completed",
                    "output": [
                        {
                            "type": "message",
                            "id": "msg_1",
                            "role": "assistant",
                            "status": "completed",
                            "content": [{"type": "output_text", "text": text, "annotations": []}],
                        }
                    ],
                    "parallel_tool_calls": True,
                    "tool_choice": "auto",
                    "tools": [],
                }
                if not body.get("stream"):
                    self._json(response)
                    return
                self._sse(
                    [
                        (
                            "response.created",
                            json.dumps(
                                {
                                    "type": "response.created",
                                    "sequence_number": 0,
                                    "response": {**response, "output": [], "status": "in_progress"},
                                }
                            ),
                        ),
                        (
                            "response.output_item.added",
                            json.dumps(
                                {
                                    "type": "response.output_item.added",
                                    "sequence_number": 1,
                                    "output_index": 0,
                                    "item": {**response["output"][0], "content": []},
                                }
                            ),
                        ),
                        (
                            "response.content_part.added",
                            json.dumps(
                                {
                                    "type": "response.content_part.added",
                                    "sequence_number": 1,
                                    "item_id": "msg_1",
                                    "output_index": 0,
                                    "content_index": 0,
                                    "part": {"type": "output_text", "text": "", "annotations": []},
                                }
                            ),
                        ),
                        (
                            "response.output_text.delta",
                            json.dumps(
                                {
                                    "type": "response.output_text.delta",
                                    "sequence_number": 1,
                                    "item_id": "msg_1",
                                    "output_index": 0,
                                    "content_index": 0,
                                    "delta": text,
                                    "logprobs": [],
                                }
                            ),
                        ),
                        (
                            "response.completed",
                            json.dumps(
                                {
                                    "type": "response.completed",
                                    "sequence_number": 2,
                                    "response": response,
                                }
                            ),
                        ),
                    ]
                )

            def _responses_agent(self, body: dict[str, Any]) -> None:
                """A Responses API agent turn: call ``add`` or answer, as ``plan_responses``."""
                items = body["input"]
                if isinstance(items, str):
                    items = [{"role": "user", "content": items}]
                kind, value = plan_responses(items)
                step = len(items)
                if kind == "tool":
                    name = "add"
                    tools = {tool.get("name") for tool in body["tools"]}
                    if "exec_command" in tools and "add" not in tools:  # a coding agent's shell
                        name, value = (
                            "exec_command",
                            {"cmd": f"echo $(({value['a']} + {value['b']}))"},
                        )
                    item: dict[str, Any] = {
                        "type": "function_call",
                        "id": f"fc_{step}",
                        "call_id": f"call_{step}",
                        "name": name,
                        "arguments": json.dumps(value),
                        "status": "completed",
                    }
                else:
                    item = {
                        "type": "message",
                        "id": f"msg_{step}",
                        "role": "assistant",
                        "status": "completed",
                        "content": [{"type": "output_text", "text": value, "annotations": []}],
                    }
                response = {
                    "id": f"resp_{step}",
                    "object": "response",
                    "created_at": 1,
                    "model": body["model"],
                    "status": "completed",
                    "output": [item],
                    "parallel_tool_calls": True,
                    "tool_choice": "auto",
                    "tools": body["tools"],
                    "usage": {
                        "input_tokens": step,
                        "output_tokens": 1,
                        "total_tokens": step + 1,
                        "input_tokens_details": {"cached_tokens": 0},
                        "output_tokens_details": {"reasoning_tokens": 0},
                    },
                }
                if not body.get("stream"):
                    self._json(response)
                    return
                started = {**item, "arguments": ""} if kind == "tool" else {**item, "content": []}
                if kind == "tool":
                    delta = {
                        "type": "response.function_call_arguments.delta",
                        "item_id": item["id"],
                        "output_index": 0,
                        "delta": item["arguments"],
                    }
                else:
                    delta = {
                        "type": "response.output_text.delta",
                        "item_id": item["id"],
                        "output_index": 0,
                        "content_index": 0,
                        "delta": value,
                        "logprobs": [],
                    }
                events = [
                    {
                        "type": "response.created",
                        "response": {**response, "output": [], "status": "in_progress"},
                    },
                    {"type": "response.output_item.added", "output_index": 0, "item": started},
                    delta,
                    {"type": "response.output_item.done", "output_index": 0, "item": item},
                    {"type": "response.completed", "response": response},
                ]
                self._sse(
                    [
                        (e["type"], json.dumps({**e, "sequence_number": i}))
                        for i, e in enumerate(events)
                    ]
                )

        self._server = QuietServer(("127.0.0.1", 0), Handler)
