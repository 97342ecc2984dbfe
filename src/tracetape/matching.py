"""Match rules: what a decision's key leaves out (``ignore``) and what it masks (``mask``).

A prompt that carries a fresh UUID or the current time would miss on every replay; a match
rule says that part of the request decides nothing. Rules come from ``Tape(...,
match=Match(...))`` or ``[tool.tracetape.match]``::

    [tool.tracetape.match]
    ignore = ["messages[*].name"]
    mask = ["uuid", "ts", "re:order-[0-9]+"]
    keep = ["metadata"]

``ignore`` paths are dotted, with ``[*]`` for any list item and ``[N]`` for one; a path is
looked up at the payload's root, and else in its ``params`` (a model request's fields) and
its ``body`` (an HTTP request's). ``mask`` names a mask (``MASKS``: ``uuid``, ``tmp``,
``ts``, ``unix-time``, ``hex-id``) or gives a regex as ``re:...``; each is applied to every
string of the keyed payload, a match replaced by ``<name>`` (a regex's: ``<re>``).

A model request's fields that never reach the model (the provider table's ``noise``:
Anthropic's ``metadata``, OpenAI's ``user``, ``store``, ``prompt_cache_key``...) are stored
under the input's ``unkeyed`` field and never keyed, rules or not; ``keep`` names those a
tape keys after all, as request fields (``metadata``), where the program's answers depend
on them.

Only the key sees the rules: the full payload is recorded. They are written into the
cassette's header (``as_header``) and replay uses the header's, so a cassette replays the
same way wherever it goes. A tape with no rules keys exactly as before.

This module parses the rules and applies them to payloads; the keys under them are
``canonical.keys``'s, masking with ``mask_string``. It imports nothing else of
tracetape's but ``canonical`` and ``errors``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .canonical import ISO_TIME, TMP_PATH, UUID
from .errors import ConfigError

__all__ = ["MASKS", "Match"]

MASKS: dict[str, re.Pattern[str]] = {
    "uuid": UUID,
    "tmp": TMP_PATH,
    "ts": ISO_TIME,
    # seconds (10 digits) or milliseconds (13) since 1970, from 2001 to 2286, with a fraction
    "unix-time": re.compile(r"(?<![0-9.])[1-9][0-9]{9}(?:[0-9]{3}|\.[0-9]+)?(?![0-9])"),
    # a run of 16 or more hex digits holding a digit and a letter (a trace id, a digest),
    # not inside a longer word: the run is searched first (a class search is fast), the rest
    # is checked by ``_hex_id`` on the few runs found
    "hex-id": re.compile(r"[0-9a-f]{16,}(?![0-9A-Za-z])"),
}
# What a text must hold for a mask to find anything in it (a C-speed test before the regex).
_NEEDS = {"uuid": "-", "tmp": "/", "ts": ":"}


def _hex_id(found: re.Match[str]) -> str:
    run, start = found.group(), found.start()
    text = found.string
    inside = start > 0 and text[start - 1].isascii() and text[start - 1].isalnum()
    mixed = not run.isdigit() and any(c.isdigit() for c in run)
    return "<hex-id>" if mixed and not inside else run


_FIELD = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
_PART = re.compile(r"([^.\[\]]+)|\[(\*|[0-9]+)\]|\.")
_MEMO_LIMIT = 65536


def _parse_path(path: str) -> tuple[str | int | None, ...]:
    """``messages[*].name`` as ``("messages", None, "name")`` (None: any item)."""
    if not isinstance(path, str) or not path or path.startswith((".", "[")) or path.endswith("."):
        raise ConfigError(
            f"match ignore path {path!r} is not a dotted path such as 'metadata' or "
            "'messages[*].name'"
        )
    parts: list[str | int | None] = []
    at = 0
    while at < len(path):
        found = _PART.match(path, at)
        if found is None or found.end() == at:
            raise ConfigError(
                f"match ignore path {path!r} is not a dotted path such as 'metadata' or "
                f"'messages[*].name' (unexpected {path[at:]!r})"
            )
        name, index = found.groups()
        if name is not None:
            parts.append(name)
        elif index is not None:
            parts.append(None if index == "*" else int(index))
        at = found.end()
    return tuple(parts)


def _compile(mask: str) -> tuple[re.Pattern[str], Any, str]:
    if not isinstance(mask, str):
        raise ConfigError(f"match mask {mask!r} must be a string: a mask name or 're:REGEX'")
    if mask.startswith("re:"):
        try:
            return re.compile(mask[3:]), "<re>", ""
        except re.error as exc:
            raise ConfigError(f"match mask {mask!r} is not a valid regex: {exc}") from None
    pattern = MASKS.get(mask)
    if pattern is None:
        names = ", ".join(MASKS)
        raise ConfigError(f"match mask {mask!r} is unknown; use one of {names}, or 're:REGEX'")
    return pattern, _hex_id if mask == "hex-id" else f"<{mask}>", _NEEDS.get(mask, "")


def _strings(value: Any, what: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise ConfigError(f"match {what} must be a list of strings, not {value!r}")
    items = tuple(value)
    for item in items:
        if not isinstance(item, str):
            raise ConfigError(f"match {what} must be a list of strings; {item!r} is not one")
    return items


@dataclass(frozen=True)
class Match:
    """What a key leaves out and masks (see the module doc).

    >>> rules = Match(ignore=["user"], mask=["uuid"])
    >>> rules.keyed({"messages": ["id 0b7e1b2c-6a1f-4c1e-9a51-8f0b8f9b2a11"],
    ...                     "params": {"user": "u1", "model": "m"}})
    {'messages': ['id <uuid>'], 'params': {'model': 'm'}}
    """

    # Any sequence of strings is taken; both are kept as tuples, the ignored paths sorted (their
    # order means nothing; the masks' does: each is applied to what the one before left).
    ignore: Sequence[str] = ()
    mask: Sequence[str] = ()
    keep: Sequence[str] = ()
    _paths: tuple[tuple[str | int | None, ...], ...] = field(init=False, repr=False, compare=False)
    _subs: tuple[tuple[re.Pattern[str], Any, str], ...] = field(
        init=False, repr=False, compare=False
    )
    _memo: dict[str, str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "ignore", tuple(sorted(set(_strings(self.ignore, "ignore")))))
        object.__setattr__(self, "mask", _strings(self.mask, "mask"))
        object.__setattr__(self, "keep", tuple(sorted(set(_strings(self.keep, "keep")))))
        for name in self.keep:
            if not _FIELD.fullmatch(name):
                raise ConfigError(
                    f"match keep {name!r} is not a request field's name such as 'metadata' "
                    "or 'user' (a field of the request body, not a path)"
                )
        object.__setattr__(self, "_paths", tuple(_parse_path(p) for p in self.ignore))
        object.__setattr__(self, "_subs", tuple(_compile(m) for m in self.mask))
        object.__setattr__(self, "_memo", {})

    @classmethod
    def coerce(cls, value: Match | Mapping[str, Any] | None) -> Match:
        """A ``Match`` from itself, a mapping (``{"ignore": [...], "mask": [...]}``) or None."""
        if value is None:
            return cls()
        if isinstance(value, Match):
            return value
        if not isinstance(value, Mapping):
            raise ConfigError(f"match rules must be a Match or a table, not {value!r}")
        unknown = sorted(set(value) - {"ignore", "mask", "keep"})
        if unknown:
            raise ConfigError(
                f"match rules have unknown field(s) {', '.join(map(str, unknown))}; "
                "valid: ignore, mask, keep"
            )
        return cls(value.get("ignore", ()), value.get("mask", ()), value.get("keep", ()))

    def __bool__(self) -> bool:
        return bool(self.ignore or self.mask or self.keep)

    def as_header(self) -> dict[str, list[str]] | None:
        """The rules as a cassette header writes them (None: no rules; ``keep`` only where
        some field is kept)."""
        if not self:
            return None
        header = {"ignore": list(self.ignore), "mask": list(self.mask)}
        return {**header, "keep": list(self.keep)} if self.keep else header

    def describe(self) -> str:
        """The rules in a line, as a miss and ``show`` name them."""
        parts = []
        if self.ignore:
            parts.append("ignore " + ", ".join(self.ignore))
        if self.mask:
            parts.append("mask " + ", ".join(self.mask))
        if self.keep:
            parts.append("keep " + ", ".join(self.keep))
        return "; ".join(parts) or "none"

    def keyed(self, payload: Any) -> Any:
        """``payload`` as its key sees it: ignored paths left out, masks applied to every
        string. What has nothing to leave out or mask is returned as it is (not copied)."""
        value = self.ignored(payload) if self._paths else payload
        return self._masked(value) if self._subs else value

    def ignored(self, payload: Any) -> Any:
        """``payload`` without the ignored paths (copied only where something goes)."""
        value = payload
        for path in self._paths:
            if type(value) is not dict or path[0] in value:
                value = _drop(value, path, 0)
                continue
            for inner in ("params", "body"):
                found = value.get(inner)
                if isinstance(found, dict):
                    dropped = _drop(found, path, 0)
                    if dropped is not found:
                        value = {**value, inner: dropped}
        return value

    def mask_string(self, text: str) -> str:
        """``text`` with the masks applied (each distinct text masked once)."""
        memo = self._memo
        out = memo.get(text)
        if out is None:
            out = text
            for pattern, replacement, needs in self._subs:
                if needs in out:  # "" is in every text
                    out = pattern.sub(replacement, out)
            if len(memo) >= _MEMO_LIMIT:
                memo.clear()
            memo[text] = out
        return out

    def _masked(self, value: Any) -> Any:
        """``value`` with every string masked; containers copied only where one changed.
        Each distinct string is masked once (``_memo``), so a conversation that grows by
        appending costs a dictionary lookup per string it repeats."""
        string = self.mask_string

        def walk(item: Any) -> Any:
            kind = type(item)
            if kind is str:
                return string(item)
            build: type[dict[Any, Any]] | type[list[Any]]
            if kind is dict or isinstance(item, Mapping):
                pairs, build = item.items(), dict
            elif kind is list or kind is tuple:
                pairs, build = enumerate(item), list
            else:
                return item
            # a copy is made where a string changes (a mapping or tuple is copied always: the
            # canonical text holds them as a dict and a list)
            copied = None if kind is dict or kind is list else build(item)
            for k, v in pairs:
                m = walk(v)
                if m is not v:
                    if copied is None:
                        copied = build(item)
                    copied[k] = m
            return item if copied is None else copied

        return walk(value)


def _drop(value: Any, path: tuple[str | int | None, ...], at: int) -> Any:
    """``value`` without what ``path[at:]`` names (copied only where something goes)."""
    part = path[at]
    last = at == len(path) - 1
    if isinstance(part, str):
        if not isinstance(value, Mapping) or part not in value:
            return value
        if last:
            return {k: v for k, v in value.items() if k != part}
        inner = _drop(value[part], path, at + 1)
        return value if inner is value[part] else {**value, part: inner}
    if not isinstance(value, list | tuple):
        return value
    if last:
        if part is not None and part >= len(value):
            return value
        return [] if part is None else [v for i, v in enumerate(value) if i != part]
    indices = range(len(value)) if part is None else [part] if part < len(value) else []
    out = list(value)
    changed = False
    for i in indices:
        inner = _drop(value[i], path, at + 1)
        if inner is not value[i]:
            out[i], changed = inner, True
    return out if changed else value
