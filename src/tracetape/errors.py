"""Errors and warnings raised by tracetape.

The tree::

    TapeError                      base of everything tracetape raises on purpose
    ├── CassetteError              a cassette file cannot be read or written as asked
    │   ├── CassetteNotFoundError  replay asked for a missing cassette (a FileNotFoundError)
    │   └── CassetteVersionError   the cassette was written in a format this version cannot read
    ├── ReplayMiss                 the run asked for a decision that was never recorded
    ├── UnplayedDecisionsError     strict replay closed with recorded decisions never played
    ├── EnvironmentDriftError      strict replay under a different environment or harness SHA
    ├── IrreversibleEffectError    an irreversible tool would run for real while recording
    └── NetworkBlockedError        a replayed test tried to open a network connection

    TapeWarning(UserWarning)       the same drift and unplayed reports when not strict

Every error carries the objects that explain it (``.path``, ``.line``, ``.expected``,
``.changes``...) and its message says what to do next.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "CassetteError",
    "CassetteNotFoundError",
    "CassetteVersionError",
    "EnvironmentDriftError",
    "IrreversibleEffectError",
    "NetworkBlockedError",
    "ReplayMiss",
    "TapeError",
    "TapeWarning",
    "UnplayedDecisionsError",
]


class TapeError(Exception):
    """Base class of every error tracetape raises on purpose."""


class TapeWarning(UserWarning):
    """Raised as a warning when replay runs under drift that is not fatal without ``strict``."""


class CassetteError(TapeError):
    """Raised when a cassette file is corrupt, unreadable or cannot be written.

    ``.path`` is the file and ``.line`` the 1-based line number when one is at fault.
    """

    def __init__(self, message: str, *, path: str | Path | None = None, line: int | None = None):
        self.path = str(path) if path is not None else None
        self.line = line
        where = ""
        if self.path is not None:
            where = f"{self.path}:{line}: " if line is not None else f"{self.path}: "
        super().__init__(where + message)


class CassetteNotFoundError(CassetteError, FileNotFoundError):
    """Raised when replay is asked for a cassette file that does not exist."""


class CassetteVersionError(CassetteError):
    """Raised when a cassette header names a format version this tracetape cannot read."""


class ReplayMiss(TapeError):
    """Raised when a replayed run asks for a decision that was never recorded.

    The first line of the message is exactly ``{key} was never recorded — the run diverged
    here``; the rest is the diagnosis. ``.expected`` is the recorded decision the run was
    expected to make next (a dict, or None) and ``.changes`` the input paths that differ.
    """

    def __init__(
        self,
        key: str,
        *,
        kind: str,
        step: int | None,
        matched: int,
        recorded: int,
        expected: Mapping[str, Any] | None,
        changes: Sequence[str],
        diagnosis: str = "",
    ):
        self.key = key
        self.kind = kind
        self.step = step
        self.matched = matched
        self.recorded = recorded
        self.expected = dict(expected) if expected is not None else None
        self.changes = list(changes)
        self.diagnosis = diagnosis
        first = f"{key} was never recorded — the run diverged here"
        super().__init__(f"{first}\n{diagnosis}" if diagnosis else first)


class UnplayedDecisionsError(TapeError):
    """Raised on closing a strict replay whose cassette holds decisions the run never played."""

    def __init__(self, message: str, unplayed: Sequence[Mapping[str, Any]]):
        self.unplayed = [dict(r) for r in unplayed]
        super().__init__(message)


class EnvironmentDriftError(TapeError):
    """Raised by strict replay when an allowed environment variable or the harness SHA changed."""

    def __init__(self, message: str, drift: Sequence[str]):
        self.drift = list(drift)
        super().__init__(message)


class IrreversibleEffectError(TapeError):
    """Raised when recording would run an irreversible tool for real without consent or stub."""


class NetworkBlockedError(TapeError):
    """Raised when code under a replay-mode network guard opens a connection or resolves a host.

    ``.address`` is what was asked for (``(host, port)`` or a host name). Not an ``OSError`` on
    purpose: HTTP clients retry those and wrap them into their own connection errors.
    """

    def __init__(self, message: str, address: object):
        self.address = address
        super().__init__(message)
