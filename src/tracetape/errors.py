"""Errors and warnings raised by tracetape.

The tree::

    TapeError                      base of everything tracetape raises on purpose
    ├── CassetteError              a cassette file cannot be read or written as asked
    │   ├── CassetteNotFoundError  replay asked for a missing cassette (a FileNotFoundError)
    │   ├── CassetteExistsError    mode 'record' found a cassette it must not overwrite
    │   ├── CassetteLockedError    another recorder is writing this cassette
    │   ├── CassetteVersionError   the cassette was written in a format this version cannot read
    │   ├── NotACassetteError      the file holds no cassette at all (empty, or not JSON first)
    │   └── TraceError             a trace is missing, empty, malformed or of mixed schemas
    ├── ConfigError                [tool.tracetape] holds a value of the wrong shape, or the
    │   │                          analysis needs more than its memory_limit (a ValueError)
    │   ├── MatchRulesError        replay was given match rules other than the cassette's own
    │   └── OptionError            an option of a tape (TapeOptions) has a value it cannot take
    ├── ReplayMiss                 the run asked for a decision that was never recorded
    ├── UnplayedDecisionsError     strict replay closed with recorded decisions never played
    ├── EnvironmentDriftError      strict replay under a different environment or harness SHA
    ├── IrreversibleEffectError    an irreversible tool would run for real while recording
    ├── SpanError                  a span cannot be read, run live or decided as asked
    ├── NetworkBlockedError        a replayed test tried to open a network connection
    ├── PushError                  a collector refused a batch, or could not be reached
    └── RunConflict                lines of one source were sent into a run another filled

    TapeWarning(UserWarning)       the same drift and unplayed reports when not strict

Every error carries the objects that explain it (``.path``, ``.line``, ``.expected``,
``.changes``...) and its message says what to do next.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .record import Record

__all__ = [
    "CassetteError",
    "CassetteExistsError",
    "CassetteLockedError",
    "CassetteNotFoundError",
    "CassetteVersionError",
    "ConfigError",
    "EnvironmentDriftError",
    "IrreversibleEffectError",
    "MatchRulesError",
    "NetworkBlockedError",
    "NotACassetteError",
    "OptionError",
    "PushError",
    "ReplayMiss",
    "RunConflict",
    "SpanError",
    "TapeError",
    "TapeWarning",
    "TraceError",
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


class CassetteExistsError(CassetteError, FileExistsError):
    """Raised when mode ``record`` finds a cassette already there: it never overwrites one
    (mode ``rewrite`` does)."""


class CassetteLockedError(CassetteError):
    """Raised when another recorder (a thread or a process, ``.pid``) is writing the same
    cassette: one writer per cassette, checked before the agent runs."""

    def __init__(self, message: str, *, path: str | Path, pid: int | None):
        self.pid = pid
        super().__init__(message, path=path)


class NotACassetteError(CassetteError):
    """Raised for a file that holds no cassette at all: it is empty, or its first line is
    not JSON and nothing comes before it (not a recording cut short, which keeps its header)."""


class CassetteVersionError(CassetteError):
    """Raised when a cassette header names a format version this tracetape cannot read."""


class TraceError(CassetteError):
    """Raised when a trace file is missing, empty, malformed or holds mixed schemas.

    ``.path`` and ``.line`` locate the fault; ``.field`` names the record field at fault.
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | Path | None = None,
        line: int | None = None,
        field: str | None = None,
    ):
        self.field = field
        super().__init__(message, path=path, line=line)


class ConfigError(TapeError, ValueError):
    """Raised when ``[tool.tracetape]`` holds a value of the wrong shape (names file and field),
    or when the analysis needs more memory than its ``memory_limit`` (says what to raise)."""


class MatchRulesError(ConfigError):
    """Raised when match rules given at replay differ from those a cassette was recorded
    with (its header's): a cassette replays under its own rules."""


class OptionError(ConfigError):
    """Raised when an option of a tape (``TapeOptions``) has a value it cannot take.

    ``.option`` is the option's keyword; the message names it as ``Tape(...)`` takes it, and
    ``.flag_message`` says the same in ``tracetape run``'s flags (``--latency: ...``).
    """

    def __init__(self, message: str, *, option: str, flag_message: str | None = None):
        self.option = option
        self.flag_message = flag_message or message
        super().__init__(message)


