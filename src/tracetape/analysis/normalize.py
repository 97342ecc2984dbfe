"""The analysis's two forms of ``canonical.Normalizer``: memoized in Python, and in SQL.

* ``MemoNormalizer``, for the signing loop:
``Normalizer`` checks every mapping key against its glob list with ``fnmatch`` and runs its
regexes over every string. A trace repeats the same few keys and many of the same strings
(paths, queries), so this wrapper remembers both answers; its output equals the wrapped
normalizer's as a value (a property test holds them equal; only the order of mapping keys
may differ, which canonical JSON ignores). The string memo is bounded.
* SQL tests DuckDB runs on every distinct argument text at once, so that the loop walks only
  the texts normalizing may change (``may_change``), checks the depth only of those with
  enough brackets (``DEEP``), looks for a resource only where one may be named
  (``may_name``), and one walk serves every text that differs only in its top-level
  volatile keys (``unvolatile``): ``how_sql`` puts them together. Each is a necessary
  condition of what the normalizer does; the tests hold them against it.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..canonical import Normalizer
from ..formats.schemas import deep_sql

__all__ = [
    "DEEP",
    "How",
    "MemoNormalizer",
    "how_sql",
    "key_pattern",
    "literal",
    "may_change",
    "may_name",
    "resource_finder",
    "resource_pattern",
    "unvolatile",
    "volatile_patterns",
]

_MAX_STRINGS = 1 << 16


class MemoNormalizer:
    """Call it like the ``Normalizer`` it wraps; the result is the same, only cheaper.

    >>> MemoNormalizer(Normalizer())({"ts": 1, "p": "/tmp/tmpab12/x"})
    {'p': '<tmp>/x'}
    """

    def __init__(self, normalizer: Normalizer):
        self.normalizer = normalizer
        self._volatile: dict[str, bool] = {}
        self._strings: dict[str, str] = {}
        # Each built-in mask needs one of these substrings to match: a UUID and an ISO time
        # hold a dash, a temp path names /tmp/ or /var/folders/. Custom masks can match
        # anything, so with masks every string goes through the regexes.
        self._prefilter = not normalizer.masks

    def _string(self, text: str) -> str:
        if (
            self._prefilter
            and "-" not in text
            and "/tmp/" not in text
            and "/var/folders/" not in text
        ):
            return text
        done = self._strings.get(text)
        if done is None:
            if len(self._strings) >= _MAX_STRINGS:
                self._strings.clear()
            done = self._strings[text] = self.normalizer(text)
        return done

    def __call__(self, obj: Any) -> Any:
        kind = type(obj)
        if kind is str:
            return self._string(obj)
        if kind is dict:
            # Unlike Normalizer, keys keep their order: every consumer (canonical JSON,
            # changed_paths, equality) is order-blind, and sorting costs on the hot path.
            volatile = self._volatile
            out = {}
            for k, v in obj.items():
                skip = volatile.get(k)
                if skip is None:
                    skip = volatile[k] = self.normalizer.is_volatile(str(k))
                if skip:
                    continue
                kv = type(v)
                if kv is str:
                    out[k] = self._string(v)
                elif kv is int or kv is float or kv is bool or v is None:
                    out[k] = v
                else:
                    out[k] = self(v)
            return out
        if kind is list:
            return [self(v) for v in obj]
        if kind is int or kind is float or kind is bool or obj is None:
            return obj
        if isinstance(obj, Mapping):
            return self(dict(obj))
        if isinstance(obj, list | tuple):
            return [self(v) for v in obj]
        if isinstance(obj, str):
            return self.normalizer(obj)
        return obj


# -- the SQL forms ------------------------------------------------------------------------


class How(enum.IntFlag):
    """What the loop of ``sign.Signer.keys`` must do to an argument text (``how_sql``); none:
    only key it.

    >>> How(5)
    <How.NORMALIZE|FIND_RESOURCE: 5>
    """

    NORMALIZE = 1  # walk it with the normalizer: it may change
    CHECK_DEPTH = 2  # check its depth: it holds more brackets than MAX_DEPTH
    FIND_RESOURCE = 4  # look for a resource in it: it may name one


def how_sql(normalizer: Normalizer, keys: Sequence[str]) -> str:
    """What the loop of ``sign.Signer.keys`` must do to an argument text (the column ``args``), as
    SQL: the sum of its ``How`` flags. The tests of ``NORMALIZE`` and ``FIND_RESOURCE`` each
    look for keys spelled in the text: most texts spell none of either, which one pass of both
    patterns tells for less than two passes."""

    def how(spelled: bool) -> str:
        return (
            f"CASE WHEN {may_change(normalizer, spelled)} THEN {How.NORMALIZE:d} ELSE 0 END "
            f"+ CASE WHEN {DEEP} THEN {How.CHECK_DEPTH:d} ELSE 0 END "
            f"+ CASE WHEN {may_name(keys, spelled)} THEN {How.FIND_RESOURCE:d} ELSE 0 END"
        )

    volatile, named = volatile_patterns(normalizer), resource_pattern(keys)
    if volatile is None or named is None:
        return how(True)
    either = f"regexp_matches(args, '{volatile[0]}|{named}')" + _any_of(volatile[1:])
    return f"CASE WHEN {either} THEN {how(True)} ELSE {how(False)} END"


def may_change(normalizer: Normalizer, spelled: bool = True) -> str:
    """A SQL test on an argument's JSON text (the column ``args``) that is false only when
    normalizing cannot change it: no volatile key (as the text spells keys: no escape in it),
    nothing a built-in mask needs (a UUID and an ISO time hold a dash, a temp path names /tmp/
    or /var/folders/), and no custom masks nor character classes in the volatile keys. Then
    the normalizer's walk is skipped: the value is its own normalized form. DuckDB runs it on
    every distinct text at once, in parallel, where a Python test would cost a call a text. Not
    ``spelled``: the test for a text known to spell no volatile key."""
    patterns = volatile_patterns(normalizer)
    if patterns is None:
        return "true"  # anything may change: walk every value
    regex = _any_of(patterns) if spelled else ""
    return (
        f"(contains(args, '\\') OR {_MASKED} OR contains(args, '/tmp/') "
        f"OR contains(args, '/var/folders/'){regex})"
    )


# Whether a text may hold a UUID or an ISO time (the built-in masks that need a dash): four
# hex digits between two dashes (a UUID's "-6a1f-"), or two decimal digits (a time's "-08-";
# Python's \d is any decimal digit, as \p{Nd} is). A dash alone would walk every request
# that names a model ("gpt-4o-mini"); starting with the dash, RE2 skips to each dash (the
# digits first run forty times slower over a long conversation's text).
_MASKED = "regexp_matches(args, '-(?:[0-9a-fA-F]{4}|\\p{Nd}{2})-')"


def volatile_patterns(normalizer: Normalizer) -> list[str] | None:
    """RE2 (what DuckDB's regexp_matches runs): a text that matches none spells no volatile
    key between quotes, then a colon. None: the normalizer may change any value (custom
    masks, character classes).

    The first pattern spells the keys from their opening quote; a second, the globs that
    start with ``*`` (``*_at``) by their ends alone (``_at"`` and a colon: in JSON a quote
    then a colon ends a key, and a key holds no quote unescaped). Over a long conversation's
    text RE2 runs ``"[^"]*_at"``, or one alternation of both, ten times slower than the two
    (benchmarks/README.md, "The pages")."""
    keys = normalizer.volatile_keys
    if normalizer.masks or any("[" in k for k in keys):
        return None
    names = "|".join(key_pattern(k) for k in keys if not k.startswith("*"))
    ends = [key_pattern(k.lstrip("*")) for k in keys if k.startswith("*")]
    quoted = f'"(?:{names})"\\s*:'
    return [quoted, f'(?:{"|".join(ends)})"\\s*:'] if ends else [quoted]


def _any_of(patterns: Sequence[str]) -> str:
    """SQL: `` OR `` a match of each of ``patterns`` in ``args`` (nothing for none)."""
    return "".join(f" OR regexp_matches(args, '{p}')" for p in patterns)


# Whether an argument text (the column ``args``) has more brackets than MAX_DEPTH.
DEEP = deep_sql("args")


def unvolatile(normalizer: Normalizer) -> str:
    """SQL: an argument text (the column ``args``) without its top-level volatile keys of
    exact names, where DuckDB drops them exactly; else NULL. The normalizer drops those keys
    anyway, so the text left normalizes to the same value (and names the same resource),
    and one Python walk serves every text that differs only in them.

    DuckDB's ``json_merge_patch`` with ``{"key": null, ...}`` drops them and writes the rest
    as it was (numbers, duplicate keys and key order too). A text is patched only if it is an
    object, not too deep to read (the Python reader judges those whole) and holds nothing
    that the Python reader might refuse where DuckDB reads it: an escape (a lone surrogate),
    NaN or infinity, a trailing comma, 300 digits in a row or an exponent of 3 digits (a
    number orjson reads as infinity). Then both read it alike, and the dropped values can
    hide no error."""
    exact = [k for k in normalizer.volatile_keys if not any(c in k for c in "*?[")]
    if not exact:
        return "NULL"
    names = "|".join(map(key_pattern, exact))
    patch = json.dumps(dict.fromkeys(exact)).replace("'", "''")
    value = r"[:,[]\s*[+-]?"  # where a value starts: after a colon, a comma or a bracket
    odd = rf"{value}(?i:nan|inf)|{value}[0-9.]+[eE][+-]?[0-9]{{3}}|[0-9]{{300}}|,\s*[]}}]"
    # Each WHEN is tried on the texts the WHENs before it left (most texts name no volatile
    # key, and are done with one test).
    return f"""CASE
        WHEN NOT regexp_matches(args, '"(?:{names})"\\s*:') THEN NULL
        WHEN NOT starts_with(args, '{{') OR contains(args, '\\') THEN NULL
        WHEN regexp_matches(args, '{odd}') OR ({DEEP}) OR NOT json_valid(args) THEN NULL
        ELSE nullif(json_merge_patch(args, '{patch}')::VARCHAR, args) END"""


def key_pattern(glob: str) -> str:
    """A volatile-key glob (``*`` and ``?`` only) as an RE2 pattern over a JSON key's text."""
    return "".join('[^"]*' if c == "*" else '[^"]' if c == "?" else literal(c) for c in glob)


