"""botocore's client events: every ``boto3``/``botocore`` client taped through its public
event system (Bedrock's model calls under ``patch_sdks``; every request under ``patch_http``).

botocore does not use httpx, and its modules are not patched: the installer's watch of
``botocore.session`` wraps the public ``Session.create_client`` at the class, and each client
it creates gets handlers on its own ``client.meta.events`` (tested on botocore 1.44.8):

* ``before-call``: who takes the call (``capture.taker`` on its method, host and path): a
  tape, an SDK fast path's capture, or nobody. The answer is kept in the call's request
  context, the open-ended dict botocore hands to every event of the call, each attempt's too.
* ``choose-signer`` (replay): ``botocore.UNSIGNED``: a replayed request is never signed, so a
  replay needs no AWS credentials. A client created while ``patch_http`` replays (every
  request of its context is taken), without explicit keys, is created unsigned too: botocore
  would otherwise look its credentials up at once, the EC2 metadata service included.
* ``before-send``: the request as it goes on the wire is keyed (its first attempt); replay
  answers with an ``AWSResponse`` built from the record (no socket is opened); record learns
  the credentials it carries (SigV4's key id and signature, the session token).
* ``before-parse`` (record): the body is tapped as it is read: whole bytes at once, a
  streaming body (``invoke_model``'s) or an event stream (``converse_stream``'s, which
  botocore's ``EventStream`` reads lazily) wrapped so that the consumer's reads feed the tap.
* ``response-received`` (record): an attempt that got no response at all (a connection
  error) is noted (``Capture.failed``).
* ``needs-retry`` (replay): never retry. A call is one decision, whatever botocore's retries:
  the outcome it ended with (``after-call``/``after-call-error`` write it; a stream once
  read). A recorded throttling error or connection error is raised at once, never slept on.

No header is keyed. The response headers botocore parses into the answer are stored with it
(the output shape's header members, ``x-amzn-errortype``, from which botocore takes a
REST-JSON error's code, and the request id); the others are not. A client created before the hooks
were installed is not taped (``tracetape run`` installs them before the program starts);
aiobotocore's clients (its own ``create_client``) are not taped.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import importlib
import inspect
import io
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from ..record import RAISED
from ..tape import Tape
from .capture import Capture, Tap, out_content, rebuilt, sending, taker
from .flow import Beyond, Headers, Out, Parts, prepare, replay
from .framing import content_type_of, framing_of
from .install import patch_attr
from .keying import Keyed, key_request
from .state import http_tape

__all__ = ["patch_module"]

# The key of a taken call in botocore's request context.
_CALL = "tracetape"
# Response headers stored with every output besides those its operation's answer is parsed
# from: an error's code (botocore reads a REST-JSON error's from ``x-amzn-errortype``), and
# the request id (``ResponseMetadata.RequestId``, which programs log).
_KEPT = frozenset(
    {"x-amzn-errortype", "x-amzn-query-error", "x-amzn-requestid", "x-amz-request-id"}
)


def _botocore(module: str = "") -> Any:
    return importlib.import_module(f"botocore.{module}" if module else "botocore")


@dataclass
class _Call:
    """One botocore call taken by the tape: who takes it, its key, its recording."""

    taker: Capture | Tape
    keyed: Keyed | None = None
    capture: Capture | None = None
    # While an attempt is sent (``capture.sending``): urllib3, under botocore, takes it no more.
    sent: contextvars.Token[bool] | None = None

    def received(self) -> None:
        """The attempt's response (or failure) came back."""
        token, self.sent = self.sent, None
        if token is not None:
            sending.reset(token)

    @property
    def tape(self) -> Tape:
        return self.taker if isinstance(self.taker, Tape) else self.taker.tape

    @property
    def replaying(self) -> bool:
        return isinstance(self.taker, Tape) and self.taker.replaying


# The recording attempt between its ``before-send`` and its ``before-parse`` (botocore emits
# both in the calling thread, one after the other; ``before-parse`` is given no context).
_attempt: contextvars.ContextVar[_Call | None] = contextvars.ContextVar(
    "tracetape_botocore_attempt", default=None
)