class ReplayMiss(TapeError):
    """Raised when a replayed run asks for a decision that was never recorded.

    The first line of the message is exactly ``{key} was never recorded — the run diverged
    here``; the rest is the diagnosis. ``.expected`` is the recorded decision the run was
    expected to make next (a ``Record``, or None) and ``.changes`` the input paths that differ.
    """

    def __init__(
        self,
        key: str,
        *,
        kind: str,
        step: int | None,
        matched: int,
        recorded: int,
        expected: Record | None,
        changes: Sequence[str],
        diagnosis: str = "",
    ):
        self.key, self.kind, self.step = key, kind, step
        self.matched, self.recorded, self.expected = matched, recorded, expected
        self.changes, self.diagnosis = list(changes), diagnosis
        first = f"{key} was never recorded — the run diverged here"
        super().__init__(f"{first}\n{diagnosis}" if diagnosis else first)

    # The miss this one is a copy of, raised as another type too (the hooks type a miss as an
    # SDK's error so that no SDK wraps it); None: it is the miss the tape raised.
    copy_of: ReplayMiss | None = None

    def same(self, other: BaseException | None) -> bool:
        """Whether ``other`` is this miss: itself, or a copy of it raised as another type.

        >>> miss = ReplayMiss("llm:1", kind="llm", step=1, matched=0, recorded=1,
        ...                   expected=None, changes=[])
        >>> miss.same(miss), miss.same(ValueError())
        (True, False)
        """
        origin = self.copy_of or self
        return other is origin or getattr(other, "copy_of", None) is origin


class UnplayedDecisionsError(TapeError):
    """Raised on closing a strict replay whose cassette holds decisions the run never played."""

    def __init__(self, message: str, unplayed: Sequence[Record]):
        self.unplayed = list(unplayed)
        super().__init__(message)


class EnvironmentDriftError(TapeError):
    """Raised by strict replay when an allowed environment variable or the harness SHA changed."""

    def __init__(self, message: str, drift: Sequence[str]):
        self.drift = list(drift)
        super().__init__(message)


class IrreversibleEffectError(TapeError):
    """Raised when recording would run an irreversible tool for real without consent or stub."""


class SpanError(TapeError):
    """Raised when span replay cannot do what was asked: a span that is missing or malformed
    (file and field named), a command not installed here, a ``write`` span without a stub, a
    decision endpoint that fails or times out. The message says what to do next."""


class NetworkBlockedError(TapeError):
    """Raised when code under a replay-mode network guard opens a connection or resolves a host.

    ``.address`` is what was asked for (``(host, port)`` or a host name). Not an ``OSError`` on
    purpose: HTTP clients retry those and wrap them into their own connection errors.
    """

    def __init__(self, message: str, address: object):
        self.address = address
        super().__init__(message)


class PushError(TapeError):
    """Raised when a push stops: ``unreachable`` when the collector could not be reached or
    kept failing after the retries, else the collector refused a batch (the message says
    which lines and why)."""

    def __init__(self, message: str, *, unreachable: bool = False):
        self.unreachable = unreachable
        super().__init__(message)


class RunConflict(TapeError):
    """Raised when lines of one source are sent into a run another source filled (the
    collector answers 409): ``.run``, and the ``.stored`` and ``.sent`` sources."""

    def __init__(self, run: str, stored: str, sent: str):
        self.run, self.stored, self.sent = run, stored, sent
        super().__init__(
            f"run {run!r} holds the lines of {_quoted(stored)}, and these come from "
            f"{_quoted(sent)}: two traces with one run id; push with another run id "
            "(--run-id), or add these lines to it on purpose (--append)"
        )


def _quoted(text: str, width: int = 80) -> str:
    """``text`` quoted, shortened to ``width`` characters with an ellipsis in the middle
    (both ends of a path say most).

    >>> _quoted("runs/" + "x" * 200 + "/agent.jsonl")
    "'runs/xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx…xxxxxxxxxxxxxxxxxxxxxxxxxxxx/agent.jsonl'"
    """
    if len(text) > width:
        half = (width - 1) // 2
        text = text[:half] + "…" + text[len(text) - (width - 1 - half) :]
    return repr(text)
