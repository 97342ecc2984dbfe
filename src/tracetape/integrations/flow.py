"""The capture flow, written once: what a transport does with a request the tape takes.

A transport supplies an ``Adapter``: the request's parts (method, URL, content type, the
headers that carry its credentials), how to ask its body uncompressed, how a response of its
own kind is built from a record (``answer``) or a recorded failure raised (``raised``), and
how its response reports the body it is read for to a ``Tap`` (``tapped``). The flow is here:

* ``begin``: key the request (``keying.key_request``), and in replay answer it from the tape
  (``replay``); else start recording it (a ``Capture`` of its own, or the SDK fast path's that
  took it), its credentials learned so that an answer that echoes one is redacted; a request
  to a telemetry host (``telemetry``) is counted, sent unrecorded, answered empty in replay;
* ``exchange`` / ``aexchange`` (sync, async): ``begin``, then send (``capture.sending`` set, so
  an inner transport takes it no more), record a failure, tap the response;
* ``recording``: the SDK fast path records a call, whose request the transports then tap.

The ``httpx`` transports and clients' ``send`` (``http``), ``aiohttp``'s middleware
(``aiohttp_client``), ``urllib3``'s pool (``urllib3_pool``) and the proxy are adapters over
``exchange``; ``botocore_events``, whose send is a chain of events, calls ``replay`` and
``prepare`` from its handlers; the SDK fast path (``stainless``) uses ``recording``.

    >>> import inspect
    >>> [name for name in inspect.signature(exchange).parameters]
    ['adapter', 'taker', 'request', 'content', 'send']
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import Any, NamedTuple, Protocol, TypeVar

from ..tape import Tape
from . import telemetry
from .capture import (
    Capture,
    Telemetry,
    beyond_recording,
    capture_var,
    failed,
    play,
    replayed_headers,
    sending,
)
from .keying import Keyed, key_request, learn_credentials
from .state import state_of

__all__ = [
    "Adapter",
    "Answers",
    "Beyond",
    "Headers",
    "Out",
    "Parts",
    "aexchange",
    "begin",
    "exchange",
    "prepare",
    "recording",
    "replay",
]

Rq = TypeVar("Rq")  # a transport's request
Rs = TypeVar("Rs")  # and its response
Rq_contra = TypeVar("Rq_contra", contravariant=True)
Rs_co = TypeVar("Rs_co", covariant=True)


# What an answer is built from besides the request: the recorded output, headers besides its
# content type, and what raises past the end of a stream the recorded run abandoned.
Out = Mapping[str, Any]
Headers = Mapping[str, str]
Beyond = Callable[[], BaseException] | None


class Parts(NamedTuple):
    """What the flow reads of a request: ``url`` as scheme, netloc, path and query."""

    method: str
    url: tuple[str, str, str, str]
    content_type: str
    headers: Mapping[str, str]


class Answers(Protocol[Rq_contra, Rs_co]):
    """How a transport answers a request from the tape."""

    def answer(self, request: Rq_contra, out: Out, headers: Headers, beyond: Beyond) -> Rs_co:
        """The response to ``request`` built from a recorded output (``headers`` besides its
        content type; ``beyond`` raises past the end of a stream the recorded run abandoned)."""
        ...

    def raised(self, request: Rq_contra, out: Mapping[str, Any]) -> BaseException:
        """The recorded failure (no response at all), as the transport raises it."""
        ...


class Adapter(Answers[Rq_contra, Rs], Protocol):
    """What a transport supplies to the flow besides its answers."""

    def parts(self, request: Rq_contra) -> Parts:
        """The request's parts."""
        ...

    def identity(self, request: Rq_contra) -> None:
        """Ask for the body uncompressed (a recorded body is stored decoded)."""
        ...

    def tapped(self, request: Rq_contra, response: Rs, capture: Capture) -> Rs:
        """``response`` to ``request``, reporting its body to ``capture`` as it is read."""
        ...


