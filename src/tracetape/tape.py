"""``Tape``: record a run's decisions, replay them offline, and explain the first miss.

A decision is a call at one of a run's boundaries (a model request, a tool call, an
environment read). Its key is ``kind:<sha256 of the redacted canonical payload>[:16]``, the
seed's key whenever no secret is found. Replay keeps a FIFO queue per key, returns recorded
outputs without calling anything, and raises ``ReplayMiss`` at the first input that was never
recorded, naming the fields that changed.

``Tape`` is one run's state machine: its mode, its decision API and its life in a ``with``
block, over a store. Its parts are beside it, each in a module of its own: its options in one
frozen value (``TapeOptions``), its replay queues and the diagnosis of a miss (``Replay``), its
recording's keys and writes (``Recorder``), a fork's branch as a store (``ForkStore``), and its
signals, network guard and environment checks (``Session``).

    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "run.jsonl"
    >>> with Tape(path, mode="record") as tape:
    ...     tape.call("tool", {"name": "add", "args": [1, 2], "step": 1}, lambda: 3)
    3
    >>> with Tape(path, mode="replay") as tape:
    ...     tape.call("tool", {"name": "add", "args": [1, 2], "step": 1}, lambda: 1 / 0)
    3
"""

from __future__ import annotations

import contextvars
import copy
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Unpack

from ._enums import Effect
from .calls import TapeCalls
from .canonical import canonical_json, key_of
from .config import load_config
from .deprecated import DeprecatedTapeMethods
from .errors import (
    CassetteError,
    CassetteExistsError,
    CassetteNotFoundError,
    ReplayMiss,
)
from .formats._source import stem_of
from .formats.cassette import new_run_id
from .matching import Match
from .options import Mode, TapeKeywords, TapeOptions, latency_factor
from .record import UNKEYED, Decision, Record, Unkeyed, keyed_input
from .recorder import Recorder
from .redact import Redactor, RedactRules
from .replay import Replay
from .session import Session, ending_of
from .stores import FileStore, RecordStore
from .stores.fork import ForkStore

__all__ = [
    "Decision",
    "Effect",
    "Match",
    "Mode",
    "Tape",
    "TapeOptions",
    "current_tape",
    "ending_of",
    "key",
    "latency_factor",
]

_default_redactor: Redactor | None = None


def key(kind: str, payload: Any) -> str:
    """Return the decision key of a payload: the seed's ``_key`` computed after redaction,
    of the payload without its ``"unkeyed"`` field (stored, never keyed).

    >>> key("llm", {"messages": [{"role": "user", "content": "hi"}], "step": 1})
    'llm:3abd769722df7134'
    """
    global _default_redactor  # noqa: PLW0603 - one lazily built redactor for the helper
    if _default_redactor is None:
        _default_redactor = Redactor(RedactRules.coerce(load_config("redact") or None))
    return key_of(kind, _default_redactor.redact_json(canonical_json(keyed_input(payload))))


_current: contextvars.ContextVar[Tape | None] = contextvars.ContextVar("tracetape", default=None)


def current_tape() -> Tape | None:
    """Return the tape active in this thread or asyncio task (set by ``with Tape(...)``)."""
    return _current.get()


def _unserved() -> Tape | None:
    """The replaying tape of this context when its guard is on and no hook serves it."""
    tape = _current.get()
    if tape is None or not tape.session.guard or tape.hooks or tape.mode is not Mode.REPLAY:
        return None
    return tape


def _mode_of(asked: Mode, exists: bool, name: str, rerecord: str) -> Mode:
    """What a tape asked for mode ``asked`` does with the store ``name``, where a recording
    ``exists`` or not: ``replay`` or ``record`` (or the error that it cannot)."""
    if asked is Mode.RECORD and exists:
        raise CassetteExistsError(
            "a cassette is already recorded here and mode 'record' never overwrites one; "
            f"replay it, or re-record it on purpose: {rerecord}",
            path=name,
        )
    if asked is Mode.FORK and not exists:
        raise CassetteNotFoundError(
            f"no cassette to fork; record it first: Tape({name!r}, mode='record')", path=name
        )
    if asked is Mode.AUTO:
        return Mode.REPLAY if exists else Mode.RECORD
    return {Mode.REWRITE: Mode.RECORD, Mode.FORK: Mode.REPLAY}.get(asked, asked)


