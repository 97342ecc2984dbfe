"""The SDK-level fast path of the openai-style SDKs (Stainless-generated: ``openai``,
``anthropic``, ``groq``), from the ``sdk`` entries of the provider table.

Each target resource's ``create`` (and its async twin) is wrapped, so that a call is keyed
before the SDK builds its request (the SDK's own request building costs milliseconds per call)
and, in replay, a recorded JSON answer is validated into the SDK's public response type
(``ChatCompletion``, ``Message``) without running the request pipeline: no request is built
and no socket is opened. A recorded stream is handed back as the SDK's own ``Stream`` of its
event type over the recorded events written back byte for byte (the SDK parses them as a
server's). Everything else a replay must answer (an error status, a raw or streaming
response, an embedding the SDK decodes) goes on to the transport, which replays it the
SDK's own way; a recorded connection failure is raised as the SDK raises it
once its retries are spent (``APIConnectionError``, ``APITimeoutError``).

In record mode the real call runs and the transport taps its HTTP response into this call's
``Capture``: the SDK retries a 429 or 5xx, and only the response the call ends with is
recorded, the same JSON body or events the transport alone would record.

Private names, and the releases they are tested on (``openai`` 3.57.0 and 1.109.1,
``anthropic`` 2.14.0 and 0.40.0, ``groq`` 1.7.0): ``BaseClient._calculate_retry_timeout``, the
retry seam of the oldest releases (they retry any exception their HTTP client raises), and a
resource's ``_client``, read for its public ``base_url`` only, to name the URL of a recorded
connection failure.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import importlib
import sys
import types
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from ..errors import ReplayMiss
from ..record import Record
from ..tape import Tape
from .capture import capture_var, failed, play, rebuilt
from .flow import recording
from .framing import content_type_of, framing_of
from .install import patch_attr
from .keying import Keyed, model_decision
from .providers import Match, Provider, SdkTarget, providers
from .state import resolve_tape, state_of

__all__ = ["REHEARSALS", "patch_client", "patch_package", "patch_resources", "warm_up"]


class _Target(NamedTuple):
    """One wrapped class: the table's target, sync or async, and its route."""

    spec: SdkTarget
    aio: bool
    provider: Provider

    @property
    def match(self) -> Match:
        return _MATCHES[self.spec]

    @property
    def cls(self) -> str:
        return ("Async" if self.aio else "") + self.spec.cls

    @property
    def package(self) -> str:
        return self.provider.sdk.package  # type: ignore[union-attr]


_MATCHES: dict[SdkTarget, Match] = {}


@functools.cache
def _targets() -> tuple[_Target, ...]:
    found = []
    for prov in providers():
        for spec in prov.sdk.targets if prov.sdk is not None else ():
            _MATCHES[spec] = Match(prov, prov.route(spec.route), {})
            found += [_Target(spec, False, prov), _Target(spec, True, prov)]
    return tuple(found)


def _provider(package: str) -> Provider | None:
    return next((p for p in providers() if p.sdk is not None and p.sdk.package == package), None)


@functools.cache
def _type(ref: tuple[str, str]) -> Any:
    return getattr(importlib.import_module(ref[0]), ref[1])


@functools.cache
def _validate(ref: tuple[str, str]) -> Callable[[Any], Any]:
    """The response type's ``model_validate``: its pydantic-core validator itself where the
    SDK's model keeps pydantic's own (the classmethod's checks of its keyword arguments cost
    a sixth of a replayed call's validation)."""
    cls = _type(ref)
    own = getattr(getattr(cls, "model_validate", None), "__func__", None)
    base = sys.modules.get("pydantic")
    validator = getattr(cls, "__pydantic_validator__", None)
    if base is not None and own is base.BaseModel.model_validate.__func__ and validator:
        return validator.validate_python  # type: ignore[no-any-return]
    return cls.model_validate  # type: ignore[no-any-return]


# the SDKs send these arguments as request headers or options, not in the body
_NOT_BODY = frozenset(
    {"extra_headers", "extra_query", "extra_body", "timeout", "user_profile_id", "workspace_id"}
)
_PLAIN = frozenset({str, int, float, bool, type(None), list, tuple, dict})
_UNSET = frozenset({"Omit", "NotGiven"})  # the SDKs' markers of an argument not given


def one_shot(value: Any) -> bool:
    """Whether a call argument is an iterable that may be read only once (a generator, an
    iterator): it is turned into a list, for the key and the real call."""
    return isinstance(value, types.GeneratorType) or (
        hasattr(value, "__next__") and hasattr(value, "__iter__")
    )


