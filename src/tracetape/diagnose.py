"""``ReplayMiss`` diagnosis: which recorded decision was expected, and what changed.

A miss names how far the run agreed with the recording, the recorded decision the run was
expected to make next (the next unplayed one of the same kind) and the input paths that
differ, with a short before/after excerpt; where the input copy was not stored, the
per-field digests still name the changed fields.
"""

from __future__ import annotations

import json
from typing import Any

from .canonical import Change, changed_paths, digest_changes, excerpt, field_digests
from .errors import ReplayMiss
from .matching import MASKS, Match
from .record import UNKEYED, Decision, Record

__all__ = ["explain_miss", "truncated_stream_miss"]


def explain_miss(
    decision: Decision,
    expected: Record | None,
    *,
    matched: int,
    recorded: int,
    repeated: int,
    rerecord: str,
    rules: str | None = None,
    ended: str | None = None,
    uncompared: list[str] | None = None,
) -> ReplayMiss:
    """The ``ReplayMiss`` of ``decision``, which was never recorded (or recorded ``repeated``
    times and all played); ``rerecord`` is the call that records again. ``rules`` names the
    active match rules (the expected input comes keyed by them: masked values masked);
    ``ended`` is how the recording ended (its trailer); ``uncompared`` the paths that differ
    but that the rules leave out of the key (named, not shown)."""
    step = decision.step if decision.step is not None else "-"
    lines = [
        f"  matched {matched} of {recorded} recorded decisions before this miss "
        f"(kind {decision.kind}, step {step})"
    ]
    if rules:
        lines.append(f"  match rules (from the cassette's header): {rules}")

    cut = ended is not None and ended != "completed"
    if repeated:
        lines.append(
            f"  this exact input was recorded {repeated} time(s) and all were already played: "
            "the run repeated a decision more often than the recording did"
        )
    changes: list[str] = []
    if expected is None and cut:
        lines.append(
            f"  the recording {_how_cut(ended)} after {recorded} decisions; this run goes on "
            "past where it stopped: re-record it"
        )
    elif expected is None:
        lines.append(
            f"  no unplayed {decision.kind!r} decision is left: the run went on past the end "
            "of the recording"
        )
    else:
        if cut:
            lines.append(f"  note: the recording {_how_cut(ended)} after {recorded} decisions")
        where = f"#{'?' if expected.seq is None else expected.seq} {expected.kind}"
        if expected.step is not None:
            where += f" step {expected.step}"
        lines.append(f"  expected: {where} {expected.key}")
        changes, details = _explain(expected, decision.input())
        lines += details
        noise = [p for p in uncompared or () if p.split(".", 1)[0].split("[", 1)[0] == UNKEYED]
        ruled = [p for p in uncompared or () if p not in noise]
        for paths, why in ((ruled, "the rules ignore or mask them"), (noise, _NEVER_KEYED)):
            if paths:
                more = f" and {len(paths) - 10} more" if len(paths) > 10 else ""
                lines.append(
                    f"  differing too, not compared ({why}): {', '.join(paths[:10])}{more}"
                )
    lines.append(f"  if the change is intended, re-record: {rerecord}")
    return _miss(decision, expected, (matched, recorded), changes, lines)


_NEVER_KEYED = "fields that never reach the model, stored but never keyed"


def _how_cut(ended: str | None) -> str:
    """How a recording that did not complete stopped, as the diagnosis says it.

    >>> _how_cut("interrupted"), _how_cut("failed: ValueError")
    ('was interrupted', 'stopped when the agent raised ValueError')
    """
    if ended == "unfinished":
        return "was cut short (it never closed)"
    if ended and ended.startswith("failed: "):
        return f"stopped when the agent raised {ended.removeprefix('failed: ')}"
    return f"was {ended}"


