"""``TapeCalls``: ``call`` and ``acall``, a tape's decision API around a plain function.

``tape.call(kind, payload, do)`` keys ``payload``; in replay it returns the recorded output and
never runs ``do``; while recording it runs ``do`` (an ``irreversible`` call runs its ``stub``
instead) and records what it returned, with its time. ``acall`` is the async twin. Both are
made of the tape's ``prepare``, ``play`` and ``record`` alone (``Decides``), so ``Tape``
inherits them as it inherits its deprecated methods.

    >>> import tempfile, pathlib
    >>> from tracetape import Tape
    >>> with Tape(pathlib.Path(tempfile.mkdtemp()) / "run.jsonl", mode="record") as tape:
    ...     tape.call("tool", {"name": "add", "args": [1, 2], "step": 1}, lambda: 3)
    3
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar, cast

from ._enums import Effect
from .errors import IrreversibleEffectError
from .options import Mode
from .record import Decision, Record

__all__ = ["Decides", "TapeCalls"]

T = TypeVar("T")


class Decides(Protocol):
    """What ``call`` and ``acall`` need of a tape."""

    mode: Mode
    allow_irreversible: bool

    def prepare(self, kind: str, payload: Any, *, finite: bool = False) -> Decision:
        """Key a boundary input."""
        ...

    def play(self, decision: Decision) -> Record:
        """The next recorded record of ``decision`` (or ``ReplayMiss``)."""
        ...

    def record(self, decision: Decision, out: Any, *, ms: float = ..., effect: Effect) -> Any:
        """Write ``decision`` and its output."""
        ...


def _effect_of(decision: Decision, effect: str | Effect, stub: Any, allowed: bool) -> Effect:
    """The effect a call is recorded with; an irreversible one with no ``stub`` runs for real
    only when ``allowed`` (``allow_irreversible``)."""
    tag = Effect.parse(effect)
    if tag is Effect.IRREVERSIBLE and stub is None and not allowed:
        raise IrreversibleEffectError(
            f"{decision.key} is an irreversible tool call and would run for real while "
            "recording; pass stub=<callable returning the output to record>, or "
            "Tape(..., allow_irreversible=True) to run it for real"
        )
    return tag


class TapeCalls:
    """The mixin ``Tape`` inherits ``call`` and ``acall`` from (see the module docstring)."""

    def call(
        self: Decides,
        kind: str,
        payload: Any,
        do: Callable[[], T],
        *,
        effect: str | Effect = Effect.READ,
        stub: Callable[[], T] | None = None,
    ) -> T:
        """Record ``do()``'s result under ``payload``'s key, or in replay return the recorded one.

        ``effect`` tags the call; an ``"irreversible"`` call runs ``stub`` instead of ``do``
        while recording (or ``do`` only with ``allow_irreversible=True``).
        """
        decision = self.prepare(kind, payload)
        if self.mode is Mode.REPLAY:
            return cast(T, self.play(decision).out)
        tag = _effect_of(decision, effect, stub, self.allow_irreversible)
        start = time.perf_counter()
        out = (stub or do)()
        self.record(decision, out, ms=(time.perf_counter() - start) * 1000, effect=tag)
        return out

    async def acall(
        self: Decides,
        kind: str,
        payload: Any,
        do: Callable[[], Awaitable[T]],
        *,
        effect: str | Effect = Effect.READ,
        stub: Callable[[], Awaitable[T]] | None = None,
    ) -> T:
        """The async twin of ``call``: ``do`` (and ``stub``) return awaitables."""
        decision = self.prepare(kind, payload)
        if self.mode is Mode.REPLAY:
            return cast(T, self.play(decision).out)
        tag = _effect_of(decision, effect, stub, self.allow_irreversible)
        start = time.perf_counter()
        out = await (stub or do)()
        self.record(decision, out, ms=(time.perf_counter() - start) * 1000, effect=tag)
        return out