def replay(adapter: Answers[Rq, Rs], tape: Tape, keyed: Keyed, request: Rq) -> Rs:
    """The recorded answer to a keyed request; a miss is raised the way the SDKs let it
    through (``capture.play``), a recorded failure (no response) as the exception it was."""
    again = tape.failed_again(keyed.decision)
    if again is not None:
        raise adapter.raised(request, again.out)
    rec = play(tape, keyed)
    if failed(rec.out):
        raise adapter.raised(request, rec.out)
    headers = replayed_headers(tape, keyed, rec.out)
    return adapter.answer(request, rec.out, headers, beyond_recording(tape, keyed.decision, rec))


def prepare(tape: Tape, parts: Parts) -> None:
    """Before a request is sent to be recorded: learn the credentials it carries."""
    learn_credentials(tape, parts.headers, parts.url[3])


# What ``begin`` returns for a request that is sent as it is, unrecorded (a telemetry host's).
PASS: Any = object()

Taker = Capture | Tape | Telemetry


def begin(adapter: Adapter[Rq, Rs], taker: Taker, request: Rq, content: bytes) -> Any:
    """The answer (``Rs``) when ``taker`` is a replaying tape, else the ``Capture`` that
    records this request, ready to send (``content`` is the request's body), or ``PASS`` for
    a telemetry request recorded by nobody (answered with an empty success in replay)."""
    parts = adapter.parts(request)
    if isinstance(taker, Telemetry):
        host = parts.url[1].rsplit("@", 1)[-1]
        state_of(taker.tape).telemetry[host] += 1
        if taker.tape.replaying:
            return adapter.answer(request, telemetry.answer(parts.content_type), {}, None)
        return PASS
    if isinstance(taker, Tape):
        keyed = key_request(taker, parts.method, parts.url, content, parts.content_type)
        if taker.replaying:
            return replay(adapter, taker, keyed, request)
        capture = Capture(taker, keyed, final=True)
    else:
        capture = taker
    prepare(capture.tape, parts)
    adapter.identity(request)
    return capture


def exchange(
    adapter: Adapter[Rq, Rs],
    taker: Taker,
    request: Rq,
    content: bytes,
    send: Callable[[Rq], Rs],
) -> Rs:
    """Take ``request``: answer it from the tape, or ``send`` it and record its response."""
    begun = begin(adapter, taker, request, content)
    if begun is not PASS and not isinstance(begun, Capture):
        return begun  # type: ignore[no-any-return]
    with _sending(begun):
        response = send(request)
    return response if begun is PASS else adapter.tapped(request, response, begun)


async def aexchange(
    adapter: Adapter[Rq, Rs],
    taker: Taker,
    request: Rq,
    content: bytes,
    send: Callable[[Rq], Awaitable[Rs]],
) -> Rs:
    """The async twin of ``exchange``."""
    begun = begin(adapter, taker, request, content)
    if begun is not PASS and not isinstance(begun, Capture):
        return begun  # type: ignore[no-any-return]
    with _sending(begun):
        response = await send(request)
    return response if begun is PASS else adapter.tapped(request, response, begun)


@contextlib.contextmanager
def _sending(begun: Capture | Any) -> Iterator[None]:
    """While a taken request is sent: no inner transport takes it (``capture.sending``), and a
    failure to send is recorded (``Capture.failed``) unless nobody records it (``PASS``)."""
    token = sending.set(True)
    try:
        yield
    except Exception as exc:
        if begun is not PASS:
            begun.failed(exc)
        raise
    finally:
        sending.reset(token)


@contextlib.contextmanager
def recording(tape: Tape, keyed: Keyed) -> Iterator[Capture]:
    """Record one SDK call as ``keyed``: its attempts' responses are tapped by the transports
    (``capture_var``), and the one the call ends with is written when the block ends."""
    capture = Capture(tape, keyed)
    token = capture_var.set(capture)
    try:
        yield capture
    finally:
        capture_var.reset(token)
        capture.finish()