def _miss(
    decision: Decision,
    expected: Record | None,
    counts: tuple[int, int],
    changes: list[str],
    lines: list[str],
) -> ReplayMiss:
    matched, recorded = counts
    return ReplayMiss(
        decision.key,
        kind=decision.kind,
        step=decision.step,
        matched=matched,
        recorded=recorded,
        expected=expected,
        changes=changes,
        diagnosis="\n".join(lines),
    )


def truncated_stream_miss(
    decision: Decision, rec: Record, *, matched: int, recorded: int, rerecord: str
) -> ReplayMiss:
    """The miss raised when a replay reads a stream past where the recorded run abandoned it."""
    events = len(rec.out.get("events", ()))
    lines = [
        f"  the recorded run stopped reading this stream after {events} event(s) "
        "(it abandoned it); this run reads further, past what was recorded",
        f"  if the change is intended, re-record: {rerecord}",
    ]
    return _miss(decision, rec, (matched, recorded), [], lines)


def _short(value: Any, width: int = 60) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= width else text[: width - 1] + "…"


def _explain(expected: Record, live: Any) -> tuple[list[str], list[str]]:
    """Return the changed input paths and the diagnosis lines that show them."""
    if expected.input is not None:
        changes = changed_paths(expected.input, live)
    elif expected.digests is not None and isinstance(live, dict):
        keyed = {k: v for k, v in expected.digests.items() if k != UNKEYED}
        names = digest_changes(keyed, field_digests(live))
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
            # a string beside another type is quoted, so 1 -> "1" does not read 1 -> 1
            quote = isinstance(before, str) != isinstance(after, str)
            b, a = (
                _short(json.dumps(v, default=str)) if quote else _short(v) for v in (before, after)
            )
            lines.append(f"  changed: {change.path}: {b} -> {a}")
    if len(changes) > 10:
        lines.append(f"  ... and {len(changes) - 10} more changed paths")
    if not changes:
        lines.append("  the input equals the expected one: it was already played earlier")
    return [c.path for c in changes], lines + _mask_hint(changes)


# What each mask of ``matching.MASKS`` finds, as a miss names it.
_FOUND = {
    "uuid": "a UUID",
    "tmp": "a temporary path",
    "ts": "a timestamp",
    "unix-time": "a Unix time",
    "hex-id": "a hex id",
}


def _mask_hint(changes: list[Change]) -> list[str]:
    """Where every change is a text that differs only in what masks find (a UUID, a time, a
    hex id), the mask rule that would match them: the fewest masks that make each before
    and after equal.

    >>> from tracetape.canonical import Change
    >>> _mask_hint([Change("messages[0].content", "run 0b7e1b2c-6a1f-4c1e-9a51-8f0b8f9b2a11",
    ...                    "run 3f1c9d2e-2b4a-4f6e-8c1d-5e7a9b0c1d2e")])[0]
    '  only a UUID differs: the mask rule [tool.tracetape.match] mask = ["uuid"] would match it'
    >>> _mask_hint([Change("messages[0].content", "find the flaky tests", "find the slow tests")])
    []
    """
    if not all(isinstance(c.before, str) and isinstance(c.after, str) for c in changes):
        return []

    def equal_under(names: list[str]) -> bool:
        mask = Match(mask=names).mask_string
        return all(mask(c.before) == mask(c.after) for c in changes)

    needed = list(MASKS)
    if not changes or not equal_under(needed):
        return []
    for name in list(needed):
        fewer = [n for n in needed if n != name]
        if fewer and equal_under(fewer):
            needed = fewer
    found = " and ".join(_FOUND.get(name, name) for name in needed)
    masks = ", ".join(f'"{name}"' for name in needed)
    them = "them" if len(needed) > 1 or len(changes) > 1 else "it"
    return [
        f"  only {found} {'differ' if len(needed) > 1 else 'differs'}: the mask rule "
        f"[tool.tracetape.match] mask = [{masks}] would match {them}",
        "    (in pyproject.toml; then re-key the cassette with `tracetape migrate`, or re-record)",
    ]
