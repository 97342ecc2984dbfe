"""Google Gen AI: the Gemini API's ``generateContent`` family (``google-genai`` SDK).

Also the Vertex AI paths of the same API (``.../publishers/google/models/M:generateContent``,
a tuned model's ``.../endpoints/E:generateContent``) and the Gemini API's tuned models
(``/tunedModels/M:generateContent``): the model and the method are in the URL path, and join
the keyed ``params`` as ``model`` (``gemini-2.5-flash``, ``tunedModels/M``, ``endpoints/E``)
and ``method`` (``generateContent``, ``streamGenerateContent``...). Any API version prefix
is recognised (``google-genai`` 3.6.1 sends ``/v1/`` by default, earlier ones ``/v1beta/``).

* Conversation: ``contents`` (model turns: ``role: model``). ``countTokens``,
  ``embedContent`` and ``batchEmbedContents`` carry no conversation (one-shot: step 1).
* Credentials: the ``x-goog-api-key`` header (the SDK's), ``?key=`` (REST clients'), and a
  Vertex access token in ``authorization``.
* Streams: ``streamGenerateContent?alt=sse`` answers SSE whose lines end in CRLF (stored with
  ``"eol": "crlf"``), one whole ``GenerateContentResponse`` per event, no ``[DONE]``: the
  stream ends with the event whose candidates all carry a ``finishReason``. A streamed text is
  the candidates' ``text`` parts, event after event (no ``delta``).
* Usage: ``usageMetadata``: ``promptTokenCount`` (plus ``toolUsePromptTokenCount``) is the
  input, ``candidatesTokenCount`` plus ``thoughtsTokenCount`` the output,
  ``cachedContentTokenCount`` the cached part of the input. Streamed: the last event that
  has it (each event carries the counts so far).
* Tool calls: ``functionCall`` parts (``name``, ``args``). A function-call part carries a
  ``thoughtSignature`` the next request must send back byte for byte: it is stored as the
  answer gave it, so the replayed answer gives the program the same one. Vertex's streamed
  ``partialArgs`` are not assembled (the Gemini API sends none).
* No SDK fast path: ``google-genai`` is taped at its transports (``httpx2`` for the sync
  client, ``aiohttp`` for ``client.aio`` when aiohttp is installed); tested on
  ``google-genai`` 3.6.1. The SDK re-raises a miss as it is (no ``errors`` entry needed).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
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
    last_usage,
    role_in,
)

# A model is named in the path as ``models/M`` (the Gemini API; Vertex's
# ``publishers/P/models/M``), ``tunedModels/M`` or Vertex's ``endpoints/E``; only the first
# drops its collection, as the SDK's ``model="gemini-2.5-flash"`` does.
_MODEL = r"(?:/models/|/(?=tunedModels/|endpoints/))(?P<model>(?:tunedModels/|endpoints/)?[^/:]+)"

ROUTES = (
    Route(
        "generate_content",
        _MODEL + r":(?P<method>generateContent|streamGenerateContent)",
        "contents",
    ),
    Route("count_tokens", _MODEL + r":(?P<method>countTokens)"),
    Route("embed_content", _MODEL + r":(?P<method>embedContent|batchEmbedContents)"),
)


def _counts(usage: Any) -> Usage | None:
    if not isinstance(usage, Mapping):
        return None

    def total(*names: str) -> int | None:
        found = [n for n in (integer(usage.get(name)) for name in names) if n is not None]
        return sum(found) if found else None

    return Usage(
        total("promptTokenCount", "toolUsePromptTokenCount"),
        total("candidatesTokenCount", "thoughtsTokenCount"),
        integer(usage.get("cachedContentTokenCount")),
    )


def usage(out: Mapping[str, Any]) -> Usage | None:
    """The usage an answer reports, whole or streamed (the last event that has it)."""
    body = body_of(out)
    if body is not None:
        return _counts(body.get("usageMetadata"))
    return last_usage(_counts(dig(data, "usageMetadata")) for data in events_of(out))


def _function_calls(answers: Iterable[Any]) -> list[Ask]:
    found = []
    for answer in answers:
        for candidate in dig(answer, "candidates") or ():
            for part in dig(candidate, "content", "parts") or ():
                call = dig(part, "functionCall")
                if isinstance(call, Mapping) and call.get("name"):
                    found.append(Ask(str(call["name"]), call.get("args") or {}))
    return found


def asks(out: Mapping[str, Any]) -> list[Ask]:
    """The ``functionCall`` parts of an answer, whole or streamed (each arrives whole)."""
    body = body_of(out)
    return _function_calls([body] if body is not None else events_of(out))


def text(out: Mapping[str, Any]) -> str | None:
    """The first candidate's text parts (not its thoughts), whole or over the stream."""
    body = body_of(out)
    return joined(
        part.get("text")
        for answer in ([body] if body is not None else events_of(out))
        for part in (dig(answer, "candidates", 0, "content", "parts") or ())
        if isinstance(part, Mapping) and not part.get("thought")
    )


def stream_text(path: tuple[Any, ...]) -> bool:
    """A candidate's text part: ``candidates[i].content.parts[j].text``.

    >>> stream_text(("candidates", 0, "content", "parts", 0, "text"))
    True
    """
    return len(path) > 2 and path[0] == "candidates" and path[-1] == "text"


def terminal(event: Mapping[str, Any]) -> bool:
    """The last event of a stream: every candidate finished, the prompt was blocked, or an
    error."""
    data = event.get("data")
    if not isinstance(data, Mapping):
        return False
    if "error" in data or dig(data, "promptFeedback", "blockReason") is not None:
        return True
    candidates = data.get("candidates")
    return (
        isinstance(candidates, list)
        and bool(candidates)
        and all(dig(c, "finishReason") is not None for c in candidates)
    )


PROVIDER = Provider(
    name="gemini",
    routes=ROUTES,
    hosts=("googleapis.com",),  # generativelanguage., REGION-aiplatform.
    credentials=("x-goog-api-key", "key", "authorization"),
    noise=frozenset({"labels"}),  # Vertex AI's billing labels
    turn=role_in("model"),
    instructions=("systemInstruction", "system_instruction"),
    usage=usage,
    asks=asks,
    text=text,
    stream_text=stream_text,
    terminal=terminal,
)
