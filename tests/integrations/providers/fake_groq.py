"""A fake Groq API on 127.0.0.1 (standard library only), speaking its wire format:
``/openai/v1/chat/completions`` (the agent of ``agent_checks``), whole or streamed, and
``/openai/v1/embeddings``.

As Groq answers: OpenAI's chat format plus ``x_groq`` (the request id; streamed, the last
chunk's ``x_groq.usage`` carries the usage, ``usage`` itself only with ``stream_options.
include_usage``), each tool call whole in one delta, ``data: [DONE]`` at the end. The model
``missing`` is answered Groq's 404 ``model_not_found``.
"""

from __future__ import annotations

import json
from typing import Any

from fakeserver import plan_openai

from .agent_checks import MISSING, FakeModelServer, Reply, json_reply, pieces, sse, usage_for

CREATED = 1750000000


def _usage(messages: int) -> dict[str, Any]:
    prompt, completion = usage_for(messages)
    return {
        "queue_time": 0.01,
        "prompt_tokens": prompt,
        "prompt_time": 0.002,
        "completion_tokens": completion,
        "completion_time": 0.004,
        "total_tokens": prompt + completion,
        "total_time": 0.006,
    }


class FakeGroq(FakeModelServer):
    """Groq's chat completions and embeddings endpoints."""

    def answer(self, path: str, body: dict[str, Any]) -> Reply:
        if body.get("model") == MISSING:
            message = f"The model `{MISSING}` does not exist or you do not have access to it."
            error = {"message": message, "type": "invalid_request_error", "code": "model_not_found"}
            return json_reply({"error": error}, 404)
        if path == "/openai/v1/embeddings":
            texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
            return json_reply(
                {
                    "object": "list",
                    "data": [
                        {"object": "embedding", "embedding": [0.5, -0.25], "index": i}
                        for i in range(len(texts))
                    ],
                    "model": body["model"],
                    "usage": {"prompt_tokens": len(texts), "total_tokens": len(texts)},
                }
            )
        if path == "/openai/v1/chat/completions":
            return self._chat(body)
        return json_reply({"error": {"message": "Unknown request URL", "type": "x"}}, 404)

    def _chat(self, body: dict[str, Any]) -> Reply:
        messages = body["messages"]
        kind, value = plan_openai(messages)
        step = len(messages)
        request_id = f"req_{step:026d}"
        base = {"id": f"chatcmpl-{step:08d}", "created": CREATED, "model": body["model"]}
        if kind == "tool":
            call = {
                "id": f"call_{step:04d}",
                "type": "function",
                "function": {"name": "add", "arguments": json.dumps(value)},
            }
            message: dict[str, Any] = {"role": "assistant", "tool_calls": [call]}
            finish = "tool_calls"
        else:
            message = {"role": "assistant", "content": value}
            finish = "stop"
        usage = _usage(step)
        if not body.get("stream"):
            choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": finish}
            return json_reply(
                {
                    **base,
                    "object": "chat.completion",
                    "choices": [choice],
                    "usage": usage,
                    "usage_breakdown": None,
                    "system_fingerprint": "fp_1234567890",
                    "x_groq": {"id": request_id},
                    "service_tier": "on_demand",
                }
            )
        chunk = {**base, "object": "chat.completion.chunk", "system_fingerprint": "fp_1234567890"}

        def event(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> Any:
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
            return None, {**chunk, "choices": [choice], **extra}

        events = [event({"role": "assistant", "content": ""}, x_groq={"id": request_id})]
        if kind == "tool":
            events.append(event({"tool_calls": [{**call, "index": 0}]}))
        else:
            events += [event({"content": piece}) for piece in pieces(value)]
        events.append(event({}, finish, x_groq={"id": request_id, "usage": usage}))
        if (body.get("stream_options") or {}).get("include_usage"):
            events.append((None, {**chunk, "choices": [], "usage": usage}))
        events.append((None, "[DONE]"))
        return Reply(content_type="text/event-stream", chunks=sse(events))
