"""Deterministic secret redaction, applied to canonical JSON text before anything is written.

Each detected secret becomes a placeholder ``[REDACTED:<detector>:<digest>]``. The digest is
an HMAC-SHA256 of the secret's value, so the same secret always gives the same placeholder,
different secrets give different ones, and a placeholder is never redacted again. Keys are
computed on the redacted text: the live prompt that quotes a secret and, in replay, the prompt
built from the redacted tool output that held it, hash to the same key.

Why redaction works on the canonical JSON text rather than on the payload's objects:

* the key is computed from that text anyway, so scanning it costs no second serialization;
* a secret that an agent quotes inside a string (``json.dumps(tool_result)`` in a message) is
  found at any depth of JSON escaping, and its digest is taken on the fully unescaped value so
  the output and the prompt that quotes it agree;
* a conversation grows by appending: ``Redactor.redact`` keeps, per decision kind, the last
  text and its matches, finds where the new text first differs (a memcmp-speed chunk scan) and
  scans only from the start of the JSON token holding that point. A 200-step run is then scanned
  once in total instead of once per step.

Limits, said plainly: detectors find common secret *shapes* and *field names*; a secret with
neither (a bare password in prose) is not found, so add a pattern for it. The digest is keyed
with ``TRACETAPE_REDACT_KEY`` (or ``Tape(redact_key=...)``); without one it is keyed with the
public constant ``DEFAULT_REDACT_KEY``, and anyone holding the cassette can then confirm a guess
of a low-entropy secret (a short password) by hashing it. Set a key of your own to prevent that;
replay then needs the same key only where live secrets reappear in replayed inputs. A field-name
match stops at the first embedded double quote that looks like the end of the value.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .canonical import common_prefix

__all__ = [
    "DEFAULT_REDACT_KEY",
    "DETECTORS",
    "Detector",
    "RedactRules",
    "Redactor",
]

DEFAULT_REDACT_KEY = b"tracetape-redact-v1"
PLACEHOLDER_PREFIX = "[REDACTED:"

# The left boundary a token must have: not inside a word, but a JSON escape such as ``\n``
# right before it still counts as a boundary.
_B = r"(?:(?<![A-Za-z0-9_\-])|(?<=\\[nrt]))"
_KEY_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


@dataclass(frozen=True)
class Detector:
    """A named secret shape. Only the group named ``s`` is replaced when the regex has one.

    ``anchors`` are lowercase literals every match contains at its start; with them the
    detector is tried only where an anchor occurs (found by ``str.find``, far faster than
    running a regex over the whole text). A detector without anchors is searched everywhere.

    >>> Detector("ticket", r"TCK-[0-9]{8}", anchors=("tck-",)).name
    'ticket'
    """

    name: str
    pattern: str
    anchors: tuple[str, ...] = ()


DETECTORS: tuple[Detector, ...] = (
    Detector(
        "private_key",
        r"-----BEGIN[A-Z ]*PRIVATE KEY-----.*?-----END[A-Z ]*PRIVATE KEY-----",
        ("-----begin",),
    ),
    Detector("anthropic_key", _B + r"sk-ant-[A-Za-z0-9_\-]{20,}", ("sk-",)),
    Detector("openai_key", _B + r"sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}", ("sk-",)),
    Detector("aws_access_key", _B + r"(?:AKIA|ASIA)[0-9A-Z]{16}(?![0-9A-Z])", ("akia", "asia")),
    Detector(
        "github_token",
        _B + r"(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    ),
    Detector("slack_token", _B + r"xox[abposr]-[A-Za-z0-9\-]{10,}", ("xox",)),
    Detector("google_api_key", _B + r"AIza[0-9A-Za-z_\-]{35}", ("aiza",)),
    Detector(
        "jwt",
        _B + r"eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",
        ("eyj",),
    ),
    Detector(
        "bearer",
        r"(?i:bearer)\s+(?P<s>(?!\[REDACTED:)[A-Za-z0-9\-._~+/]{12,}=*)",
        ("bearer",),
    ),
)

DEFAULT_FIELD_NAMES: tuple[str, ...] = (
    "password",
    "passwd",
    "secret",
    "api_key",
    "apikey",
    "api-key",
    "access_token",
    "refresh_token",
    "auth_token",
    "id_token",
    "session_token",
    "private_key",
    "authorization",
    "credentials",
)
# What a field-name match must contain, as few and as short as possible: each is a str.find.
_FIELD_ANCHORS = (
    "passw",
    "secret",
    "apikey",
    "api_key",
    "api-key",
    "token",
    "private_key",
    "authorization",
    "credentials",
)

FIELD = "field"


def _field_pattern(names: Iterable[str]) -> str:
    alternatives = "|".join(re.escape(n) for n in sorted(set(names), key=len, reverse=True))
    # ``q`` captures the escaping depth (no backslash at depth 0, ``\`` at depth 1, ...), so a
    # field inside a JSON string inside a JSON string is found with its own quotes.
    key = rf'(?P<q>\\*)"[A-Za-z0-9_\-]*(?i:{alternatives})[A-Za-z0-9_\-]*(?P=q)"'
    value = r'(?P<s>(?!\[REDACTED:)(?:[^"\\]|\\+[^"\\]|\\+"(?!\s*[,}\]:]))+)'
    return key + r"\s*:\s*(?P=q)\"" + value


@dataclass(frozen=True)
class RedactRules:
    """User additions to the built-in detectors: field names and ``{name: regex}`` patterns.

    >>> RedactRules(fields=("ssn",), patterns={"ticket": r"TCK-[0-9]{8}"}).fields
    ('ssn',)
    """

    fields: tuple[str, ...] = ()
    patterns: Mapping[str, str] = field(default_factory=dict)
    builtins: bool = True

    @classmethod
    def coerce(cls, value: RedactRules | Mapping[str, Any] | Sequence[str] | None) -> RedactRules:
        """Accept rules, a ``{"fields": [...], "patterns": {...}}`` mapping or a list of regexes."""
        if value is None:
            return cls()
        if isinstance(value, RedactRules):
            return value
        if isinstance(value, Mapping):
            unknown = set(value) - {"fields", "patterns", "builtins"}
            if unknown:
                raise ValueError(
                    f"unknown redact option(s) {sorted(unknown)}; valid: fields, patterns, builtins"
                )
            patterns = value.get("patterns", {})
            if not isinstance(patterns, Mapping):
                patterns = {f"pattern{i}": p for i, p in enumerate(patterns)}
            return cls(
                tuple(value.get("fields", ())), dict(patterns), bool(value.get("builtins", True))
            )
        if isinstance(value, str):
            raise TypeError("redact= takes a list of regexes, a mapping or RedactRules, not a str")
        return cls(patterns={f"pattern{i}": p for i, p in enumerate(value)})

    def merged(self, other: RedactRules) -> RedactRules:
        """Return the union of two rule sets (config file rules plus ``Tape(redact=...)``)."""
        return RedactRules(
            self.fields + other.fields,
            {**self.patterns, **other.patterns},
            self.builtins and other.builtins,
        )


def _unescape_fully(text: str) -> str:
    """Decode JSON string escapes until none is left, so every escaping depth agrees."""
    while "\\" in text:
        try:
            decoded = json.loads(f'"{text}"')
        except ValueError:
            break
        if decoded == text:
            break
        text = decoded
    return text


Match = tuple[int, int, str]


class _Compiled:
    __slots__ = ("anchors", "group", "name", "regex", "token")

    def __init__(self, name: str, pattern: str, anchors: tuple[str, ...], token: bool):
        try:
            self.regex = re.compile(pattern, re.DOTALL)
        except re.error as exc:
            raise ValueError(f"redact pattern {name!r} is not a valid regex: {exc}") from exc
        self.name = name
        self.anchors = tuple(a.lower() for a in anchors)
        self.group = "s" if "s" in self.regex.groupindex else 0
        self.token = token


class Redactor:
    """Find secrets in canonical JSON text and replace them with stable placeholders.

    >>> Redactor().redact_text('{"api_key":"hunter2hunter2"}')
    '{"api_key":"[REDACTED:field:...]"}'
    """

    def __init__(self, rules: RedactRules | None = None, key: bytes | str | None = None):
        rules = rules or RedactRules()
        if key is None:
            env = os.environ.get("TRACETAPE_REDACT_KEY")
            key = env.encode() if env else DEFAULT_REDACT_KEY
        self._key = key.encode() if isinstance(key, str) else key
        self.key_id = hashlib.sha256(self._key).hexdigest()[:12]
        for name, pattern in rules.patterns.items():
            _Compiled(name, pattern, (), True)  # a bad pattern fails here, not at first use
        self._rules = rules
        # Compiled on first use (about 6 ms): a replay whose texts hold no secret never
        # redacts anything, since a recorded text is already redacted.
        self._compiled: tuple[list[tuple[str, list[_Compiled]]], list[_Compiled], dict[str, int]]
        self._compiled = ([], [], {})
        self._ready = False
        self._memo: dict[str, tuple[str, list[Match], str, str]] = {}

    def mac(self, value: str, length: int = 12) -> str:
        """Return the keyed digest (HMAC-SHA256, hex) of a value, cut to ``length``."""
        return hmac.new(self._key, value.encode(), hashlib.sha256).hexdigest()[:length]

    def placeholder(self, detector: str, value: str) -> str:
        """Return the placeholder of a secret value (HMAC of its fully unescaped form)."""
        return f"{PLACEHOLDER_PREFIX}{detector}:{self.mac(_unescape_fully(value))}]"

    def _compile(self) -> None:
        rules = self._rules
        detectors = list(DETECTORS) if rules.builtins else []
        detectors += [Detector(n, p) for n, p in rules.patterns.items()]
        compiled = [_Compiled(d.name, d.pattern, d.anchors, True) for d in detectors]
        names = (DEFAULT_FIELD_NAMES if rules.builtins else ()) + tuple(rules.fields)
        if names:
            anchors = (_FIELD_ANCHORS if rules.builtins else ()) + tuple(rules.fields)
            compiled.append(_Compiled(FIELD, _field_pattern(names), anchors, False))
        by_anchor: dict[str, list[_Compiled]] = {}
        for det in compiled:
            for anchor in dict.fromkeys(det.anchors):
                by_anchor.setdefault(anchor, []).append(det)
        free = [c for c in compiled if not c.anchors]
        self._compiled = list(by_anchor.items()), free, {c.name: i for i, c in enumerate(compiled)}
        self._ready = True

    def _scan(self, text: str, start: int, end: int) -> list[Match]:
        """Find the secrets in ``text[start:end]``, without overlaps, in text order."""
        if not self._ready:
            self._compile()
        anchored, free, order = self._compiled
        found: list[tuple[int, int, int, bool, str]] = []
        low = text[start:end].lower()
        for anchor, dets in anchored:
            i = low.find(anchor)
            while i >= 0:
                for det in dets:
                    pos = start + i if det.token else _key_start(text, start + i)
                    m = det.regex.match(text, pos, end) if pos >= 0 else None
                    if m is not None:
                        s, e = m.span(det.group)
                        found.append((s, e, order[det.name], det.token, det.name))
                i = low.find(anchor, i + 1)
        for det in free:
            for m in det.regex.finditer(text, start, end):
                s, e = m.span(det.group)
                if e > s:
                    found.append((s, e, order[det.name], True, det.name))
        if not found:
            return []
        # Token shapes win over field names, then the earlier detector: the same secret gets
        # the same placeholder whether or not it sits under a secret-looking field name.
        found.sort(key=lambda f: (not f[3], f[0], f[2]))
        chosen: list[tuple[int, int, str]] = []
        for s, e, _, _, name in found:
            if all(e <= cs or s >= ce for cs, ce, _ in chosen):
                chosen.append((s, e, name))
        chosen.sort()
        return [(s, e, self.placeholder(name, text[s:e])) for s, e, name in chosen]

    @staticmethod
    def _apply(text: str, matches: list[Match]) -> str:
        if not matches:
            return text
        pieces = []
        pos = 0
        for s, e, placeholder in matches:
            pieces.append(text[pos:s])
            pieces.append(placeholder)
            pos = e
        pieces.append(text[pos:])
        return "".join(pieces)

    def redact_text(self, text: str) -> str:
        """Redact one JSON text from scratch (no memory of earlier texts)."""
        return self._apply(text, self._scan(text, 0, len(text)))

    def redact(self, text: str, stream: str) -> str:
        """Redact a canonical JSON text, rescanning only what changed since the last text of
        the same ``stream`` (a decision kind: each kind's payloads grow on their own).
        """
        memo = self._memo.get(stream)
        if memo is None or len(text) < _INCREMENTAL_MIN:
            start, end = 0, len(text)
            matches = self._scan(text, start, end)
        else:
            previous, old, head, tail = memo
            # ``head``/``tail`` are the previous text's unchanged ends: a startswith/endswith
            # (memcmp, no copy) usually confirms most of the prefix and suffix at once.
            lo = len(head) if text.startswith(head) else 0
            prefix = common_prefix(previous, text, lo)
            limit = min(len(previous), len(text)) - prefix
            slo = len(tail) if len(tail) <= limit and text.endswith(tail) else 0
            suffix = _common_suffix(previous, text, limit, slo)
            start = _token_start(text, prefix)
            end = _token_end(text, len(text) - suffix)
            shift = len(text) - len(previous)
            matches = [m for m in old if m[1] <= start]
            matches += self._scan(text, start, end)
            matches += [(s + shift, e + shift, p) for s, e, p in old if s + shift >= end]
        self._memo[stream] = (text, matches, text[:start], text[end:])
        return self._apply(text, matches)

    def redact_value(self, value: Any) -> tuple[Any, bool]:
        """Redact a JSON-able value (a decision's output). Returns ``(value, changed)``."""
        text = json.dumps(value, separators=(",", ":"), default=str)
        matches = self._scan(text, 0, len(text))
        if not matches:
            return value, False
        return json.loads(self._apply(text, matches)), True


_CHUNK = 4096
_INCREMENTAL_MIN = 2048


def _key_start(text: str, pos: int) -> int:
    """Start of the quoted key (with its escaping backslashes) around ``pos``, or -1."""
    while pos > 0 and text[pos - 1] in _KEY_CHARS:
        pos -= 1
    if pos == 0 or text[pos - 1] != '"':
        return -1
    pos -= 1
    while pos > 0 and text[pos - 1] == "\\":
        pos -= 1
    return pos


def _common_suffix(a: str, b: str, limit: int, n: int = 0) -> int:
    """Length of the common suffix of two texts (at most ``limit``) known to be ``n`` or more."""
    la, lb = len(a), len(b)
    while n < limit:
        m = min(n + _CHUNK, limit)
        if a[la - m : la - n] != b[lb - m : lb - n]:
            while m - n > 1:
                mid = (n + m) // 2
                if a[la - mid : la - n] == b[lb - mid : lb - n]:
                    n = mid
                else:
                    m = mid
            return n
        n = m
    return limit


def _token_start(text: str, pos: int) -> int:
    """Back up from ``pos`` to the start of the depth-0 JSON token (or key) holding it.

    Inside a JSON string every quote is escaped, so ``{"``, ``,"`` and ``["`` occur only where
    a key or a string element begins: no secret match can straddle such a point. The search
    window grows from a few hundred characters so a rare ``["`` costs no scan of the text.
    """
    width = 256
    while True:
        lo = max(0, pos - width)
        found = max(text.rfind('{"', lo, pos), text.rfind(',"', lo, pos), text.rfind('["', lo, pos))
        if found >= 0 or lo == 0:
            return max(found, 0)
        width *= 8


def _token_end(text: str, pos: int) -> int:
    """Advance from ``pos`` to the next point no secret match can straddle (see above)."""
    width = 256
    while True:
        hi = min(len(text), pos + width)
        ends = [i for i in (text.find(m, pos, hi) for m in ('{"', ',"', '["')) if i >= 0]
        if ends or hi == len(text):
            return min(ends) if ends else len(text)
        width *= 8
