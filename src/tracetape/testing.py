"""Test helpers that work with or without pytest; the pytest plugin is a thin layer over them.

* ``TapeCase``: one test's tape. It picks the cassette mode from a *test mode* (``replay``,
  ``record``, ``auto``, ``rewrite``), patches the SDKs for the test's duration, guards the
  network in replay, and on a clean exit still fails if the code under test swallowed a
  ``ReplayMiss`` or a blocked connection.
* ``block_network`` (from ``integrations.network``): a context manager under which any
  connection to the network (loopback included unless allowed) raises ``NetworkBlockedError``.
* ``default_cassette_path``: ``cassettes/<test module>/<test name>.jsonl`` beside the test.
* ``TapeUsage``: which cassettes a session opened and which recorded decisions it never
  played, for ``--tape-report``.

    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "case.jsonl"
    >>> with TapeCase(path, "auto", sdk=False) as tape:
    ...     tape.call("tool", {"name": "now"}, lambda: "noon")
    'noon'
    >>> with TapeCase(path, "replay", sdk=False) as tape:
    ...     tape.call("tool", {"name": "now"}, lambda: "late")
    'noon'
"""

from __future__ import annotations

import contextlib
import re
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from ._lazy import collector_paused
from .errors import CassetteNotFoundError, ReplayMiss, TapeWarning
from .integrations.network import NetworkGuard, block_network, untaped_traffic, watch_network
from .record import Record
from .tape import Mode, Tape

# The fixes a warning of untaped traffic gives (``network.untaped_traffic``).
HOOK_FIX = "tape them with tracetape.patch_http(tape) (every request) or @tracetape.tool"
UNHOOKED_FIX = (
    "no hook of tracetape hears that client (raw sockets, or an HTTP library it does not "
    "patch): put the call in a @tracetape.tool, or give the framework an httpx, aiohttp or "
    "requests engine (dspy and others: their litellm engine)"
)

__all__ = [
    "NetworkGuard",
    "TapeCase",
    "TapeUsage",
    "TestMode",
    "block_network",
    "default_cassette_path",
]


TestMode = Mode
"""The modes of a test suite's cassettes (``--tape-mode``): the tape's own ``Mode``."""


# -- one test's tape ----------------------------------------------------------------------------

_UNSAFE = re.compile(r"[^\w.\-\[\]=,+@]")


def default_cassette_path(
    test_file: str | Path, test_name: str, class_name: str | None = None
) -> Path:
    """``cassettes/<test module>/<[Class.]test name>.jsonl`` in the test file's folder.

    >>> default_cassette_path("tests/test_agent.py", "test_plan[gpt/4o]").as_posix()
    'tests/cassettes/test_agent/test_plan[gpt_4o].jsonl'
    """
    test_file = Path(test_file)
    name = f"{class_name}.{test_name}" if class_name else test_name
    return test_file.parent / "cassettes" / test_file.stem / f"{_UNSAFE.sub('_', name)}.jsonl"


def _patch_sdks(tape: Tape) -> contextlib.AbstractContextManager[Any]:
    with collector_paused():  # the hooks' modules, imported the first time
        from .integrations.sdk import patch_sdks

    return patch_sdks(tape)


