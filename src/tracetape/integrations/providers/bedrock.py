"""AWS Bedrock Runtime: ``converse``, ``converse_stream``, ``invoke_model`` and
``invoke_model_with_response_stream`` (``boto3``/``botocore``, taped at botocore's events by
``integrations.botocore_events``; any other client of the same REST API at its transport).

* Routes: ``/model/{modelId}/converse``, ``/converse-stream``, ``/invoke`` and
  ``/invoke-with-response-stream``; the model id (URL-encoded in the path: ``:`` and ``/``
  included) and the route's last segment are the keyed ``model`` and ``method``.
* Conversation: ``messages`` (model turns: ``role: assistant``), for Converse and for an
  ``invoke`` body that carries one (Anthropic's Messages on Bedrock); another model's
  ``invoke`` body (``inputText``, ``prompt``) is a one-shot call, step 1.
* Streams: the AWS event stream (``framing.AWS``); Converse's ends with ``metadata`` after
  ``messageStop``; ``invoke-with-response-stream`` sends the model's own events as base64
  ``chunk`` payloads (Anthropic's: read decoded).
* Usage: ``usage.inputTokens``/``outputTokens`` with ``cacheReadInputTokens`` and
  ``cacheWriteInputTokens``, which Bedrock counts apart from ``inputTokens`` (all three are
  the input; ``cached`` is the cache read), from the answer or the stream's ``metadata``
  event; an ``invoke`` answer in Anthropic's shape, whole or streamed, as the ``anthropic``
  provider reads it (a stream's ``amazon-bedrock-invocationMetrics`` otherwise).
* Tool calls: ``output.message.content[*].toolUse`` (streamed: ``contentBlockStart``'s
  ``toolUse`` name, then ``contentBlockDelta``'s ``toolUse.input`` pieces, by block index).
* Credentials: SigV4's ``Authorization`` (its key id and signature), ``X-Amz-Security-Token``,
  or a Bedrock API key as ``Authorization: Bearer``; ``X-Amz-Date`` and the User-Agent change
  every call: no header is keyed.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator, Mapping
from typing import Any

from . import Ask, Provider, Route, Usage, body_of, dig, integer, joined, json_args, role_in
from . import anthropic as _anthropic

ROUTES = tuple(
    Route(method, rf"/model/(?P<model>[^/]+)/(?P<method>{method})", "messages")
    for method in ("converse", "converse-stream", "invoke", "invoke-with-response-stream")
)


def _kind(event: Any) -> str | None:
    """An event-stream message's ``:event-type`` (or ``:exception-type``)."""
    headers = event.get("headers") if isinstance(event, Mapping) else None
    if not isinstance(headers, Mapping):
        return None
    kind = headers.get(":event-type") or headers.get(":exception-type")
    return kind if isinstance(kind, str) else None


def _messages(out: Mapping[str, Any]) -> Iterator[tuple[str | None, Any]]:
    """Each stored event-stream message as its type and JSON payload."""
    for event in out.get("events") or ():
        if isinstance(event, Mapping):
            yield _kind(event), event.get("data")


def _chunks(out: Mapping[str, Any]) -> dict[str, Any]:
    """An ``invoke-with-response-stream`` output as the stream of the model's own events
    (each ``chunk``'s base64 ``bytes``, decoded), in the stored form other providers read."""
    events = []
    for kind, data in _messages(out):
        raw = dig(data, "bytes") if kind == "chunk" else None
        if isinstance(raw, str):
            try:
                events.append({"data": json.loads(base64.b64decode(raw))})
            except ValueError:
                continue
    return {"events": events}


def _usage_of(usage: Any) -> Usage | None:
    if not isinstance(usage, Mapping) or "inputTokens" not in usage:
        return None
    parts = [
        integer(usage.get(k))
        for k in ("inputTokens", "cacheReadInputTokens", "cacheWriteInputTokens")
    ]
    counted = [p for p in parts if p is not None]
    return Usage(sum(counted) if counted else None, integer(usage.get("outputTokens")), parts[1])


