"""OpenAI: Chat Completions, Responses, legacy Completions and Embeddings (``openai`` SDK).

Also the wire format of every OpenAI-compatible server (vLLM, LM Studio, OpenRouter, Azure's
``/openai/deployments/D/chat/completions``): they are recognised by path, whatever the host,
and the ``mistral`` and ``groq`` modules reuse what is declared here.

* Conversation: Chat's ``messages`` (model turns: ``role: assistant``); Responses' ``input``
  (model turns: assistant messages, ``reasoning`` items and ``*_call`` items), continued from an
  earlier answer by ``previous_response_id`` or a stored ``conversation``. Completions'
  ``prompt`` and Embeddings' ``input`` carry no conversation (one-shot: step 1).
* Streams: SSE ending in ``data: [DONE]`` (Chat) or ``response.completed`` (Responses).
* Usage: ``usage.prompt_tokens``/``completion_tokens`` and ``prompt_tokens_details.
  cached_tokens`` (Chat, Completions; a stream's last chunk with ``stream_options.
  include_usage``), ``usage.input_tokens``/``output_tokens`` and ``input_tokens_details.
  cached_tokens`` (Responses, in ``response.completed`` when streamed).
* SDK fast path (``integrations.stainless``): ``chat.completions``, ``responses``,
  ``completions`` and ``embeddings``, tested on ``openai`` 3.57.0 (and 1.109.1, the oldest).
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
    item_field,
    joined,
    json_args,
    last_usage,
    parts_text,
)

ROUTES = (
    Route("chat.completions", r"/chat/completions", "messages"),
    Route("responses", r"/responses", "input"),
    Route("completions", r"/completions", "prompt"),
    Route("embeddings", r"/embeddings", "input"),
)


def turn(item: Any) -> bool:
    """A model item of a Chat or Responses conversation."""
    if type(item) is dict:  # the common case, read directly (this runs on every item)
        kind, role = item.get("type"), item.get("role")
    else:
        kind, role = item_field(item, "type"), item_field(item, "role")
    if isinstance(kind, str) and (kind == "reasoning" or kind.endswith("_call")):
        return True
    return role == "assistant"


def chain(body: Mapping[str, Any]) -> str | None:
    """The earlier answer a Responses request continues: its ``previous_response_id``, or
    the stored ``conversation`` it adds to."""
    previous = body.get("previous_response_id")
    if isinstance(previous, str):
        return previous
    conversation = body.get("conversation")
    if isinstance(conversation, Mapping):
        conversation = conversation.get("id")
    return f"conversation:{conversation}" if isinstance(conversation, str) else None


def _response(out: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """A Responses answer's ``response`` object, whole or from ``response.completed``."""
    body = body_of(out)
    if body is not None:
        return body if body.get("object") == "response" else None
    for data in events_of(out):
        if isinstance(data, Mapping) and data.get("type") in _DONE:
            response = data.get("response")
            return response if isinstance(response, Mapping) else None
    return None


def answer_id(out: Mapping[str, Any]) -> str | None:
    """The id of a Responses answer (a later request names it ``previous_response_id``)."""
    response = _response(out)
    found = response.get("id") if response is not None else None
    return found if isinstance(found, str) else None


def _usage_of(usage: Any) -> Usage | None:
    if not isinstance(usage, Mapping):
        return None
    if "input_tokens" in usage:  # Responses
        return Usage(
            integer(usage.get("input_tokens")),
            integer(usage.get("output_tokens")),
            integer(dig(usage, "input_tokens_details", "cached_tokens")),
        )
    if "prompt_tokens" not in usage:
        return None
    return Usage(
        integer(usage.get("prompt_tokens")),
        integer(usage.get("completion_tokens")),
        integer(dig(usage, "prompt_tokens_details", "cached_tokens")),
    )


def usage(out: Mapping[str, Any]) -> Usage | None:
    """The usage an answer reports, whole or streamed."""
    body = body_of(out)
    if body is not None:
        return _usage_of(body.get("usage"))
    response = _response(out)
    if response is not None:
        return _usage_of(response.get("usage"))
    return last_usage(
        _usage_of(data.get("usage")) for data in events_of(out) if isinstance(data, Mapping)
    )


def _output_asks(items: Any) -> list[Ask]:
    return [
        Ask(str(item.get("name")), json_args(item.get("arguments")))
        for item in items or ()
        if isinstance(item, Mapping) and item.get("type") == "function_call"
    ]


def _message_asks(message: Any) -> list[Ask]:
    calls = dig(message, "tool_calls") or []
    found = [
        Ask(str(dig(c, "function", "name")), json_args(dig(c, "function", "arguments")))
        for c in calls
        if isinstance(c, Mapping)
    ]
    legacy = dig(message, "function_call")
    if isinstance(legacy, Mapping):
        found.append(Ask(str(legacy.get("name")), json_args(legacy.get("arguments"))))
    return found