def _body(target: _Target, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The JSON body the SDK will send for these arguments. One-shot iterables among the
    arguments become lists on the way, for the real call too."""
    body = {}
    for name, given in kwargs.items():
        kind, value = type(given), given
        if kind not in _PLAIN:
            if kind.__name__ in _UNSET:
                continue
            if one_shot(given):
                value = kwargs[name] = list(given)
        if name not in _NOT_BODY:
            body[name] = value
    extra = kwargs.get("extra_body")
    if extra:
        body.update(extra)
    if target.spec.route == "embeddings" and body.get("encoding_format") is None:
        body["encoding_format"] = "base64"  # what the SDK asks for, and decodes back
    return body


_PASS = object()  # the transport answers this call
_WHOLE = frozenset({"status", "body"})  # a recorded answer of one JSON body, no headers


def _failure(target: _Target, resource: Any, out: Mapping[str, Any]) -> BaseException:
    """A recorded request that got no response, raised as the SDK raises it once its retries
    are spent: ``APITimeoutError`` for a timeout, ``APIConnectionError`` for any other failure
    of its HTTP client, caused by the recorded exception."""
    cause = rebuilt(out)
    flavor = sys.modules.get(type(cause).__module__.split(".", 1)[0])
    sdk = sys.modules.get(target.package)
    if flavor is None or sdk is None or not hasattr(flavor, "Request"):
        return cause
    base = str(getattr(getattr(resource, "_client", None), "base_url", "") or "")
    request = flavor.Request("POST", base.rstrip("/") + "/" + target.spec.path)
    if isinstance(cause, flavor.TimeoutException):
        error: BaseException = sdk.APITimeoutError(request=request)
    elif isinstance(cause, flavor.RequestError):
        error = sdk.APIConnectionError(request=request)
    else:
        return cause
    error.__cause__ = cause
    return error


def _fast(
    tape: Tape, target: _Target, keyed: Keyed, kwargs: Mapping[str, Any], resource: Any
) -> Any:
    """Replay a call here when its recorded answer is a plain JSON body the SDK would only
    validate (or a connection failure); ``_PASS`` for the transport to answer it."""
    streamed = kwargs.get("stream") is True
    if kwargs.get("extra_headers") or (streamed and target.spec.chunk is None):
        return _PASS
    rec = tape.peek(keyed.decision)
    if rec is None or not isinstance(rec.out, dict):
        return _PASS  # a miss, or a key the transport keys differently: it decides
    if failed(rec.out):
        play(tape, keyed)
        raise _failure(target, resource, rec.out)
    if streamed:
        return _stream(tape, target, keyed, rec, resource)
    response = target.spec.response
    if response is None or rec.out.keys() != _WHOLE or rec.out["status"] != 200:
        return _PASS
    try:
        value = _validate(response)(rec.out["body"])
    except ValueError:
        return _PASS  # a body off the schema: the SDK's own lenient parsing builds it
    played = play(tape, keyed)
    if played is not rec:  # another thread played it meanwhile: this call's is the next
        value = _type(response).model_construct(**played.out.get("body", {}))
    return value


def _stream(tape: Tape, target: _Target, keyed: Keyed, rec: Record, resource: Any) -> Any:
    """A recorded stream as the SDK's own ``Stream`` (``AsyncStream``) of its event type,
    over a response that holds the recorded events written back byte for byte: the SDK
    parses them as it parses a server's, and no request is built. ``_PASS`` for anything
    else (an error status, a stream the recorded run abandoned, which the transport ends
    with a miss where it was left, or an SDK whose HTTP library or stream class is not
    found)."""
    out = rec.out
    sdk = sys.modules.get(target.package)
    client = getattr(resource, "_client", None)
    http = _http_library(getattr(client, "_client", None), target.package)
    stream_cls = getattr(sdk, "AsyncStream" if target.aio else "Stream", None)
    if (
        out.get("status") != 200
        or "events" not in out
        or out.get("complete") is False  # abandoned: the transport raises past its end
        or http is None
        or stream_cls is None
        or not hasattr(http, "Response")
    ):
        return _PASS
    played = play(tape, keyed)
    framing = framing_of(played.out)
    base = str(getattr(client, "base_url", "") or "")
    request = http.Request("POST", base.rstrip("/") + "/" + target.spec.path)
    response = http.Response(
        200,
        headers={"content-type": content_type_of(played.out)},
        content=b"".join(framing.encode(played.out)),
        request=request,
    )
    assert target.spec.chunk is not None
    return stream_cls(cast_to=_type(target.spec.chunk), response=response, client=client)


def _http_library(http_client: Any, package: str) -> Any:
    """The HTTP library an SDK's client is built on (``httpx``, or the SDK's own fork of it),
    found from the client's classes (the SDK subclasses the library's client)."""
    for cls in type(http_client).__mro__:
        root = cls.__module__.split(".", 1)[0]
        if root not in (package, "builtins"):
            return sys.modules.get(root)
    return None


def _wrap_create(target: _Target, original: Callable[..., Any]) -> Callable[..., Any]:
    match = target.match  # found once: a call hashes no table entry

    def key(tape: Tape, kwargs: dict[str, Any]) -> Keyed:
        return model_decision(tape, match, _body(target, kwargs))

    if target.aio:

        @functools.wraps(original)
        async def acreate(self: Any, *args: Any, **kwargs: Any) -> Any:
            tape = resolve_tape()
            if tape is None or args or capture_var.get() is not None:
                return await original(self, *args, **kwargs)
            keyed = key(tape, kwargs)
            if tape.replaying:
                value = _fast(tape, target, keyed, kwargs, self)
                return await original(self, **kwargs) if value is _PASS else value
            with recording(tape, keyed):
                return await original(self, **kwargs)

        return acreate

    @functools.wraps(original)
    def create(self: Any, *args: Any, **kwargs: Any) -> Any:
        tape = resolve_tape()
        if tape is None or args or capture_var.get() is not None:
            return original(self, *args, **kwargs)
        keyed = key(tape, kwargs)
        if tape.replaying:
            value = _fast(tape, target, keyed, kwargs, self)
            return original(self, **kwargs) if value is _PASS else value
        with recording(tape, keyed):
            return original(self, **kwargs)

    return create


# -- the installer's watches -----------------------------------------------------------------------


def patch_resources(module: types.ModuleType) -> None:
    """Wrap ``create`` of the target classes ``module`` defines."""
    for target in _targets():
        cls = getattr(module, target.cls, None) if target.spec.module == module.__name__ else None
        if cls is not None and "create" in cls.__dict__:
            patch_attr(cls, "create", _wrap_create(target, cls.__dict__["create"]))


def _no_retry_of_a_miss(original: Callable[..., Any]) -> Callable[..., Any]:
    """``BaseClient._calculate_retry_timeout``, which the SDKs call before a retry: while a
    ``ReplayMiss`` is being handled, raise it instead, so the miss leaves the call at once
    with its diagnosis (current releases re-raise it themselves: ``sdk_compatible_miss``)."""

    @functools.wraps(original)
    def timeout(self: Any, *args: Any, **kwargs: Any) -> Any:
        handled = sys.exc_info()[1]
        if isinstance(handled, ReplayMiss):
            raise handled
        return original(self, *args, **kwargs)

    return timeout


def patch_package(module: types.ModuleType) -> None:
    """The SDK package itself (either hook level): the retry seam of its oldest releases."""
    prov = _provider(module.__name__)
    if prov is None or prov.sdk is None or not prov.sdk.retry_seam:
        return
    base = getattr(sys.modules.get(f"{module.__name__}._base_client"), "BaseClient", None)
    if base is not None and "_calculate_retry_timeout" in base.__dict__:
        original = base.__dict__["_calculate_retry_timeout"]
        patch_attr(base, "_calculate_retry_timeout", _no_retry_of_a_miss(original))


def patch_client(module: types.ModuleType) -> None:
    """The SDK package (SDK level): building its client warms replay up."""
    prov = _provider(module.__name__)
    client = getattr(module, prov.sdk.client, None) if prov and prov.sdk else None
    if isinstance(client, type) and "__init__" in client.__dict__:
        init = client.__dict__["__init__"]
        patch_attr(client, "__init__", _rehearse_when_built(init, module.__name__))


def imported(module: types.ModuleType) -> None:
    """Called once a watched SDK package was imported and patched: warm the replay up."""
    tape = resolve_tape()
    if tape is not None and _provider(module.__name__) is not None:
        warm_up(tape, module.__name__, rehearse=False)  # rehearsed when a client is built


# -- warming up replay -----------------------------------------------------------------------------
#
# The SDKs defer work to their first call: openai imports a resource module when the client's
# attribute is first read (``client.chat``) and pydantic builds a response type's validator
# when it first validates one. Replay does both when it starts, for the routes the cassette
# answers, and rehearses the first call, so the first replayed call costs what the others do
# (a fresh process runs the replay path cold until the interpreter has specialized it). The
# work is the same; it moves to where the program imports the SDK. benchmarks/README.md has
# the figures.


def _answer(out: Any, api: str | None) -> tuple[_Target, Any, bool] | None:
    """The (sync) target a recorded output answers, with its body or first event and whether
    it was streamed: the target of the record's ``api`` where one has it (``groq`` and
    ``openai`` answer alike), else the first whose SDK answers that kind of body."""
    if not isinstance(out, Mapping):
        return None
    sample, streamed = out.get("body"), False
    if sample is None:
        events = out.get("events")
        sample = events[0].get("data") if events and isinstance(events[0], Mapping) else None
        streamed = True
    if not isinstance(sample, Mapping):
        return None
    kind = sample.get("object") or sample.get("type")
    if not isinstance(kind, str):
        return None
    answering = [t for t in _targets() if not t.aio and kind in t.spec.answers]
    for target in answering:
        if target.match.api == api:
            return target, sample, streamed
    return (answering[0], sample, streamed) if answering else None


def _answered(tape: Tape) -> dict[_Target, tuple[Any, bool, Record]]:
    """Each target the tape's cassette answers, with its first recorded body (or first event),
    whether it was streamed, and the record (found once)."""
    hooks = state_of(tape)
    if hooks.answered is None:
        found: dict[_Target, tuple[Any, bool, Record]] = {}
        for rec in tape.records:
            answer = _answer(rec.out, rec.api) if rec.kind == "llm" else None
            if answer is not None:
                found.setdefault(answer[0], (answer[1], answer[2], rec))
        hooks.answered = found  # type: ignore[assignment]
    return hooks.answered  # type: ignore[return-value]


_warmed: set[_Target] = set()
REHEARSALS = 16  # runs of the replay path before the program's first call


def warm_up(tape: Tape, package: str | None = None, *, rehearse: bool = True) -> None:
    """Import the resource modules and build the response types that replaying ``tape``
    needs, for ``package`` (or each SDK already imported), and rehearse its first call.
    Never imports an SDK; errors are left to the call that would have met them."""
    if not tape.replaying:
        return
    for target, (sample, streamed, rec) in _answered(tape).items():
        if target.package != package and (package is not None or target.package not in sys.modules):
            continue
        _warm(target, sample, streamed)
        if rehearse and not streamed:
            state_of(tape).rehearsed[target] = _rehearse(tape, target, rec)


def _warm(target: _Target, sample: Any, streamed: bool) -> None:
    if target in _warmed:
        return
    _warmed.add(target)
    try:
        importlib.import_module(target.spec.module)
        if target.spec.via is not None:
            _type(target.spec.via)
        if target.spec.response is not None and not streamed:
            _validate(target.spec.response)(sample)
    except Exception:  # a warm-up: the call itself reports what fails
        pass


def _rehearse_when_built(original: Callable[..., Any], package: str) -> Callable[..., Any]:
    """An SDK client's ``__init__``: the first client a replaying tape sees built rehearses
    the tape's first call (a program builds its client right before it calls the model)."""

    @functools.wraps(original)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        tape = resolve_tape()
        if tape is None or not tape.replaying:
            return
        hooks = state_of(tape)
        if package not in hooks.built:
            hooks.built.add(package)
            warm_up(tape, package)
        # The client's resources the cassette answers (``client.chat.completions``), which
        # the SDK builds on first read: built now, as replay starts.
        for target in _answered(tape):
            if target.package == package:
                with contextlib.suppress(Exception):
                    functools.reduce(getattr, target.spec.route.split("."), self)

    return __init__