def _call(context: Any) -> _Call | None:
    found = context.get(_CALL) if isinstance(context, dict) else None
    return found if isinstance(found, _Call) else None


def _installed() -> bool:
    """Whether the hooks are on: a client's handlers outlive them, and then do nothing."""
    session = _botocore("session").Session
    return hasattr(session.create_client, "__tracetape_original__")


# -- the request -----------------------------------------------------------------------------------


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes | bytearray) else str(value)


def _content(body: Any) -> bytes:
    """A request body's bytes; a file-like body is read and put back where it was."""
    if body is None:
        return b""
    if isinstance(body, bytes | bytearray):
        return bytes(body)
    if isinstance(body, str):
        return body.encode()
    if all(hasattr(body, name) for name in ("read", "seek", "tell")):
        position = body.tell()
        data = body.read()
        body.seek(position)
        return data.encode() if isinstance(data, str) else bytes(data)
    return b""


def _parts(request: Any) -> Parts:
    scheme, netloc, path, query, _ = urlsplit(request.url)
    headers = {_text(k).lower(): _text(v) for k, v in request.headers.items()}
    return Parts(
        request.method, (scheme, netloc, path, query), headers.get("content-type", ""), headers
    )


def _key(tape: Tape, request: Any) -> Keyed:
    parts = _parts(request)
    return key_request(tape, parts.method, parts.url, _content(request.body), parts.content_type)


# -- replay ----------------------------------------------------------------------------------------


class _Replayed(io.BytesIO):
    """A recorded body as botocore reads a response's: ``read()`` for a whole or streaming
    body, ``stream()`` for an event stream (one recorded event per chunk; past the end of a
    stream the recorded run abandoned, ``beyond()`` is raised)."""

    def __init__(self, chunks: list[bytes], beyond: Callable[[], BaseException] | None):
        super().__init__(b"".join(chunks))
        self._chunks = chunks
        self._beyond = beyond

    def stream(self, amt: int | None = None, decode_content: bool | None = None) -> Iterator[bytes]:
        """The recorded chunks, as urllib3's ``HTTPResponse.stream`` gives a body's."""
        yield from self._chunks
        if self._beyond is not None:
            raise self._beyond()


def _response(url: str, out: Mapping[str, Any], beyond: Any) -> Any:
    """An ``AWSResponse`` built from a recorded output."""
    headers = {str(k): str(v) for k, v in (out.get("headers") or {}).items()}
    if "events" in out:
        chunks = framing_of(out).encode(out)
        headers["content-type"] = content_type_of(out)
    else:
        headers["content-type"], content = out_content(out)
        headers["content-length"] = str(len(content))
        chunks = [content] if content else []
    status = int(out.get("status", 200))
    return _botocore("awsrequest").AWSResponse(url, status, headers, _Replayed(chunks, beyond))


def _raised(out: Mapping[str, Any]) -> BaseException:
    """The recorded failure: a botocore error (built from keyword arguments only, which
    ``capture.rebuilt`` cannot pass) as its own type with its message, else as ``rebuilt``."""
    info = out[RAISED]
    module, _, name = str(info.get("type", "")).rpartition(".")
    base = _botocore("exceptions").BotoCoreError
    cls: Any = None
    with contextlib.suppress(ImportError, AttributeError):
        cls = getattr(importlib.import_module(module), name) if module else None
    if isinstance(cls, type) and issubclass(cls, base):
        # its constructor formats a message from the keyword arguments it was raised with,
        # which are not recorded: the recorded message is given as is
        exc = base.__new__(cls)
        Exception.__init__(exc, str(info.get("message", "")))
        exc.kwargs = {}
        return exc  # type: ignore[no-any-return]
    return rebuilt(out)


