"""SDK-level hooks: tape the official ``openai`` and ``anthropic`` SDKs without touching the agent.

``with tape.patch_sdks():`` (or ``patch_sdks(tape)``) wraps the resource methods

* ``openai``: ``chat.completions.create`` and ``.parse``, ``responses.create``,
  ``completions.create``, ``embeddings.create`` and their async twins (their ``.stream(...)``
  helpers and ``with_raw_response`` / ``with_streaming_response`` go through ``create``);
* ``anthropic``: ``messages.create``, ``messages.stream`` and their async twins;

so that a call is keyed before the SDK builds its request (the SDK's own request building,
``maybe_transform``, costs milliseconds per call) and, in replay, answered with the SDK's own
types (``ChatCompletion``, ``Message``, ``Stream`` yielding its chunk/event objects) built from the
cassette without running the request pipeline: no request is built and no socket is opened.
In record mode the real call runs and its HTTP response is tapped as the SDK reads it, so the
cassette holds the same JSON body or SSE events as the HTTP-level hook would.

The tape is resolved at call time: the tape bound in this thread or asyncio task (``with tape:``,
``with tape.patch_sdks():``), else the process-wide one of ``tracetape.patch(tape)``; with none,
the SDK runs untouched. The method patch itself is process-wide and reference counted.

One module on purpose (about 580 lines): every wrapper and the installer share the per-SDK
lookups of private SDK types (``_Sdk``), which must be resolved and patched together.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import importlib
import importlib.machinery
import sys
import threading
import types
from collections.abc import Callable, Iterator, Mapping
from types import ModuleType
from typing import Any, NamedTuple

from ..errors import ReplayMiss
from ..record import Record
from ..tape import Tape, _current
from ._common import (
    _PLAIN,
    Capture,
    capture_var,
    endpoint,
    flush_pending,
    llm_payload,
    materialize,
    one_shot,
    resolve_tape,
    set_default_tape,
)
from .http import _rebuilt, _replay_response, beyond_recording, wrap_send
from .tools import RAISED

__all__ = ["Patch", "patch", "patch_sdks", "unpatch_all"]


class _Target(NamedTuple):
    module: str
    cls: str
    endpoint: str
    cast_to: tuple[str, str]
    chunk: tuple[str, str] | None
    aio: bool

    @property
    def sdk(self) -> str:
        return self.module.split(".")[0]


def _targets() -> list[_Target]:
    chat = ("openai.types.chat", "ChatCompletion"), ("openai.types.chat", "ChatCompletionChunk")
    resp = ("openai.types.responses", "Response"), ("openai.types.responses", "ResponseStreamEvent")
    comp = ("openai.types", "Completion"), ("openai.types", "Completion")
    emb = ("openai.types", "CreateEmbeddingResponse"), None
    msg = ("anthropic.types", "Message"), ("anthropic.types", "RawMessageStreamEvent")
    out = []
    for module, name, ep, (cast_to, chunk) in (
        ("openai.resources.chat.completions", "Completions", "chat.completions", chat),
        ("openai.resources.responses", "Responses", "responses", resp),
        ("openai.resources.completions", "Completions", "completions", comp),
        ("openai.resources.embeddings", "Embeddings", "embeddings", emb),
        ("anthropic.resources.messages", "Messages", "messages", msg),
    ):
        out.append(_Target(module, name, ep, cast_to, chunk, False))
        out.append(_Target(module, "Async" + name, ep, cast_to, chunk, True))
    return out


class _Sdk(NamedTuple):
    """What replay needs from one SDK package, looked up once."""

    module: ModuleType
    httpx: ModuleType
    options_cls: Any
    construct_type: Callable[..., Any]
    raw_header: str
    stream_cls: Any
    async_stream_cls: Any


@functools.cache
def _sdk(name: str) -> _Sdk:
    base = importlib.import_module(f"{name}._base_client")
    models = importlib.import_module(f"{name}._models")
    streaming = importlib.import_module(f"{name}._streaming")
    constants = importlib.import_module(f"{name}._constants")
    httpx = getattr(base, "httpx2", None) or base.httpx
    return _Sdk(
        importlib.import_module(name),
        httpx,
        models.FinalRequestOptions,
        models.construct_type,
        constants.RAW_RESPONSE_HEADER,
        streaming.Stream,
        streaming.AsyncStream,
    )


@functools.cache
def _type(ref: tuple[str, str]) -> Any:
    return getattr(importlib.import_module(ref[0]), ref[1])


@functools.cache
def _validate(ref: tuple[str, str]) -> Callable[[Any], Any]:
    """The response type's ``model_validate``: its pydantic-core validator itself where the
    SDK's model keeps pydantic's own (the classmethod's checks of its keyword arguments
    cost 15% of a replayed call's validation)."""
    cls = _type(ref)
    own = getattr(getattr(cls, "model_validate", None), "__func__", None)
    base = sys.modules.get("pydantic")
    validator = getattr(cls, "__pydantic_validator__", None)
    if base is not None and own is base.BaseModel.model_validate.__func__ and validator:
        return validator.validate_python  # type: ignore[no-any-return]
    return cls.model_validate  # type: ignore[no-any-return]


_META = frozenset({"extra_headers", "extra_query", "extra_body", "timeout"})
# anthropic sends these arguments as request headers, not in the body
_HEADER_ARGS = frozenset({"user_profile_id", "workspace_id"})


_NOT_BODY = _META | _HEADER_ARGS
_UNSET = frozenset({"Omit", "NotGiven"})  # the SDKs' markers of an argument not given


def _given(value: Any) -> bool:
    return type(value).__name__ not in _UNSET


def _body(target: _Target, kwargs: dict[str, Any]) -> tuple[dict[str, Any], Any]:
    """The JSON body the SDK would send for these arguments, and its response post-parser.
    One-shot iterables among the arguments become lists on the way (``materialize``)."""
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
    post_parser = None
    if target.endpoint == "embeddings":
        # Mirror the SDK: it asks for base64 unless told otherwise and decodes it back.
        encoding = kwargs.get("encoding_format")
        if not _given(encoding) or encoding is None:
            body.setdefault("encoding_format", "base64")
        try:
            parsing = importlib.import_module("openai.lib._parsing._embeddings")
            post_parser = functools.partial(
                parsing.parse_embedding_response,
                encoding_format=encoding if encoding is not None else _sdk("openai").module.omit,
            )
        except (ImportError, AttributeError):
            post_parser = None
    return body, post_parser


def _replay_result(
    resource: Any,
    target: _Target,
    kwargs: Mapping[str, Any],
    out: Mapping[str, Any],
    post: Any,
    *,
    beyond: Callable[[], BaseException] | None = None,
) -> Any:
    """Build what the SDK method would have returned, from a recorded response.

    Returns the value, or for async clients an awaitable of it.
    """
    if RAISED in out:
        raise _failure(resource, target, out)
    stream = kwargs.get("stream") is True
    status = out.get("status", 200)
    headers = kwargs.get("extra_headers") or None
    if headers is None and not stream and status == 200 and "body" in out and post is None:
        # The common case, without building a response object. pydantic-core validation is
        # about 10x faster than the SDK's own lenient construct_type and gives the same object
        # for a body that fits the schema; anything else is built the SDK's way.
        try:
            value = _validate(target.cast_to)(out["body"])
        except ValueError:
            cast_to = _type(target.cast_to)
            value = _sdk(target.sdk).construct_type(type_=cast_to, value=out["body"])
        return _done(value) if target.aio else value
    cast_to = _type(target.cast_to)
    sdk = _sdk(target.sdk)
    client = resource._client
    status = int(status)
    path = endpoint(target.endpoint).path
    options = sdk.options_cls.construct(method="post", url=path, headers=headers or {})
    if post is not None:
        options.post_parser = post
    cast_to = client._maybe_override_cast_to(cast_to, options)
    raw = options.headers.get(sdk.raw_header) if headers else None
    request = sdk.httpx.Request(
        "POST", client._prepare_url(path), headers={sdk.raw_header: raw} if raw else None
    )
    response = _replay_response(sdk.httpx, request, out, target.aio, beyond)
    if status >= 400:
        raise client._make_status_error_from_response(response)
    stream_cls = None
    if target.chunk is not None:
        base = sdk.async_stream_cls if target.aio else sdk.stream_cls
        stream_cls = base[_type(target.chunk)]
    return client._process_response(
        cast_to=cast_to, options=options, response=response, stream=stream, stream_cls=stream_cls
    )


def _failure(resource: Any, target: _Target, out: Mapping[str, Any]) -> BaseException:
    """A recorded request that got no response, raised as the SDK raises it once its retries
    are spent: ``APITimeoutError`` for a timeout, ``APIConnectionError`` for any other failure
    of its HTTP client, caused by the recorded exception."""
    sdk = _sdk(target.sdk)
    request = sdk.httpx.Request(
        "POST", resource._client._prepare_url(endpoint(target.endpoint).path)
    )
    cause = _rebuilt(out, request)
    if isinstance(cause, sdk.httpx.TimeoutException):
        error: BaseException = sdk.module.APITimeoutError(request=request)
    elif isinstance(cause, sdk.httpx.RequestError):
        error = sdk.module.APIConnectionError(request=request)
    else:
        return cause
    error.__cause__ = cause
    return error


async def _done(value: Any) -> Any:
    return value


class _Call:
    """One SDK call under a tape: its key, then either a replayed result or a recording."""

    __slots__ = ("beyond", "capture", "decision", "post", "tape")

    def __init__(self, tape: Tape, target: _Target, kwargs: dict[str, Any]):
        body, self.post = _body(target, kwargs)
        payload = llm_payload(endpoint(target.endpoint), body, tape.next_model_step())
        self.tape = tape
        self.decision = tape.prepare("llm", payload, finite=True)
        self.capture: Capture | None = None
        self.beyond: Callable[[], BaseException] | None = None

    def play(self) -> Mapping[str, Any]:
        """The recorded output (sets ``beyond`` for a stream the recorded run abandoned)."""
        rec = self.tape.play(self.decision)
        self.beyond = beyond_recording(self.tape, self.decision, rec)
        out: Mapping[str, Any] = rec.out
        return out

    def start(self) -> contextvars.Token[Capture | None]:
        self.capture = Capture(self.tape, self.decision)
        return capture_var.set(self.capture)

    def end(self, token: contextvars.Token[Capture | None]) -> None:
        capture_var.reset(token)
        assert self.capture is not None
        self.capture.finish()


def _wrap_create(target: _Target, original: Callable[..., Any]) -> Callable[..., Any]:
    if target.aio:

        @functools.wraps(original)
        async def acreate(self: Any, *args: Any, **kwargs: Any) -> Any:
            tape = resolve_tape()
            if tape is None or args or capture_var.get() is not None:
                return await original(self, *args, **kwargs)
            call = _Call(tape, target, kwargs)
            if tape.replaying:
                return await _replay_result(
                    self, target, kwargs, call.play(), call.post, beyond=call.beyond
                )
            token = call.start()
            try:
                return await original(self, **kwargs)
            finally:
                call.end(token)

        return acreate

    @functools.wraps(original)
    def create(self: Any, *args: Any, **kwargs: Any) -> Any:
        tape = resolve_tape()
        if tape is None or args or capture_var.get() is not None:
            return original(self, *args, **kwargs)
        call = _Call(tape, target, kwargs)
        if tape.replaying:
            return _replay_result(self, target, kwargs, call.play(), call.post, beyond=call.beyond)
        token = call.start()
        try:
            return original(self, **kwargs)
        finally:
            call.end(token)

    return create


def _wrap_openai_parse(target: _Target, original: Callable[..., Any]) -> Callable[..., Any]:
    """``chat.completions.parse(...)`` posts by itself with a parser of the response format:
    key the body it sends (``stream: false``, the format as a JSON schema) and, in replay, parse
    the recorded completion with the SDK's own parser.
    """
    parsing = importlib.import_module("openai.lib._parsing")

    def prepare(tape: Tape, kwargs: dict[str, Any]) -> tuple[_Call, dict[str, Any], Any]:
        materialize(kwargs)
        response_format = kwargs.get("response_format", _sdk("openai").module.omit)
        tools = parsing.validate_input_tools(kwargs.get("tools", _sdk("openai").module.omit))
        sent = {
            **kwargs,
            "stream": False,
            "response_format": parsing.type_to_response_format_param(response_format),
            "tools": tools,
        }

        def post(raw: Any) -> Any:
            return parsing.parse_chat_completion(
                response_format=response_format, chat_completion=raw, input_tools=tools
            )

        return _Call(tape, target, sent), sent, post

    if target.aio:

        @functools.wraps(original)
        async def aparse(self: Any, *args: Any, **kwargs: Any) -> Any:
            tape = resolve_tape()
            if tape is None or args or capture_var.get() is not None:
                return await original(self, *args, **kwargs)
            call, sent, post = prepare(tape, kwargs)
            if tape.replaying:
                return await _replay_result(
                    self, target, sent, call.play(), post, beyond=call.beyond
                )
            token = call.start()
            try:
                return await original(self, **kwargs)
            finally:
                call.end(token)

        return aparse

    @functools.wraps(original)
    def parse(self: Any, *args: Any, **kwargs: Any) -> Any:
        tape = resolve_tape()
        if tape is None or args or capture_var.get() is not None:
            return original(self, *args, **kwargs)
        call, sent, post = prepare(tape, kwargs)
        if tape.replaying:
            return _replay_result(self, target, sent, call.play(), post, beyond=call.beyond)
        token = call.start()
        try:
            return original(self, **kwargs)
        finally:
            call.end(token)

    return parse


def _wrap_anthropic_stream(target: _Target, original: Callable[..., Any]) -> Callable[..., Any]:
    """``messages.stream(...)`` posts by itself (not through ``create``): take over the request
    its stream manager sends, keeping the manager (and its event accumulation) the SDK's own.
    """
    manager_cls = "AsyncMessageStreamManager" if target.aio else "MessageStreamManager"
    mangled = f"_{manager_cls}__api_request"

    @functools.wraps(original)
    def stream(self: Any, *args: Any, **kwargs: Any) -> Any:
        tape = resolve_tape()
        if tape is None or args or capture_var.get() is not None:
            return original(self, *args, **kwargs)
        materialize(kwargs)
        manager = original(self, **kwargs)
        request = getattr(manager, mangled)
        # Key the body the SDK built (``output_format`` already merged into ``output_config``):
        # a partial of ``_post`` (sync) or its not yet started coroutine (async).
        sent = getattr(request, "keywords", None) or {}
        frame = getattr(request, "cr_frame", None)
        if frame is not None:
            sent = frame.f_locals
        body = sent.get("body")
        if isinstance(body, Mapping):
            call = _Call(tape, target, {**body, "extra_body": kwargs.get("extra_body")})
        else:
            call = _Call(tape, target, {**kwargs, "stream": True})
        if tape.replaying:
            out = call.play()
            replay_kwargs = {**kwargs, "stream": True}
            if target.aio:
                request.close()  # the SDK's un-awaited request coroutine: never sent
                replayed = _replay_result(
                    self, target, replay_kwargs, out, None, beyond=call.beyond
                )
                setattr(manager, mangled, replayed)
            else:
                setattr(
                    manager,
                    mangled,
                    lambda: _replay_result(
                        self, target, replay_kwargs, out, None, beyond=call.beyond
                    ),
                )
            return manager
        if target.aio:

            async def send() -> Any:
                token = call.start()
                try:
                    return await request
                finally:
                    call.end(token)

            setattr(manager, mangled, send())
        else:

            def send_sync() -> Any:
                token = call.start()
                try:
                    return request()
                finally:
                    call.end(token)

            setattr(manager, mangled, send_sync)
        return manager

    return stream


# -- warming up replay -------------------------------------------------------------------------
#
# The SDKs defer work to their first call: openai imports a resource module when the client's
# attribute is first read (``client.chat``, ~20 ms) and pydantic builds a response type's
# validator when it first validates one (``ChatCompletion``, ~5 ms). Replay does both when it
# starts, for the endpoints the cassette answers, so the first replayed call costs what the
# others do. The work is the same; it moves to where the program imports the SDK.

# What a recorded response answers, by its body's ``object`` (openai) or ``type`` (anthropic),
# or its first event's.
_ANSWERS = {
    "chat.completion": "chat.completions",
    "chat.completion.chunk": "chat.completions",
    "response": "responses",
    "text_completion": "completions",
    "list": "embeddings",
    "message": "messages",
    "message_start": "messages",
}
_ENDPOINTS = frozenset(_ANSWERS.values())


def _answer(out: Any) -> tuple[str, tuple[Any, bool]] | None:
    """The endpoint a recorded output answers, with its body or first event and whether it
    was streamed, if known."""
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
    name = _ANSWERS.get(kind) if isinstance(kind, str) else None
    if name is None and isinstance(kind, str) and kind.startswith("response."):
        name = "responses"
    return (name, (sample, streamed)) if name is not None else None


def _answered(tape: Tape) -> dict[str, Any]:
    """Each endpoint the tape's cassette answers, with its first recorded body (or first
    event) and whether it was streamed, and the record (found once)."""
    found = tape.hooks.answered
    if found is None:
        found = {}
        for rec in tape.records:
            if len(found) == len(_ENDPOINTS):
                break  # every endpoint found
            answer = _answer(rec.out) if rec.kind == "llm" else None
            if answer is not None:
                name, (sample, streamed) = answer
                found.setdefault(name, (sample, streamed, rec))
        tape.hooks.answered = found
    return found


def warm_up(tape: Tape, sdk: str | None = None, *, rehearse: bool = True) -> None:
    """Import the resource modules and build the response types that replaying ``tape``
    needs, for ``sdk`` (or each SDK already imported), and rehearse its first call
    (``_rehearse``). Never imports an SDK; errors are left to the call that would have met
    them."""
    if not tape.replaying:
        return
    answered = _answered(tape)
    for target in _targets():
        if target.aio or target.endpoint not in answered:
            continue
        if target.sdk != sdk and (sdk is not None or target.sdk not in sys.modules):
            continue
        _warm(target, answered[target.endpoint])
        _, streamed, rec = answered[target.endpoint]
        if rehearse and not streamed:
            tape.hooks.rehearsed[target] = _rehearse(tape, target, rec)


def _rehearse_when_built(original: Callable[..., Any], sdk: str) -> Callable[..., Any]:
    """An SDK client's ``__init__``: the first client a replaying tape sees built rehearses
    the tape's first call (a program builds its client right before it calls the model;
    building one runs some 20 ms of other code, after which the replay path is cold again)."""

    @functools.wraps(original)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        tape = resolve_tape()
        if tape is not None and tape.replaying and sdk not in tape.hooks.built:
            tape.hooks.built.add(sdk)
            warm_up(tape, sdk)
        if tape is not None and tape.replaying:
            # The client's resources the cassette answers (``client.chat.completions``),
            # which the SDK builds on first read: built now, as replay starts.
            for name in _answered(tape).keys() & _ENDPOINTS_OF[sdk]:
                with contextlib.suppress(Exception):
                    functools.reduce(getattr, name.split("."), self)

    return __init__


# The class a client's attribute imports on first read, where it is not the target's own.
_VIA = {"chat.completions": ("openai.resources.chat", "Chat")}


def _warm(target: _Target, answer: tuple[Any, bool, Record]) -> None:
    if target in _warmed:
        return
    _warmed.add(target)
    sample, streamed, _ = answer
    try:
        importlib.import_module(target.module)
        if target.endpoint in _VIA:
            _type(_VIA[target.endpoint])
        _sdk(target.sdk)
        cls = _type(target.chunk if streamed and target.chunk else target.cast_to)
        validate = getattr(cls, "model_validate", None)
        if validate is not None:
            validate(sample)
    except Exception:  # a warm-up: the call itself reports what fails
        pass


_warmed: set[_Target] = set()
REHEARSALS = 16  # runs of the replay path before the program's first call (see _rehearse)


def _rehearse(tape: Tape, target: _Target, rec: Record) -> bool:
    """Replay ``rec`` (the first recorded call ``target`` answers) through the hooked
    ``create`` ``REHEARSALS`` times, leaving the tape as it was (``Tape.rehearse``).

    A fresh process runs the replay path cold: its first call cost 150-200 us against 25 us
    warm, and its next ones stayed slow until the interpreter had specialized the code
    (after about ten runs). Rehearsing when replay starts costs about 1 ms once.
    """
    data = rec.input
    cls = getattr(sys.modules.get(target.module), target.cls, None)
    create = getattr(cls, "__dict__", {}).get("create")
    if (
        not isinstance(data, dict)
        or not rec.key
        or not isinstance(rec.step, int)
        or "__tracetape_original__" not in getattr(create, "__dict__", {})
    ):
        return False
    kwargs = dict(data.get("params") or {})
    kwargs[endpoint(target.endpoint).messages] = data.get("messages")
    if data.get("tools"):
        kwargs["tools"] = data["tools"]
    resource = types.SimpleNamespace()  # the replay of a plain body never reads it
    assert create is not None
    return tape.rehearse(
        rec.key, lambda: create(resource, **kwargs), step=rec.step, times=REHEARSALS
    )


# -- installing ----------------------------------------------------------------------------------
#
# Installing never imports an SDK (openai and anthropic take seconds to import): a module that
# is already imported is patched at once, the others when they are imported, by a finder at the
# front of ``sys.meta_path`` that wraps their loader. A program that never imports an SDK pays
# nothing; one that imports it later is still taped.
#
# Two levels share the installer, each reference counted: ``sdk`` patches the SDK resources and
# the httpx clients' ``send``; ``http`` patches ``send`` only (``tape.patch_http()``).

_lock = threading.RLock()
_installs = {"sdk": 0, "http": 0}
_saved: dict[str, list[tuple[type, str, Any]]] = {"sdk": [], "http": []}
_waiting: set[str] = set()  # watched modules not imported yet


_SDKS = ("openai", "anthropic")
_HTTPX = ("httpx2", "httpx")


def _group(name: str) -> str:
    """The patch group a watched module belongs to: the SDK packages themselves are patched
    for either level (a miss is never retried), their resources for the SDK level only."""
    return "http" if name in _HTTPX or name in _SDKS else "sdk"


def _no_retry_of_a_miss(original: Callable[..., Any]) -> Callable[..., Any]:
    """``BaseClient._calculate_retry_timeout``, which the SDKs call before a retry: while a
    ``ReplayMiss`` is being handled, raise it instead. The SDKs before their 2.x/3.x releases
    (openai 1.x, anthropic 0.x) catch *any* exception their HTTP client raises, and retry it
    or wrap it into ``APIConnectionError``; so the miss leaves the call as it is, at once,
    with its diagnosis (current releases re-raise it themselves: ``http.sdk_compatible_miss``).
    """

    @functools.wraps(original)
    def timeout(self: Any, *args: Any, **kwargs: Any) -> Any:
        handled = sys.exc_info()[1]
        if isinstance(handled, ReplayMiss):
            raise handled
        return original(self, *args, **kwargs)

    return timeout


def _active(group: str) -> bool:
    return _installs["sdk"] > 0 or (group == "http" and _installs["http"] > 0)


def _watched() -> set[str]:
    return {t.module for t in _targets()} | {*_HTTPX, *_SDKS, *_CLIENTS}


# The endpoints of each SDK, by the client attribute that reaches them.
_ENDPOINTS_OF = {sdk: {t.endpoint for t in _targets() if t.sdk == sdk} for sdk in _SDKS}
# Where each SDK's (sync) client class is defined: building one rehearses replay.
_CLIENTS = {"openai._client": ("openai", "OpenAI"), "anthropic._client": ("anthropic", "Anthropic")}


def _patch_attr(group: str, cls: type, name: str, wrapper: Callable[..., Any]) -> None:
    original = cls.__dict__[name]
    _saved[group].append((cls, name, original))
    wrapper.__dict__["__tracetape_original__"] = original
    setattr(cls, name, wrapper)


def _patch_module(name: str, module: ModuleType) -> None:
    """Patch what ``module`` (one of ``_watched()``) defines; the lock is held."""
    if name in _HTTPX:
        for client_cls, aio in ((module.Client, False), (module.AsyncClient, True)):
            wrapper = wrap_send(module, client_cls.__dict__["send"], aio)
            _patch_attr("http", client_cls, "send", wrapper)
        return
    if name in _SDKS:
        base = getattr(sys.modules.get(f"{name}._base_client"), "BaseClient", None)
        if base is not None and "_calculate_retry_timeout" in base.__dict__:
            original = base.__dict__["_calculate_retry_timeout"]
            _patch_attr("http", base, "_calculate_retry_timeout", _no_retry_of_a_miss(original))
        return
    if name in _CLIENTS:
        sdk, cls_name = _CLIENTS[name]
        client = getattr(module, cls_name, None)
        if client is not None and "__init__" in client.__dict__:
            _patch_attr("sdk", client, "__init__", _rehearse_when_built(client.__init__, sdk))
        return
    for target in _targets():
        cls = getattr(module, target.cls, None) if target.module == name else None
        if cls is None or "create" not in cls.__dict__:
            continue
        _patch_attr("sdk", cls, "create", _wrap_create(target, cls.__dict__["create"]))
        if target.sdk == "anthropic" and "stream" in cls.__dict__:
            stream = _wrap_anthropic_stream(target, cls.__dict__["stream"])
            _patch_attr("sdk", cls, "stream", stream)
        if target.endpoint == "chat.completions" and "parse" in cls.__dict__:
            with contextlib.suppress(ImportError, AttributeError):
                parse = _wrap_openai_parse(target, cls.__dict__["parse"])
                _patch_attr("sdk", cls, "parse", parse)


def _imported(name: str, module: ModuleType) -> None:
    with _lock:
        if name in _waiting:
            _waiting.discard(name)
            _patch_module(name, module)
    if name in _SDKS:
        tape = resolve_tape()
        if tape is not None:  # its first call is rehearsed when a client is built
            warm_up(tape, name, rehearse=False)


class _PatchingLoader:
    """A watched module's own loader, patching the module once it has run (a loader by
    protocol: ``importlib.abc`` costs milliseconds to import)."""

    def __init__(self, loader: Any, name: str):
        self._loader = loader
        self._name = name

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        create = getattr(self._loader, "create_module", None)
        return create(spec) if create is not None else None

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        _imported(self._name, module)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)


