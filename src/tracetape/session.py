"""``Session``: what a tape minds while it is open, beside its calls.

A ``Tape`` keys, replays and records; its session holds the rest of its time in a ``with``
block: SIGTERM (a recording tape entered in the main thread makes it ``SystemExit(143)``, so
the recording closes ``interrupted`` with its trailer instead of dying without one), the
network guard (in replay, a connection opened in the tape's context with no hook serving it
is refused, and each refusal is kept in ``blocked``), the environment's drift from the
recording (the allowed variables by digest, the harness files or git SHA), and how the run
ended: ``ending``, and the errors the program caught or turned into its own, which the tape
raises again when it closes.

    >>> from tracetape.redact import Redactor
    >>> session = Session(Redactor(), env_allow=(), guard=True)
    >>> session.ending(None), session.ending(KeyboardInterrupt())
    ('completed', 'interrupted')
"""

from __future__ import annotations

import os
import signal
import threading
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NoReturn

from . import guard as _guard
from .errors import EnvironmentDriftError, NetworkBlockedError, ReplayMiss, TapeWarning
from .harness import environment_drift
from .redact import Redactor

__all__ = ["Session", "ending_of"]


def ending_of(exc: BaseException | None, signalled: bool = False) -> str:
    """How a recording ended, for its trailer: ``completed``, ``interrupted`` (a signal,
    Ctrl-C) or ``failed: ExceptionType`` (``sys.exit(0)`` is ``completed``).

    >>> ending_of(None), ending_of(KeyboardInterrupt()), ending_of(ValueError())
    ('completed', 'interrupted', 'failed: ValueError')
    """
    if signalled or isinstance(exc, KeyboardInterrupt):
        return "interrupted"
    if exc is None or (isinstance(exc, SystemExit) and exc.code in (None, 0)):
        return "completed"
    return f"failed: {type(exc).__name__}"


class Session:
    """A tape's signals, network guard and environment checks (see the module docstring).

    ``redactor`` digests the ``env_allow`` variables' values; ``guard`` is the network
    guard's switch (``Tape(allow_network=True)`` turns it off).
    """

    def __init__(self, redactor: Redactor, env_allow: Sequence[str], guard: bool):
        self.redactor = redactor
        self.env_allow = tuple(env_allow)
        self.guard = guard
        self.armed = False
        self.blocked: list[NetworkBlockedError] = []
        self.signalled = False
        self._sigterm: Callable[[int, object], None] | None = None

    # -- the environment ---------------------------------------------------------------------

    def env_digest(self, name: str) -> str | None:
        """The keyed digest of environment variable ``name``'s value (None: unset)."""
        value = os.environ.get(name)
        if value is None:
            return None
        return f"hmac:{self.redactor.mac(value, 16)}"

    def environment(self) -> dict[str, str | None] | None:
        """The header's ``env``: each allowed variable's digest (None: none allowed)."""
        return {name: self.env_digest(name) for name in self.env_allow} or None

    def check_drift(
        self, name: str, header: Mapping[str, Any], harness_sha: str | None, strict: bool
    ) -> None:
        """Warn (``strict``: raise ``EnvironmentDriftError``) when the environment or the
        harness differs from the recording of ``name``, whose header is ``header``."""
        drift = environment_drift(header, self.env_allow, self.env_digest, harness_sha)
        if not drift:
            return
        message = f"{name}: replaying under drift: " + "; ".join(drift)
        if strict:
            raise EnvironmentDriftError(message, drift)
        warnings.warn(message, TapeWarning, stacklevel=4)

    # -- signals -----------------------------------------------------------------------------

    def catch_sigterm(self) -> None:
        """In the main thread, with SIGTERM's default action: make SIGTERM end the program as
        ``SystemExit(143)``, so a recording closes ``interrupted`` (``with`` blocks and
        ``atexit`` run) instead of dying without its trailer."""
        if threading.current_thread() is not threading.main_thread():
            return
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            return

        def terminated(signum: int, frame: object) -> None:
            self.signalled = True
            raise SystemExit(128 + signum)

        signal.signal(signal.SIGTERM, terminated)
        self._sigterm = terminated

    def release_sigterm(self) -> None:
        """Give SIGTERM its default action back, if ``catch_sigterm`` took it."""
        if self._sigterm is None:
            return
        handler, self._sigterm = self._sigterm, None
        main = threading.current_thread() is threading.main_thread()
        if main and signal.getsignal(signal.SIGTERM) is handler:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)

    # -- the network guard -------------------------------------------------------------------

    def arm(self, find: Callable[[], _guard.Refuser | None]) -> None:
        """Switch the network guard on for this tape (once); ``find`` names the tape of the
        calling context that refuses, if any."""
        if self.guard and not self.armed:
            self.armed = True
            _guard.arm(1, find)

    def disarm(self, find: Callable[[], _guard.Refuser | None]) -> None:
        """Switch the network guard off for this tape, if ``arm`` switched it on."""
        if self.armed:
            self.armed = False
            _guard.arm(-1, find)

    def refuse(self, name: str, what: str, address: object) -> NoReturn:
        """Refuse a request the guard saw in the context of the tape of ``name``: keep the
        error in ``blocked`` and raise it."""
        __tracebackhide__ = True
        error = NetworkBlockedError(
            f"tracetape: {name} replays, and {what} was made in its context: "
            "no hook serves this tape, so the request would go live; enable the hooks: "
            "`with tracetape.patch_sdks(tape):` (every provider's SDK and MCP) or "
            "`with tracetape.patch_http(tape):` (every httpx, aiohttp and botocore request); "
            "Tape(..., allow_network=True) lets untaped connections through",
            address,
        )
        self.blocked.append(error)
        raise error

    # -- the ending --------------------------------------------------------------------------

    def ending(self, exc: BaseException | None) -> str:
        """How the recording ends if ``exc`` ends it (see ``ending_of``)."""
        return ending_of(exc, self.signalled)

    def raise_caught(self, misses: Sequence[ReplayMiss]) -> None:
        """At the close of a replay the program did not fail: raise the first refused
        connection, else the first miss, that the program caught and went on after (or a
        framework wrapped and retried): the run diverged all the same."""
        if self.blocked and not misses:
            first_blocked = self.blocked[0]
            first_blocked.add_note("tracetape: the program caught this error and went on")
            raise first_blocked
        if misses:
            first = misses[0]
            first.add_note("tracetape: the program caught this ReplayMiss and went on")
            raise first

    def raise_turned(self, exc: BaseException | None, misses: Sequence[ReplayMiss]) -> None:
        """When ``exc`` ended the ``with`` block: raise the first refused connection, or the
        first miss, that the program (an SDK, a framework) turned into ``exc``, an error of its
        own (a connection error after retries): the diagnosis is what the user needs to see."""
        if exc is None:
            return
        if self.blocked and not misses and not isinstance(exc, NetworkBlockedError):
            blocked = self.blocked[0]
            blocked.add_note(f"tracetape: the program turned it into {type(exc).__name__}")
            raise blocked from None
        if misses and not isinstance(exc, ReplayMiss):
            first = misses[0]
            first.add_note(f"tracetape: the program turned it into {type(exc).__name__}: {exc}")
            raise first from None
