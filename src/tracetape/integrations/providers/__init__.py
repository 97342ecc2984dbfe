"""The provider table: what each model provider's wire format says, one small module each.

A provider module declares only what that provider knows (``Provider``):

* ``routes``: its model endpoints as the transport sees them, a path pattern each (matched at
  the end of the URL path, behind any prefix) and the body field that carries the
  conversation; a pattern's named groups (``model``, ``method``) are fields the request puts
  in its URL, and join the keyed ``params``;
* ``credentials``: the headers and query parameters its credentials travel in (never keyed,
  never stored; their values are redacted wherever a response echoes them), and ``noise``:
  body fields that never reach the model (who asks, storage, caching, keep-alive), stored
  under the input's ``unkeyed`` field and left out of the key (a tape's match rule ``keep``
  keys them after all);
* ``turn`` and ``chain``: how a request names its conversation, to derive the step (a model
  item of the conversation; the id of an earlier answer the request continues);
* ``instructions`` and ``instruction_roles``: where a request keeps its system instructions
  (body fields, and the roles of conversation items that carry them), and ``user``: which
  conversation items are the user's own turns (not a tool's result); a diff names a changed
  request's cause from them (``analysis.causes``);
* ``usage``, ``asks``, ``text``, ``answer_id``: what an answer says (its token usage, the
  tool calls it asks for, its text, its id), from the stored output, whole or streamed;
* ``framing``, ``stream_text`` and ``terminal``: how its streams are framed, which strings of
  an event are pieces of one streamed text (redaction reads them assembled), and which event
  ends a stream;
* ``sdk``: its SDK-level fast path, where it has one (``Sdk``), and ``errors``: the base
  errors its SDK re-raises as they are (a miss is typed as them, so the SDK neither wraps nor
  retries it).

The mechanism (installing hooks on import, the wrappers, capture, replay, the miss) lives
once, in ``tracetape.integrations``; adding a provider is one module here (found by its
name: nothing else lists it), plus its tests. Provider modules import no SDK: the table is
read when the hooks are installed.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple
from urllib.parse import unquote

from ...record import call_text

__all__ = [
    "FIRST",
    "Ask",
    "Match",
    "Provider",
    "Route",
    "Sdk",
    "SdkTarget",
    "Usage",
    "answer_of",
    "body_of",
    "events_of",
    "item_field",
    "joined",
    "match_route",
    "modules",
    "parts_text",
    "provider",
    "provider_of",
    "providers",
    "turns",
    "user_turn",
]

# The providers whose wire format others copy come first: a path two providers share goes to
# the first (unless another names the request's host). Every other module of this package is a
# provider too, in name order: adding one needs no line here.
FIRST = ("openai", "anthropic")


class Usage(NamedTuple):
    """Tokens an answer reports: ``input`` (prompt), ``output`` (completion) and ``cached``
    (input tokens read from a cache, counted within ``input`` where the provider does so)."""

    input: int | None = None
    output: int | None = None
    cached: int | None = None

    def stored(self) -> dict[str, int]:
        """The record's ``usage`` field: the counts the answer gave."""
        return {k: v for k, v in self._asdict().items() if v is not None}

    @property
    def total(self) -> int:
        """Input and output tokens (the record's ``tokens``)."""
        return (self.input or 0) + (self.output or 0)


class Ask(NamedTuple):
    """One tool call an answer asks for: the tool's name and its arguments (parsed JSON where
    the provider sends them as a JSON text)."""

    name: str
    args: Any


@dataclass(frozen=True)
class Route:
    """One model endpoint: ``name``, the ``path`` pattern (a regular expression matched at
    the end of the URL path) and the body field holding the ``conversation`` (``None``: the
    request carries none, a one-shot call)."""

    name: str
    path: str
    conversation: str | None = None
    method: str = "POST"

    @functools.cached_property
    def pattern(self) -> re.Pattern[str]:
        """``path`` compiled, on first use: every process that patches reads the table."""
        return re.compile(f"(?:{self.path})/?$")

    def match(self, path: str) -> dict[str, str] | None:
        """The URL fields of ``path`` if this route answers it, else None."""
        found = self.pattern.search(path)
        if found is None:
            return None
        return {k: unquote(v) for k, v in found.groupdict().items() if v is not None}


