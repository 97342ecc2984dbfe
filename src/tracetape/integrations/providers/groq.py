"""Groq: its OpenAI-compatible Chat Completions and Embeddings (``groq`` SDK).

The wire format is OpenAI's, under ``/openai/v1/`` on ``api.groq.com`` (on any other host
the path is the ``openai`` provider's, which reads it the same way): the conversation, the
tool calls and the stream's end (``data: [DONE]``) are ``providers.openai``'s. What differs:

* Usage: ``usage``, as OpenAI's; streamed, Groq reports it in the last chunk's
  ``x_groq.usage`` (and in ``usage`` only when asked with ``stream_options.include_usage``).
* SDK fast path (``integrations.stainless``, the SDK is Stainless-generated like
  ``openai``'s): ``chat.completions`` (``groq.resources.chat.completions.Completions.create``,
  keyword-only, answered by the public ``groq.types.chat.ChatCompletion``). Embeddings go
  through the transport.
* Errors: the SDK retries (twice by default) any exception its HTTP client raises, and wraps
  the last into ``APIConnectionError``: the retry seam (``BaseClient.
  _calculate_retry_timeout``, private) lets a miss leave at once; with ``max_retries=0`` the
  call raises ``APIConnectionError`` and the tape raises the miss when its block exits.

Tested on ``groq`` 1.7.0.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import Provider, Route, Sdk, SdkTarget, Usage, body_of, dig, events_of, last_usage
from . import openai as _openai


def usage(out: Mapping[str, Any]) -> Usage | None:
    """OpenAI's usage; streamed, the last ``usage`` or ``x_groq.usage`` a chunk carries.

    >>> usage({"events": [{"data": {"choices": [], "x_groq": {"id": "req_1", "usage": {
    ...     "prompt_tokens": 12, "completion_tokens": 5}}}}, {"text": "[DONE]"}]})
    Usage(input=12, output=5, cached=None)
    """
    found = _openai.usage(out)
    if found is not None or body_of(out) is not None:
        return found
    # ``x_groq`` holds its usage as a body does: read as one
    return last_usage(_openai.usage({"body": dig(data, "x_groq")}) for data in events_of(out))


PROVIDER = Provider(
    name="groq",
    routes=(
        Route("chat.completions", r"/openai/v1/chat/completions", "messages"),
        Route("embeddings", r"/openai/v1/embeddings", "input"),
    ),
    hosts=("api.groq.com",),
    credentials=("authorization",),
    noise=frozenset({"user", "metadata"}),
    turn=_openai.turn,
    instruction_roles=frozenset({"system", "developer"}),
    usage=usage,
    asks=_openai.asks,
    text=_openai.text,
    terminal=_openai.terminal,
    errors=(("groq", "GroqError"),),
    sdk=Sdk(
        "groq",
        "Groq",
        (
            SdkTarget(
                "groq.resources.chat.completions",
                "Completions",
                "chat.completions",
                "openai/v1/chat/completions",
                ("groq.types.chat", "ChatCompletion"),
                ("chat.completion", "chat.completion.chunk"),
                via=("groq.resources.chat", "Chat"),
                chunk=("groq.types.chat", "ChatCompletionChunk"),
            ),
        ),
        retry_seam=True,
    ),
)
