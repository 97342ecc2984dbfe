"""A fake Cohere v2 API on 127.0.0.1 (standard library only), speaking its wire format:
``/v2/chat`` (the agent of ``agent_checks``), whole or streamed, and ``/v2/embed``.

Streamed as Cohere streams: SSE events named by ``event:`` (``message-start``,
``content-start``, ``content-delta``, ``content-end``, ``tool-plan-delta``,
``tool-call-start``, ``tool-call-delta``, ``tool-call-end``, ``message-end``), each data
naming its ``type`` too, and no ``[DONE]``; a tool call's arguments in two pieces; the usage in
``message-end``'s delta. Usage has ``tokens`` (what the model read: the task and a preamble)
and ``billed_units`` (10 fewer input tokens: the preamble is not billed). The model ``missing``
is answered Cohere's 404.
"""

from __future__ import annotations

import json
from typing import Any

from fakeserver import plan_openai

from .agent_checks import MISSING, FakeModelServer, Reply, json_reply, pieces, sse, usage_for

PLAN = "I will call add with the next number."


def _usage(messages: int) -> dict[str, Any]:
    read, wrote = usage_for(messages)
    return {
        "billed_units": {"input_tokens": read - 10, "output_tokens": wrote},
        "tokens": {"input_tokens": read, "output_tokens": wrote},
    }


class FakeCohere(FakeModelServer):
    """Cohere's v2 chat and embed endpoints."""

    def answer(self, path: str, body: dict[str, Any]) -> Reply:
        if body.get("model") == MISSING:
            message = (
                f"model '{MISSING}' not found, make sure the correct model ID was used and "
                "that you have access to the model."
            )
            return json_reply({"id": "e-1", "message": message}, 404)
        if path == "/v2/embed":
            texts = body.get("texts") or []
            return json_reply(
                {
                    "id": "embed-1",
                    "embeddings": {"float": [[0.5, -0.25] for _ in texts]},
                    "texts": texts,
                    "meta": {"api_version": {"version": "2"}, **_usage(len(texts))},
                    "response_type": "embeddings_by_type",
                }
            )
        if path == "/v2/chat":
            return self._chat(body)
        return json_reply({"message": "Not Found"}, 404)

    def _chat(self, body: dict[str, Any]) -> Reply:
        messages = body["messages"]
        kind, value = plan_openai(messages)
        step = len(messages)
        usage = _usage(step)
        call = {
            "id": f"add_{step}",
            "type": "function",
            "function": {"name": "add", "arguments": json.dumps(value)},
        }
        if kind == "tool":
            message: dict[str, Any] = {"role": "assistant", "tool_plan": PLAN, "tool_calls": [call]}
            finish = "TOOL_CALL"
        else:
            message = {"role": "assistant", "content": [{"type": "text", "text": value}]}
            finish = "COMPLETE"
        if not body.get("stream"):
            answer = {"id": f"chat-{step}", "message": message, "finish_reason": finish}
            return json_reply({**answer, "usage": usage})
        empty = {
            "role": "assistant",
            "content": [],
            "tool_plan": "",
            "tool_calls": [],
            "citations": [],
        }
        events: list[dict[str, Any]] = [
            {"id": f"chat-{step}", "type": "message-start", "delta": {"message": empty}}
        ]
        if kind == "tool":
            args = call["function"]["arguments"]
            start = {**call, "function": {"name": "add", "arguments": ""}}
            events += [
                {"type": "tool-plan-delta", "delta": {"message": {"tool_plan": PLAN}}},
                {
                    "type": "tool-call-start",
                    "index": 0,
                    "delta": {"message": {"tool_calls": start}},
                },
            ]
            events += [
                {
                    "type": "tool-call-delta",
                    "index": 0,
                    "delta": {"message": {"tool_calls": {"function": {"arguments": piece}}}},
                }
                for piece in (args[:5], args[5:])
            ]
            events.append({"type": "tool-call-end", "index": 0})
        else:
            first = {"type": "text", "text": ""}
            events.append(
                {"type": "content-start", "index": 0, "delta": {"message": {"content": first}}}
            )
            events += [
                {
                    "type": "content-delta",
                    "index": 0,
                    "delta": {"message": {"content": {"text": piece}}},
                }
                for piece in pieces(value)
            ]
            events.append({"type": "content-end", "index": 0})
        events.append({"type": "message-end", "delta": {"finish_reason": finish, "usage": usage}})
        return Reply(content_type="text/event-stream", chunks=sse((e["type"], e) for e in events))