class SdkTarget(NamedTuple):
    """An SDK resource class whose ``create`` is taped before the SDK builds its request:
    where the class lives (its ``Async`` twin beside it), its route (whose name is also the
    client's attribute path to the resource: ``client.chat.completions``), the request path
    below the client's base URL, the public response type
    a recorded JSON answer is validated into (``None``: the SDK post-processes the answer, so
    replay goes through the transport), the values of a recorded body's (or first event's)
    ``object``/``type`` that say it answers this route, the class a client's attribute
    imports on first read on its way to the resource, where it is not the target's own
    (``client.chat``): replay imports it as it starts; and the public type of a streamed
    answer's events (``None``: a stream replays through the transport), which replay builds
    the SDK's own ``Stream`` of from the recorded events."""

    module: str
    cls: str
    route: str
    path: str
    response: tuple[str, str] | None
    answers: tuple[str, ...] = ()
    via: tuple[str, str] | None = None
    chunk: tuple[str, str] | None = None


class Sdk(NamedTuple):
    """The SDK-level fast path of an openai-style (Stainless-generated) SDK
    (``integrations.stainless``): its package, its sync client class (exported by the
    package; building one warms replay up), its resource targets, and whether its oldest
    supported releases need the retry seam (they retry any exception their HTTP client
    raises: ``BaseClient._calculate_retry_timeout`` is patched, a private name, so that a miss
    leaves at once)."""

    package: str
    client: str
    targets: tuple[SdkTarget, ...]
    retry_seam: bool = False


def _never(_: Any) -> Any:
    return None


def _no_asks(_: Any) -> list[Ask]:
    return []


def joined(pieces: Iterable[Any]) -> str | None:
    """The text pieces of an answer (its parts, or a stream's deltas) as one text; None when
    it has none (an answer of tool calls only).

    >>> joined(["The weather", None, " is fine."]), joined([None])
    ('The weather is fine.', None)
    """
    found = [p for p in pieces if isinstance(p, str)]
    return "".join(found) if found else None


def parts_text(parts: Any, kind: str | None = None) -> str | None:
    """The text of a list of content parts (``{"type": "text", "text": ...}`` or bare
    strings); ``kind``: only parts of that ``type``. A bare string is its own text."""
    if isinstance(parts, str):
        return parts
    if not isinstance(parts, list):
        return None
    return joined(
        p if isinstance(p, str) else p.get("text")
        for p in parts
        if isinstance(p, str)
        or (isinstance(p, Mapping) and (kind is None or p.get("type") == kind))
    )


_TOOL_RESULTS = ("tool_result", "toolResult", "functionResponse", "function_response")


def user_turn(item: Any) -> bool:
    """Whether a conversation item is the user's own turn: a bare string, or an item of role
    ``user`` (any case) that is not a tool's result fed back (Anthropic ``tool_result``
    blocks, Bedrock ``toolResult``, Gemini ``functionResponse`` parts).

    >>> user_turn({"role": "user", "content": "hi"}), user_turn("hi")
    (True, True)
    >>> user_turn({"role": "user", "content": [{"type": "tool_result", "content": "4"}]})
    False
    """
    if isinstance(item, str):
        return True
    role = item_field(item, "role")
    if not isinstance(role, str) or role.lower() != "user":
        return False
    content = item_field(item, "content")
    if content is None:
        content = item_field(item, "parts")
    parts = content if isinstance(content, list) else [content]
    for part in parts:
        if isinstance(part, Mapping) and (
            part.get("type") in _TOOL_RESULTS or any(k in part for k in _TOOL_RESULTS)
        ):
            return False
    return True