class _PatchOnImport:
    """Finds watched modules with the other finders and wraps their loader (a meta path
    finder by protocol)."""

    def find_spec(
        self, fullname: str, path: Any = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in _waiting:
            return None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None) if finder is not self else None
            spec: importlib.machinery.ModuleSpec | None = (
                find(fullname, path, target) if find is not None else None
            )
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _PatchingLoader(spec.loader, fullname)  # type: ignore[assignment]
                return spec
        return None


_finder = _PatchOnImport()


def install(level: str = "sdk") -> None:
    """Hook ``level`` (``"sdk"`` or ``"http"``) in, once more (reference counted)."""
    with _lock:
        before = {group: _active(group) for group in _saved}
        _installs[level] += 1
        for name in sorted(_watched()):
            group = _group(name)
            if before[group] or not _active(group):
                continue
            module = sys.modules.get(name)
            if module is None:
                _waiting.add(name)
            else:
                _patch_module(name, module)
        if _waiting and _finder not in sys.meta_path:
            sys.meta_path.insert(0, _finder)


def uninstall(level: str = "sdk") -> None:
    """Undo one ``install(level)``; the last one of a group restores its originals."""
    with _lock:
        _installs[level] = max(0, _installs[level] - 1)
        for group, saved in _saved.items():
            if _active(group):
                continue
            _waiting.difference_update(n for n in _watched() if _group(n) == group)
            while saved:
                cls, name, original = saved.pop()
                setattr(cls, name, original)
        if not _waiting:
            with contextlib.suppress(ValueError):
                sys.meta_path.remove(_finder)