def _metrics_usage(stream: Mapping[str, Any]) -> Usage | None:
    """The usage Bedrock adds to an invoke stream's last chunk."""
    found = None
    for event in stream["events"]:
        metrics = dig(event, "data", "amazon-bedrock-invocationMetrics")
        if isinstance(metrics, Mapping):
            found = Usage(
                integer(metrics.get("inputTokenCount")),
                integer(metrics.get("outputTokenCount")),
                integer(metrics.get("cacheReadInputTokenCount")),
            )
    return found


def usage(out: Mapping[str, Any]) -> Usage | None:
    """The usage an answer reports: Converse's ``usage`` (a stream's ``metadata`` event), an
    Anthropic-shaped ``invoke`` answer's, whole or streamed."""
    body = body_of(out)
    if body is not None:
        found = _usage_of(body.get("usage"))
        return found if found is not None else _anthropic.usage(out)
    for kind, data in _messages(out):
        if kind == "metadata":
            return _usage_of(dig(data, "usage"))
    stream = _chunks(out)
    return _anthropic.usage(stream) or _metrics_usage(stream)


def asks(out: Mapping[str, Any]) -> list[Ask]:
    """The ``toolUse`` blocks of a Converse answer, whole or assembled from its stream by
    block index; an Anthropic-shaped ``invoke`` answer's ``tool_use`` blocks."""
    body = body_of(out)
    if body is not None:
        content = dig(body, "output", "message", "content")
        if content is None:
            return _anthropic.asks(out)
        return [
            Ask(str(dig(block, "toolUse", "name")), dig(block, "toolUse", "input"))
            for block in content
            if isinstance(dig(block, "toolUse"), Mapping)
        ]
    blocks: dict[int, dict[str, str]] = {}
    for kind, data in _messages(out):
        index = integer(dig(data, "contentBlockIndex")) or 0
        if kind == "contentBlockStart" and isinstance(dig(data, "start", "toolUse"), Mapping):
            blocks[index] = {"name": str(dig(data, "start", "toolUse", "name")), "json": ""}
        elif kind == "contentBlockDelta" and index in blocks:
            blocks[index]["json"] += str(dig(data, "delta", "toolUse", "input") or "")
    if blocks:
        return [
            Ask(b["name"], json_args(b["json"]) if b["json"] else {})
            for _, b in sorted(blocks.items())
        ]
    return _anthropic.asks(_chunks(out))


def text(out: Mapping[str, Any]) -> str | None:
    """A Converse answer's ``text`` blocks, whole or from its stream's deltas; an
    Anthropic-shaped ``invoke`` answer's text."""
    body = body_of(out)
    if body is not None:
        content = dig(body, "output", "message", "content")
        if content is None:
            return _anthropic.text(out)
        return joined(block.get("text") for block in content if isinstance(block, Mapping))
    found = joined(
        dig(data, "delta", "text") for kind, data in _messages(out) if kind == "contentBlockDelta"
    )
    return found if found is not None else _anthropic.text(_chunks(out))


def stream_text(path: tuple[Any, ...]) -> bool:
    """Text and tool-input pieces: the strings under a ``contentBlockDelta``'s ``delta``."""
    return path[:1] == ("delta",)


def terminal(event: Mapping[str, Any]) -> bool:
    """Converse's ``metadata`` (its last event), an exception or error message, or an invoke
    stream's last chunk (Anthropic's ``message_stop``)."""
    headers = event.get("headers")
    if isinstance(headers, Mapping) and headers.get(":message-type") in ("exception", "error"):
        return True
    kind = _kind(event)
    if kind == "metadata":
        return True
    if kind != "chunk":
        return False
    decoded = _chunks({"events": [event]})["events"]
    return bool(decoded) and dig(decoded[0], "data", "type") == "message_stop"


PROVIDER = Provider(
    name="bedrock",
    routes=ROUTES,
    hosts=("amazonaws.com",),
    credentials=("authorization", "x-amz-security-token"),
    noise=frozenset({"requestMetadata"}),  # tags for the invocation logs
    turn=role_in("assistant"),
    instructions=("system",),
    usage=usage,
    asks=asks,
    text=text,
    framing="aws",
    stream_text=stream_text,
    terminal=terminal,
)
