"""Anthropic: the Messages API (``anthropic`` SDK).

* Conversation: ``messages`` (model turns: ``role: assistant``).
* Streams: SSE with ``event:`` names, ending in ``message_stop``.
* Usage: ``usage.input_tokens`` (plus ``cache_creation_input_tokens`` and
  ``cache_read_input_tokens``, which Anthropic counts apart: all three are the input) and
  ``output_tokens``; ``cached`` is ``cache_read_input_tokens``. Streamed: ``message_start``'s
  usage, then the last ``message_delta``'s.
* Tool calls: ``tool_use`` content blocks (streamed: ``input_json_delta`` pieces by index).
* SDK fast path (``integrations.stainless``): ``messages.create``, tested on ``anthropic``
  2.14.0 (and 0.40.0, the oldest); ``messages.stream`` and the beta resources are taped at
  the transport.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import (
    Ask,
    Provider,
    Route,
    Sdk,
    SdkTarget,
    Usage,
    body_of,
    dig,
    events_of,
    integer,
    joined,
    json_args,
    parts_text,
    role_in,
)


def _usage_of(usage: Any, before: Usage | None = None) -> Usage | None:
    if not isinstance(usage, Mapping):
        return before
    parts = [
        integer(usage.get(k))
        for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    ]
    counted = [p for p in parts if p is not None]
    found = Usage(
        sum(counted) if counted else None,
        integer(usage.get("output_tokens")),
        parts[2],
    )
    if before is None:
        return found
    return Usage(
        found.input if found.input is not None else before.input,
        found.output if found.output is not None else before.output,
        found.cached if found.cached is not None else before.cached,
    )


def usage(out: Mapping[str, Any]) -> Usage | None:
    """The usage an answer reports, whole or streamed."""
    body = body_of(out)
    if body is not None:
        return _usage_of(body.get("usage"))
    found: Usage | None = None
    for data in events_of(out):
        kind = dig(data, "type")
        if kind == "message_start":
            found = _usage_of(dig(data, "message", "usage"), found)
        elif kind == "message_delta":
            found = _usage_of(dig(data, "usage"), found)
    return found


def asks(out: Mapping[str, Any]) -> list[Ask]:
    """The ``tool_use`` blocks of an answer, whole or assembled from a stream."""
    body = body_of(out)
    if body is not None:
        return [
            Ask(str(block.get("name")), block.get("input"))
            for block in body.get("content") or ()
            if isinstance(block, Mapping) and block.get("type") == "tool_use"
        ]
    blocks: dict[int, dict[str, Any]] = {}
    for data in events_of(out):
        kind, index = dig(data, "type"), integer(dig(data, "index"))
        if kind == "content_block_start" and dig(data, "content_block", "type") == "tool_use":
            name = str(dig(data, "content_block", "name"))
            blocks[index or 0] = {"name": name, "json": ""}
        elif kind == "content_block_delta" and (index or 0) in blocks:
            blocks[index or 0]["json"] += str(dig(data, "delta", "partial_json") or "")
    return [
        Ask(b["name"], json_args(b["json"]) if b["json"] else {}) for _, b in sorted(blocks.items())
    ]


def text(out: Mapping[str, Any]) -> str | None:
    """The ``text`` blocks of an answer, whole or its stream's ``text_delta`` pieces."""
    body = body_of(out)
    if body is not None:
        return parts_text(body.get("content"), "text")
    return joined(
        dig(data, "delta", "text")
        for data in events_of(out)
        if dig(data, "type") == "content_block_delta" and dig(data, "delta", "type") == "text_delta"
    )


def terminal(event: Mapping[str, Any]) -> bool:
    """``message_stop``, or an ``error`` event."""
    kind = dig(event, "data", "type")
    return event.get("event") in ("message_stop", "error") or kind in ("message_stop", "error")


PROVIDER = Provider(
    name="anthropic",
    routes=(Route("messages", r"/v1/messages", "messages"),),
    hosts=("api.anthropic.com",),
    credentials=("x-api-key", "authorization"),
    # who asks (Claude Code: a fresh session id in ``user_id`` on every request)
    noise=frozenset({"metadata"}),
    turn=role_in("assistant"),
    instructions=("system",),
    usage=usage,
    asks=asks,
    text=text,
    terminal=terminal,
    errors=(("anthropic", "AnthropicError"),),
    sdk=Sdk(
        "anthropic",
        "Anthropic",
        (
            SdkTarget(
                "anthropic.resources.messages",
                "Messages",
                "messages",
                "v1/messages",
                ("anthropic.types", "Message"),
                ("message", "message_start"),
                chunk=("anthropic.types", "RawMessageStreamEvent"),
            ),
        ),
        retry_seam=True,
    ),
)