def unpatch_all() -> None:
    """Remove every SDK hook now, whatever still holds a patch (for test teardown)."""
    with _lock:
        _installs.update(sdk=0, http=0)
        uninstall()
    set_default_tape(None)


@contextlib.contextmanager
def patch_sdks(tape: Tape) -> Iterator[Tape]:
    """Route ``openai``/``anthropic`` SDK calls made in this thread or task through ``tape``.

    ``tape`` is this context's current tape for the block. On exit, a stream the agent left
    half-read is recorded as far as it was read.

        >>> import tracetape, tempfile, pathlib
        >>> tape = tracetape.Tape(pathlib.Path(tempfile.mkdtemp()) / "run.jsonl")
        >>> with tape, tape.patch_sdks():
        ...     pass  # openai.OpenAI().chat.completions.create(...) is taped here
    """
    token = tape.bind()
    install()
    try:
        warm_up(tape)
        yield tape
    finally:
        try:
            flush_pending(tape)
        finally:
            uninstall()
            _current.reset(token)


class Patch:
    """The handle ``tracetape.patch(tape)`` returns: hooks stay on until ``stop()``.

    Also a context manager (``with tracetape.patch(tape):``).
    """

    def __init__(self, tape: Tape):
        self.tape = tape
        self._stopped = False
        install()
        self._previous = set_default_tape(tape)
        warm_up(tape)

    def stop(self) -> None:
        """Record half-read streams, restore the previous default tape and unhook (idempotent)."""
        if self._stopped:
            return
        self._stopped = True
        try:
            flush_pending(self.tape)
        finally:
            set_default_tape(self._previous)
            uninstall()

    def __enter__(self) -> Patch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def patch(tape: Tape) -> Patch:
    """Tape every ``openai``/``anthropic`` SDK call of the process, in any thread, from now on.

    A tape bound in a thread or task (``with other_tape:``) still wins there. Returns a
    ``Patch``; call ``.stop()`` (or use it as a context manager) to unhook.
    """
    return Patch(tape)
