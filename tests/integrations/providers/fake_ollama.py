"""A fake Ollama server on 127.0.0.1 (standard library only), speaking its native API:
``/api/chat`` (the agent of ``agent_checks``), ``/api/generate`` and ``/api/embed``.

As Ollama answers: compact JSON (Go's encoder); a stream unless the body says
``"stream": false`` (NDJSON, ``application/x-ndjson``, one object a line, the text in pieces,
tool calls whole in one line with ``arguments`` an object, then a ``done: true`` line carrying
the counts and durations); ``prompt_eval_count``/``eval_count`` as the usage. The model
``missing`` is answered Ollama's 404 ``{"error": ...}``.
"""

from __future__ import annotations

from typing import Any

from fakeserver import plan_openai

from .agent_checks import MISSING, FakeModelServer, Reply, compact, json_reply, pieces, usage_for

CREATED_AT = "2025-06-01T12:00:00.000000Z"


def _counts(messages: int) -> dict[str, Any]:
    read, wrote = usage_for(messages)
    return {
        "total_duration": 5_191_566,
        "load_duration": 2_154,
        "prompt_eval_count": read,
        "prompt_eval_duration": 383_809,
        "eval_count": wrote,
        "eval_duration": 4_799_921,
    }


class FakeOllama(FakeModelServer):
    """Ollama's chat, generate and embed endpoints."""

    def answer(self, path: str, body: dict[str, Any]) -> Reply:
        model = body.get("model")
        if model == MISSING:
            return json_reply({"error": f'model "{MISSING}" not found, try pulling it first'}, 404)
        if path == "/api/embed":
            texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
            counts = _counts(len(texts))
            return json_reply(
                {
                    "model": model,
                    "embeddings": [[0.5, -0.25] for _ in texts],
                    "total_duration": counts["total_duration"],
                    "load_duration": counts["load_duration"],
                    "prompt_eval_count": counts["prompt_eval_count"],
                }
            )
        base = {"model": model, "created_at": CREATED_AT}
        if path == "/api/generate":
            text = f"echo: {body.get('prompt')}"
            done = {"response": "", "done": True, "done_reason": "stop", "context": [1, 2, 3]}
            parts = [{**base, "response": p, "done": False} for p in pieces(text)]
            whole = {**base, **done, "response": text, **_counts(1)}
            return self._reply(body, whole, [*parts, {**base, **done, **_counts(1)}])
        if path == "/api/chat":
            return self._chat(body, base)
        return json_reply({"error": "404 page not found"}, 404)

    def _chat(self, body: dict[str, Any], base: dict[str, Any]) -> Reply:
        messages = body["messages"]
        kind, value = plan_openai(messages)
        done = {"done": True, "done_reason": "stop", **_counts(len(messages))}
        if kind == "tool":
            call = {"function": {"name": "add", "arguments": value}}
            message = {"role": "assistant", "content": "", "tool_calls": [call]}
            parts = [{**base, "message": message, "done": False}]
        else:
            message = {"role": "assistant", "content": value}
            parts = [
                {**base, "message": {"role": "assistant", "content": p}, "done": False}
                for p in pieces(value)
            ]
        last = {**base, "message": {"role": "assistant", "content": ""}, **done}
        return self._reply(body, {**base, "message": message, **done}, [*parts, last])

    @staticmethod
    def _reply(body: dict[str, Any], whole: dict[str, Any], lines: list[dict[str, Any]]) -> Reply:
        if body.get("stream", True) is False:
            return Reply(content_type="application/json; charset=utf-8", body=compact(whole))
        return Reply(
            content_type="application/x-ndjson", chunks=[compact(x) + b"\n" for x in lines]
        )