def _rehearse(tape: Tape, target: _Target, rec: Record) -> bool:
    """Replay ``rec`` (the first recorded call ``target`` answers) through the hooked
    ``create`` ``REHEARSALS`` times, on a shadow of the tape (``Tape.shadow``) bound in a copy
    of the context: nothing of the tape changes. Returns whether every run replayed."""
    data = rec.input
    cls = getattr(sys.modules.get(target.spec.module), target.cls, None)
    create = getattr(cls, "__dict__", {}).get("create")
    if (
        not isinstance(data, dict)
        or target.spec.response is None
        or not rec.key
        or "__tracetape_original__" not in getattr(create, "__dict__", {})
    ):
        return False
    kwargs = dict(data.get("params") or {})
    conversation = target.match.route.conversation
    if conversation is not None:
        kwargs[conversation] = data.get("messages")
    if data.get("tools"):
        kwargs["tools"] = data["tools"]
    resource = types.SimpleNamespace()  # the replay of a plain body never reads it
    assert create is not None

    def once() -> None:
        shadow = tape.shadow(rec.key or "")
        if shadow is None:
            raise LookupError(rec.key)
        shadow.bind()
        create(resource, **kwargs)

    try:
        for _ in range(REHEARSALS):
            contextvars.copy_context().run(once)
    except Exception:  # a rehearsal: the program's own call reports what fails
        return False
    return True
