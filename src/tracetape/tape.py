"""``Tape``: record a run's decisions, replay them offline, and explain the first miss.

A decision is a call at one of a run's boundaries (a model request, a tool call, an
environment read). Its key is ``kind:<sha256 of the redacted canonical payload>[:16]``, the
seed's key whenever no secret is found. Replay keeps a FIFO queue per key, returns recorded
outputs without calling anything, and raises ``ReplayMiss`` at the first input that was never
recorded, naming the fields that changed.

Why one module: ``Tape`` is one state machine (its mode, its queues per key, its step and
flow counters, its pending records and its writer) whose every method reads and changes that
state under one lock; the helpers above it are the few pure functions it alone uses. Split
by method, the state would have to be public to every part.

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
import json
import os
import signal
import sys
import threading
import time
import warnings
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar, cast

import msgspec

from . import guard
from ._enums import Effect, LoudEnum
from .canonical import (
    StreamKey,
    canonical_json,
    changed_paths,
    digest,
    field_digests,
    key_of,
    keyer,
)
from .config import load_config
from .deprecated import DeprecatedTapeMethods
from .diagnose import explain_miss
from .errors import (
    CassetteError,
    CassetteExistsError,
    CassetteNotFoundError,
    EnvironmentDriftError,
    IrreversibleEffectError,
    MatchRulesError,
    NetworkBlockedError,
    ReplayMiss,
    TapeWarning,
    UnplayedDecisionsError,
)
from .formats._source import stem_of
from .formats.cassette import (
    KEYS_VERSION,
    MAX_RECORD_BYTES,
    RUN_ID,
    final_chain,
    new_header,
    new_run_id,
)
from .harness import environment_drift, git_sha, harness_digest
from .matching import Match
from .record import RAISED, Decision, Record
from .redact import Redactor, RedactRules
from .stores import FileStore, RecordStore

__all__ = [
    "Decision",
    "Effect",
    "Match",
    "Mode",
    "Tape",
    "current_tape",
    "ending_of",
    "key",
    "latency_factor",
]

T = TypeVar("T")


class Mode(LoudEnum):
    """What a tape does with its cassette: the one vocabulary of the API, ``tracetape run``
    and the pytest plugin (``--tape-mode``).

    ``replay`` returns recorded outputs and fails on a missing cassette; ``record`` runs live
    and writes a cassette that does not exist yet (an existing one is an error, never
    overwritten); ``auto`` (the default of ``Tape``) replays a cassette that exists and records
    one that does not; ``rewrite`` runs live and overwrites; ``fork`` replays while the run
    matches the cassette and goes live from its first decision that does not (or from step
    ``fork_at``), writing the whole run to a branch cassette and never changing the parent.
    """

    __test__ = False  # not a pytest test class, whatever a test module names it

    REPLAY = "replay"
    RECORD = "record"
    AUTO = "auto"
    REWRITE = "rewrite"
    FORK = "fork"


_default_redactor: Redactor | None = None


def latency_factor(value: str | float | None) -> float:
    """The factor of each replayed decision's recorded ``ms`` that replay waits: 0 (instant,
    the default: None, ``"instant"``), 1 (``"recorded"``) or a factor given as a number.

    >>> latency_factor("recorded"), latency_factor("0.5"), latency_factor(None)
    (1.0, 0.5, 0.0)
    """
    if value is None or value == "instant":
        return 0.0
    if value == "recorded":
        return 1.0
    try:
        factor = float(value)
    except (TypeError, ValueError):
        factor = -1.0
    if not 0 <= factor <= 1000:  # a NaN is not either
        raise ValueError(
            f"replay latency {value!r} is not 'instant', 'recorded' or a factor from 0 to 1000"
        )
    return factor


def _branch_path(parent: Path, fork_at: int | None) -> Path:
    """Where a fork of ``parent`` goes by default: named for its fork point,
    ``NAME.fork-3.jsonl`` for step 3 (``NAME.fork-miss.jsonl`` at the first miss), then
    ``NAME.fork-3-2.jsonl``... while taken.

    >>> parent = Path("/nowhere/run.jsonl")
    >>> _branch_path(parent, 3).name, _branch_path(parent, None).name
    ('run.fork-3.jsonl', 'run.fork-miss.jsonl')
    """
    name = f"{parent.name.removesuffix('.jsonl')}.fork-{'miss' if fork_at is None else fork_at}"
    found, n = parent.with_name(f"{name}.jsonl"), 1
    while found.exists():
        n += 1
        found = parent.with_name(f"{name}-{n}.jsonl")
    return found


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


def key(kind: str, payload: Any) -> str:
    """Return the decision key of a payload: the seed's ``_key`` computed after redaction.

    >>> key("llm", {"messages": [{"role": "user", "content": "hi"}], "step": 1})
    'llm:3abd769722df7134'
    """
    global _default_redactor  # noqa: PLW0603 - one lazily built redactor for the helper
    if _default_redactor is None:
        _default_redactor = Redactor(RedactRules.coerce(load_config("redact") or None))
    return key_of(kind, _default_redactor.redact_json(canonical_json(payload)))


_current: contextvars.ContextVar[Tape | None] = contextvars.ContextVar("tracetape", default=None)

# The key of the output recorded in place of a result when the call raised (a tool's error, a
# request that got no response); a result holding exactly this key would replay as an error,
# which is why the name is namespaced.


def _failure(rec: Record) -> bool:
    return isinstance(rec.out, dict) and RAISED in rec.out


def _task() -> object | None:
    """The running asyncio task, if any."""
    aio = sys.modules.get("asyncio")  # a program that never imported asyncio runs no task
    if aio is None:
        return None
    loop = aio._get_running_loop()  # None outside a loop (current_task would raise)
    if loop is None:
        return None
    task: object | None = aio.current_task(loop)
    return task


def _flow() -> tuple[int, int]:
    """The calling flow: its thread, and its asyncio task if one runs."""
    task = _task()
    return threading.get_ident(), id(task) if task is not None else 0


def _unserved() -> Tape | None:
    """The replaying tape of this context when its guard is on and no hook serves it."""
    tape = _current.get()
    if tape is None or not tape._guard or tape.hooks or tape.mode is not Mode.REPLAY:
        return None
    return tape


def current_tape() -> Tape | None:
    """Return the tape active in this thread or asyncio task (set by ``with Tape(...)``)."""
    return _current.get()


class Tape(DeprecatedTapeMethods):
    """Record or replay the decisions of one agent run in a cassette file or another store.

    ``path`` is the cassette file (a ``FileStore``), or any ``RecordStore``. ``mode`` (see
    ``Mode``) is ``"auto"`` by default: replay ``PATH`` if it exists, else record it;
    ``"replay"`` returns recorded outputs and executes nothing; ``"record"`` writes a new
    cassette (``PATH.partial``, moved over ``PATH`` on close) and refuses to overwrite one;
    ``"rewrite"`` records over an existing one. ``tape.mode`` is what the tape does:
    ``replay`` or ``record``. ``redact`` adds secret rules to the built-ins and
    ``[tool.tracetape.redact]``; ``env_allow`` names environment variables recorded as
    hashes; ``harness_paths`` names the agent-loop files whose content is the harness (else
    the git HEAD is); ``strict`` turns unplayed decisions and environment drift into errors;
    ``rerecord`` is how the caller records the tape again (``tracetape run`` and the pytest
    plugin give their own command line), named at the end of every miss. ``push`` is a
    collector's URL: a recording also goes there, live, in the background (``PushingStore``:
    never blocking the agent; what could not be sent stays in the cassette and is reported).
    A recording's header carries its ``run_id`` (default: unique, the cassette's name and 12
    random hex digits); the collector files the run under it.

    ``match`` (a ``Match``, or ``[tool.tracetape.match]``) says what a key ignores and masks;
    a recording writes it into its header and replay uses the header's. ``mode="fork"``
    replays and goes live at the first miss, or at step ``fork_at``; the whole run goes to
    ``branch`` (default: ``NAME.fork-N.jsonl`` next to the cassette, for ``fork_at=N``;
    ``tape.branch``) under a run id of its own.
    ``replay_latency`` makes replay wait each decision's recorded time (``"recorded"``) or a
    factor of it. In replay, no request goes live unnoticed: with no hook serving the tape
    (``patch_sdks``, ``patch_http``, ``patch``, ``http_transport``), a connection opened in
    its ``with`` block (its thread or task) raises ``NetworkBlockedError`` naming the hook to
    enable (``allow_network=True`` lets untaped connections through). A recording's trailer
    says how it ended: ``completed``, ``interrupted`` (Ctrl-C, or SIGTERM, which a recording
    tape entered in the main thread catches) or ``failed: ExceptionType``.

        >>> Tape("x.jsonl", mode="rec")
        Traceback (most recent call last):
        ...
        ValueError: 'rec' is not a valid mode; use one of 'replay', 'record', 'auto', 'rewrite', \
