"""``Tape``: record a run's decisions, replay them offline, and explain the first miss.

A decision is a call at one of a run's boundaries (a model request, a tool call, an
environment read). Its key is ``kind:<sha256 of the redacted canonical payload>[:16]``, the
seed's key whenever no secret is found. Replay keeps a FIFO queue per key, returns recorded
outputs without calling anything, and raises ``ReplayMiss`` at the first input that was never
recorded, naming the fields that changed.

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
import functools
import hashlib
import json
import os
import subprocess
import threading
import time
import warnings
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from types import TracebackType
from typing import Any, NamedTuple, ParamSpec, TypeVar, overload

from ._enums import LoudEnum
from .canonical import (
    canonical_json,
    changed_paths,
    digest_changes,
    excerpt,
    field_digests,
    key_of,
)
from .cassette import MAX_RECORD_BYTES, CassetteWriter, new_header, read_cassette
from .config import load_config
from .errors import (
    CassetteNotFoundError,
    EnvironmentDriftError,
    IrreversibleEffectError,
    ReplayMiss,
    TapeWarning,
    UnplayedDecisionsError,
)
from .redact import Redactor, RedactRules

__all__ = ["Decision", "Effect", "Mode", "Tape", "current_tape", "key"]

T = TypeVar("T")
P = ParamSpec("P")
R = TypeVar("R")


class Mode(LoudEnum):
    """How a tape treats decisions: record them, replay them, or replay if a cassette exists."""

    RECORD = "record"
    REPLAY = "replay"
    AUTO = "auto"


class Effect(LoudEnum):
    """What a tool call does to the world. Replay never executes any of them."""

    READ = "read"
    WRITE = "write"
    IRREVERSIBLE = "irreversible"


_default_redactor: Redactor | None = None


def key(kind: str, payload: Any) -> str:
    """Return the decision key of a payload: the seed's ``_key`` computed after redaction.

    >>> key("llm", {"messages": [{"role": "user", "content": "hi"}], "step": 1})
    'llm:3abd769722df7134'
    """
    global _default_redactor  # noqa: PLW0603 - one lazily built redactor for the helper
    if _default_redactor is None:
        _default_redactor = Redactor(RedactRules.coerce(load_config("redact") or None))
    return key_of(kind, _default_redactor.redact_text(canonical_json(payload)))


class Decision(NamedTuple):
    """One boundary input, keyed: what ``Tape.prepare`` returns and ``play``/``record`` take."""

    kind: str
    key: str
    blob: str
    step: int | None

    def input(self) -> Any:
        """The redacted input as plain JSON data."""
        return json.loads(self.blob)


_current: contextvars.ContextVar[Tape | None] = contextvars.ContextVar("tracetape", default=None)


def current_tape() -> Tape | None:
    """Return the tape active in this thread or asyncio task (set by ``with Tape(...)``)."""
    return _current.get()


def _git_sha() -> str | None:
    """HEAD of the git work tree holding the working directory, or None outside one."""
    return _git_sha_of(str(Path.cwd()))


@functools.lru_cache(maxsize=32)
def _git_sha_of(folder: str) -> str | None:
    # Cached per folder: a subprocess costs milliseconds, and every replay checks the SHA.
    try:
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
            cwd=folder,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    sha = done.stdout.strip()
    return sha if done.returncode == 0 and sha else None


def _harness_digest(paths: Iterable[str | os.PathLike[str]]) -> str:
    """A digest of the harness files' names and contents (folders walked, caches skipped)."""
    digest = hashlib.sha256()
    for root in sorted(str(p) for p in paths):
        base = Path(root)
        if base.is_dir():
            files = sorted(
                f for f in base.rglob("*") if f.is_file() and "__pycache__" not in f.parts
            )
        else:
            files = [base]
        for file in files:
            digest.update(file.as_posix().encode() + b"\0")
            digest.update(file.read_bytes() if file.is_file() else b"<missing>")
            digest.update(b"\0")
    return f"sha256:{digest.hexdigest()[:16]}"


