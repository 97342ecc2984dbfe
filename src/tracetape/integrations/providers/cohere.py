"""Cohere: the v2 Chat and Embed APIs (``cohere`` SDK, ``ClientV2``/``AsyncClientV2``).

* Conversation: ``/v2/chat``'s ``messages`` (model turns: ``role: assistant``); ``/v2/embed``
  carries none (its ``texts``: step 1).
* Streams: SSE with ``event:`` names (``message-start``, ``content-start``/``-delta``/``-end``,
  ``tool-plan-delta``, ``tool-call-start``/``-delta``/``-end``, ``citation-*``,
  ``message-end``), each data naming its ``type`` too, and no ``[DONE]``: ``message-end``
  ends the stream. Streamed text is the ``delta``'s ``text``, ``tool_plan`` and tool
  ``arguments`` pieces.
* Usage: ``usage.tokens.input_tokens``/``output_tokens`` (the tokens the model read and wrote;
  ``usage.billed_units`` when they are absent), and ``usage.cached_tokens``; streamed, in
  ``message-end``'s ``delta.usage``; Embed's in ``meta``, the same shape. The API's
  schema types the counts as numbers: a whole float counts.
* Tool calls: ``message.tool_calls`` (``function.arguments`` a JSON text); streamed, a
  ``tool-call-start`` names the call and its ``tool-call-delta`` pieces carry the arguments.

Seams: the SDK sends over ``httpx``, taped at ``Client.send`` (public); no private name.
Tested on ``cohere`` 7.3.1.
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
    joined,
    json_args,
    parts_text,
    role_in,
)


def _count(value: Any) -> int | None:
    if type(value) is int:
        return value
    if type(value) is float and value.is_integer():
        return int(value)
    return None


def _usage_of(usage: Any) -> Usage | None:
    """Chat's ``usage`` or Embed's ``meta``: ``tokens``, else ``billed_units``."""
    if not isinstance(usage, Mapping):
        return None
    counts = usage.get("tokens")
    if not isinstance(counts, Mapping):
        counts = usage.get("billed_units")
    if not isinstance(counts, Mapping):
        counts = {}
    found = Usage(
        _count(counts.get("input_tokens")),
        _count(counts.get("output_tokens")),
        _count(usage.get("cached_tokens")),
    )
    return None if found == Usage() else found


def usage(out: Mapping[str, Any]) -> Usage | None:
    """The usage an answer reports: a chat answer's ``usage`` (streamed: ``message-end``'s),
    an embedding's ``meta``.

    >>> usage({"body": {"usage": {"billed_units": {"input_tokens": 5, "output_tokens": 2},
    ...                           "tokens": {"input_tokens": 70, "output_tokens": 2}}}})
    Usage(input=70, output=2, cached=None)
    """
    body = body_of(out)
    if body is not None:
        return _usage_of(body["usage"] if "usage" in body else body.get("meta"))
    for data in events_of(out):
        if dig(data, "type") == "message-end":
            return _usage_of(dig(data, "delta", "usage"))
    return None


def asks(out: Mapping[str, Any]) -> list[Ask]:
    """The tool calls of an answer, whole or assembled from its ``tool-call-*`` events."""
    body = body_of(out)
    if body is not None:
        return [
            Ask(str(dig(c, "function", "name")), json_args(dig(c, "function", "arguments")))
            for c in dig(body, "message", "tool_calls") or ()
            if isinstance(c, Mapping)
        ]
    calls: dict[Any, dict[str, str]] = {}
    for data in events_of(out):
        kind, call = dig(data, "type"), dig(data, "delta", "message", "tool_calls")
        if kind == "tool-call-start":
            name = str(dig(call, "function", "name") or "")
            calls[dig(data, "index")] = {"name": name, "args": ""}
        if kind in ("tool-call-start", "tool-call-delta") and dig(data, "index") in calls:
            pieces = dig(call, "function", "arguments")
            calls[dig(data, "index")]["args"] += pieces if isinstance(pieces, str) else ""
    return [Ask(c["name"], json_args(c["args"]) if c["args"] else {}) for c in calls.values()]


def text(out: Mapping[str, Any]) -> str | None:
    """The ``text`` parts of an answer's message, whole or its stream's ``content-delta``s."""
    body = body_of(out)
    if body is not None:
        return parts_text(dig(body, "message", "content"), "text")
    return joined(
        dig(data, "delta", "message", "content", "text")
        for data in events_of(out)
        if dig(data, "type") == "content-delta"
    )


_STREAMED = frozenset({"text", "thinking", "tool_plan", "arguments"})


def stream_text(path: tuple[Any, ...]) -> bool:
    """A piece of streamed text: a ``text``, ``tool_plan`` or ``arguments`` under ``delta``."""
    return bool(path) and path[0] == "delta" and path[-1] in _STREAMED


def terminal(event: Mapping[str, Any]) -> bool:
    """``message-end`` (the data's ``type``, or the event's name)."""
    return "message-end" in (event.get("event"), dig(event, "data", "type"))


PROVIDER = Provider(
    name="cohere",
    routes=(Route("chat", r"/v2/chat", "messages"), Route("embed", r"/v2/embed")),
    hosts=("api.cohere.com", "api.cohere.ai"),
    credentials=("authorization",),
    turn=role_in("assistant"),
    instruction_roles=frozenset({"system"}),
    usage=usage,
    asks=asks,
    text=text,
    stream_text=stream_text,
    terminal=terminal,
)
