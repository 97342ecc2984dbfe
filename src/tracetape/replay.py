"""``Replay``: a recording's replay state, and the diagnosis of a miss.

A ``Tape`` that replays keeps its recording here: a FIFO queue of record indices per key (a
key recorded twice plays its outputs in recorded order), each kind's records in order with a
cursor past the played ones, and which records were played. Replay keys a payload as fast as
it can (``decision``: each kind's conversation hashed incrementally, redacted only when its
key was never recorded), and a miss is explained against the record the run was expected to
make (``miss``). The tape reads the queues, the played flags and the records directly on its
hot paths (``peek``, ``play``).

    >>> from tracetape.redact import Redactor
    >>> replay = Replay([Record(kind="tool", key="tool:1", out=3)], Redactor(), Match())
    >>> replay.queues, replay.unplayed()[0].out
    ({'tool:1': deque([0])}, 3)
"""

from __future__ import annotations

import copy
import json
import warnings
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from .canonical import StreamKey, canonical_json, changed_paths, key_of, keyer
from .diagnose import explain_miss
from .errors import (
    CassetteError,
    CassetteNotFoundError,
    MatchRulesError,
    ReplayMiss,
    TapeWarning,
    UnplayedDecisionsError,
)
from .formats.cassette import Cassette, Seal
from .matching import Match
from .record import RAISED, UNKEYED, Decision, Record, Unkeyed, keyed_input
from .redact import Redactor
from .stores import RecordStore

__all__ = ["Replay"]


def _recorded_rules(
    header: Mapping[str, Any], given: Match | None, name: str, rerecord: str
) -> Match:
    """The match rules a cassette was recorded with (its header's), which it replays under;
    rules ``given`` that differ are an error."""
    try:
        recorded = Match.coerce(header.get("match"))
    except ValueError as exc:
        raise CassetteError(
            f"header field 'match' is not match rules ({exc}); the header was edited: "
            "restore it, or re-record the cassette",
            path=name,
            line=1,
        ) from None
    if given is not None and given != recorded:
        raise MatchRulesError(
            f"{name}: the match rules given ({given.describe()}) differ from the rules this "
            f"cassette was recorded with ({recorded.describe()}); a cassette replays under "
            "its own rules: give none (or the same), re-key it under the new ones with "
            f"`tracetape migrate {name}`, or re-record it: {rerecord}"
        )
    return recorded


def _lines(faults: tuple[tuple[int, str], ...]) -> str:
    """The lines of ``faults`` as a message names them: ``line 4``, ``lines 4, 5 and 9``."""
    numbers = sorted({line for line, _ in faults})
    shown = [str(n) for n in numbers[:8]]
    if len(numbers) > 8:
        shown[-1] = f"{len(numbers) - 7} more"
    if len(shown) == 1:
        return f"line {shown[0]}"
    return f"lines {', '.join(shown[:-1])} and {shown[-1]}"


def _edited(seal: Seal, name: str, rerecord: str, trust: bool) -> None:
    """Refuse a cassette whose chain ``seal`` is broken (``CassetteError`` at its first line at
    fault), or with ``trust``, warn naming every line at fault."""
    assert seal.line is not None
    faults = seal.faults or ((seal.line, seal.reason),)
    if trust:
        first = f" (the first: {seal.reason})" if len(faults) > 1 else f": {seal.reason}"
        warnings.warn(
            f"{name}: its seal is broken at {_lines(faults)}{first}; it replays as edited by "
            "hand, not as recorded, as trust_edits asks",
            TapeWarning,
            stacklevel=4,
        )
        return
    others = f" (and at {_lines(faults[1:])})" if len(faults) > 1 else ""
    raise CassetteError(
        f"{seal.reason}{others}: the cassette was edited after it was recorded, so it no "
        f"longer replays the recording; check it with `tracetape verify {name}` and restore "
        f"it, re-record it ({rerecord}), or replay it as edited on purpose: "
        "Tape(..., trust_edits=True), tracetape run --trust-edits or [tool.tracetape] "
        "trust_edits = true",
        path=name,
        line=seal.line,
    )


