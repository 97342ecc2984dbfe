"""What the hooks keep, per tape and per process: which tape a hooked call goes through, and
each tape's hook state (``HookState``: responses still being read, the step book, the
SDK fast path's warm-up). ``Tape`` knows none of it: the state lives here, beside the hooks.
"""

from __future__ import annotations

import contextvars
import threading
import weakref
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..tape import Tape, current_tape
from .steps import StepBook

__all__ = [
    "HookState",
    "Pending",
    "current_step",
    "http_tape",
    "resolve_tape",
    "set_default_tape",
    "state_of",
]


class Pending(Protocol):
    """A response still being read and recorded as it is (``capture.Capture``)."""

    def abandon(self) -> None:
        """Record it as far as it was read."""


@dataclass
class HookState:
    """What the hooks keep for one tape: the captures of responses still being read (written
    when they end), the step book, and for the SDK fast path the routes the cassette answers
    (found once), whether each one's first call was rehearsed, and the SDKs a client was
    built for; and the requests sent to telemetry hosts."""

    pending: set[Pending] = field(default_factory=set)
    steps: StepBook = field(default_factory=StepBook)
    answered: dict[str, Any] | None = None
    rehearsed: dict[Any, bool] = field(default_factory=dict)
    built: set[str] = field(default_factory=set)
    migrated: bool = False
    # Requests to telemetry hosts (``telemetry``), per host: never recorded; answered in replay.
    telemetry: Counter[str] = field(default_factory=Counter)


_states: weakref.WeakKeyDictionary[Tape, HookState] = weakref.WeakKeyDictionary()
_states_lock = threading.Lock()


def state_of(tape: Tape) -> HookState:
    """The hook state of ``tape`` (made on first use)."""
    found = _states.get(tape)
    if found is None:
        with _states_lock:
            found = _states.get(tape)
            if found is None:
                found = _states[tape] = HookState()
    return found


# The process-wide tape of ``tracetape.patch(tape)``; a tape bound in the current context
# (``with tape:``, ``patch_sdks(tape)``) always wins over it.
_default_tape: Tape | None = None
_default_lock = threading.Lock()

# Set inside ``patch_http(tape)``: every request of every watched transport in this thread or
# task goes through that tape (else only model requests do, through ``resolve_tape()``).
http_tape: contextvars.ContextVar[Tape | None] = contextvars.ContextVar(
    "tracetape_http", default=None
)


def resolve_tape() -> Tape | None:
    """The tape a hooked call made now goes through: this context's tape, else the process one."""
    return current_tape() or _default_tape


def set_default_tape(tape: Tape | None) -> Tape | None:
    """Install ``tape`` as the process-wide default; returns the previous one."""
    global _default_tape
    with _default_lock:
        previous, _default_tape = _default_tape, tape
    return previous


def current_step(tape: Tape) -> int:
    """The step a tool call or environment read made now belongs to, by default: the latest
    model call of this thread or task on ``tape``, else the tape's latest (0: none yet)."""
    return state_of(tape).steps.current_step()