class _Answers:
    """How the flow answers a botocore request from the tape (``flow.replay``)."""

    def answer(self, request: Any, out: Out, headers: Headers, beyond: Beyond) -> Any:
        # botocore asks no retry of a replayed call (``_needs_retry``): no retry headers
        return _response(request.url, out, beyond)

    def raised(self, request: Any, out: Mapping[str, Any]) -> BaseException:
        return _raised(out)


_ANSWERS = _Answers()


# -- record ----------------------------------------------------------------------------------------


class _Tapped:
    """A response body that reports what its reader reads to a ``Tap``: botocore's raw event
    stream (read with ``stream()``) or a streaming body (read with ``read()``)."""

    def __init__(self, inner: Any, tap: Tap):
        self._inner = inner
        self._tap = tap

    def stream(self, *args: Any, **kwargs: Any) -> Iterator[bytes]:
        """The inner stream's chunks, each fed to the tap."""
        try:
            for chunk in self._inner.stream(*args, **kwargs):
                self._tap.feed(chunk)
                yield chunk
        except BaseException:  # an error, or the reader stopped: as far as it was read
            self._tap.finish(complete=False)
            raise
        self._tap.finish(complete=True)

    def read(self, amt: int | None = None) -> bytes:
        """Read as the inner body does; the end of the body ends the tap."""
        try:
            chunk = bytes(self._inner.read(amt))
        except BaseException:
            self._tap.finish(complete=False)
            raise
        if chunk:
            self._tap.feed(chunk)
        if amt is None or (not chunk and amt > 0):
            self._tap.finish(complete=True)
        return chunk

    def readinto(self, buffer: Any) -> int:
        """Read into ``buffer`` as the inner body does."""
        count = int(self._inner.readinto(buffer))
        if count:
            self._tap.feed(bytes(memoryview(buffer)[:count]))
        elif len(buffer):
            self._tap.finish(complete=True)
        return count

    def readlines(self) -> list[bytes]:
        """Every line left."""
        lines = list(self._inner.readlines())
        self._tap.feed(b"".join(lines))
        self._tap.finish(complete=True)
        return lines

    def readable(self) -> bool:
        """A body is read."""
        return True

    def close(self) -> None:
        """Close the inner body: what was read is what is recorded."""
        try:
            self._inner.close()
        finally:
            self._tap.finish(complete=False)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _kept(operation_model: Any, headers: Mapping[str, Any]) -> dict[str, str]:
    """The response headers botocore reads into the answer (its output shape's ``header``
    members, the ``headers`` prefix of a map of them), and ``_KEPT``; the content type and
    length are stored apart."""
    names, prefixes = set(_KEPT), []
    shape = operation_model.output_shape
    for member in shape.members.values() if shape is not None else ():
        location, name = member.serialization.get("location"), member.serialization.get("name")
        if location == "header":
            names.add(str(name).lower())
        elif location == "headers":
            prefixes.append(str(name).lower())
    names -= {"content-type", "content-length"}
    kept = {}
    for name, value in headers.items():
        low = str(name).lower()
        if low in names or low.startswith(tuple(prefixes)):
            kept[low] = _text(value)
    return kept


def _tap(capture: Capture, operation_model: Any, response_dict: dict[str, Any]) -> None:
    """Make the response botocore is about to parse report its body to ``capture``."""
    headers = response_dict["headers"]
    tap = capture.new_tap(int(response_dict["status_code"]), str(headers.get("content-type", "")))
    tap.headers = _kept(operation_model, headers)
    body = response_dict["body"]
    if isinstance(body, bytes | bytearray):
        tap.feed(bytes(body))
        tap.finish(complete=True)
    elif isinstance(body, _botocore("response").StreamingBody):
        length = headers.get("content-length")
        response_dict["body"] = _botocore("response").StreamingBody(_Tapped(body, tap), length)
    else:
        response_dict["body"] = _Tapped(body, tap)


# -- the handlers ----------------------------------------------------------------------------------


def _before_call(params: Any, context: Any, **_: Any) -> None:
    if not _installed() or not isinstance(context, dict):
        return
    parts = urlsplit(str(params.get("url", "")))
    found = taker(str(params.get("method", "")), parts.hostname or "", parts.path)
    if isinstance(found, Capture | Tape):  # no AWS host is a telemetry host
        context[_CALL] = _Call(found)