@dataclass(frozen=True)
class Provider:
    """What one provider's wire format says (see the module doc)."""

    name: str
    routes: tuple[Route, ...]
    turn: Callable[[Any], bool]
    hosts: tuple[str, ...] = ()
    credentials: tuple[str, ...] = ()
    noise: frozenset[str] = frozenset()
    chain: Callable[[Mapping[str, Any]], str | None] = _never
    instructions: tuple[str, ...] = ()
    instruction_roles: frozenset[str] = frozenset()
    user: Callable[[Any], bool] = user_turn
    answer_id: Callable[[Mapping[str, Any]], str | None] = _never
    usage: Callable[[Mapping[str, Any]], Usage | None] = _never
    asks: Callable[[Mapping[str, Any]], list[Ask]] = _no_asks
    text: Callable[[Mapping[str, Any]], str | None] = _never
    framing: str = "sse"
    stream_text: Callable[[tuple[Any, ...]], bool] = lambda path: "delta" in path
    terminal: Callable[[Mapping[str, Any]], bool] = lambda event: False
    sdk: Sdk | None = None
    errors: tuple[tuple[str, str], ...] = ()

    def route(self, name: str) -> Route:
        """The route called ``name``."""
        return next(r for r in self.routes if r.name == name)


class Match(NamedTuple):
    """A request recognised as a model call: its provider, route and URL fields."""

    provider: Provider
    route: Route
    fields: dict[str, str]

    @property
    def api(self) -> str:
        """``provider.route``, as records name it (``openai.chat.completions``)."""
        return f"{self.provider.name}.{self.route.name}"


@functools.cache
def modules() -> tuple[str, ...]:
    """The provider modules of this package: ``FIRST``, then the others by name."""
    found = sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))
    return (*FIRST, *(name for name in found if name not in FIRST))


@functools.cache
def providers() -> tuple[Provider, ...]:
    """Every provider of the table, in ``modules()`` order."""
    return tuple(importlib.import_module(f"{__name__}.{name}").PROVIDER for name in modules())


@functools.cache
def provider(name: str) -> Provider:
    """The provider called ``name``."""
    for found in providers():
        if found.name == name:
            return found
    raise KeyError(name)


def provider_of(api: str | None) -> Provider | None:
    """The provider of a record's ``api`` (``openai.chat.completions``), None if none.

    >>> provider_of("anthropic.messages").name, provider_of("acme.chat")
    ('anthropic', None)
    """
    if not api:
        return None
    try:
        return provider(api.split(".", 1)[0])
    except KeyError:
        return None


def answer_of(out: Any, api: str | None) -> tuple[str | None, list[str]]:
    """What a stored answer says: its text (None: it has none) and the tool calls it asks for,
    each as ``name(arg=value, …)``: read by its provider's rules (``text``, ``asks``), or, for
    a ``tape.call`` answer, from its ``content``, ``tool`` and ``args``.

    >>> answer_of({"content": "run it", "tool": "pytest", "args": {"k": "x"}}, None)
    ('run it', ['pytest(k="x")'])
    """
    prov = provider_of(api)
    if prov is not None and isinstance(out, Mapping):
        asked = [call_text(a.name, a.args) for a in _safe(prov.asks, out, [])]
        return _safe(prov.text, out, None), asked
    if isinstance(out, str):
        return out, []
    if isinstance(out, Mapping):  # a tape.call answer: its content, and what it asks for
        text = out.get("content")
        tool = out.get("tool")
        calls = [call_text(str(tool), out.get("args"))] if isinstance(tool, str) else []
        if isinstance(text, str) or (text is None and calls):
            return text, calls
        return _json(out), calls
    return (None if out is None else _json(out)), []


def _safe(read: Callable[[Any], Any], out: Mapping[str, Any], default: Any) -> Any:
    try:
        return read(out)
    except Exception:  # an output of another shape: the raw one stays one click away
        return default