def literal(char: str) -> str:
    """One character as an RE2 pattern that matches it alone: letters, digits and ``_`` as
    themselves, any other by its code point (nothing to quote in a SQL string either)."""
    return char if char.isascii() and (char.isalnum() or char == "_") else f"\\x{{{ord(char):X}}}"


def may_name(keys: Sequence[str], spelled: bool = True) -> str:
    """A SQL test on an argument's JSON text (the column ``args``) that is false only when its
    value holds none of the resource ``keys``: the text spells none of them between quotes and
    has no escape (with which a writer may spell a key: ``"\\u00e9"``, ``"q\\""``). Not
    ``spelled``: the test for a text known to spell none."""
    pattern = resource_pattern(keys)
    if pattern is None:
        return "false"
    regex = f" OR regexp_matches(args, '{pattern}')" if spelled else ""
    return f"(contains(args, '\\'){regex})"


def resource_pattern(keys: Sequence[str]) -> str | None:
    """RE2: a resource key spelled between quotes (None: no key)."""
    if not keys:
        return None
    return '"(?:' + "|".join("".join(map(literal, key)) for key in keys) + ')"'


def resource_finder(keys: Sequence[str]) -> Callable[[Any], str | None]:
    """The resource that normalized arguments name: the value of the first of ``keys`` they
    hold (a string or an integer)."""
    order = list(dict.fromkeys(keys))  # earlier resource keys win
    missing = object()

    def resource(args: Any) -> str | None:
        if type(args) is not dict:
            return None
        for name in order:  # a few lookups, not a walk of the arguments
            value = args.get(name, missing)
            if value is missing:
                continue
            kind = type(value)  # a string or an integer, not a bool
            if kind is str or kind is int or (isinstance(value, str | int) and kind is not bool):
                return str(value)
        return None

    return resource