class Tape(TapeCalls, DeprecatedTapeMethods):
    """Record or replay the decisions of one agent run in a cassette file or another store.

    ``path`` is the cassette file (a ``FileStore``), or any ``RecordStore``. ``mode`` (see
    ``Mode``) is ``"auto"`` by default: replay ``PATH`` if it exists, else record it;
    ``tape.mode`` is what the tape does, ``replay`` or ``record``. The keywords are
    ``TapeOptions``'s (each described there); ``options=`` gives them as one value instead.
    A recording writes ``PATH.partial``, moved over ``PATH`` on close; its trailer says how it
    ended (``completed``, ``interrupted``, ``failed: ExceptionType``). In replay, a connection
    opened in the tape's ``with`` block with no hook serving it raises ``NetworkBlockedError``.

        >>> Tape("x.jsonl", mode="rec")
        Traceback (most recent call last):
        ...
        tracetape.errors.OptionError: 'rec' is not a valid mode; use one of 'replay', 'record', \
'auto', 'rewrite', 'fork'
    """

    # The loaded recording's header and how it ended (its trailer); a fork's branch and parent
    # cassettes, its store, and where it went live (``go_live``); the ``with`` block's token.
    header: dict[str, Any] | None = None
    ended: str | None = None
    branch: Path | None = None
    parent: Path | None = None
    fork_point: dict[str, Any] | None = None
    _fork: ForkStore | None = None
    _token: contextvars.Token[Tape | None] | None = None
    _closed = False

    def __init__(
        self,
        path: str | os.PathLike[str] | RecordStore,
        mode: str | Mode = Mode.AUTO,
        *,
        options: TapeOptions | None = None,
        **keywords: Unpack[TapeKeywords],
    ):
        if options is not None and (keywords or mode is not Mode.AUTO):
            raise TypeError("Tape() takes its options as keywords or as options=, not both")
        self.options = opts = options or TapeOptions(mode=mode, **keywords)
        if isinstance(path, str | os.PathLike):
            path = FileStore(path, opts.max_record_bytes)
        self.store: RecordStore = path
        # How this tape is recorded again, as its caller runs it: every miss ends with it.
        self.rerecord = opts.rerecord or f"Tape({path.name!r}, mode='rewrite')"
        # The cassette file of a file store; for another store, its name as a path.
        self.path = getattr(path, "path", None) or Path(path.name)
        self.requested_mode = opts.mode
        self.mode = _mode_of(opts.mode, path.exists(), path.name, self.rerecord)
        self.redactor = Redactor(opts.redact_rules(), opts.redact_key)
        self.env_allow, self.strict, self.latency = opts.env_allow, opts.strict, opts.latency
        self.allow_irreversible, self.store_inputs = opts.allow_irreversible, opts.store_inputs
        self.session = Session(self.redactor, opts.env_allow, guard=not opts.allow_network)
        self.blocked = self.session.blocked  # the connections the network guard refused
        self.hooks = 0  # the hooks serving this tape now (the integrations count themselves)
        # Every ReplayMiss raised, in order: a program (or a framework's retry loop) may catch
        # one; the first is raised again when the tape closes.
        self.misses: list[ReplayMiss] = []
        self._given_match = opts.match_rules()
        self._recorder = Recorder(self.redactor, opts, self.session.environment)
        self._use(Replay([], self.redactor, self._given_match or Match()))
        if self.mode is Mode.RECORD:
            if opts.push:
                from .stores.push import PushingStore

                self.store = PushingStore(self.store, opts.push)
            self.store.begin(self._recorder.header(opts.run_id or new_run_id(stem_of(path.name))))
        else:
            cassette, replay = Replay.load(
                path,
                self.redactor,
                self._given_match,
                self.rerecord,
                trusting_edits=opts.trusting_edits,
            )
            self.header, self.ended = cassette.header, cassette.ended
            self._use(replay)
            self.session.check_drift(path.name, self.header or {}, opts.harness_sha, self.strict)
        self.fork_at = opts.fork_at
        if opts.mode is Mode.FORK:
            fork = ForkStore(self.path, opts.fork_at, opts.branch, opts.max_record_bytes)
            self.store = self._fork = fork
            self.branch, self.parent = fork.branch, fork.parent
            self.rerecord = f"Tape({fork.name!r}, mode='rewrite')"

    def _use(self, replay: Replay) -> None:
        """Replay from ``replay`` and key under its rules; ``peek`` and ``play`` read its
        queues, played flags and records as the tape's own."""
        self._replay, self.records = replay, replay.records
        self._queues, self._played = replay.queues, replay.played
        self.match = replay.match
        self._recorder.use(replay.match)

    @property
    def unplayed(self) -> list[Record]:
        """Recorded decisions that replay has not played (empty when recording)."""
        return self._replay.unplayed() if self.mode is Mode.REPLAY else []

    @property
    def matched(self) -> int:
        """How many recorded decisions replay has played so far."""
        return self._replay.matched if self.mode is Mode.REPLAY else 0

    @property
    def replaying(self) -> bool:
        """True when this tape returns recorded outputs instead of executing calls."""
        return self.mode is Mode.REPLAY

    @property
    def written(self) -> int:
        """How many records this tape wrote (the highest sequence number the store gave)."""
        return self._recorder.written

    @property
    def write_failure(self) -> CassetteError | None:
        """The first error that stopped the recording (a full disk), if any."""
        return self._recorder.write_failure

    def failed_again(self, decision: Decision) -> Record | None:
        """A request (kind ``http``) whose recorded attempts all failed, asked for once more
        than recorded: its last failure, to raise again rather than miss (a failed request
        retried in the background; see ``Replay.failed_again``)."""
        return self._replay.failed_again(decision)

    def shadow(self, key: str) -> Tape | None:
        """A replaying copy of this tape that holds only the first recorded decision of
        ``key``, with replay state of its own: playing it changes nothing of this tape,
        whatever other threads do with it meanwhile (the SDK fast path rehearses its first
        call on one). None when this tape does not replay ``key``."""
        if self.mode is not Mode.REPLAY or not self._queues.get(key):
            return None
        shadow = copy.copy(self)
        shadow._use(self._replay.only(key))
        shadow.misses, shadow._fork, shadow.latency = [], None, 0.0
        return shadow

    def rekey(self, records: list[Record]) -> None:
        """Replay ``records`` in place of the loaded ones (the same records, keyed anew by a
        migration of their keys); nothing may have been played yet."""
        if self.mode is not Mode.REPLAY or any(self._played):
            raise RuntimeError("only a replaying tape that played nothing yet can be re-keyed")
        self._use(Replay(records, self.redactor, self.match))

    def bind(self) -> contextvars.Token[Tape | None]:
        """Make this the tape of the calling thread or task (``with tape:`` and the hooks
        do). Returns the token to reset (``unbind``)."""
        return _current.set(self)

    @staticmethod
    def unbind(token: contextvars.Token[Tape | None]) -> None:
        """Undo a ``bind()``: the context's tape is the one before it again."""
        _current.reset(token)

    # -- the decision API ----------------------------------------------------------------------

    def prepare(
        self,
        kind: str,
        payload: Any,
        *,
        finite: bool = False,
        unkeyed: Unkeyed = None,
    ) -> Decision:
        """Canonicalize, redact and key a boundary input.

        The payload may still hold SDK models and tuples: they are serialized here, at call
        time, so the key and the stored input are a snapshot later mutation cannot reach.
        ``finite`` says the payload holds no NaN or infinity (see ``canonical_json``).
        Replay keys first and redacts only on a miss (``Replay.decision``); recording keys
        the whole payload (``Recorder.decision``). Under match rules the key is the payload's
        as the rules see it (``Match.keyed``). A fork goes live here, at its first miss or at
        step ``fork_at``: the decision is then keyed as a recording keys it. ``unkeyed``
        (with a mapping ``payload``) is stored with the input as its ``"unkeyed"`` field and
        never keyed: a provider's request fields that never reach the model; a payload's own
        ``"unkeyed"`` field is taken as such.
        """
        mapping = type(payload) is dict or isinstance(payload, Mapping)
        step = payload.get("step") if mapping else None
        step = step if type(step) is int else None
        if mapping and unkeyed is None and UNKEYED in payload:
            unkeyed = payload[UNKEYED]
            payload = {k: v for k, v in payload.items() if k != UNKEYED}
        if self.mode is not Mode.REPLAY:
            return self._recorder.decision(kind, payload, step, finite, unkeyed)
        decision = self._replay.decision(kind, payload, step, finite, unkeyed)
        fork = self._fork
        if fork is not None and (decision.key not in self._queues or fork.due(step)):
            self._go_live(kind, decision.key, step)
            return self._recorder.decision(kind, payload, step, finite, unkeyed)
        return decision

    def _go_live(self, kind: str, key: str, step: int | None, reason: str = "") -> None:
        """A fork's first live decision: its branch begins (``ForkStore.go_live``); from now
        on, record."""
        assert self._fork is not None
        written = self._fork.go_live(
            self._recorder.header, self.header, self.options.run_id, kind=kind, key=key, step=step,
            reason=reason,
        )  # fmt: skip
        if written is not None:
            self._recorder.written = written
        self.fork_point, self.mode = self._fork.point, Mode.RECORD

    def peek(self, decision: Decision) -> Record | None:
        """The record ``play(decision)`` would return next, without playing it (None: it
        would miss)."""
        queue = self._queues.get(decision.key) if self.mode is Mode.REPLAY else None
        return self.records[queue[0]] if queue else None

    def play(self, decision: Decision) -> Record:
        """Return the next recorded record for ``decision`` or raise ``ReplayMiss``."""
        queue = self._queues.get(decision.key)
        if not queue:
            miss = self._replay.miss(decision, self.rerecord, self.ended)
            self.misses.append(miss)
            raise miss
        index = queue.popleft()
        self._played[index] = 1
        rec = self.records[index]
        if self._fork is not None:
            self._fork.played(rec)
        if self.latency and rec.ms:
            time.sleep(rec.ms * self.latency / 1000)
        return rec

    def record(
        self,
        decision: Decision,
        out: Any,
        *,
        ms: float = 0.0,
        effect: str | Effect = Effect.READ,
        usage: Mapping[str, int] | None = None,
        api: str | None = None,
        stream_text: Callable[[tuple[Any, ...]], bool] | None = None,
    ) -> Any:
        """Write one decision and its output; returns the output as stored (redacted).

        ``usage`` is the token counts the answer reported (``{"input", "output",
        "cached"}``; the record's ``tokens`` is input plus output), ``api`` the provider route
        of a model call, ``stream_text`` the provider's rule of which strings of a streamed
        output's events are pieces of one text (redaction reads them assembled)."""
        if self.mode is not Mode.RECORD:
            raise RuntimeError(
                f"tape {self.store.name} is in {self.mode} mode; nothing can be recorded"
            )
        return self._recorder.write(
            self.store, decision, out, ms=ms, effect=effect, usage=usage, api=api,
            stream_text=stream_text,
        )  # fmt: skip

    # -- lifecycle -----------------------------------------------------------------------------

    def close(self, *, failed: bool = False, ended: str | None = None) -> None:
        """Finish the tape: seal the recording with how it ``ended`` (default: ``completed``,
        or ``failed: Exception`` when ``failed``) and move it into place, or report unplayed
        decisions. A fork that never went live writes its branch all the same."""
        if self._closed:
            return
        self._closed = True
        self.session.release_sigterm()
        self.session.disarm(_unserved)
        ended = "interrupted" if self.session.signalled else ended
        ended = ended or ("failed: Exception" if failed else "completed")
        if self._fork is not None and self.mode is Mode.REPLAY:
            why = "no divergence: the run replayed whole"
            if ended != "completed":
                why = f"no divergence before the run ended ({ended})"
            self._go_live("", "", None, why)
        if self.mode is Mode.RECORD:
            # A store of the protocol before endings takes commit() alone.
            self.store.commit() if ended == "completed" else self.store.commit(ended=ended)
        elif not failed:
            self.session.raise_caught(self.misses)
            self._replay.report_unplayed(self.store.name, self.strict)

    def ending(self, exc: BaseException | None) -> str:
        """How this recording ends if ``exc`` ends it (see ``ending_of``)."""
        return self.session.ending(exc)

    def catch_sigterm(self) -> None:
        """While recording (or forking): ``Session.catch_sigterm``, so SIGTERM closes the
        recording ``interrupted`` instead of killing it without its trailer."""
        if self.mode is Mode.RECORD or self._fork is not None:
            self.session.catch_sigterm()

    def refuse(self, what: str, address: object) -> None:
        """Refuse a request the guard saw (``guard``): note it and raise."""
        __tracebackhide__ = True
        self.session.refuse(self.store.name, what, address)

    def __enter__(self) -> Tape:
        self._token = self.bind()
        self.catch_sigterm()
        if self.mode is Mode.REPLAY:
            self.session.arm(_unserved)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._token is not None:
            _current.reset(self._token)
            self._token = None
        self.close(failed=exc is not None, ended=self.ending(exc))
        self.session.raise_turned(exc, self.misses)

    async def __aenter__(self) -> Tape:
        return self.__enter__()

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.__exit__(kind, exc, tb)

    def __repr__(self) -> str:
        return f"Tape({self.store.name!r}, mode={self.mode.value!r})"
