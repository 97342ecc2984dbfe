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


@dataclass(frozen=True)
class Detector:
    """A named secret shape. Only the group named ``s`` is replaced when the regex has one.

    >>> Detector("ticket", r"TCK-[0-9]{8}").name
    'ticket'
    """

    name: str
    pattern: str


DETECTORS: tuple[Detector, ...] = (
    Detector(
        "private_key",
        r"-----BEGIN[A-Z ]*PRIVATE KEY-----.*?-----END[A-Z ]*PRIVATE KEY-----",
    ),
    Detector("anthropic_key", _B + r"sk-ant-[A-Za-z0-9_\-]{20,}"),
    Detector("openai_key", _B + r"sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}"),
    Detector("aws_access_key", _B + r"(?:AKIA|ASIA)[0-9A-Z]{16}(?![0-9A-Z])"),
    Detector("github_token", _B + r"(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})"),
    Detector("slack_token", _B + r"xox[abposr]-[A-Za-z0-9\-]{10,}"),
    Detector("google_api_key", _B + r"AIza[0-9A-Za-z_\-]{35}"),
    Detector("jwt", _B + r"eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"),
    Detector("bearer", r"(?i:bearer)\s+(?P<s>(?!\[REDACTED:)[A-Za-z0-9\-._~+/]{12,}=*)"),
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
    "x-api-key",
)


def _field_detector(names: Iterable[str]) -> Detector:
    alternatives = "|".join(re.escape(n) for n in sorted(set(names), key=len, reverse=True))
    # ``q`` captures the escaping depth (no backslash at depth 0, ``\`` at depth 1, ...), so a
    # field inside a JSON string inside a JSON string is found with its own quotes.
    key = rf'(?P<q>\\*)"[A-Za-z0-9_\-]*(?i:{alternatives})[A-Za-z0-9_\-]*(?P=q)"'
    value = r'(?P<s>(?!\[REDACTED:)(?:[^"\\]|\\+[^"\\]|\\+"(?!\s*[,}\]:]))+)'
    return Detector("field", key + r"\s*:\s*(?P=q)\"" + value)


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
            return cls(tuple(value.get("fields", ())), dict(patterns), bool(value.get("builtins", True)))
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


class Redactor:
    """Find secrets in canonical JSON text and replace them with stable placeholders.

    >>> r = Redactor()
    >>> r.redact_text('{"api_key":"hunter2hunter2"}')
    '{"api_key":"[REDACTED:field:...]"}'
    """

    def __init__(self, rules: RedactRules | None = None, key: bytes | str | None = None):
        rules = rules or RedactRules()
        if key is None:
            env = os.environ.get("TRACETAPE_REDACT_KEY")
            key = env.encode() if env else DEFAULT_REDACT_KEY
        self._key = key.encode() if isinstance(key, str) else key
        self.key_id = hashlib.sha256(self._key).hexdigest()[:12]
        detectors = list(DETECTORS) if rules.builtins else []
        detectors += [Detector(n, p) for n, p in rules.patterns.items()]
        names = (DEFAULT_FIELD_NAMES if rules.builtins else ()) + tuple(rules.fields)
        if names:
            detectors.append(_field_detector(names))
        self.detectors = tuple(detectors)
        self._groups: list[tuple[str, str | None]] = []
        parts = []
        for i, det in enumerate(self.detectors):
            try:
                compiled = re.compile(det.pattern)
            except re.error as exc:
                raise ValueError(f"redact pattern {det.name!r} is not a valid regex: {exc}") from exc
            # Rename groups so detectors can share one alternation.
            pattern = det.pattern
            inner = None
            for name in compiled.groupindex:
                new = f"d{i}_{name}"
                pattern = pattern.replace(f"(?P<{name}>", f"(?P<{new}>")
                pattern = pattern.replace(f"(?P={name})", f"(?P={new})")
                if name == "s":
                    inner = new
            parts.append(f"(?P<d{i}>{pattern})")
            self._groups.append((det.name, inner))
        self._regex = re.compile("|".join(parts), re.DOTALL) if parts else None
        self._memo: dict[str, tuple[str, list[tuple[int, int, str]]]] = {}

    def mac(self, value: str, length: int = 12) -> str:
        """Return the keyed digest (HMAC-SHA256, hex) of a value, cut to ``length``."""
        return hmac.new(self._key, value.encode(), hashlib.sha256).hexdigest()[:length]

    def placeholder(self, detector: str, value: str) -> str:
        """Return the placeholder of a secret value (HMAC of its fully unescaped form)."""
        return f"{PLACEHOLDER_PREFIX}{detector}:{self.mac(_unescape_fully(value))}]"

    def _scan(self, text: str, start: int) -> list[tuple[int, int, str]]:
        if self._regex is None:
            return []
        found = []
        for m in self._regex.finditer(text, start):
            index = m.lastindex
            assert index is not None
            name = m.lastgroup or ""
            det, inner = self._groups[int(name[1:].split("_")[0])]
            if inner is not None:
                s, e = m.span(inner)
            else:
                s, e = m.span(index)
            found.append((s, e, self.placeholder(det, text[s:e])))
        return found

    @staticmethod
    def _apply(text: str, matches: list[tuple[int, int, str]]) -> str:
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
        return self._apply(text, self._scan(text, 0))

    def redact(self, text: str, stream: str) -> str:
        """Redact a canonical JSON text, rescanning only what changed since the last text of
        the same ``stream`` (a decision kind: each kind's payloads grow on their own).
        """
        memo = self._memo.get(stream)
        if memo is None or len(text) < 2048:
            matches = self._scan(text, 0)
        else:
            previous, old = memo
            start = _token_start(text, _common_prefix(previous, text))
            matches = [m for m in old if m[1] <= start]
            matches += self._scan(text, start)
        self._memo[stream] = (text, matches)
        return self._apply(text, matches)

    def redact_value(self, value: Any) -> tuple[Any, bool]:
        """Redact a JSON-able value (a decision's output). Returns ``(value, changed)``."""
        text = json.dumps(value, separators=(",", ":"), default=str)
        matches = self._scan(text, 0)
        if not matches:
            return value, False
        return json.loads(self._apply(text, matches)), True


_CHUNK = 4096


def _common_prefix(a: str, b: str) -> int:
    """Length of the common prefix of two texts, compared a chunk at a time at memcmp speed."""
    n = min(len(a), len(b))
    lo = 0
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


def _token_start(text: str, pos: int) -> int:
    """Back up from ``pos`` to the start of the depth-0 JSON token (or key) holding it.

    Inside a JSON string every quote is escaped, so ``{"``, ``,"`` and ``["`` occur only where
    a key or a string element begins: no secret match can straddle such a point.
    """
    return max(text.rfind('{"', 0, pos), text.rfind(',"', 0, pos), text.rfind('["', 0, pos), 0)