def _failure(rec: Record) -> bool:
    return isinstance(rec.out, dict) and RAISED in rec.out


class Replay:
    """The replay state of ``records`` (see the module docstring), keyed under ``match`` with
    ``redactor`` (which redacts a payload whose key was never recorded)."""

    def __init__(self, records: list[Record], redactor: Redactor, match: Match):
        self.records = records
        self.played = bytearray(len(records))
        self.queues: dict[str, deque[int]] = {}
        self.by_kind: dict[str, list[int]] = {}
        self.cursor: dict[str, int] = {}
        self.redactor, self.match = redactor, match
        # the rules (None for none: keyed as before, no call made), and the keyer of every
        # kind's replay keys, chosen once here
        self.rules = match or None
        self._new_keys = keyer(match.mask_string if match.mask else None)
        self._recognising = False
        queues, by_kind = self.queues, self.by_kind
        for i, rec in enumerate(records):
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
        self.keys: dict[str, StreamKey] = {kind: self._new_keys(kind) for kind in by_kind}

    @classmethod
    def load(
        cls,
        store: RecordStore,
        redactor: Redactor,
        given: Match | None,
        rerecord: str,
        *,
        trusting_edits: Callable[[], bool] = lambda: False,
    ) -> tuple[Cassette, Replay]:
        """Read the recording of ``store`` (``CassetteNotFoundError`` says how to record it),
        to replay under the match rules it was recorded with, its header's (rules ``given``
        that differ are a ``MatchRulesError`` naming ``rerecord``, how to record it again).
        A sealed recording whose chain was broken by a hand edit (``Cassette.seal``) is a
        ``CassetteError`` naming its line; where ``trusting_edits()`` (asked then only) says
        so, a ``TapeWarning`` naming every line, and it replays as edited. One cut short (no
        trailer) replays."""
        name = store.name
        try:
            cassette = store.load()
        except CassetteNotFoundError as exc:
            exc.args = (
                f"{name}: no such cassette to replay; record it first with Tape({name!r}, "
                "mode='record') (or mode='auto', which records when the cassette is missing)",
            )
            raise
        # a header whose rules do not parse is named at its line and field first
        rules = _recorded_rules(cassette.header or {}, given, name, rerecord)
        if cassette.seal is not None and cassette.seal.state == "broken":
            _edited(cassette.seal, name, rerecord, trusting_edits())
        return cassette, cls(cassette.records, redactor, rules)

    def only(self, key: str) -> Replay:
        """A state of its own that replays only the first queued record of ``key``: playing
        it changes nothing here."""
        only = copy.copy(self)
        only.queues = {key: deque([self.queues[key][0]])}
        only.played, only.cursor = bytearray(len(self.records)), {}
        only.keys = {kind: self._new_keys(kind) for kind in self.keys}
        return only

    def decision(
        self, kind: str, payload: Any, step: int | None, finite: bool, unkeyed: Unkeyed = None
    ) -> Decision:
        """Replay's key of a payload (see ``Tape.prepare``): the fast incremental key,
        redacted only when it was never recorded (a miss keeps the whole input, ``unkeyed``
        and what the rules leave out, to name what differs beyond the key)."""
        keys = self.keys.get(kind)
        if keys is None:
            keys = self.keys[kind] = self._new_keys(kind)
        # under rules: the ignored paths left out here, the masks applied by the keys
        rules = self.rules
        text, key = keys.key(payload if rules is None else rules.ignored(payload), finite=finite)
        if key in self.queues:
            return Decision(kind, key, text, step)
        whole = payload if rules is not None else None
        if unkeyed is not None:
            whole = {**payload, UNKEYED: unkeyed}
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

    @property
    def matched(self) -> int:
        """How many records were played."""
        return self.played.count(1)

    def unplayed(self) -> list[Record]:
        """The records not played, but for the failed requests (kind ``http``) whose key was
        played: a failure retried in the background (see ``failed_again``)."""
        played = {rec.key for i, rec in enumerate(self.records) if self.played[i]}
        return [
            rec
            for i, rec in enumerate(self.records)
            if not self.played[i]
            and not (rec.kind == "http" and _failure(rec) and rec.key in played)
        ]

    def report_unplayed(self, name: str, strict: bool) -> None:
        """Warn that records of ``name`` were never played (``strict``: raise
        ``UnplayedDecisionsError``); nothing when all were."""
        unplayed = self.unplayed()
        if not unplayed:
            return
        shown = ", ".join(f"#{'?' if r.seq is None else r.seq} {r.key}" for r in unplayed[:5])
        more = f" and {len(unplayed) - 5} more" if len(unplayed) > 5 else ""
        message = f"{name}: {len(unplayed)} recorded decision(s) were never played: {shown}{more}"
        if strict:
            raise UnplayedDecisionsError(
                message + "; the run stopped early or skipped them", unplayed
            )
        warnings.warn(message, TapeWarning, stacklevel=4)

    def failed_again(self, decision: Decision) -> Record | None:
        """A request (kind ``http``) whose recorded attempts all failed, asked for once more
        than recorded: its last failure (see ``Tape.failed_again``)."""
        if decision.kind != "http" or self.queues.get(decision.key):
            return None
        same = [rec for rec in self.records if rec.key == decision.key]
        return same[-1] if same and all(_failure(rec) for rec in same) else None

    # -- the miss diagnosis --------------------------------------------------------------------

    def miss(self, decision: Decision, rerecord: str, ended: str | None) -> ReplayMiss:
        """The diagnosis of ``decision``, which missed: what changed from the record it was
        expected to be, ending with ``rerecord`` (how to record it again); ``ended`` is how
        the recording ended."""
        repeated = 0
        if decision.key in self.queues:
            repeated = sum(1 for r in self.records if r.key == decision.key)
        expected = self.expected(decision)
        uncompared: list[str] = []
        if expected is not None and expected.input is not None:
            keyed = keyed_input(expected.input)
            keyed = keyed if self.rules is None else self.rules.keyed(keyed)
            if decision.payload is not None:  # paths only: the live values are not redacted
                live = json.loads(canonical_json(decision.payload))
                shown = {c.path for c in changed_paths(keyed, decision.input())}
                uncompared = [
                    c.path for c in changed_paths(expected.input, live) if c.path not in shown
                ]
            if keyed is not expected.input:
                expected = msgspec.structs.replace(expected, input=keyed)
        return explain_miss(
            decision,
            expected,
            matched=self.matched,
            recorded=len(self.records),
            repeated=repeated,
            rerecord=rerecord,
            rules=self.match.describe() if self.match else None,
            ended=ended,
            uncompared=uncompared,
        )

    def next_unplayed(self, kind: str) -> Record | None:
        """The first record of ``kind`` not played."""
        indices = self.by_kind.get(kind, [])
        cursor = self.cursor.get(kind, 0)
        while cursor < len(indices) and self.played[indices[cursor]]:
            cursor += 1
        self.cursor[kind] = cursor
        return self.records[indices[cursor]] if cursor < len(indices) else None

    def expected(self, decision: Decision) -> Record | None:
        """The recorded decision the run was expected to make: an unplayed one of its kind at
        its step (a framework may write a step's records out of order, or after a later
        step's), else the first unplayed one of its kind. Where several flows (threads, tasks)
        each left one at that step, the one whose input differs from this one in the fewest
        paths (as the match rules see them): the same flow's, as the cassette keeps no flow
        identity."""
        first = self.next_unplayed(decision.kind)
        if first is None or decision.step is None:
            return first
        same_step = [
            self.records[index]
            for index in self.by_kind.get(decision.kind, [])
            if not self.played[index] and self.records[index].step == decision.step
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
