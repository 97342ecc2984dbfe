"""Keying a request the way every hook level and transport does (``capture``'s payload).

A model request (a route of the provider table) is keyed as::

    {"messages": <the conversation field>, "tools": <tool schemas sorted by name>,
     "params": <every other body field, and the fields the URL carries>, "step": <turn>}

whether it is seen by an SDK's fast path (from the method's arguments), at a transport
(from the request's JSON body) or by the proxy, so a cassette recorded at one level replays
at another. Any other request is an ``http`` decision keyed on method, URL without secret
query parameters, and body. Headers are never keyed nor stored; the credentials they carry
are learned by the redactor (``learn_credentials``), so an answer that echoes one is
redacted too.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from functools import cache
from typing import Any, NamedTuple
from urllib.parse import parse_qsl, urlencode

import orjson

from ..record import Decision
from ..tape import Tape
from .providers import Match, match_route, providers
from .state import state_of

__all__ = [
    "Keyed",
    "clean_url",
    "key_request",
    "learn_credentials",
    "llm_payload",
    "model_decision",
    "model_route",
]


class Keyed(NamedTuple):
    """A request, keyed: its decision, and for a model request its route and JSON body."""

    decision: Decision
    match: Match | None = None
    body: Any = None


def _tool_name(tool: Any) -> str:
    if type(tool) is dict or isinstance(tool, Mapping):
        name = tool.get("name")
        if not name:
            function = tool.get("function")
            if type(function) is dict or isinstance(function, Mapping):
                name = function.get("name")
        return str(name or tool.get("type") or "")
    function = getattr(tool, "function", None)
    return str(getattr(tool, "name", None) or getattr(function, "name", None) or "")


def llm_payload(match: Match, body: Mapping[str, Any], step: int) -> dict[str, Any]:
    """The key payload of a model request body: messages, tools sorted by name, params (the
    URL's fields among them), step. The provider's transport noise is left out.

    >>> from tracetape.integrations.providers import match_route
    >>> match = match_route("POST", "h", "/v1/messages")
    >>> llm_payload(match, {"model": "m", "messages": [], "tools": [{"name": "b"},
    ...     {"name": "a"}]}, 3)
    {'messages': [], 'tools': [{'name': 'a'}, {'name': 'b'}], 'params': {'model': 'm'}, 'step': 3}
    """
    noise = match.provider.noise
    params = {k: v for k, v in body.items() if k not in noise} if noise else dict(body)
    conversation = match.route.conversation
    messages = params.pop(conversation, None) if conversation else None
    tools = params.pop("tools", None)
    schemas = sorted(tools, key=_tool_name) if isinstance(tools, list) and tools else []
    if tools and not isinstance(tools, list):
        params["tools"] = tools
    for name, value in match.fields.items():
        params.setdefault(name, value)
    return {"messages": messages, "tools": schemas, "params": params, "step": step}


def model_decision(tape: Tape, match: Match, body: Mapping[str, Any]) -> Keyed:
    """Key a model request: its step from the conversation (``steps``), then the payload."""
    step = state_of(tape).steps.model_step(match, body)
    return Keyed(tape.prepare("llm", llm_payload(match, body, step), finite=True), match, body)


_SECRET_PARAM_WORDS = ("key", "token", "secret", "passw", "signature", "credential")
_SECRET_PARAM_NAMES = frozenset({"sig", "auth", "authorization", "session", "sessionid", "code"})


def _secret_param(name: str) -> bool:
    low = name.lower()
    return low in _SECRET_PARAM_NAMES or any(word in low for word in _SECRET_PARAM_WORDS)


def clean_url(scheme: str, netloc: str, path: str, query: str) -> str:
    """A URL without secret query parameters (``?api_key=``, ``&token=``, ``?key=``...).

    >>> clean_url("https", "h", "/p", "q=1&key=s")
    'https://h/p?q=1'
    """
    kept = [(k, v) for k, v in parse_qsl(query, keep_blank_values=True) if not _secret_param(k)]
    return f"{scheme}://{netloc}{path}" + (f"?{urlencode(kept)}" if kept else "")


def _body_value(content: bytes, content_type: str) -> Any:
    if not content:
        return None
    if "boundary=" in content_type:
        # a multipart body's boundary is random per request: key it as a constant
        boundary = content_type.split("boundary=", 1)[1].split(";", maxsplit=1)[0].strip('"')
        content = content.replace(boundary.encode(), b"BOUNDARY")
    if "json" in content_type or content[:1] in (b"{", b"["):
        try:
            return json.loads(content)
        except ValueError:
            pass
    try:
        return content.decode()
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(content).decode()}


def _json_body(content: bytes) -> Any:
    """A request body's JSON (orjson, twice as fast on a long conversation; the standard
    library for what orjson refuses: NaN, integers beyond 64 bits, UTF-16), else None."""
    if not content:
        return None
    try:
        return orjson.loads(content)
    except ValueError:  # orjson.JSONDecodeError
        pass
    try:
        return json.loads(content)
    except ValueError:
        return None


def model_route(method: str, host: str, path: str) -> Match | None:
    """The provider route of a request, if it is a model request."""
    return match_route(method, host, path) if method == "POST" else None


def key_request(
    tape: Tape,
    method: str,
    url: tuple[str, str, str, str],
    content: bytes,
    content_type: str,
    *,
    match: Match | None = None,
) -> Keyed:
    """Key a request (``url`` as scheme, netloc, path, query): ``llm`` for a model route with
    a JSON object body, else ``http``."""
    scheme, netloc, path, query = url
    if match is None:
        match = model_route(method, netloc.rsplit("@", 1)[-1].split(":", 1)[0], path)
    if match is not None:
        body = _json_body(content)
        if isinstance(body, Mapping):
            return model_decision(tape, match, body)
    payload = {
        "method": method,
        "url": clean_url(scheme, netloc, path, query),
        "body": _body_value(content, content_type),
    }
    return Keyed(tape.prepare("http", payload))


@cache
def _credential_names() -> tuple[frozenset[str], frozenset[str]]:
    names = {c.lower() for p in providers() for c in p.credentials}
    return frozenset(names), frozenset(n for n in names if not n.startswith("x-") and "-" not in n)


_SCHEMES = ("bearer ", "basic ", "token ", "key ")


def learn_credentials(tape: Tape, headers: Mapping[str, str], query: str = "") -> None:
    """Teach ``tape``'s redactor the credentials a request carries (in any provider's
    credential headers, an AWS signature's key id and signature, a ``?key=`` parameter), so a
    response or an error that echoes one is redacted like any secret."""
    names, _ = _credential_names()
    learn = tape.redactor.learn
    for name, value in headers.items():
        low = name.lower()
        if low not in names and low != "x-amz-security-token":
            continue
        text = str(value)
        if text.startswith("AWS4-"):
            for part in text.replace(",", " ").split():
                field_name, _, found = part.partition("=")
                if field_name == "Credential":
                    learn(found.split("/", 1)[0])
                elif field_name == "Signature":
                    learn(found)
            continue
        lowered = text.lower()
        scheme = next((s for s in _SCHEMES if lowered.startswith(s)), "")
        learn(text[len(scheme) :].strip())
    for name, value in parse_qsl(query, keep_blank_values=True):
        if _secret_param(name) and value:
            learn(value)