'fork'
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | RecordStore,
        mode: str | Mode = Mode.AUTO,
        *,
        redact: RedactRules | Mapping[str, Any] | Iterable[str] | None = None,
        redact_key: bytes | str | None = None,
        env_allow: Iterable[str] = (),
        harness_sha: str | None = None,
        harness_paths: Iterable[str | os.PathLike[str]] = (),
        strict: bool = False,
        allow_irreversible: bool = False,
        store_inputs: bool = True,
        max_record_bytes: int = MAX_RECORD_BYTES,
        rerecord: str | None = None,
        push: str | None = None,
        run_id: str | None = None,
        match: Match | Mapping[str, Any] | None = None,
        fork_at: int | None = None,
        branch: str | os.PathLike[str] | None = None,
        replay_latency: str | float | None = None,
        allow_network: bool = False,
    ):
        if run_id is not None and not RUN_ID.fullmatch(run_id):
            raise ValueError(
                f"run_id must be 1-200 letters, digits and ._:@+=-, starting with a letter or "
                f"digit, not {run_id!r}"
            )
        if isinstance(path, str | os.PathLike):
            self.store: RecordStore = FileStore(path, max_record_bytes)
        else:
            self.store = path
        # How this tape is recorded again, as its caller runs it: every miss ends with it.
        self.rerecord = rerecord or f"Tape({self.store.name!r}, mode='rewrite')"
        # The cassette file of a file store; for another store, its name as a path.
        self.path = getattr(self.store, "path", None) or Path(self.store.name)
        harness = tuple(harness_paths)
        self.requested_mode: Mode = Mode.parse(mode)
        exists = self.store.exists()
        if self.requested_mode is Mode.RECORD and exists:
            raise CassetteExistsError(
                "a cassette is already recorded here and mode 'record' never overwrites one; "
                f"replay it, or re-record it on purpose: {self.rerecord}",
                path=self.store.name,
            )
        forking = self.requested_mode is Mode.FORK
        if (fork_at is not None or branch is not None) and not forking:
            raise ValueError("fork_at and branch are options of mode 'fork'")
        if fork_at is not None and (type(fork_at) is not int or fork_at < 0):
            raise ValueError(f"fork_at must be a step number (0 or more), not {fork_at!r}")
        if forking and not exists:
            raise CassetteNotFoundError(
                f"no cassette to fork; record it first: Tape({self.store.name!r}, mode='record')",
                path=self.store.name,
            )
        if self.requested_mode is Mode.AUTO:
            self.mode: Mode = Mode.REPLAY if exists else Mode.RECORD
        elif self.requested_mode is Mode.REWRITE:
            self.mode = Mode.RECORD
        elif forking:
            self.mode = Mode.REPLAY
        else:
            self.mode = self.requested_mode
        rules = RedactRules.coerce(load_config("redact") or None).merged(
            RedactRules.coerce(redact)  # type: ignore[arg-type]
        )
        self.redactor = Redactor(rules, redact_key)
        self.env_allow = tuple(env_allow)
        given = match if match is not None else load_config("match") or None
        self._given_match = None if given is None else Match.coerce(given)
        self._use_rules(self._given_match or Match())
        self.latency = latency_factor(replay_latency)
        self._harness = (harness_sha, harness)
        self._run_id = run_id
        # fork mode: where the branch goes, the step it goes live at, the decisions replayed
        # before it (written to the branch when it goes live), and the fork point
        self.fork_at = fork_at
        self.branch: Path | None = None
        self.parent: Path | None = None
        self.fork_point: dict[str, Any] | None = None
        self._forking = forking
        self._prefix: list[Record] = []
        self._fork_lock = threading.Lock()
        # How the loaded recording ended (its trailer), and whether a signal ended this one.
        self.ended: str | None = None
        # Hooks serving this tape now (the integrations count themselves in), the transport
        # guard's switch, and the connections it refused.
        self.hooks = 0
        self._guard = not allow_network
        self._armed = False
        self.blocked: list[NetworkBlockedError] = []
        self._signalled = False
        self._sigterm: Any = None
        self.strict = strict
        self.allow_irreversible = allow_irreversible
        self.store_inputs = store_inputs
        # Record mode: the flow and output digest of each key's first record, to warn when two
        # flows make the same decision and get different outputs.
        self._first_outputs: dict[str, tuple[tuple[int, int], str]] = {}
        self._token: contextvars.Token[Tape | None] | None = None
        self._closed = False
        # Every ReplayMiss this tape raised, in order: a program (or a framework's retry
        # loop) may catch one; the first is raised again when the tape closes.
        self.misses: list[ReplayMiss] = []
        # Records this tape wrote (the highest sequence number the store gave back), and the
        # first error that stopped the recording (a full disk), if any.
        self.written = 0
        self.write_failure: CassetteError | None = None
        # Per kind, the last canonical text keyed (recording) and the incremental keys
        # (replay): a conversation grows by appending.
        self._memos: dict[str, list[bytes]] = {}
        self._keys: dict[str, StreamKey] = {}
        self._recognising = False
        self.records: list[Record] = []
        self.header: dict[str, Any] | None = None
        if self.mode is Mode.RECORD and push:
            from .stores.push import PushingStore

            self.store = PushingStore(self.store, push)
        if self.mode is Mode.RECORD:
            self.store.begin(self._new_header(run_id or new_run_id(stem_of(self.store.name))))
        else:
            self._load(harness_sha)
        if forking:
            self.parent = Path(self.path)
            self.branch = Path(branch) if branch is not None else _branch_path(self.parent, fork_at)
            if self.branch.resolve() == self.parent.resolve():
                raise ValueError("the branch of a fork must not be its parent cassette")
            self.store = FileStore(self.branch, max_record_bytes)
            self.rerecord = f"Tape({str(self.branch)!r}, mode='rewrite')"

    def _new_header(self, run_id: str, **fields: Any) -> dict[str, Any]:
        harness_sha, harness = self._harness
        return new_header(
            run_id=run_id,
            harness_sha=harness_sha or git_sha(),
            harness_paths=[str(p) for p in harness] or None,
            harness_digest=harness_digest(harness) if harness else None,
            env={name: self._env_digest(name) for name in self.env_allow} or None,
            redact_key_id=self.redactor.key_id,
            keys=KEYS_VERSION,
            match=self.match.as_header(),
            **fields,
        )

    # -- replay state -------------------------------------------------------------------------

    def _load(self, harness_sha: str | None) -> None:
        try:
            cassette = self.store.load()
        except CassetteNotFoundError as exc:
            exc.args = (
                f"{self.store.name}: no such cassette to replay; record it first with "
                f"Tape({self.store.name!r}, mode='record') (or mode='auto', which records "
                "when the cassette is missing)",
            )
            raise
        self.header = cassette.header
        self.records = cassette.records
        self.ended = cassette.ended
        self._use_recorded_rules()
        self._index()
        self._check_environment(harness_sha)

    def _use_recorded_rules(self) -> None:
        """Replay under the header's match rules; rules given that differ are an error."""
        try:
            recorded = Match.coerce((self.header or {}).get("match"))
        except ValueError as exc:
            raise CassetteError(
                f"header field 'match' is not match rules ({exc}); the header was edited: "
                "restore it, or re-record the cassette",
                path=self.store.name,
                line=1,
            ) from None
        given = self._given_match
        if given is not None and given != recorded:
            raise MatchRulesError(
                f"{self.store.name}: the match rules given ({given.describe()}) differ from the "
                f"rules this cassette was recorded with ({recorded.describe()}); a cassette "
                "replays under its own rules: give none (or the same), re-key it under the new "
                f"ones with `tracetape migrate {self.store.name}`, or re-record it: "
                f"{self.rerecord}"
            )
        self._use_rules(recorded)

    def _use_rules(self, match: Match) -> None:
        """Key under ``match``: the rules (``_rules``: None for none, keyed as before, no
        call made) and the keyer of every kind's replay keys, chosen once here."""
        self.match = match
        self._rules = match or None
        self._new_keys = keyer(match.mask_string if match.mask else None)

    def _index(self) -> None:
        """Build the replay state of ``records``: a queue per key, the records of each kind."""
        self._played = bytearray(len(self.records))
        self._queues: dict[str, deque[int]] = {}
        self._by_kind: dict[str, list[int]] = {}
        self._cursor: dict[str, int] = {}
        queues, by_kind = self._queues, self._by_kind
        for i, rec in enumerate(self.records):
            k, kind = rec.key or "", rec.kind
            q = queues.get(k)
            if q is None:
                queues[k] = q = deque()
            q.append(i)
            lst = by_kind.get(kind)
            if lst is None:
                by_kind[kind] = lst = []
            lst.append(i)
        # Replay keys each kind incrementally; made now, so the first call pays no setup.
        self._keys = {kind: self._new_keys(kind) for kind in by_kind}

    def _env_digest(self, name: str) -> str | None:
        value = os.environ.get(name)
        if value is None:
            return None
        return f"hmac:{self.redactor.mac(value, 16)}"

    def _check_environment(self, harness_sha: str | None) -> None:
        drift = environment_drift(self.header or {}, self.env_allow, self._env_digest, harness_sha)
        if not drift:
            return
        message = f"{self.store.name}: replaying under drift: " + "; ".join(drift)
        if self.strict:
            raise EnvironmentDriftError(message, drift)
        warnings.warn(message, TapeWarning, stacklevel=4)

    @property
    def unplayed(self) -> list[Record]:
        """Recorded decisions that replay has not played (empty when recording)."""
        if self.mode is not Mode.REPLAY:
            return []
        played = {rec.key for i, rec in enumerate(self.records) if self._played[i]}
        return [
            rec
            for i, rec in enumerate(self.records)
            if not self._played[i]
            and not (rec.kind == "http" and _failure(rec) and rec.key in played)
        ]

    def failed_again(self, decision: Decision) -> Record | None:
        """A request (kind ``http``) whose recorded attempts all failed, asked for once more
        than recorded: its last failure, to raise again rather than miss. A failed request
        retried in the background (a price list fetched again on a timer) is repeated as
        often as the run's timing allows, and the world it failed in has not changed; its
        extra recorded failures are likewise not reported unplayed."""
        if decision.kind != "http" or self._queues.get(decision.key):
            return None
        same = [rec for rec in self.records if rec.key == decision.key]
        return same[-1] if same and all(_failure(rec) for rec in same) else None

    def shadow(self, key: str) -> Tape | None:
        """A replaying copy of this tape that holds only the first recorded decision of
        ``key``, with replay state of its own: playing it changes nothing of this tape,
        whatever other threads do with it meanwhile (the SDK fast path rehearses its first
        call on one). None when this tape does not replay ``key``."""
        queue = self._queues.get(key) if self.mode is Mode.REPLAY else None
        if not queue:
            return None
        first = queue[0]
        shadow = copy.copy(self)
        shadow._queues = {key: deque([first])}
        shadow._played = bytearray(len(self.records))
        shadow._cursor = {}
        shadow._keys = {kind: self._new_keys(kind) for kind in self._keys}
        shadow.misses = []
        shadow._forking, shadow.latency = False, 0.0
        return shadow

    def rekey(self, records: list[Record]) -> None:
        """Replay ``records`` in place of the loaded ones (the same records, keyed anew by a
        migration of their keys); nothing may have been played yet."""
        if self.mode is not Mode.REPLAY or any(self._played):
            raise RuntimeError("only a replaying tape that played nothing yet can be re-keyed")
        self.records = records
        self._index()

    @property
    def replaying(self) -> bool:
        """True when this tape returns recorded outputs instead of executing calls."""
        return self.mode is Mode.REPLAY

    @property
    def matched(self) -> int:
        """How many recorded decisions replay has played so far."""
        return self._played.count(1) if self.mode is Mode.REPLAY else 0

    def bind(self) -> contextvars.Token[Tape | None]:
        """Make this the tape of the calling thread or task (``with tape:`` and the hooks
        do). Returns the token to reset."""
        return _current.set(self)

    @staticmethod
    def unbind(token: contextvars.Token[Tape | None]) -> None:
        """Undo a ``bind()``: the context's tape is the one before it again."""
        _current.reset(token)

    # -- the decision API ----------------------------------------------------------------------

    def prepare(self, kind: str, payload: Any, *, finite: bool = False) -> Decision:
        """Canonicalize, redact and key a boundary input.

        The payload may still hold SDK models and tuples: they are serialized here, at call
        time, so the key and the stored input are a snapshot later mutation cannot reach.
        ``finite`` says the payload holds no NaN or infinity (see ``canonical_json``).

        Replay keys first and redacts only on a miss: a text whose key was recorded *is* a
        recorded text, already redacted (redaction leaves a redacted text as it is), and a
        conversation's key is hashed incrementally (``StreamKey``). Only a text holding a
        secret, or one never recorded, is redacted and keyed again.

        Under match rules the key is the payload's as the rules see it (``Match.keyed``);
        a recording stores the whole payload, and replay's decision holds the keyed one (a
        miss shows masked values masked). A fork goes live here, at its first miss or at step
        ``fork_at``: the decision is then keyed as a recording keys it.
        """
        mapping = type(payload) is dict or isinstance(payload, Mapping)
        step = payload.get("step") if mapping else None
        step = step if type(step) is int else None
        rules = self._rules
        if self.mode is Mode.REPLAY:
            decision = self._replay_decision(kind, payload, step, finite)
            if self._forking and (
                decision.key not in self._queues
                or (self.fork_at is not None and step is not None and step >= self.fork_at)
            ):
                self._go_live(kind, decision.key, step)
                return self.prepare(kind, payload, finite=finite)
            return decision
        memo = self._memos.get(kind)
        if memo is None:
            memo = self._memos[kind] = [b""]
        canonical = canonical_json(payload, memo, finite=finite)
        blob = self.redactor.redact_payload(payload, canonical, kind)
        keyed = payload if rules is None else rules.keyed(payload)
        if keyed is payload:
            return Decision(kind, key_of(kind, blob), blob, step)
        stream = f"{kind} keyed"  # a stream of its own: the redactor and encoder memoise it
        memo = self._memos.setdefault(stream, [b""])
        seen = self.redactor.redact_payload(
            keyed, canonical_json(keyed, memo, finite=finite), stream
        )
        return Decision(kind, key_of(kind, seen), blob, step)

    def _replay_decision(self, kind: str, payload: Any, step: int | None, finite: bool) -> Decision:
        """Replay's key of a payload (see ``prepare``): the fast incremental key, redacted
        only when it was never recorded."""
        keys = self._keys.get(kind)
        if keys is None:
            keys = self._keys[kind] = self._new_keys(kind)
        # under rules: the ignored paths left out here, the masks applied by the keys
        rules = self._rules
        text, key = keys.key(payload if rules is None else rules.ignored(payload), finite=finite)
        if key in self._queues:
            return Decision(kind, key, text, step)
        whole = None if rules is None else payload
        plain = text.decode()
        blob = self.redactor.redact_json(plain)
        if blob == plain and not self._recognising:
            # No secret found: maybe one only a field name revealed when recording. The
            # recording's placeholders tell it by its digest (checked once, on a miss).
            self._recognising = True
            for rec in self.records:
                self.redactor.recognise(json.dumps([rec.input, rec.out], default=str))
            blob = self.redactor.redact_json(plain)
        return Decision(kind, key if blob == plain else key_of(kind, blob), blob, step, whole)

    def _go_live(self, kind: str, key: str, step: int | None, reason: str = "") -> None:
        """A fork's first live decision: write the branch's header (naming its parent and
        the fork point) and the decisions replayed so far; from now on, record."""
        with self._fork_lock:
            if self.mode is not Mode.REPLAY:
                return
            assert self.parent is not None and self.branch is not None
            at = self.fork_at is not None and step is not None and step >= self.fork_at
            self.fork_point = {
                "seq": len(self._prefix) + 1,
                "step": step,
                "kind": kind or None,
                "key": key or None,
                "reason": reason or (f"fork_at {self.fork_at}" if at else "first miss"),
            }
            parent = {"path": str(self.parent), "chain": final_chain(self.parent)}
            if self.header and isinstance(self.header.get("run_id"), str):
                parent["run_id"] = self.header["run_id"]
            self.store.begin(
                self._new_header(
                    # the branch's own name (``NAME.fork-3``), not its parent's stem
                    self._run_id or new_run_id(self.branch.name.removesuffix(".jsonl")),
                    parent=parent,
                    fork=self.fork_point,
                )
            )
            for rec in self._prefix:
                self.written = self.store.append(rec)
            self.mode = Mode.RECORD

    def peek(self, decision: Decision) -> Record | None:
        """The record ``play(decision)`` would return next, without playing it (None: it
        would miss)."""
        queue = self._queues.get(decision.key) if self.mode is Mode.REPLAY else None
        return self.records[queue[0]] if queue else None

    def play(self, decision: Decision) -> Record:
        """Return the next recorded record for ``decision`` or raise ``ReplayMiss``."""
        queue = self._queues.get(decision.key)
        if not queue:
            raise self._miss(decision)
        index = queue.popleft()
        self._played[index] = 1
        rec = self.records[index]
        if self._forking:
            with self._fork_lock:
                self._prefix.append(rec)
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
        stored, _ = self.redactor.redact_value(out, stream_text)
        data = decision.input()
        counts = dict(usage) if usage else None
        record = Record(
            kind=decision.kind,
            key=decision.key,
            step=decision.step,
            input=data if self.store_inputs else None,
            out=stored,
            effect=Effect.parse(effect).value,
            tokens=(counts.get("input", 0) + counts.get("output", 0)) if counts else None,
            usage=counts,
            api=api,
            ms=round(ms, 3),
            digests=field_digests(data) if isinstance(data, dict) else None,
        )
        try:
            seq = self.store.append(record)
        except CassetteError as exc:
            if self.write_failure is None:
                self.write_failure = exc
            raise
        self.written = max(self.written, seq)
        self._check_ambiguous(decision.key, stored)
        return stored

    def _check_ambiguous(self, key: str, stored: Any) -> None:
        """Warn when two flows made the same decision and got different outputs: replay
        returns a key's outputs in recorded order, which need not be their arrival order."""
        flow, out = _flow(), digest(stored)
        first = self._first_outputs.setdefault(key, (flow, out))
        if first[0] != flow and first[1] != out:
            self._first_outputs[key] = (flow, out)  # one warning per pair of flows
            warnings.warn(
                f"{self.store.name}: {key} was made by two concurrent flows (threads or asyncio "
                "tasks) with different outputs; replay returns them in recorded order, which "
                "may not be the order the calls arrive in: make the inputs differ (a worker "
                "id in the prompt or the tool arguments) or make the calls in one flow",
                TapeWarning,
                stacklevel=3,
            )

    def _begin(
        self, kind: str, payload: Any, effect: str | Effect, stub: Any
    ) -> tuple[Decision, Effect | None]:
        """Key a call; when recording, also check its effect (``None``: replay it)."""
        decision = self.prepare(kind, payload)
        if self.mode is Mode.REPLAY:
            return decision, None
        tag = Effect.parse(effect)
        if tag is Effect.IRREVERSIBLE and stub is None and not self.allow_irreversible:
            raise IrreversibleEffectError(
                f"{decision.key} is an irreversible tool call and would run for real while "
                "recording; pass stub=<callable returning the output to record>, or "
                "Tape(..., allow_irreversible=True) to run it for real"
            )
        return decision, tag

    def _recorded(self, decision: Decision, result: T, start: float, effect: Effect) -> T:
        self.record(decision, result, ms=(time.perf_counter() - start) * 1000, effect=effect)
        return result

    def call(
        self,
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
        decision, tag = self._begin(kind, payload, effect, stub)
        if tag is None:
            return cast(T, self.play(decision).out)
        start = time.perf_counter()
        return self._recorded(decision, (stub or do)(), start, tag)

    async def acall(
        self,
        kind: str,
        payload: Any,
        do: Callable[[], Awaitable[T]],
        *,
        effect: str | Effect = Effect.READ,
        stub: Callable[[], Awaitable[T]] | None = None,
    ) -> T:
        """The async twin of ``call``: ``do`` (and ``stub``) return awaitables."""
        decision, tag = self._begin(kind, payload, effect, stub)
        if tag is None:
            return cast(T, self.play(decision).out)
        start = time.perf_counter()
        return self._recorded(decision, await (stub or do)(), start, tag)

    # -- the miss diagnosis --------------------------------------------------------------------

    def _next_unplayed(self, kind: str) -> Record | None:
        indices = self._by_kind.get(kind, [])
        cursor = self._cursor.get(kind, 0)
        while cursor < len(indices) and self._played[indices[cursor]]:
            cursor += 1
        self._cursor[kind] = cursor
        return self.records[indices[cursor]] if cursor < len(indices) else None

    def _miss(self, decision: Decision) -> ReplayMiss:
        repeated = 0
        if decision.key in self._queues:
            repeated = sum(1 for r in self.records if r.key == decision.key)
        expected = self._expected(decision)
        uncompared: list[str] = []
        if expected is not None and self._rules is not None and expected.input is not None:
            keyed = self._rules.keyed(expected.input)
            if decision.payload is not None:  # paths only: the live values are not redacted
                live = json.loads(canonical_json(decision.payload))
                shown = {c.path for c in changed_paths(keyed, decision.input())}
                uncompared = [
                    c.path for c in changed_paths(expected.input, live) if c.path not in shown
                ]
            expected = msgspec.structs.replace(expected, input=keyed)
        miss = explain_miss(
            decision,
            expected,
            matched=self.matched,
            recorded=len(self.records),
            repeated=repeated,
            rerecord=self.rerecord,
            rules=self.match.describe() if self.match else None,
            ended=self.ended,
            uncompared=uncompared,
        )
        self.misses.append(miss)
        return miss

    def _expected(self, decision: Decision) -> Record | None:
        """The recorded decision the run was expected to make: an unplayed one of its kind at
        its step (a framework may write a step's records out of order, or after a later
        step's), else the first unplayed one of its kind. Where several flows (threads, tasks)
        each left one at that step, the one whose input differs from this one in the fewest
        paths: the same flow's, as the cassette keeps no flow identity."""
        first = self._next_unplayed(decision.kind)
        if first is None or decision.step is None:
            return first
        played = self._played
        same_step = [
            self.records[index]
            for index in self._by_kind.get(decision.kind, [])
            if not played[index] and self.records[index].step == decision.step
        ]
        if len(same_step) > 1:
            live, keyed = decision.input(), self.match.keyed
            return min(
                same_step,
                key=lambda rec: (
                    len(changed_paths(keyed(rec.input), live)) if rec.input is not None else 1 << 30
                ),
            )
        return same_step[0] if same_step else first

    # -- lifecycle -----------------------------------------------------------------------------

    def close(self, *, failed: bool = False, ended: str | None = None) -> None:
        """Finish the tape: seal the recording with how it ``ended`` (default: ``completed``,
        or ``failed: Exception`` when ``failed``) and move it into place, or report unplayed
        decisions. A fork that never went live writes its branch all the same."""
        if self._closed:
            return
        self._closed = True
        self._release_sigterm()
        if self._armed:
            self._armed = False
            guard.arm(-1, _unserved)
        if self._signalled:
            ended = "interrupted"
        ended = ended or ("failed: Exception" if failed else "completed")
        if self._forking and self.mode is Mode.REPLAY:
            why = "no divergence: the run replayed whole"
            if ended != "completed":
                why = f"no divergence before the run ended ({ended})"
            self._go_live("", "", None, why)
        if self.mode is Mode.RECORD:
            # A store of the protocol before endings takes commit() alone.
            self.store.commit() if ended == "completed" else self.store.commit(ended=ended)
            return
        if self.blocked and not failed and not self.misses:
            first_blocked = self.blocked[0]
            first_blocked.add_note("tracetape: the program caught this error and went on")
            raise first_blocked
        if self.misses and not failed:
            # The program went on after a miss (it caught it, or a framework wrapped and
            # retried it): the run diverged all the same, so the diagnosis is raised here.
            first = self.misses[0]
            first.add_note("tracetape: the program caught this ReplayMiss and went on")
            raise first
        unplayed = self.unplayed
        # After a miss the rest of the recording is unplayed by definition: no second report.
        if not unplayed or failed or self.misses:
            return
        shown = ", ".join(f"#{'?' if r.seq is None else r.seq} {r.key}" for r in unplayed[:5])
        more = f" and {len(unplayed) - 5} more" if len(unplayed) > 5 else ""
        count = f"{len(unplayed)} recorded decision(s)"
        message = f"{self.store.name}: {count} were never played: {shown}{more}"
        if self.strict:
            raise UnplayedDecisionsError(
                message + "; the run stopped early or skipped them", unplayed
            )
        warnings.warn(message, TapeWarning, stacklevel=3)

    def ending(self, exc: BaseException | None) -> str:
        """How this recording ends if ``exc`` ends it (see ``ending_of``)."""
        return ending_of(exc, self._signalled)

    def catch_sigterm(self) -> None:
        """While recording in the main thread with SIGTERM's default action: make SIGTERM
        end the program as ``SystemExit(143)``, so the recording closes ``interrupted``
        (``with`` blocks and ``atexit`` run) instead of dying without its trailer."""
        if (
            self.mode is not Mode.RECORD and not self._forking
        ) or threading.current_thread() is not threading.main_thread():
            return
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            return

        def terminated(signum: int, frame: object) -> None:
            self._signalled = True
            raise SystemExit(128 + signum)

        signal.signal(signal.SIGTERM, terminated)
        self._sigterm = terminated

    def _release_sigterm(self) -> None:
        if self._sigterm is None:
            return
        handler, self._sigterm = self._sigterm, None
        main = threading.current_thread() is threading.main_thread()
        if main and signal.getsignal(signal.SIGTERM) is handler:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)

    def refuse(self, what: str, address: object) -> None:
        """Refuse a request the guard saw (``guard``): note it and raise."""
        __tracebackhide__ = True
        error = NetworkBlockedError(
            f"tracetape: {self.store.name} replays, and {what} was made in its context: "
            "no hook serves this tape, so the request would go live; enable the hooks: "
            "`with tracetape.patch_sdks(tape):` (every provider's SDK and MCP) or "
            "`with tracetape.patch_http(tape):` (every httpx, aiohttp and botocore request); "
            "Tape(..., allow_network=True) lets untaped connections through",
            address,
        )
        self.blocked.append(error)
        raise error

    def __enter__(self) -> Tape:
        self._token = self.bind()
        self.catch_sigterm()
        if self.mode is Mode.REPLAY and self._guard and not self._armed:
            self._armed = True
            guard.arm(1, _unserved)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._token is not None:
            _current.reset(self._token)
            self._token = None
        self.close(failed=exc is not None, ended=self.ending(exc))
        turned = exc is not None and not isinstance(exc, NetworkBlockedError)
        if turned and self.blocked and not self.misses:
            # The SDK turned it into its own error (a connection error after retries).
            blocked = self.blocked[0]
            blocked.add_note(f"tracetape: the program turned it into {type(exc).__name__}")
            raise blocked from None
        if exc is not None and self.misses and not isinstance(exc, ReplayMiss):
            # A framework turned the miss into its own error (a connection error after
            # retries): the diagnosis is what the user needs to see.
            first = self.misses[0]
            first.add_note(f"tracetape: the program turned it into {type(exc).__name__}: {exc}")
            raise first from None

    async def __aenter__(self) -> Tape:
        return self.__enter__()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.__exit__(exc_type, exc, tb)

    def __repr__(self) -> str:
        return f"Tape({self.store.name!r}, mode={self.mode.value!r})"
