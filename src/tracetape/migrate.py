"""Bring cassettes of older formats and older keying to the current ones, without recording.

A cassette from an older tracetape (format 0: the seed's records without a header; format 1:
unsealed; keys 1: model steps counted per thread; keys 3: a provider's noise keyed) or keyed
under other match rules still holds each decision's input: ``migrate_cassette`` re-keys every
record from it as replay keys it now (steps read from the conversation, the providers' noise
stored unkeyed, the match rules applied, redaction as the tape redacts), seals the records
into the current format and checks, before anything replaces the file, that the new
cassette replays the same outputs in the same order (each stored input keyed by a replaying
``Tape`` and played). The old file is kept as ``PATH.bak`` unless told otherwise; the new
one replaces it atomically. A sealed cassette edited by hand (its chain broken) is refused,
as replay refuses it: sealing it again would make the edits look recorded; ``trust_edits``
migrates it as edited.

The match rules a cassette is migrated to are the project's (``[tool.tracetape.match]``)
where it has some, else the cassette's own: changing the project's rules and running
``tracetape migrate`` re-keys the cassettes under them.
"""

from __future__ import annotations

import os
import shutil
import warnings
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec

from ._version import __version__
from .canonical import canonical_json, digest, field_digests, key_of
from .config import load_config
from .errors import CassetteError, ReplayMiss
from .formats.cassette import (
    FORMAT_VERSION,
    KEYS_VERSION,
    Cassette,
    new_header,
    read_cassette,
    run_id_of,
)
from .integrations.keying import migrate_noise
from .integrations.steps import migrate as migrate_steps
from .matching import Match
from .record import UNKEYED, Decision, Record, keyed_input
from .redact import Redactor, RedactRules
from .stores.file import CassetteWriter

__all__ = ["Migration", "migrate_cassette"]


@dataclass
class Migration:
    """What migrating one cassette changes (``changes`` empty: it is current)."""

    path: Path
    format: int
    keys: int
    records: int = 0
    rekeyed: int = 0
    changes: list[str] = field(default_factory=list)
    written: bool = False
    backup: Path | None = None

    def as_json(self) -> dict[str, Any]:
        """The JSON form ``tracetape migrate --format json`` prints."""
        return {
            "path": str(self.path),
            "format": self.format,
            "keys": self.keys,
            "records": self.records,
            "rekeyed": self.rekeyed,
            "changes": self.changes,
            "written": self.written,
            "backup": None if self.backup is None else str(self.backup),
        }


def _rules(cassette: Cassette) -> tuple[Match, Match]:
    """The cassette's own rules and the ones it is migrated to."""
    try:
        own = Match.coerce((cassette.header or {}).get("match"))
    except ValueError as exc:
        raise CassetteError(
            f"header field 'match' is not match rules ({exc}); restore the header",
            path=cassette.path,
            line=1,
        ) from None
    project = load_config("match")
    return own, Match.coerce(project) if project else own


def _hooked(records: list[Record]) -> bool:
    """Whether the hooks recorded the cassette's model calls (their steps were counted per
    thread before keys 2): a record names its ``api``, or holds a provider's envelope (a
    status and a body or events). ``tape.call`` decisions keep the steps their code gave."""
    for rec in records:
        if rec.kind != "llm":
            continue
        out = rec.out
        if rec.api is not None or (
            isinstance(out, dict) and "status" in out and ("body" in out or "events" in out)
        ):
            return True
    return False


def _current(records: list[Record], rules: Match, redactor: Redactor, path: Path) -> list[Record]:
    """``records`` redacted by today's rules (a secret an older tracetape missed is replaced
    now) and keyed from their inputs as replay keys them now."""
    out = []
    for rec in records:
        data = rec.input
        if data is not None:
            data, _ = redactor.redact_value(data)
        body, _ = redactor.redact_value(rec.out)
        changes: dict[str, Any] = {}
        if body != rec.out:
            changes["out"] = body
        if data is None:
            if rules:
                raise CassetteError(
                    f"record #{rec.seq} ({rec.key}) stored no input, so it cannot be keyed "
                    "under match rules; re-record the cassette",
                    path=path,
                )
        else:
            if data != rec.input:
                changes["input"] = data
                changes["digests"] = field_digests(data) if isinstance(data, dict) else None
            text = redactor.redact_json(canonical_json(rules.keyed(keyed_input(data))))
            if key_of(rec.kind, text) != rec.key:
                changes["key"] = key_of(rec.kind, text)
        out.append(msgspec.structs.replace(rec, **changes) if changes else rec)
    return out


