"""Keying a request the way every hook level and transport does (``capture``'s payload).

A model request (a route of the provider table) is keyed as::

    {"messages": <the conversation field>, "tools": <tool schemas sorted by name>,
     "params": <every other body field, and the fields the URL carries>, "step": <turn>}

and stored with ``"unkeyed": <the body fields its provider calls noise>`` (who asks, storage,
caching: ``Provider.noise``) where it sends any, so a session id a client sends on every
request does not make each replay miss; a tape's match rule ``keep`` keys them after all.
Cassettes keyed before (keys 3) are migrated on replay and by ``tracetape migrate``
(``migrate_noise``).

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
from collections.abc import Collection, Iterable, Mapping
from functools import cache
from typing import Any, NamedTuple
from urllib.parse import parse_qsl, urlencode

import msgspec
import orjson

from ..canonical import canonical_json, field_digests, key_of
from ..formats.cassette import KEYS_VERSION
from ..matching import Match as MatchRules
from ..record import UNKEYED, Decision, Record
from ..tape import Tape
from .providers import Match, match_route, provider_of, providers
from .state import state_of
from .steps import migrate as migrate_steps

__all__ = [
    "Keyed",
    "clean_url",
    "current_keys",
    "key_request",
    "learn_credentials",
    "llm_payload",
    "migrate_noise",
    "model_decision",
    "model_route",
    "unkeyed",
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


def llm_payload(
    match: Match, body: Mapping[str, Any], step: int, keep: Collection[str] = ()
) -> dict[str, Any]:
    """The key payload of a model request body: messages, tools sorted by name, params (the
    URL's fields among them), step. The provider's noise is left out, but for what ``keep``
    names (``unkeyed`` gives it).

    >>> from tracetape.integrations.providers import match_route
    >>> match = match_route("POST", "h", "/v1/messages")
    >>> llm_payload(match, {"model": "m", "messages": [], "tools": [{"name": "b"},
    ...     {"name": "a"}], "metadata": {"user_id": "s-1"}}, 3)
    {'messages': [], 'tools': [{'name': 'a'}, {'name': 'b'}], 'params': {'model': 'm'}, 'step': 3}
    """
    noise = match.provider.noise
    if keep:
        noise = noise.difference(keep)
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


def unkeyed(
    match: Match, body: Mapping[str, Any], keep: Collection[str] = ()
) -> dict[str, Any] | None:
    """The fields of a model request body its provider calls noise, but for what ``keep``
    names: stored, never keyed (None: it sends none).

    >>> from tracetape.integrations.providers import match_route
    >>> match = match_route("POST", "h", "/v1/chat/completions")
    >>> unkeyed(match, {"model": "m", "user": "u-1", "store": True})
    {'user': 'u-1', 'store': True}
    >>> unkeyed(match, {"model": "m", "user": "u-1"}, keep=["user"]) is None
    True
    """
    noise = match.provider.noise
    if not noise or noise.isdisjoint(body):
        return None
    found = {k: v for k, v in body.items() if k in noise and k not in keep}
    return found or None


def model_decision(tape: Tape, match: Match, body: Mapping[str, Any]) -> Keyed:
    """Key a model request: its step from the conversation (``steps``), then the payload,
    its noise stored beside it (``unkeyed``)."""
    step = state_of(tape).steps.model_step(match, body)
    keep = tape.match.keep
    payload = llm_payload(match, body, step, keep)
    noise = unkeyed(match, body, keep)
    return Keyed(tape.prepare("llm", payload, finite=True, unkeyed=noise), match, body)


def migrate_noise(records: Iterable[Record], rules: MatchRules) -> list[Record]:
    """The records of a cassette keyed before the provider table's noise was stored unkeyed
    (keys 3 and before), as they are keyed now: a model request whose ``params`` hold its
    provider's noise (but for what ``rules`` keep) has it moved under ``unkeyed`` and is keyed
    again without it, under ``rules``; every other record is kept as it is. The inputs
    stored are redacted already: the key is of the same text a recording hashes.

    >>> old = Record(kind="llm", key="llm:x", api="anthropic.messages", input={"messages": [],
    ...     "tools": [], "params": {"model": "m", "metadata": {"user_id": "s-1"}}, "step": 1})
    >>> new = migrate_noise([old], MatchRules())[0]
    >>> new.input["params"], new.input["unkeyed"], new.key == key_of("llm", canonical_json(
    ...     {"messages": [], "tools": [], "params": {"model": "m"}, "step": 1}))
    ({'model': 'm'}, {'metadata': {'user_id': 's-1'}}, True)
    """
    out: list[Record] = []
    for rec in records:
        data, known = rec.input, provider_of(rec.api) if rec.kind == "llm" else None
        params = data.get("params") if type(data) is dict and UNKEYED not in data else None
        noise = known.noise.difference(rules.keep) if known is not None else frozenset()
        moved = {k: v for k, v in params.items() if k in noise} if type(params) is dict else {}
        if not moved:
            out.append(rec)
            continue
        assert type(data) is dict and type(params) is dict
        kept = {**data, "params": {k: v for k, v in params.items() if k not in moved}}
        stored = {**kept, UNKEYED: moved}
        out.append(
            msgspec.structs.replace(
                rec,
                key=key_of(rec.kind, canonical_json(rules.keyed(kept))),
                input=stored,
                digests=field_digests(stored),
            )
        )
    return out


def current_keys(tape: Tape) -> None:
    """Make a replaying tape keyed before ``KEYS_VERSION`` keyed as the hooks key today, once,
    before it played anything: steps read from the conversation (``steps.migrate``, keys 1
    and 2) and the provider's noise stored unkeyed (``migrate_noise``, keys 3)."""
    hooks = state_of(tape)
    if not tape.replaying or hooks.migrated:
        return
    hooks.migrated = True
    keys = (tape.header or {}).get("keys", 1)
    keys = keys if type(keys) is int else 1
    if keys >= KEYS_VERSION or tape.matched:
        return
    records = tape.records
    if keys < 3:
        records = migrate_steps(records, since=keys)
    tape.rekey(migrate_noise(records, tape.match))


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