class TapeCase:
    """One test's tape: mode, SDK patches and network guard, opened and closed together.

    ``mode`` is a ``TestMode``; ``record_hint`` and ``rewrite_hint`` say how to record or
    re-record the cassette, ``network_hint`` ends a blocked connection's message;
    ``sdk=False`` leaves the SDKs alone;
    other keyword arguments go to ``Tape`` (``strict``, ``redact``, ``env_allow``...).
    ``on_close(case)`` runs after the tape is closed (``TapeUsage.note`` fits).
    """

    def __init__(
        self,
        path: str | Path,
        mode: str | Mode = Mode.REPLAY,
        *,
        allow_loopback: bool = False,
        allow_hosts: Iterable[str] = (),
        sdk: bool = True,
        record_hint: str = "",
        rewrite_hint: str = "",
        network_hint: str = "",
        on_close: Callable[[TapeCase], None] | None = None,
        **tape_options: Any,
    ):
        self.path = Path(path)
        self.mode: Mode = Mode.parse(mode)
        self.allow_loopback = allow_loopback
        self.allow_hosts = tuple(allow_hosts)
        self.sdk = sdk
        self.record_hint = record_hint
        self.rewrite_hint = rewrite_hint
        self.network_hint = network_hint
        self.on_close = on_close
        self.tape_options = tape_options
        self.tape: Tape | None = None
        self.guard: NetworkGuard | None = None
        self.watcher: NetworkGuard | None = None  # in record modes: what the test reached
        self._stack = contextlib.ExitStack()

    def _tape_mode(self) -> Mode:
        if self.mode is Mode.REPLAY and not self.path.exists():
            how = f": {self.record_hint}" if self.record_hint else " (mode 'record')"
            raise CassetteNotFoundError(
                f"no cassette to replay; record it first{how}", path=self.path
            )
        return self.mode

    def open(self) -> Tape:
        """Open the tape, patch the SDKs, guard the network in replay; return the tape."""
        tape = Tape(
            self.path,
            mode=self._tape_mode(),
            rerecord=self.rewrite_hint or None,
            **{"allow_network": True, **self.tape_options},  # the case guards the network
        )
        self.tape = tape
        try:
            self._stack.enter_context(tape)
            if self.sdk:
                self._stack.enter_context(_patch_sdks(tape))
            if tape.replaying and tape.branch is None:  # a fork goes live: no guard
                self.guard = self._stack.enter_context(
                    block_network(
                        allow_loopback=self.allow_loopback,
                        allow_hosts=self.allow_hosts,
                        hint=self.network_hint,
                    )
                )
            else:
                from .integrations.capture import hearing  # the hooks' own, loaded with them

                self.watcher = self._stack.enter_context(watch_network(hearing))
        except BaseException:
            self._stack.close()
            raise
        return tape

    def close(self, *, failed: bool = False) -> None:
        """Close everything; unless ``failed``, raise what the code under test swallowed."""
        tape = self.tape
        if tape is None:
            return
        # A miss the code under test swallowed is raised by the tape's own close; a blocked
        # connection it swallowed is raised here, once everything is closed.
        swallowed: BaseException | None = None
        if not failed and not tape.misses and self.guard is not None and self.guard.attempts:
            swallowed = self.guard.attempts[0]
            swallowed.add_note(
                "tracetape: the code under test caught this blocked connection and went on"
            )
        try:
            # Unwinding the stack exits the tape without an exception, so it would not know the
            # test failed: close it first with the right flag, then unwind patches and guard.
            tape.close(failed=failed or swallowed is not None)
            if tape.fork_point is not None:
                warnings.warn(
                    f"{self.path}: forked at decision {tape.fork_point['seq']} "
                    f"({tape.fork_point['reason']}); the whole run is in the branch "
                    f"{tape.branch}",
                    TapeWarning,
                    stacklevel=2,
                )
        finally:
            self._stack.close()
            if self.on_close is not None:
                self.on_close(self)
        if swallowed is not None:
            raise swallowed
        if not failed and self.watcher is not None and self.watcher.seen:
            message = untaped_traffic(self.watcher, HOOK_FIX, UNHOOKED_FIX)
            warnings.warn(message, TapeWarning, stacklevel=2)

    def __enter__(self) -> Tape:
        return self.open()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close(failed=exc is not None)


# -- session usage, for --tape-report ------------------------------------------------------------


@dataclass
class TapeUsage:
    """What a test session did with its cassettes."""

    opened: set[Path] = field(default_factory=set)
    unplayed: dict[Path, list[Record]] = field(default_factory=dict)

    def note(self, case: TapeCase) -> None:
        """Record one closed ``TapeCase`` (use as its ``on_close``)."""
        path = case.path.resolve()
        self.opened.add(path)
        if case.tape is not None and case.tape.replaying:
            left = case.tape.unplayed
            if left:
                self.unplayed[path] = left
            else:
                self.unplayed.pop(path, None)

    def unused(self, folders: Iterable[Path], claimed: Iterable[Path] = ()) -> list[Path]:
        """Cassettes in ``folders`` that no case opened, less ``claimed`` ones (tests not run)."""
        skip = self.opened | {p.resolve() for p in claimed}
        found = {
            p.resolve() for folder in folders if folder.is_dir() for p in folder.glob("*.jsonl")
        }
        return sorted(found - skip)

    def report(self, folders: Iterable[Path], claimed: Iterable[Path] = ()) -> dict[str, Any]:
        """The ``--tape-report`` data: unused cassettes and unplayed decisions, as JSON data."""
        return {
            "unused_cassettes": [str(p) for p in self.unused(folders, claimed)],
            "unplayed_decisions": [
                {
                    "cassette": str(path),
                    "seq": rec.seq,
                    "key": rec.key,
                    "kind": rec.kind,
                    "step": rec.step,
                }
                for path, recs in sorted(self.unplayed.items())
                for rec in recs
            ],
        }


def is_replay_miss(exc: BaseException | None) -> bool:
    """True when ``exc`` is a ``ReplayMiss`` or was caused by one (an SDK wrapping it)."""
    while exc is not None:
        if isinstance(exc, ReplayMiss):
            return True
        exc = exc.__cause__ or exc.__context__
    return False