def asks(out: Mapping[str, Any]) -> list[Ask]:
    """The tool calls an answer asks for: Chat's ``tool_calls`` (streamed: assembled from the
    deltas by index), Responses' ``function_call`` output items."""
    response = _response(out)
    if response is not None:
        return _output_asks(response.get("output"))
    body = body_of(out)
    if body is not None:
        return _message_asks(dig(body, "choices", 0, "message"))
    calls: dict[tuple[int, int], dict[str, str]] = {}
    done: list[Ask] = []
    for data in events_of(out):
        if not isinstance(data, Mapping):
            continue
        if data.get("type") == "response.output_item.done":
            done += _output_asks([data.get("item")])
        for choice in data.get("choices") or ():
            for call in dig(choice, "delta", "tool_calls") or ():
                if not isinstance(call, Mapping):
                    continue
                index = (integer(dig(choice, "index")) or 0, integer(call.get("index")) or 0)
                slot = calls.setdefault(index, {"name": "", "arguments": ""})
                slot["name"] += str(dig(call, "function", "name") or "")
                slot["arguments"] += str(dig(call, "function", "arguments") or "")
    return done + [Ask(c["name"], json_args(c["arguments"])) for _, c in sorted(calls.items())]


def _output_text(items: Any) -> str | None:
    return joined(
        parts_text(item.get("content"), "output_text")
        for item in items or ()
        if isinstance(item, Mapping) and item.get("type") == "message"
    )


def text(out: Mapping[str, Any]) -> str | None:
    """The answer's text: Chat's message ``content``, Responses' ``output_text`` parts (streamed:
    the deltas, or the completed response)."""
    response = _response(out)
    if response is not None:
        return _output_text(response.get("output"))
    body = body_of(out)
    if body is not None:
        return parts_text(dig(body, "choices", 0, "message", "content"))
    return joined(
        dig(choice, "delta", "content") if isinstance(choice, Mapping) else None
        for data in events_of(out)
        for choice in (dig(data, "choices") or ())
    ) or joined(
        data.get("delta")
        for data in events_of(out)
        if isinstance(data, Mapping) and data.get("type") == "response.output_text.delta"
    )


_DONE = frozenset({"response.completed", "response.failed", "response.incomplete"})


def terminal(event: Mapping[str, Any]) -> bool:
    """``data: [DONE]`` (Chat, Completions) or a Responses stream's final event."""
    if event.get("text") == "[DONE]":
        return True
    data = event.get("data")
    kind = data.get("type") if isinstance(data, Mapping) else None
    return kind in _DONE or kind == "error" or event.get("event") == "error"


# Who asks, and whether and how the answer is stored or cached: nothing the model reads.
NOISE = frozenset(
    {
        "user",
        "metadata",
        "store",
        "prompt_cache_key",
        "prompt_cache_retention",
        "safety_identifier",
        "client_metadata",  # Codex: its session, thread and turn ids
    }
)

PROVIDER = Provider(
    name="openai",
    routes=ROUTES,
    hosts=("api.openai.com", "openai.azure.com"),
    credentials=("authorization", "api-key"),
    noise=NOISE,
    turn=turn,
    instructions=("instructions",),
    instruction_roles=frozenset({"system", "developer"}),
    chain=chain,
    answer_id=answer_id,
    usage=usage,
    asks=asks,
    text=text,
    terminal=terminal,
    errors=(("openai", "OpenAIError"),),
    sdk=Sdk(
        "openai",
        "OpenAI",
        (
            SdkTarget(
                "openai.resources.chat.completions",
                "Completions",
                "chat.completions",
                "chat/completions",
                ("openai.types.chat", "ChatCompletion"),
                ("chat.completion", "chat.completion.chunk"),
                via=("openai.resources.chat", "Chat"),
                chunk=("openai.types.chat", "ChatCompletionChunk"),
            ),
            SdkTarget(
                "openai.resources.responses",
                "Responses",
                "responses",
                "responses",
                ("openai.types.responses", "Response"),
                ("response", "response.created"),
                chunk=("openai.types.responses", "ResponseStreamEvent"),
            ),
            SdkTarget(
                "openai.resources.completions",
                "Completions",
                "completions",
                "completions",
                ("openai.types", "Completion"),
                ("text_completion",),
                chunk=("openai.types", "Completion"),
            ),
            # The SDK asks for base64 embeddings and decodes them: replayed at the transport.
            SdkTarget(
                "openai.resources.embeddings",
                "Embeddings",
                "embeddings",
                "embeddings",
                None,
                ("list",),
            ),
        ),
        retry_seam=True,
    ),
)
