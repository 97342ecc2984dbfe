"""A fake Mistral API on 127.0.0.1 (standard library only), speaking its wire format:
``/v1/chat/completions`` and ``/v1/agents/completions`` (the agent of ``agent_checks``),
``/v1/fim/completions`` and ``/v1/embeddings``, whole or streamed.

Streamed as Mistral streams: ``data:`` lines of compact JSON ending in ``data: [DONE]``; each
tool call whole in one delta (its ``function.name`` and complete arguments: the SDK rejects a
delta without a name); the usage in the last chunk, the one with ``finish_reason``. The model
``missing`` is answered Mistral's 400 error.
"""

from __future__ import annotations

from typing import Any

from fakeserver import plan_openai

from .agent_checks import MISSING, FakeModelServer, Reply, json_reply, pieces, sse, usage_for

CREATED = 1750000000


def _usage(messages: int) -> dict[str, int]:
    prompt, completion = usage_for(messages)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


class FakeMistral(FakeModelServer):
    """Mistral's chat, agents, FIM and embeddings endpoints."""

    def answer(self, path: str, body: dict[str, Any]) -> Reply:
        if body.get("model") == MISSING:
            return json_reply(
                {
                    "object": "error",
                    "message": f"Invalid model: {MISSING}",
                    "type": "invalid_model",
                    "param": None,
                    "code": "1500",
                },
                400,
            )
        if path == "/v1/embeddings":
            texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
            return json_reply(
                {
                    "id": "embd-1",
                    "object": "list",
                    "data": [
                        {"object": "embedding", "embedding": [0.5, -0.25], "index": i}
                        for i in range(len(texts))
                    ],
                    "model": body["model"],
                    "usage": {**_usage(len(texts)), "completion_tokens": 0},
                }
            )
        if path == "/v1/fim/completions":
            return self._completion(body, [], ("text", f"return a + b  # {body.get('suffix')}"))
        if path in ("/v1/chat/completions", "/v1/agents/completions"):
            return self._completion(body, body["messages"], plan_openai(body["messages"]))
        return json_reply({"object": "error", "message": "Not Found"}, 404)

    def _completion(
        self, body: dict[str, Any], messages: list[Any], plan: tuple[str, Any]
    ) -> Reply:
        kind, value = plan
        step = len(messages)
        base = {
            "id": f"cmpl-{step:032x}",
            "object": "chat.completion",
            "model": body.get("model") or "mistral-medium-2508",
            "created": CREATED,
        }
        usage = _usage(max(step, 1))
        if kind == "tool":
            calls = [
                {
                    "id": f"call{step:05d}",
                    "function": {
                        "name": "add",
                        "arguments": f'{{"a": {value["a"]}, "b": {value["b"]}}}',
                    },
                    "index": 0,
                }
            ]
            message: dict[str, Any] = {"role": "assistant", "content": "", "tool_calls": calls}
            finish = "tool_calls"
        else:
            message = {"role": "assistant", "content": value, "tool_calls": None}
            finish = "stop"
        if not body.get("stream"):
            choice = {"index": 0, "message": {**message, "prefix": False}, "finish_reason": finish}
            return json_reply({**base, "usage": usage, "choices": [choice]})
        chunk = {**base, "object": "chat.completion.chunk"}
        deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
        if kind == "tool":
            last = {"tool_calls": message["tool_calls"]}
        else:
            *first, end = pieces(value)
            deltas += [{"content": piece} for piece in first]
            last = {"content": end}
        events: list[tuple[str | None, Any]] = [
            (None, {**chunk, "choices": [{"index": 0, "delta": d, "finish_reason": None}]})
            for d in deltas
        ]
        end = {"index": 0, "delta": last, "finish_reason": finish}
        events += [(None, {**chunk, "choices": [end], "usage": usage}), (None, "[DONE]")]
        return Reply(content_type="text/event-stream; charset=utf-8", chunks=sse(events))
