"""``Recorder``: how a recording tape keys its decisions and writes them.

Recording keys a payload whole: its canonical JSON (each kind's last text memoised, so a
conversation that grows by appending is encoded once), redacted, hashed; under match rules the
key is the payload's as the rules see it, while the stored input is the whole payload. Each
decision is written with its output redacted, its token counts and its time. The recorder
counts what the store took (``written``), keeps the first error that stopped the recording
(``write_failure``: a full disk), and warns when two flows made one decision with different
outputs. A recording's header (``header``) names its harness, its allowed environment
variables by digest, its redaction key's id, its keys' version and its match rules.

    >>> from tracetape.redact import Redactor
    >>> recorder = Recorder(Redactor(), TapeOptions(), lambda: None)
    >>> recorder.decision("tool", {"name": "add", "args": [1, 2], "step": 1}, 1, False).key
    'tool:fd4e74fff8f24b4b'
"""

from __future__ import annotations

import sys
import threading
import warnings
from collections.abc import Callable, Mapping
from typing import Any

from ._enums import Effect
from .canonical import canonical_json, digest, field_digests, key_of
from .errors import CassetteError, TapeWarning
from .formats.cassette import KEYS_VERSION, new_header
from .harness import git_sha, harness_digest
from .matching import Match
from .options import TapeOptions
from .record import UNKEYED, Decision, Record, Unkeyed
from .redact import Redactor
from .stores import RecordStore

__all__ = ["Recorder"]


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


class Recorder:
    """The keys and writes of a recording (see the module docstring), redacted by
    ``redactor``, under the tape's ``options`` (its harness, ``store_inputs``);
    ``environment`` gives the header's digests of the allowed environment variables."""

    def __init__(
        self,
        redactor: Redactor,
        options: TapeOptions,
        environment: Callable[[], dict[str, str | None] | None],
    ):
        self.redactor, self.options, self.environment = redactor, options, environment
        self.store_inputs = options.store_inputs
        self.use(Match())
        # Per kind, the last canonical text keyed: a conversation grows by appending.
        self._memos: dict[str, list[bytes]] = {}
        # The flow and output digest of each key's first record (``_check_ambiguous``).
        self._first_outputs: dict[str, tuple[tuple[int, int], str]] = {}
        self.written = 0
        self.write_failure: CassetteError | None = None

    def use(self, match: Match) -> None:
        """Key under ``match`` from now on (a fork records under its parent's rules)."""
        self.match, self._rules = match, match or None

    def header(self, run_id: str, **fields: Any) -> dict[str, Any]:
        """A recording's header: ``run_id``, the harness (its files' digest, else its git
        SHA), the allowed environment variables' digests, the redaction key's id, the keys'
        version, the match rules, then ``fields``."""
        harness = self.options.harness_paths
        return new_header(
            run_id=run_id,
            harness_sha=self.options.harness_sha or git_sha(),
            harness_paths=list(harness) or None,
            harness_digest=harness_digest(harness) if harness else None,
            env=self.environment(),
            redact_key_id=self.redactor.key_id,
            keys=KEYS_VERSION,
            match=self.match.as_header(),
            **fields,
        )

    def decision(
        self, kind: str, payload: Any, step: int | None, finite: bool, unkeyed: Unkeyed = None
    ) -> Decision:
        """Recording's key of a payload (see ``Tape.prepare``): ``unkeyed`` is stored with
        it (``UNKEYED``), never keyed."""
        memo = self._memos.get(kind)
        if memo is None:
            memo = self._memos[kind] = [b""]
        whole = payload if unkeyed is None else {**payload, UNKEYED: unkeyed}
        canonical = canonical_json(whole, memo, finite=finite)
        blob = self.redactor.redact_payload(whole, canonical, kind)
        rules = self._rules
        keyed = payload if rules is None else rules.keyed(payload)
        if keyed is whole:
            return Decision(kind, key_of(kind, blob), blob, step)
        stream = f"{kind} keyed"  # a stream of its own: the redactor and encoder memoise it
        memo = self._memos.setdefault(stream, [b""])
        seen = self.redactor.redact_payload(
            keyed, canonical_json(keyed, memo, finite=finite), stream
        )
        return Decision(kind, key_of(kind, seen), blob, step)

    def write(
        self,
        store: RecordStore,
        decision: Decision,
        out: Any,
        *,
        ms: float,
        effect: str | Effect,
        usage: Mapping[str, int] | None,
        api: str | None,
        stream_text: Callable[[tuple[Any, ...]], bool] | None,
    ) -> Any:
        """Write ``decision`` and its output to ``store`` (see ``Tape.record``); returns the
        output as stored (redacted)."""
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
            seq = store.append(record)
        except CassetteError as exc:
            if self.write_failure is None:
                self.write_failure = exc
            raise
        self.written = max(self.written, seq)
        self._check_ambiguous(store.name, decision.key, stored)
        return stored

    def _check_ambiguous(self, name: str, key: str, stored: Any) -> None:
        """Warn when two flows made the same decision and got different outputs: replay
        returns a key's outputs in recorded order, which need not be their arrival order."""
        flow, out = _flow(), digest(stored)
        first = self._first_outputs.setdefault(key, (flow, out))
        if first[0] != flow and first[1] != out:
            self._first_outputs[key] = (flow, out)  # one warning per pair of flows
            warnings.warn(
                f"{name}: {key} was made by two concurrent flows (threads or asyncio "
                "tasks) with different outputs; replay returns them in recorded order, which "
                "may not be the order the calls arrive in: make the inputs differ (a worker "
                "id in the prompt or the tool arguments) or make the calls in one flow",
                TapeWarning,
                stacklevel=4,
            )
