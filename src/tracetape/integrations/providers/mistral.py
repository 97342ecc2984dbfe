"""Mistral: Chat, Agents and FIM completions and Embeddings (``mistralai`` SDK).

The wire format is OpenAI's (``usage``, ``choices[].message.tool_calls``, SSE ending in
``data: [DONE]``), so the usage and the stream's end are ``providers.openai``'s. What differs:

* Routes: ``/v1/chat/completions`` and ``/v1/agents/completions`` (``messages``; model turns:
  ``role: assistant``), ``/v1/fim/completions`` (a one-shot ``prompt``, and its ``suffix``:
  step 1) and ``/v1/embeddings`` (``input``: step 1). Recognised by path on
  ``api.mistral.ai``; on any other host a path OpenAI shares (chat, FIM as ``completions``,
  embeddings) goes to ``openai``, which reads it the same way.
* Streamed tool calls: Mistral sends each call whole in one delta (its name, its complete
  arguments; the SDK rejects a delta without ``function.name``), several calls of one answer
  in one delta; ``arguments`` may be a JSON text or an object.
* Usage: ``usage.prompt_tokens``/``completion_tokens`` and ``prompt_tokens_details.
  cached_tokens``; streamed, in the last chunk (the one with ``finish_reason``).

Seams: the SDK sends over ``httpx2``, taped at ``Client.send`` (public); no private name.
Tested on ``mistralai`` 3.7.0.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import Ask, Provider, Route, body_of, dig, events_of, integer, json_args, role_in
from .openai import terminal, text, usage


def _call(call: Any) -> Ask:
    return Ask(str(dig(call, "function", "name")), json_args(dig(call, "function", "arguments")))


def asks(out: Mapping[str, Any]) -> list[Ask]:
    """The tool calls an answer asks for: its message's ``tool_calls``, or, streamed, each
    call of the deltas (a delta naming a function starts a call; one without a name, as an
    OpenAI-style server would send, continues the call of its index).

    >>> call = {"index": 0, "function": {"name": "add", "arguments": '{"a": 1}'}}
    >>> asks({"events": [{"data": {"choices": [{"index": 0, "delta": {"tool_calls": [
    ...     call, {**call, "index": 1}]}}]}}, {"text": "[DONE]"}]})
    [Ask(name='add', args={'a': 1}), Ask(name='add', args={'a': 1})]
    """
    body = body_of(out)
    if body is not None:
        calls = dig(body, "choices", 0, "message", "tool_calls") or ()
        return [_call(c) for c in calls if isinstance(c, Mapping)]
    found: list[dict[str, Any]] = []
    latest: dict[tuple[int, int], dict[str, Any]] = {}
    for data in events_of(out):
        for choice in dig(data, "choices") or ():
            for call in dig(choice, "delta", "tool_calls") or ():
                if not isinstance(call, Mapping):
                    continue
                index = (integer(dig(choice, "index")) or 0, integer(call.get("index")) or 0)
                name, args = dig(call, "function", "name"), dig(call, "function", "arguments")
                slot = latest.get(index)
                if name or slot is None:
                    slot = latest[index] = {"name": str(name or ""), "args": args}
                    found.append(slot)
                elif isinstance(args, str):
                    slot["args"] = str(slot["args"] or "") + args
    return [Ask(c["name"], json_args(c["args"])) for c in found]


PROVIDER = Provider(
    name="mistral",
    routes=(
        Route("chat.completions", r"/v1/chat/completions", "messages"),
        Route("agents.completions", r"/v1/agents/completions", "messages"),
        Route("fim.completions", r"/v1/fim/completions", "prompt"),
        Route("embeddings", r"/v1/embeddings", "input"),
    ),
    hosts=("api.mistral.ai",),
    credentials=("authorization",),
    turn=role_in("assistant"),
    instruction_roles=frozenset({"system"}),
    usage=usage,
    asks=asks,
    text=text,
    terminal=terminal,
)
