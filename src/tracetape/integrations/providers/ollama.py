"""Ollama: the native ``/api/chat``, ``/api/generate`` and ``/api/embed`` (``ollama`` SDK).

Ollama's OpenAI-compatible ``/v1/chat/completions`` is the ``openai`` provider's.

* Conversation: ``/api/chat``'s ``messages`` (model turns: ``role: assistant``);
  ``/api/generate``'s ``prompt`` is one-shot (step 1, as is ``/api/embed``'s ``input``).
* Noise: ``keep_alive`` (how long the server keeps the model loaded: a resource hint, not a
  decision) is left out of the key.
* Streams: NDJSON (``application/x-ndjson``), one JSON object a line, the last one
  ``done: true``; the server streams unless the body says ``"stream": false`` (the SDK always
  says which, a plain HTTP client may not). An ``error`` line ends a stream too. Streamed text
  is the ``message.content`` (``/api/chat``) or ``response`` (``/api/generate``) pieces, and
  their ``thinking``.
* Usage: ``prompt_eval_count`` (input) and ``eval_count`` (output), on the whole answer or
  the ``done`` line.
* Tool calls: ``message.tool_calls[].function`` (``arguments`` an object); streamed, each
  line carries whole calls.

Seams: the SDK sends over ``httpx``, taped at ``Client.send`` (public); no private name.
Tested on ``ollama`` 0.6.3.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import (
    Ask,
    Provider,
    Route,
    Usage,
    body_of,
    dig,
    events_of,
    integer,
    joined,
    json_args,
    last_usage,
    role_in,
)


def _usage_of(data: Any) -> Usage | None:
    if not isinstance(data, Mapping) or "prompt_eval_count" not in data:
        return None
    return Usage(integer(data.get("prompt_eval_count")), integer(data.get("eval_count")))


def usage(out: Mapping[str, Any]) -> Usage | None:
    """The counts of the whole answer, or of a stream's ``done`` line.

    >>> usage({"events": [{"data": {"done": False}},
    ...                   {"data": {"done": True, "prompt_eval_count": 26, "eval_count": 9}}]})
    Usage(input=26, output=9, cached=None)
    """
    body = body_of(out)
    if body is not None:
        return _usage_of(body)
    return last_usage(_usage_of(data) for data in events_of(out))


def _message_asks(data: Any) -> list[Ask]:
    return [
        Ask(str(dig(c, "function", "name")), json_args(dig(c, "function", "arguments")))
        for c in dig(data, "message", "tool_calls") or ()
        if isinstance(c, Mapping)
    ]


def asks(out: Mapping[str, Any]) -> list[Ask]:
    """The tool calls of an answer, whole or from each line of its stream."""
    body = body_of(out)
    if body is not None:
        return _message_asks(body)
    return [ask for data in events_of(out) for ask in _message_asks(data)]


def text(out: Mapping[str, Any]) -> str | None:
    """The answer's ``message.content`` (chat) or ``response`` (generate), whole or streamed."""
    body = body_of(out)
    return joined(
        dig(data, "message", "content")
        if dig(data, "message") is not None
        else dig(data, "response")
        for data in ([body] if body is not None else events_of(out))
    )


_STREAMED = {("message", "content"), ("message", "thinking"), ("response",), ("thinking",)}


def stream_text(path: tuple[Any, ...]) -> bool:
    """A piece of the streamed answer: ``message.content``, ``response`` (and thinking)."""
    return path in _STREAMED


def terminal(event: Mapping[str, Any]) -> bool:
    """The ``done: true`` line, or an ``error`` line."""
    data = event.get("data")
    return isinstance(data, Mapping) and (data.get("done") is True or "error" in data)


PROVIDER = Provider(
    name="ollama",
    routes=(
        Route("chat", r"/api/chat", "messages"),
        Route("generate", r"/api/generate", "prompt"),
        Route("embed", r"/api/embed", "input"),
    ),
    hosts=("ollama.com",),
    credentials=("authorization",),
    noise=frozenset({"keep_alive"}),
    turn=role_in("assistant"),
    instructions=("system",),
    instruction_roles=frozenset({"system"}),
    usage=usage,
    asks=asks,
    text=text,
    framing="ndjson",
    stream_text=stream_text,
    terminal=terminal,
)