def _json(value: Any) -> str:
    import json

    return json.dumps(value, ensure_ascii=False, default=str)


def match_route(method: str, host: str, path: str) -> Match | None:
    """The model route a request goes to, if any: the first provider whose route answers the
    path, unless a later one also answers it and names the request's host.

    >>> match_route("POST", "127.0.0.1", "/v1/chat/completions").api
    'openai.chat.completions'
    >>> match_route("GET", "127.0.0.1", "/v1/chat/completions") is None
    True
    """
    found = _match_route(method, host.lower(), path)  # an agent asks the same few routes
    return None if found is None else found._replace(fields=dict(found.fields))


@functools.lru_cache(maxsize=1024)
def _match_route(method: str, host: str, path: str) -> Match | None:
    first: Match | None = None
    for prov in providers():
        for route in prov.routes:
            if route.method != method:
                continue
            fields = route.match(path)
            if fields is None:
                continue
            found = Match(prov, route, fields)
            if any(host == h or host.endswith("." + h) for h in prov.hosts):
                return found
            if first is None:
                first = found
            break
    return first


# -- helpers for provider modules ------------------------------------------------------------------


def body_of(out: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The JSON body of a stored, not streamed, output."""
    body = out.get("body")
    return body if isinstance(body, Mapping) else None


def events_of(out: Mapping[str, Any]) -> list[Any]:
    """The data of each event of a stored stream (empty for a whole body)."""
    events = out.get("events")
    if not isinstance(events, list):
        return []
    return [e.get("data") for e in events if isinstance(e, Mapping) and "data" in e]


def turns(items: Any, model: Callable[[Any], bool]) -> int:
    """How many model turns a conversation holds: runs of consecutive items ``model`` says
    are the model's (one turn may be several items: a reasoning item and two tool calls).

    >>> conversation = [{"role": "user"}, {"role": "assistant"}, {"role": "tool"}]
    >>> turns(conversation, lambda m: m["role"] == "assistant")
    1
    """
    if not isinstance(items, list):
        return 0
    count, inside = 0, False
    for item in items:
        mine = model(item)
        if mine and not inside:
            count += 1
        inside = mine
    return count


def integer(value: Any) -> int | None:
    """``value`` if it is a token count (an int, not a bool)."""
    return value if type(value) is int else None


def dig(node: Any, *path: Any) -> Any:
    """The value at ``path`` in nested dicts and lists, or None."""
    for step in path:
        if isinstance(step, int):
            node = node[step] if isinstance(node, list) and -len(node) <= step < len(node) else None
        else:
            node = node.get(step) if isinstance(node, Mapping) else None
        if node is None:
            return None
    return node


def json_args(text: Any) -> Any:
    """Tool arguments sent as a JSON text, parsed (the text itself if it is not JSON)."""
    if not isinstance(text, str):
        return text
    import json

    try:
        return json.loads(text)
    except ValueError:
        return text


def item_field(item: Any, name: str) -> Any:
    """A field of a conversation item: a JSON object's, or an SDK model's attribute (an SDK's
    fast path keys the arguments the program passed, its own models among them)."""
    if type(item) is dict or isinstance(item, Mapping):  # a dict without the slower ABC check
        return item.get(name)
    return getattr(item, name, None)


def role_in(*roles: str) -> Callable[[Any], bool]:
    """A ``turn`` rule: items whose ``role`` is one of ``roles``."""
    wanted = frozenset(roles)

    def turn(item: Any) -> bool:
        role = item.get("role") if type(item) is dict else item_field(item, "role")
        return role in wanted

    return turn


def last_usage(candidates: Iterable[Usage | None]) -> Usage | None:
    """The last usage a stream reported (later events carry the final counts)."""
    found = None
    for usage in candidates:
        if usage is not None:
            found = usage
    return found