def _verify(target: Path, records: list[Record]) -> None:
    """Replay ``target`` (the migrated cassette) with each record's stored input, in order:
    every one must play the output it had."""
    from .tape import Tape

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tape = Tape(target, mode="replay")
    for rec in records:
        if rec.input is not None:
            noise = rec.input.get(UNKEYED) if type(rec.input) is dict else None
            decision = tape.prepare(rec.kind, keyed_input(rec.input), unkeyed=noise)
        else:
            decision = Decision(rec.kind, rec.key or "", "null", rec.step)
        try:
            played = tape.play(decision)
        except ReplayMiss as miss:
            raise CassetteError(
                f"the migrated cassette does not replay record #{rec.seq} ({rec.key}): "
                f"{str(miss).splitlines()[0]}; nothing was changed",
                path=target,
            ) from None
        if digest(played.out) != digest(rec.out):
            raise CassetteError(
                f"the migrated cassette replays record #{rec.seq} ({rec.key}) with another "
                "output; nothing was changed",
                path=target,
            )


def migrate_cassette(
    path: str | os.PathLike[str],
    *,
    check: bool = False,
    backup: bool = True,
    trust_edits: bool = False,
) -> Migration:
    """Migrate the cassette at ``path`` in place (see the module doc); with ``check``, only
    say what would change. Raises ``CassetteError`` for a cassette that cannot be read or
    migrated, leaving it as it was: one edited by hand too, unless ``trust_edits``."""
    path = Path(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a torn last line: what is whole migrates
        cassette = read_cassette(path)
    seal = cassette.seal
    if seal is not None and seal.state == "broken" and not trust_edits:
        raise CassetteError(
            f"{seal.reason}: the cassette was edited after it was recorded, and migrating "
            f"it would seal the edits as if recorded; nothing was changed. Check it with "
            f"`tracetape verify {path}` and restore it or re-record it, or migrate it as "
            "edited on purpose with --trust-edits",
            path=path,
            line=seal.line,
        )
    header = cassette.header or {}
    keys = header.get("keys", 1) if cassette.header else 1
    found = Migration(path, cassette.format, keys if isinstance(keys, int) else 1)
    found.records = len(cassette.records)
    own, rules = _rules(cassette)
    records = cassette.records
    hooked = _hooked(records)
    if found.keys < 3 and hooked:
        records = migrate_steps(records, since=found.keys)
    if found.keys < 4:
        records = migrate_noise(records, rules)
    redactor = Redactor(RedactRules.coerce(load_config("redact") or None))
    stepped, records = records, _current(records, rules, redactor, path)
    found.rekeyed = sum(a.key != b.key for a, b in zip(cassette.records, records, strict=True))
    redacted = sum(
        a.input != b.input or a.out != b.out for a, b in zip(stepped, records, strict=True)
    )
    if cassette.format != FORMAT_VERSION:
        found.changes.append(f"format {cassette.format} -> {FORMAT_VERSION} (sealed)")
    if found.keys != KEYS_VERSION:
        how = "steps from the conversation; " if found.keys < 3 else ""
        how = f"{how}the providers' noise stored unkeyed" if hooked else "no hooked model call"
        found.changes.append(f"keys {found.keys} -> {KEYS_VERSION} ({how})")
    if own != rules:
        found.changes.append(f"match rules: {own.describe()} -> {rules.describe()}")
    if found.rekeyed:
        found.changes.append(f"{found.rekeyed} of {found.records} record(s) re-keyed")
    if redacted:
        found.changes.append(f"{redacted} record(s) hold a secret redacted now")
    if check or not found.changes:
        return found
    _write(path, cassette, records, rules, found, backup=backup)
    return found


def _write(
    path: Path,
    cassette: Cassette,
    records: list[Record],
    rules: Match,
    found: Migration,
    *,
    backup: bool,
) -> None:
    header = {k: v for k, v in (cassette.header or {}).items() if k != "pid"}
    header = {
        **(header or new_header()),
        "tracetape": FORMAT_VERSION,
        "keys": KEYS_VERSION,
        "run_id": header.get("run_id") or run_id_of(path),
        "migrated": {
            "from": {"format": found.format, "keys": found.keys},
            "by": __version__,
            "at": datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        },
    }
    header.pop("match", None)
    if rules:
        header["match"] = rules.as_header()
    # how the old recording ended; one that never closed (no trailer) was cut short
    ended = {None: "completed", "unfinished": "interrupted"}.get(cassette.ended, cassette.ended)
    target = path.with_name(path.name + ".migrating")
    writer = CassetteWriter(target, header)
    try:
        for rec in records:
            writer.write(rec)
        writer.close(ended=ended or "completed")
        _verify(target, records)
        if backup:
            found.backup = path.with_name(path.name + ".bak")
            shutil.copy2(path, found.backup)
        target.replace(path)
    finally:
        writer.close(keep=False)
        target.unlink(missing_ok=True)
    found.written = True