def _choose_signer(context: Any, **_: Any) -> Any:
    call = _call(context)
    return _botocore().UNSIGNED if call is not None and call.replaying else None


def _before_send(request: Any, **_: Any) -> Any:
    call = _call(request.context)
    if call is None:
        return None
    if call.keyed is None:
        call.keyed = _key(call.taker, request) if isinstance(call.taker, Tape) else call.taker.keyed
    if call.replaying:
        return replay(_ANSWERS, call.tape, call.keyed, request)
    prepare(call.tape, _parts(request))
    if call.capture is None:
        taker_ = call.taker
        call.capture = taker_ if isinstance(taker_, Capture) else Capture(taker_, call.keyed)
    _attempt.set(call)
    call.sent = sending.set(True)
    return None


def _before_parse(operation_model: Any, response_dict: Any, **_: Any) -> None:
    call = _attempt.get()
    if call is None or call.capture is None:
        return
    _attempt.set(None)
    call.received()
    _tap(call.capture, operation_model, response_dict)


def _received(context: Any, exception: Any = None, **_: Any) -> None:
    call = _call(context)
    if call is None or call.replaying:
        return
    _attempt.set(None)
    call.received()
    if isinstance(exception, Exception) and call.capture is not None:
        call.capture.failed(exception)


def _needs_retry(request_dict: Any, **_: Any) -> Any:
    call = _call(request_dict.get("context")) if isinstance(request_dict, dict) else None
    return False if call is not None and call.replaying else None


def _after_call(context: Any, **_: Any) -> None:
    call = _call(context)
    if call is None:
        return
    del context[_CALL]
    _attempt.set(None)
    call.received()
    # An SDK fast path's capture is finished by its own hook.
    if call.capture is not None and isinstance(call.taker, Tape):
        call.capture.finish()


def _register(client: Any) -> None:
    """Put the handlers on a new client's events."""
    events = client.meta.events
    service = client.meta.service_model.service_id.hyphenize()
    events.register_last("before-call", _before_call)
    events.register_first("choose-signer", _choose_signer)
    events.register_first("before-send", _before_send)
    events.register("before-parse", _before_parse)
    events.register("response-received", _received)
    # botocore's retry handler is registered per service: on the same node, and first, so
    # that its answer is the one botocore takes
    events.register_first(f"needs-retry.{service}", _needs_retry)
    events.register("after-call", _after_call)
    events.register("after-call-error", _after_call)


def _unsigned_in_replay(signature: inspect.Signature, args: tuple[Any, ...], kwargs: Any) -> Any:
    """``create_client``'s arguments, unsigned if every request of this context is replayed
    and no keys are given (so that botocore looks no credentials up)."""
    tape = http_tape.get()
    if tape is None or not tape.replaying:
        return args, kwargs
    bound = signature.bind(*args, **kwargs)
    if bound.arguments.get("aws_access_key_id") is not None:
        return args, kwargs
    unsigned = _botocore("config").Config(signature_version=_botocore().UNSIGNED)
    config = bound.arguments.get("config")
    bound.arguments["config"] = config.merge(unsigned) if config is not None else unsigned
    return bound.args, bound.kwargs


def _wrap_create_client(original: Callable[..., Any]) -> Callable[..., Any]:
    signature = inspect.signature(original)

    @functools.wraps(original)
    def create_client(*args: Any, **kwargs: Any) -> Any:
        args, kwargs = _unsigned_in_replay(signature, args, kwargs)
        client = original(*args, **kwargs)
        _register(client)
        return client

    return create_client


def patch_module(module: Any) -> None:
    """Wrap ``botocore.session.Session.create_client`` (the installer's watch of
    ``botocore.session``): each client it creates is taped through its events."""
    session = module.Session
    patch_attr(session, "create_client", _wrap_create_client(session.__dict__["create_client"]))