class Tape:
    """Record or replay the decisions of one agent run in a cassette file.

    ``mode`` is ``"record"`` (write ``PATH.partial``, moved over ``PATH`` on close),
    ``"replay"`` (return recorded outputs; nothing is executed) or ``"auto"`` (replay if
    ``PATH`` exists, else record). ``redact`` adds secret rules to the built-ins and
    ``[tool.tracetape.redact]``; ``env_allow`` names environment variables recorded as hashes;
    ``harness_paths`` names the agent-loop files whose content is the harness (else the git
    HEAD is); ``strict`` turns unplayed decisions and environment drift into errors.

        >>> Tape("x.jsonl", mode="rec")
        Traceback (most recent call last):
        ...
        ValueError: 'rec' is not a valid mode; use one of 'record', 'replay', 'auto'
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        mode: str | Mode = Mode.RECORD,
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
    ):
        self.path = Path(path)
        harness = tuple(harness_paths)
        self.requested_mode: Mode = Mode.parse(mode)
        if self.requested_mode is Mode.AUTO:
            self.mode: Mode = Mode.REPLAY if self.path.exists() else Mode.RECORD
        else:
            self.mode = self.requested_mode
        rules = RedactRules.coerce(load_config("redact") or None).merged(
            RedactRules.coerce(redact)  # type: ignore[arg-type]
        )
        self.redactor = Redactor(rules, redact_key)
        self.env_allow = tuple(env_allow)
        self.strict = strict
        self.allow_irreversible = allow_irreversible
        self.store_inputs = store_inputs
        # Model calls made so far: the SDK hooks count them, tools key their ``step`` on it.
        self.model_calls = 0
        self._token: contextvars.Token[Tape | None] | None = None
        self._closed = False
        self._missed = False
        self._record_lock = threading.Lock()
        self._last_digests: dict[str, dict[str, Any]] = {}
        self._writer: CassetteWriter | None = None
        self.records: list[dict[str, Any]] = []
        self.header: dict[str, Any] | None = None
        if self.mode is Mode.RECORD:
            self._writer = CassetteWriter(
                self.path,
                new_header(
                    harness_sha=harness_sha or _git_sha(),
                    harness_paths=[str(p) for p in harness] or None,
                    harness_digest=_harness_digest(harness) if harness else None,
                    env={name: self._env_digest(name) for name in self.env_allow} or None,
                    redact_key_id=self.redactor.key_id,
                ),
                max_record_bytes,
            )
        else:
            self._load(harness_sha)

    # -- replay state -------------------------------------------------------------------------

    def _load(self, harness_sha: str | None) -> None:
        try:
            cassette = read_cassette(self.path)
        except CassetteNotFoundError as exc:
            exc.args = (
                f"{self.path}: no such cassette to replay; record it first with "
                f"Tape({str(self.path)!r}, mode='record') (or mode='auto', which records "
                "when the cassette is missing)",
            )
            raise
        self.header = cassette.header
        self.records = cassette.records
        self._played = bytearray(len(self.records))
        self._queues: dict[str, deque[int]] = {}
        self._by_kind: dict[str, list[int]] = {}
        self._cursor: dict[str, int] = {}
        queues, by_kind = self._queues, self._by_kind
        for i, rec in enumerate(self.records):
            k = rec["key"]
            q = queues.get(k)
            if q is None:
                queues[k] = q = deque()
            q.append(i)
            kind = rec["kind"]
            lst = by_kind.get(kind)
            if lst is None:
                by_kind[kind] = lst = []
            lst.append(i)
        self._check_environment(harness_sha)

    def _env_digest(self, name: str) -> str | None:
        value = os.environ.get(name)
        if value is None:
            return None
        return f"hmac:{self.redactor.mac(value, 16)}"

    def _check_environment(self, harness_sha: str | None) -> None:
        header = self.header or {}
        drift = []
        recorded_env: dict[str, Any] = header.get("env") or {}
        for name in sorted(set(recorded_env) | set(self.env_allow)):
            if name not in recorded_env:
                drift.append(f"environment variable {name} was not recorded in this cassette")
            elif self._env_digest(name) != recorded_env[name]:
                drift.append(
                    f"environment variable {name} has a different value than when recorded"
                )
        recorded_paths, recorded_digest = header.get("harness_paths"), header.get("harness_digest")
        if isinstance(recorded_paths, list) and recorded_digest:
            # The recording named its harness files: their content, not HEAD, is the harness.
            live_digest = _harness_digest(recorded_paths)
            if live_digest != recorded_digest:
                drift.append(
                    f"harness files {', '.join(map(str, recorded_paths))} changed: recorded "
                    f"{recorded_digest}, now {live_digest}"
                )
        else:
            recorded_sha = header.get("harness_sha")
            live_sha = harness_sha or (_git_sha() if recorded_sha else None)
            if recorded_sha and live_sha and recorded_sha != live_sha:
                drift.append(f"harness git SHA changed: recorded {recorded_sha}, now {live_sha}")
        if not drift:
            return
        message = f"{self.path}: replaying under drift: " + "; ".join(drift)
        if self.strict:
            raise EnvironmentDriftError(message, drift)
        warnings.warn(message, TapeWarning, stacklevel=4)

    @property
    def unplayed(self) -> list[dict[str, Any]]:
        """Recorded decisions that replay has not played (empty when recording)."""
        if self.mode is not Mode.REPLAY:
            return []
        return [rec for i, rec in enumerate(self.records) if not self._played[i]]

    @property
    def replaying(self) -> bool:
        """True when this tape returns recorded outputs instead of executing calls."""
        return self.mode is Mode.REPLAY

    # -- the decision API ----------------------------------------------------------------------

    def prepare(self, kind: str, payload: Any) -> Decision:
        """Canonicalize, redact and key a boundary input."""
        blob = self.redactor.redact(canonical_json(payload), kind)
        step = payload.get("step") if isinstance(payload, Mapping) else None
        return Decision(kind, key_of(kind, blob), blob, step if type(step) is int else None)

    def play(self, decision: Decision) -> dict[str, Any]:
        """Return the next recorded record for ``decision`` or raise ``ReplayMiss``."""
        queue = self._queues.get(decision.key)
        if not queue:
            self._missed = True
            raise self._miss(decision)
        index = queue.popleft()
        self._played[index] = 1
        return self.records[index]

    def record(
        self, decision: Decision, out: Any, *, ms: float = 0.0, effect: str | Effect = Effect.READ
    ) -> Any:
        """Write one decision and its output; returns the output as stored (redacted)."""
        if self._writer is None:
            raise RuntimeError(f"tape {self.path} is in {self.mode} mode; nothing can be recorded")
        stored, _ = self.redactor.redact_value(out)
        rec: dict[str, Any] = {"key": decision.key, "kind": decision.kind}
        if decision.step is not None:
            rec["step"] = decision.step
        rec["ms"] = round(ms, 3)
        rec["effect"] = Effect.parse(effect).value
        rec["out"] = stored
        data = decision.input()
        if not isinstance(data, dict):
            if self.store_inputs:
                rec["input"] = data
            self._writer.write(rec)
            return stored
        digests = field_digests(data)
        with self._record_lock:
            # A conversation grows by appending: store only the list elements that are new
            # since the previous record of this kind, and how many it shares (``base``).
            previous = self._last_digests.get(decision.kind, {})
            base: dict[str, int] = {}
            for name, elements in digests.items():
                old = previous.get(name)
                if not name.endswith("[]") or not old:
                    continue
                shared = 0
                for a, b in zip(old, elements, strict=False):
                    if a != b:
                        break
                    shared += 1
                if shared:
                    base[name[:-2]] = shared
            if self.store_inputs:
                rec["input"] = {k: v[base[k] :] if k in base else v for k, v in data.items()}
            rec["digests"] = {
                k: v[base[k[:-2]] :] if k[:-2] in base and k.endswith("[]") else v
                for k, v in digests.items()
            }
            if base:
                rec["base"] = base
            self._writer.write(rec)
            self._last_digests[decision.kind] = digests
        return stored

    def _guard(self, decision: Decision, effect: Effect, stub: Callable[[], Any] | None) -> None:
        if effect is Effect.IRREVERSIBLE and stub is None and not self.allow_irreversible:
            raise IrreversibleEffectError(
                f"{decision.key} is an irreversible tool call and would run for real while "
                "recording; pass stub=<callable returning the output to record>, or "
                "Tape(..., allow_irreversible=True) to run it for real"
            )

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
        decision = self.prepare(kind, payload)
        if self.mode is Mode.REPLAY:
            out: T = self.play(decision)["out"]
            return out
        tag: Effect = Effect.parse(effect)
        self._guard(decision, tag, stub)
        start = time.perf_counter()
        result = (stub or do)()
        self.record(decision, result, ms=(time.perf_counter() - start) * 1000, effect=tag)
        return result

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
        decision = self.prepare(kind, payload)
        if self.mode is Mode.REPLAY:
            out: T = self.play(decision)["out"]
            return out
        tag: Effect = Effect.parse(effect)
        self._guard(decision, tag, stub)
        start = time.perf_counter()
        result = await (stub or do)()
        self.record(decision, result, ms=(time.perf_counter() - start) * 1000, effect=tag)
        return result

    # -- the miss diagnosis --------------------------------------------------------------------

    def _next_unplayed(self, kind: str) -> dict[str, Any] | None:
        indices = self._by_kind.get(kind, [])
        cursor = self._cursor.get(kind, 0)
        while cursor < len(indices) and self._played[indices[cursor]]:
            cursor += 1
        self._cursor[kind] = cursor
        return self.records[indices[cursor]] if cursor < len(indices) else None

    def _miss(self, decision: Decision) -> ReplayMiss:
        matched = self._played.count(1)
        expected = self._next_unplayed(decision.kind)
        live = decision.input()
        lines = [
            f"  matched {matched} of {len(self.records)} recorded decisions before this miss "
            f"(kind {decision.kind}, step {decision.step if decision.step is not None else '-'})"
        ]
        if decision.key in self._queues:
            times = sum(1 for r in self.records if r["key"] == decision.key)
            lines.append(
                f"  this exact input was recorded {times} time(s) and all were already played: "
                "the run repeated a decision more often than the recording did"
            )
        changes: list[str] = []
        if expected is None:
            lines.append(
                f"  no unplayed {decision.kind!r} decision is left: the run went on past the end "
                "of the recording"
            )
        else:
            where = f"#{expected.get('seq', '?')} {expected['kind']}"
            if expected.get("step") is not None:
                where += f" step {expected['step']}"
            lines.append(f"  expected: {where} {expected['key']}")
            changes, details = _explain(expected, live)
            lines += details
        lines.append(
            f"  if the change is intended, re-record: Tape({str(self.path)!r}, mode='record')"
        )
        return ReplayMiss(
            decision.key,
            kind=decision.kind,
            step=decision.step,
            matched=matched,
            recorded=len(self.records),
            expected=expected,
            changes=changes,
            diagnosis="\n".join(lines),
        )

    # -- integrations: SDK and HTTP hooks ---------------------------------------------------

    def patch_sdks(self) -> AbstractContextManager[Tape]:
        """Tape ``openai``/``anthropic`` SDK calls made in this thread or task (a context manager).

        See ``tracetape.integrations.sdk``; replay returns the SDKs' own types.
        """
        from .integrations.sdk import patch_sdks

        return patch_sdks(self)

    def patch_http(self) -> AbstractContextManager[Tape]:
        """Tape every ``httpx``/``httpx2`` client created in this thread or task in the block."""
        from .integrations.http import patch_http

        return patch_http(self)

    def http_transport(self, inner: Any = None, *, flavor: Any = None) -> Any:
        """A sync ``httpx2`` (or ``httpx``: ``flavor="httpx"``) transport through this tape."""
        from .integrations.http import http_transport

        return http_transport(self, inner, flavor=flavor)

    def async_http_transport(self, inner: Any = None, *, flavor: Any = None) -> Any:
        """The async twin of ``http_transport``, for ``AsyncClient``."""
        from .integrations.http import async_http_transport

        return async_http_transport(self, inner, flavor=flavor)

    # -- lifecycle -----------------------------------------------------------------------------

    def close(self, *, failed: bool = False) -> None:
        """Finish the tape: move the recording into place, or report unplayed decisions."""
        if self._closed:
            return
        self._closed = True
        if self._writer is not None:
            self._writer.close()
            return
        unplayed = self.unplayed
        # After a miss the rest of the recording is unplayed by definition: no second report.
        if not unplayed or failed or self._missed:
            return
        shown = ", ".join(f"#{r.get('seq', '?')} {r['key']}" for r in unplayed[:5])
        more = f" and {len(unplayed) - 5} more" if len(unplayed) > 5 else ""
        message = (
            f"{self.path}: {len(unplayed)} recorded decision(s) were never played: {shown}{more}"
        )
        if self.strict:
            raise UnplayedDecisionsError(
                message + "; the run stopped early or skipped them", unplayed
            )
        warnings.warn(message, TapeWarning, stacklevel=3)

    def __enter__(self) -> Tape:
        self._token = _current.set(self)
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
        self.close(failed=exc is not None)

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
        return f"Tape({str(self.path)!r}, mode={self.mode.value!r})"

    # -- integrations: tools and environment ------------------------------------------------

    @overload
    def tool(
        self,
        func: Callable[P, R],
        *,
        effect: str | Effect = ...,
        name: str | None = ...,
        stub: Callable[P, R] | None = ...,
        ignore: Iterable[str] = ...,
    ) -> Callable[P, R]: ...

    @overload
    def tool(
        self,
        func: None = ...,
        *,
        effect: str | Effect = ...,
        name: str | None = ...,
        stub: Callable[..., Any] | None = ...,
        ignore: Iterable[str] = ...,
    ) -> Callable[[Callable[P, R]], Callable[P, R]]: ...

    def tool(
        self,
        func: Callable[P, R] | None = None,
        *,
        effect: str | Effect = Effect.READ,
        name: str | None = None,
        stub: Callable[..., Any] | None = None,
        ignore: Iterable[str] = (),
    ) -> Callable[P, R] | Callable[[Callable[P, R]], Callable[P, R]]:
        """Decorate a function as a tool taped on this tape (see ``tracetape.tool``)."""
        from .integrations.tools import tool

        return tool(func, effect=effect, name=name, stub=stub, ignore=ignore, tape=self)

    def env(self, name: str, default: str | None = None) -> str | None:
        """Read an environment variable through this tape (see ``tracetape.env``)."""
        from .integrations.tools import env

        return env(name, default, tape=self)


def _short(value: Any, width: int = 60) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= width else text[: width - 1] + "…"


def _explain(expected: Mapping[str, Any], live: Any) -> tuple[list[str], list[str]]:
    """Return the changed input paths and the diagnosis lines that show them."""
    if "input" in expected:
        changes = changed_paths(expected["input"], live)
    elif "digests" in expected and isinstance(live, dict):
        names = digest_changes(expected["digests"], field_digests(live))
        return names, [
            f"  changed: {n} (digest differs; the input copy was not stored)" for n in names
        ]
    else:
        return [], [
            "  the recorded decision has no input copy (a cassette of the seed's format): "
            "re-record it with tracetape for a field-level diagnosis"
        ]
    lines = []
    for change in changes[:10]:
        before, after = change.before, change.after
        if isinstance(before, str) and isinstance(after, str):
            b, a = excerpt(before, after)
            lines += [f"  changed: {change.path}", f"    - {b!r}", f"    + {a!r}"]
        elif before is None:
            lines.append(f"  added: {change.path} = {_short(after)}")
        elif after is None:
            lines.append(f"  removed: {change.path} (was {_short(before)})")
        else:
            lines.append(f"  changed: {change.path}: {_short(before)} -> {_short(after)}")
    if len(changes) > 10:
        lines.append(f"  ... and {len(changes) - 10} more changed paths")
    if not changes:
        lines.append("  the input equals the expected one: it was already played earlier")
    return [c.path for c in changes], lines
