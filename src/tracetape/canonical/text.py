"""Canonical JSON, decision keys by definition, per-field digests, path diffs, normalization
and fingerprints.

The canonical form of a payload is the one the seed's reference ``Tape`` hashes::

    json.dumps(payload, sort_keys=True, separators=(",", ":"), default=...)

``canonical_json`` produces it through orjson when the result is provably the same bytes, and
through the standard library otherwise (``reference_json``, the definition): orjson escapes
no non-ASCII text, prints some floats differently (``1e-07`` against Python's ``1e-07``...
and ``1.4e-7`` for ``1.4e-07``), refuses integers beyond 64 bits and writes a NaN as
``null``. Each of those is detected on the output and sent to the standard library, so the
fast path equals the reference for every value (property-tested, top-level scalars
included), and a key is byte-for-byte the seed's key for plain JSON data.

One ``default`` (``json_default``) serializes what JSON has no type for: SDK and pydantic
models as the SDK sends them (set fields, JSON mode), enums as their value, other mappings as
dicts, sets and frozensets as lists sorted by ``repr`` (so a key never depends on
``PYTHONHASHSEED``), anything else as ``str(value)`` (the seed's ``default=str``: datetimes,
bytes). Non-finite floats are written as the seed writes them, ``NaN``, ``Infinity`` and
``-Infinity`` (not strict JSON, but the same key every time).

``normalize`` / ``fingerprint`` are the second canonical form, for comparing outputs and
arguments across runs: volatile fields (timestamps, ids, durations), UUIDs, temp paths and
ISO timestamps are dropped or masked first so a fresh request id does not look like drift.

This module imports nothing else of tracetape's; ``keys`` keys streams of payloads on it.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, NamedTuple, TypeVar

import orjson

__all__ = [
    "DEFAULT_VOLATILE_KEYS",
    "ISO_TIME",
    "TMP_PATH",
    "UUID",
    "Change",
    "Normalizer",
    "all_finite",
    "canonical_json",
    "changed_paths",
    "common_prefix",
    "digest",
    "digest_changes",
    "excerpt",
    "field_digests",
    "fingerprint",
    "json_default",
    "key_of",
    "normalize",
    "reference_json",
]

_dumpers: dict[type, Callable[[Any], Any] | None] = {}


def _dumper(cls: type) -> Callable[[Any], Any] | None:
    # SDK models (a response message appended to the conversation) serialize as the SDK sends
    # them: set fields only, JSON mode, minus the fields the SDK never sends. Looked up once
    # per class: pydantic's instance __getattr__ is slow on a miss.
    dump = getattr(cls, "model_dump", None)
    if not callable(dump):
        return None
    exclude = getattr(cls, "__api_exclude__", None)

    def dumper(value: Any) -> Any:
        return value.model_dump(mode="json", exclude_unset=True, exclude=exclude)

    return dumper


def json_default(value: Any) -> Any:
    """Serialize what JSON has no type for (the one ``default`` of every encoder here).

    >>> json_default({3, 1, 2}), json_default(b"x")
    ([1, 2, 3], "b'x'")
    """
    cls = type(value)
    try:
        dump = _dumpers[cls]
    except KeyError:
        dump = _dumpers[cls] = _dumper(cls)
    if dump is not None:
        return dump(value)
    if isinstance(value, Enum):
        return value.value  # as orjson writes it, so both encoders agree
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, set | frozenset):
        return sorted(value, key=repr)
    return str(value)


# The seed's json.dumps(sort_keys=True, separators=(",", ":")): ASCII-escaped, NaN allowed.
_reference = json.JSONEncoder(sort_keys=True, separators=(",", ":"), default=json_default).encode


def reference_json(payload: Any) -> str:
    """The canonical JSON text by its definition (the standard library): what
    ``canonical_json`` must equal.

    >>> reference_json({"b": 1, "a": [1.5, "é", float("nan")]})
    '{"a":[1.5,"\\\\u00e9",NaN],"b":1}'
    """
    return _reference(payload)


_ORJSON_OPTIONS = orjson.OPT_SORT_KEYS | orjson.OPT_PASSTHROUGH_DATETIME
_ORJSON_OPTIONS |= orjson.OPT_PASSTHROUGH_DATACLASS
# A number token (at the start, or right after ``:``, ``,`` or ``[`` in compact JSON) that
# orjson may print differently from Python's float repr: exponents, and small magnitudes
# Python writes as 1e-05.
_FLOAT_RISK = re.compile(rb"(?:^|[:,\[])-?(?:[0-9]+(?:\.[0-9]+)?[eE]|0\.0000)")
_CHUNK = 4096


_Seq = TypeVar("_Seq", bound=Sequence[Any])


def common_prefix(a: _Seq, b: _Seq, lo: int = 0) -> int:
    """Length of the common prefix of two texts (or lists) known to agree on ``lo`` items.

    Compared a chunk at a time (slice equality is a memcmp, a list's runs in C), then by
    bisection in the chunk that differs: a few microseconds for 100 KB, where a character
    loop takes milliseconds.

    >>> common_prefix("abcdef", "abcxyz"), common_prefix([{"a": 1}, 2], [{"a": 1}, 3])
    (3, 1)
    """
    n = min(len(a), len(b))
    while lo < n:
        hi = min(lo + _CHUNK, n)
        if a[lo:hi] != b[lo:hi]:
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if a[lo:mid] == b[lo:mid]:
                    lo = mid
                else:
                    hi = mid
            return lo
        lo = hi
    return n


def all_finite(obj: Any) -> bool:
    """Whether ``obj`` holds no NaN or infinite float in its containers (SDK models are dumped
    by pydantic, which writes those as null itself).

    >>> all_finite({"a": [1.0, None]}), all_finite([{"b": float("nan")}])
    (True, False)
    """
    stack = [obj]
    pop, push = stack.pop, stack.extend
    while stack:
        value = pop()
        kind = type(value)
        if kind is dict:
            push(value.values())
        elif kind is list or kind is tuple or kind is set or kind is frozenset:
            push(value)
        elif kind is float:
            if not math.isfinite(value):
                return False
        elif isinstance(value, Mapping):
            push(value.values())
    return True


def _signed_e(region: bytes, sign: bytes) -> bool:
    """Whether ``region`` holds an "e" followed by ``sign``. A sign is rare in a request's
    text, and a byte is found at memchr's speed, where the search of two bytes costs about a
    nanosecond a byte of prose full of "e"s: the signs are looked at one by one, up to a few.

    >>> _signed_e(b'{"t":1e-7,"m":"gpt-4o"}', b"-"), _signed_e(b'"gpt-4o-mini"', b"-")
    (True, False)
    """
    at = region.find(sign)
    for _ in range(4):
        if at < 0:
            return False
        if at and region[at - 1] == 0x65:  # "e"
            return True
        at = region.find(sign, at + 1)
    return at >= 0 and b"e" + sign in region


def _plain(region: bytes, payload: Any, finite: bool, text: bytes) -> bool:
    """Whether orjson's ``text`` is the canonical text, judged on ``region``: the bytes of it not
    checked before (a float token is at most ~25 bytes, so a region starts 32 bytes early to
    cover one straddling its start)."""
    if not region.isascii() or b"\x7f" in region:
        return False
    # orjson writes every exponent with its sign: look for those before the regex. It also
    # writes a NaN or an infinity as null, which a None writes too: where a null appears in
    # the text (anywhere: a NaN can take the place of a None in a prefix checked before,
    # which reads the same), the payload is searched for a non-finite float.
    risky = _signed_e(region, b"+") or _signed_e(region, b"-") or b"0.0000" in region
    if risky and _FLOAT_RISK.search(region):
        return False
    return finite or b"null" not in text or all_finite(payload)


def _orjson(payload: Any) -> bytes | None:
    try:
        return orjson.dumps(payload, default=json_default, option=_ORJSON_OPTIONS)
    except TypeError:  # orjson.JSONEncodeError: big ints, non-str keys, invalid str...
        return None


def canonical_json(payload: Any, memo: list[bytes] | None = None, *, finite: bool = False) -> str:
    """Return the canonical JSON text of ``payload`` (``reference_json``, faster).

    ``memo`` holds the previous output of the same stream that passed the checks: a
    conversation grows by appending, so only the bytes after the common prefix are searched.

    A ``null`` anywhere in the text (not only in that region: a NaN may take a None's place
    in the prefix, which then reads the same) makes the whole payload be searched for a NaN
    or infinite float (orjson writes those as ``null``).
    ``finite=True`` skips that search where the caller knows there can be none: the SDK hooks'
    payloads, which the SDKs refuse to send with a NaN (there a NaN keys as a ``None`` would).

    >>> canonical_json({"b": 1, "a": [1.5, "é"]})
    '{"a":[1.5,"\\\\u00e9"],"b":1}'
    >>> canonical_json(1.439488178100376e-07)
    '1.439488178100376e-07'
    """
    raw = _orjson(payload)
    if raw is None:
        return _reference(payload)
    start = max(0, common_prefix(memo[0], raw) - 32) if memo else 0
    if not _plain(raw[start:] if start else raw, payload, finite, raw):
        if memo:
            memo[0] = b""
        return _reference(payload)
    if memo:
        memo[0] = raw
    return raw.decode()


def key_of(kind: str, blob: str) -> str:
    """Return the decision key ``kind:<16 hex>`` of an already canonical (and redacted) text.

    >>> key_of("tool", canonical_json({"name": "search", "args": {"q": "x"}, "step": 1}))
    'tool:7d66ff5c9b68eeda'
    """
    return f"{kind}:{hashlib.sha256(blob.encode()).hexdigest()[:16]}"


def digest(value: Any) -> str:
    """Return a 16-hex digest of ``value``'s canonical JSON (used for per-field digests)."""
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()[:16]


def field_digests(payload: Mapping[str, Any]) -> dict[str, Any]:
    """Digest each top-level field of a payload; a list field also gets ``name[]``, the list
    of its elements' digests.

    A miss is explained by comparing these with the live payload's, so the changed field is
    found even where the stored copy of the input is redacted or absent.

    >>> d = field_digests({"messages": [{"role": "user"}], "step": 1})
    >>> sorted(d), len(d["messages[]"])
    (['messages', 'messages[]', 'step'], 1)
    """
    out: dict[str, Any] = {}
    for name in sorted(payload, key=str):
        value = payload[name]
        out[str(name)] = digest(value)
        if isinstance(value, list | tuple):
            out[f"{name}[]"] = [digest(item) for item in value]
    return out


def digest_changes(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """Name the fields (and list elements) whose digests differ between two digest maps.

    >>> digest_changes({"m": "a", "m[]": ["x", "y"]}, {"m": "b", "m[]": ["x", "z", "w"]})
    ['m[1]', 'm[2]']
    """
    changed: list[str] = []
    for name in sorted(set(before) | set(after)):
        if name.endswith("[]") or before.get(name) == after.get(name):
            continue
        old, new = before.get(name + "[]"), after.get(name + "[]")
        if isinstance(old, list) and isinstance(new, list):
            changed += [
                f"{name}[{i}]"
                for i in range(max(len(old), len(new)))
                if i >= len(old) or i >= len(new) or old[i] != new[i]
            ]
        else:
            changed.append(name)
    return changed


class Change(NamedTuple):
    """One difference between two JSON-like values: its path and both sides (``None`` = absent)."""

    path: str
    before: Any
    after: Any


_MISSING: Any = object()


def _join(path: str, name: Any) -> str:
    if isinstance(name, int):
        return f"{path}[{name}]"
    name = str(name)
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_\-]*", name):
        return f"{path}.{name}" if path else name
    return f"{path}[{json.dumps(name)}]"


def changed_paths(before: Any, after: Any, path: str = "", limit: int = 50) -> list[Change]:
    """List the paths at which two JSON-like values differ, depth first, at most ``limit``.

    >>> [c.path for c in changed_paths({"m": [{"c": "a"}], "t": 1}, {"m": [{"c": "b"}], "t": 1})]
    ['m[0].c']
    """
    out: list[Change] = []
    _diff(before, after, path, out, limit)
    return out


def _diff(a: Any, b: Any, path: str, out: list[Change], limit: int) -> None:
    if len(out) >= limit:
        return
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        for name in sorted(set(a) | set(b), key=str):
            av, bv = a.get(name, _MISSING), b.get(name, _MISSING)
            if av is _MISSING or bv is _MISSING:
                out.append(
                    Change(
                        _join(path, name),
                        None if av is _MISSING else av,
                        None if bv is _MISSING else bv,
                    )
                )
            else:
                _diff(av, bv, _join(path, name), out, limit)
            if len(out) >= limit:
                return
        return
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        for i in range(max(len(a), len(b))):
            if i >= len(a):
                out.append(Change(_join(path, i), None, b[i]))
            elif i >= len(b):
                out.append(Change(_join(path, i), a[i], None))
            else:
                _diff(a[i], b[i], _join(path, i), out, limit)
            if len(out) >= limit:
                return
        return
    if type(a) is not type(b) or a != b:
        out.append(Change(path or "$", a, b))


def excerpt(before: str, after: str, context: int = 24) -> tuple[str, str]:
    """Cut two texts down to the region where they differ, with ``context`` characters around.

    >>> excerpt("please fix the bug in main.py now", "please fix the issue in main.py now", 8)
    ('…fix the bug in main…', '…fix the issue in main…')
    """
    limit = min(len(before), len(after))
    start = 0
    while start < limit and before[start] == after[start]:
        start += 1
    end = 0
    while end < limit - start and before[-1 - end] == after[-1 - end]:
        end += 1
    # Widen to word boundaries so the excerpt shows whole words, and never cut into a
    # bracketed token such as a redaction placeholder.
    while start > 0 and before[start - 1].isalnum():
        start -= 1
    lo = max(0, start - context)
    opening = before.rfind("[", 0, lo)
    if opening >= 0 and before.rfind("]", 0, lo) < opening and lo - opening <= 64:
        lo = opening

    def cut(text: str) -> str:
        stop = len(text) - end
        hi = min(len(text), stop + context)
        return ("…" if lo > 0 else "") + text[lo:hi] + ("…" if hi < len(text) else "")

    return cut(before), cut(after)


DEFAULT_VOLATILE_KEYS: tuple[str, ...] = (
    "ts",
    "timestamp",
    "time",
    "created",
    "*_at",
    "duration_ms",
    "elapsed_ms",
    "latency_ms",
    "trace_id",
    "span_id",
    "request_id",
    "idempotency_key",
)
# explicit classes, not re.I: the same matches, searched twice as fast
UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
TMP_PATH = re.compile(r"(?:/private)?(?:/tmp|/var/folders/[^/\s]+/[^/\s]+/T)/[A-Za-z0-9_.-]+")
ISO_TIME = re.compile(
    r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?",
)


@dataclass(frozen=True)
class Normalizer:
    """Drop volatile keys and mask UUIDs, temp paths and ISO timestamps before comparing.

    ``volatile_keys`` are exact names or ``fnmatch`` globs (``*_at``). ``masks`` are extra
    ``(regex, replacement)`` pairs applied to every string.

    >>> Normalizer()({"id": "0b7e1b2c-6a1f-4c1e-9a51-8f0b8f9b2a11", "ts": 1, "q": "x"})
    {'id': '<uuid>', 'q': 'x'}
    """

    volatile_keys: tuple[str, ...] = DEFAULT_VOLATILE_KEYS
    masks: tuple[tuple[str, str], ...] = ()
    _exact: frozenset[str] = field(init=False, repr=False, compare=False)
    _globs: tuple[str, ...] = field(init=False, repr=False, compare=False)
    _subs: tuple[tuple[re.Pattern[str], str], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        globs = tuple(k for k in self.volatile_keys if any(c in k for c in "*?["))
        object.__setattr__(self, "_globs", globs)
        object.__setattr__(self, "_exact", frozenset(self.volatile_keys) - set(globs))
        subs = [(UUID, "<uuid>"), (TMP_PATH, "<tmp>"), (ISO_TIME, "<ts>")]
        subs += [(re.compile(p), r) for p, r in self.masks]
        object.__setattr__(self, "_subs", tuple(subs))

    @classmethod
    def from_config(
        cls, volatile_keys: Iterable[str] | None = None, masks: Mapping[str, str] | None = None
    ) -> Normalizer:
        """Build from ``[tool.tracetape]`` values; keys given replace the defaults."""
        keys = tuple(volatile_keys) if volatile_keys is not None else DEFAULT_VOLATILE_KEYS
        return cls(keys, tuple((masks or {}).items()))

    def is_volatile(self, name: str) -> bool:
        """Tell whether a mapping key is dropped before comparison."""
        return name in self._exact or any(fnmatch.fnmatchcase(name, g) for g in self._globs)

    def __call__(self, obj: Any) -> Any:
        if isinstance(obj, Mapping):
            return {
                k: self(v)
                for k, v in sorted(obj.items(), key=lambda kv: str(kv[0]))
                if not self.is_volatile(str(k))
            }
        if isinstance(obj, list | tuple):
            return [self(v) for v in obj]
        if isinstance(obj, str):
            for pattern, replacement in self._subs:
                obj = pattern.sub(replacement, obj)
            return obj
        return obj


_DEFAULT_NORMALIZER = Normalizer()


def normalize(obj: Any, normalizer: Normalizer | None = None) -> Any:
    """Return ``obj`` with volatile keys dropped and volatile substrings masked.

    >>> normalize({"path": "/tmp/tmpa1b2/out.txt", "started_at": "now"})
    {'path': '<tmp>/out.txt'}
    """
    return (normalizer or _DEFAULT_NORMALIZER)(obj)


def fingerprint(obj: Any, normalizer: Normalizer | None = None) -> str:
    """Return the 16-hex digest of ``obj`` after normalization (the seed's ``fingerprint``).

    >>> fingerprint({"a": 1, "ts": 5}) == fingerprint({"ts": 6, "a": 1})
    True
    """
    return digest(normalize(obj, normalizer))
