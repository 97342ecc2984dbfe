"""Deterministic secret redaction, applied before anything is written, kept run-wide.

Each secret becomes a placeholder ``[REDACTED:<detector>:<digest>]``. The digest is an
HMAC-SHA256 of the secret's value, so the same secret always gives the same placeholder,
different secrets give different ones, and a placeholder is never redacted again. Keys are
computed on the redacted text: the live prompt that quotes a secret and, in replay, the prompt
built from the redacted tool output that held it, hash to the same key.

How (``Redactor``):

* **on parsed values**, never across JSON syntax: strings are searched for secret shapes
  (``DETECTORS``, after gitleaks' rules and detect-secrets' plugins) and for secret-named
  fields of JSON quoted in them, at any depth of escaping; the value of a field whose name ends
  with a secret name (any case or separator) is a secret whatever its shape, nested values
  included; so is a mapping key that holds a shape, a secret met before or an
  authorization's value (``{"Token v4lue7...": 1}``). A replacement keeps the structure: a
  string stays a string, a list its length, a number under a secret name becomes a
  placeholder string;
* **run-wide**: every secret met is remembered (``known``) and replaced wherever it appears
  later (prose, a ``repr``, an exception message, a mapping key); in replay, ``recognise``
  teaches the placeholders a recording holds, so a live secret a field name revealed when
  recording is known by its digest (checked on misses only, on a text's words, its tokens and
  runs of up to four of them, and the whole text, so a secret holding spaces or quotes is
  known too): record and replay redact by one rule;
* **streams** are redacted on the text their events' deltas assemble, and those deltas are
  rewritten so the stream keeps its number of events;
* **incrementally**: a conversation grows by appending, so ``redact_payload`` searches only
  the JSON text a payload appended after the previous clean one (where quotes, newlines and
  non-ASCII characters are escapes: a secret name before a prose separator there sends the
  payload to the walk), and each distinct string is scanned once (a cache); replay redacts
  nothing on a hit (a recorded text is already redacted).

Limits, said plainly: detectors find common secret *shapes* and *field names*; a secret with
neither (a bare password in prose never met under a secret name in the run) is not found, so
add a pattern for it. The digest is keyed with ``TRACETAPE_REDACT_KEY`` (or
``Tape(redact_key=...)``); without one it is keyed with the public constant
``DEFAULT_REDACT_KEY``, and anyone holding the cassette can then confirm a guess of a
low-entropy secret (a short password) by hashing it. Set a key of your own to prevent that. In
JSON quoted inside a string, a field-name match stops at the first embedded double quote that
looks like the end of the value. The incremental search reads a key's name to 100 characters.

Why one module: the detectors of secret shapes, the field-name rules and the ``Redactor``
that applies them are one promise (nothing that looks like a secret is written), tested
together by the redaction corpus; a rule added in one place and not the other is a leak, so
they change together.
"""

from __future__ import annotations

import base64
import collections
import hashlib
import hmac
import json
import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .canonical import canonical_json as _canonical
from .canonical import common_prefix, json_default
from .config import load_config

__all__ = [
    "DEFAULT_REDACT_KEY",
    "DETECTORS",
    "Detector",
    "RedactRules",
    "Redactor",
    "redacted",
]

DEFAULT_REDACT_KEY = b"tracetape-redact-v1"
PLACEHOLDER_PREFIX = "[REDACTED:"

# The left boundary a token must have: not inside a word (letters and digits); ``_``, ``-``, a
# non-ASCII character or a JSON escape such as ``\n`` right before it is a boundary.
_B = r"(?:(?<![A-Za-z0-9])|(?<=\\[bfnrt])|(?<=\\u[0-9a-fA-F]{4}))"
# A token that is an identifier rather than a key (``sk-learn_compatible_estimator_api``) has
# no digit: keys are random, so a key-shaped token must hold at least one.
_HAS_DIGIT = r"(?=[A-Za-z_\-]*[0-9])"


@dataclass(frozen=True)
class Detector:
    """A named secret shape. Only the group named ``s`` is replaced when the regex has one.

    ``anchors`` are lowercase literals every match contains at its start; with them the
    detector is tried only where an anchor occurs (found by ``str.find``, far faster than
    running a regex over the whole text). A detector without anchors is searched everywhere.
    ``check``, where given, must accept a match's text for it to be a secret (what a regex
    cannot say: its entropy, what it decodes to).

    >>> Detector("ticket", r"TCK-[0-9]{8}", anchors=("tck-",)).name
    'ticket'
    """

    name: str
    pattern: str
    anchors: tuple[str, ...] = ()
    check: Callable[[str], bool] | None = None


def _entropy(text: str) -> float:
    """Shannon entropy of ``text``'s characters, in bits per character."""
    n = len(text)
    return -sum(c / n * math.log2(c / n) for c in collections.Counter(text).values())


def _aws_secret(text: str) -> bool:
    """A bare AWS secret access key: 40 characters of base64 as random as a key is, with a
    capital, a small letter and a digit; a git SHA (hex: 4 bits at most) or a word never is.
    As random: detect-secrets' base64 entropy limit (4.5 bits), or a little under it (4.2,
    where one real key in fifty falls) with no word in it: seven small letters in a row
    (``Identifier``) or three capitalised words (``getUserById2ForTenant...``)."""
    entropy = _entropy(text)
    return (
        (entropy >= 4.5 or (entropy >= 4.2 and not _reads_as_words(text)))
        and any(c.isdigit() for c in text)
        and any(c.isupper() for c in text)
        and any(c.islower() for c in text)
    )


_WORD_RUN = re.compile(r"[a-z]{7}")
_CAPITALISED = re.compile(r"[A-Z][a-z]{3,}")


def _reads_as_words(text: str) -> bool:
    """Whether ``text`` holds a word of seven small letters or three capitalised words."""
    return _WORD_RUN.search(text) is not None or len(_CAPITALISED.findall(text)) >= 3


def _wrapped_key(text: str) -> bool:
    """Base64 (standard or URL-safe) that decodes to an API key of a known shape."""
    try:
        decoded = base64.b64decode(text.replace("-", "+").replace("_", "/") + "==", validate=False)
    except ValueError:
        return False
    return _WRAPPED.match(decoded.decode("latin-1")) is not None


_WRAPPED = re.compile(r"sk-(?:ant-)?(?=[A-Za-z_\-]*[0-9])[A-Za-z0-9_\-]{20,}")


# Shapes after gitleaks' rules (rule ids in the comments; https://github.com/gitleaks/gitleaks,
# config/gitleaks.toml) and detect-secrets' plugins, kept to the shapes a JSON payload of an
# agent holds. Each has a test with a real-looking sample and a look-alike it must leave alone.
DETECTORS: tuple[Detector, ...] = (
    # gitleaks private-key; a block cut before its END line is still a key
    Detector(
        "private_key",
        r"-----BEGIN[A-Z ]*PRIVATE KEY(?: BLOCK)?-----"
        r"(?:.*?-----END[A-Z ]*PRIVATE KEY(?: BLOCK)?-----|(?:[A-Za-z0-9+/=\s:-]|\\n)*)",
        ("-----begin",),
    ),
    # gitleaks anthropic-api-key, openai-api-key: any sk- key with a digit, which covers the
    # legacy, proj-, svcacct- and admin- forms alike (each has a test)
    Detector("anthropic_key", _B + r"sk-ant-" + _HAS_DIGIT + r"[A-Za-z0-9_\-]{20,}", ("sk-",)),
    Detector("openai_key", _B + r"sk-" + _HAS_DIGIT + r"[A-Za-z0-9_\-]{20,}", ("sk-",)),
    # gitleaks stripe-access-token
    Detector("stripe_key", _B + r"(?:sk|rk)_(?:live|test|prod)_[A-Za-z0-9]{16,}", ("sk_", "rk_")),
    # gitleaks aws-access-token
    Detector(
        "aws_access_key",
        _B + r"(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}(?![0-9A-Z])",
        ("akia", "asia", "abia", "acca"),
    ),
    # a bare secret access key, with no name beside it (detect-secrets' high-entropy base64
    # string, the length of AWS's keys), or after ``=``; a JSON escape before it is a boundary,
    # as the character it stands for is in the parsed string (matched, not looked behind for:
    # this search runs over every character)
    Detector(
        "aws_secret_key",
        r"(?<![A-Za-z0-9/+])(?:(?<=\\)(?:[bfnrt]|u[0-9a-fA-F]{4}))?"
        r"(?P<s>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])",
        check=_aws_secret,
    ),
    # an OpenAI or Anthropic key wrapped in base64 (``base64("sk-")`` is ``c2st``)
    Detector(
        "base64_key",
        _B + r"c2st[A-Za-z0-9+/_\-]{26,}={0,2}",
        ("c2st",),
        check=_wrapped_key,
    ),
    # detect-secrets AWSKeyDetector: a bare secret access key beside its name
    Detector(
        "aws_secret_key",
        r"(?i:aws_?secret(?:_access)?_?key)[\"'\s]*[:=][\"'\s]*"
        r"(?P<s>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])",
        ("aws_secret", "awssecret"),
    ),
    # gitleaks github-pat, github-oauth, github-app-token, github-fine-grained-pat
    Detector(
        "github_token",
        _B + r"(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    ),
    # gitleaks slack-bot-token, slack-user-token, slack-app-token (xapp-)
    Detector(
        "slack_token", _B + r"(?:xox[abposre]|xapp)-[0-9]+-[A-Za-z0-9\-]{8,}", ("xox", "xapp-")
    ),
    # gitleaks gcp-api-key; Google OAuth access tokens (ya29.)
    Detector("google_api_key", _B + r"AIza[0-9A-Za-z_\-]{35}", ("aiza",)),
    Detector("google_oauth_token", _B + r"ya29\.[0-9A-Za-z_\-]{20,}", ("ya29.",)),
    # gitleaks jwt
    Detector(
        "jwt",
        _B + r"eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",
        ("eyj",),
    ),
    # Authorization headers written as text (detect-secrets KeywordDetector, gitleaks
    # generic-api-key's bearer form)
    Detector(
        "bearer",
        # a credential is random: it holds a digit, a capital or a base64 sign, a word does not
        r"(?i:bearer|basic)\s+(?P<s>(?!\[REDACTED:)(?=[a-z\-._~]*[A-Z0-9+/=])"
        r"[A-Za-z0-9\-._~+/]{12,}=*)",
        ("bearer", "basic"),
    ),
    # credentials in a URL: scheme://user:PASSWORD@host (detect-secrets BasicAuthDetector)
    Detector(
        "url_password",
        r"://[^\s/:@\"'\\]+:(?P<s>(?!\[REDACTED:)[^\s/@\"'\\]+)@",
        ("://",),
    ),
    # and in a query string: ?api_key=... &access_token=... &token=...
    Detector(
        "url_token",
        r"[?&](?i:api[_-]?key|access[_-]?token|token|secret|password|auth)="
        r"(?P<s>(?!\[REDACTED:)[^\s&#\"']{6,})",
        ("?", "&"),
    ),
)

# Field names whose value is a secret, matched on the end of the name, lowercased and without
# separators (detect-secrets KeywordDetector's list, trimmed to names an agent's data holds).
DEFAULT_FIELD_NAMES: tuple[str, ...] = (
    "password",
    "passwd",
    "pwd",
    "passphrase",
    "secret",
    "token",
    "apikey",
    "apikeys",
    "privatekey",
    "accesskey",
    "secretkey",
    "credential",
    "credentials",
    "authorization",
)
_MIN_FIELD_VALUE = 4  # "yes", "no", "n/a" under a secret name are not secrets
_MIN_KNOWN = 6  # a secret shorter than this is not replaced everywhere it appears
_MAX_CACHED = 16 * 1024 * 1024  # characters of strings remembered with their redaction
_SCALARS = frozenset({str, dict, list, tuple, int, float, bool, type(None)})
_PLACEHOLDER_RE = re.compile(r"\[REDACTED:[A-Za-z0-9_]+:[0-9a-f]{12}\]")
_PLACEHOLDER_PARTS = re.compile(r"\[REDACTED:([A-Za-z0-9_]+):([0-9a-f]{12})\]")
_WORD = re.compile(r"[^\s\"'`,;()\[\]{}<>]{6,}")
# An authorization value that is a credential: a scheme and its token, or a bare token.
_AUTH_VALUE = re.compile(r"(?:[A-Za-z][A-Za-z0-9-]*\s+\S{6,}|[^\s]{16,})")


def _normal(name: str) -> str:
    """A field name lowercased and without separators: ``X-API-Key`` -> ``xapikey``."""
    return re.sub(r"[\s_.\-]", "", name).lower()


FIELD = "field"


# A key that may name a secret, at any depth of escaping (``q``: no backslash at depth 0, ``\``
# at depth 1, ...), so a field inside a JSON string inside a JSON string is found with its own
# quotes; whether the name is a secret's is ``Redactor.secret_name``'s to say.
_KEY_NAME = r"[A-Za-z0-9_\-. ]{1,100}"
_SITE = re.compile(rf'(\\*)"({_KEY_NAME})\1"\s*:')
# The names of what may be object keys: an object's keys in canonical JSON (a secret name has
# no escape) and ``_SITE``'s names, and more; found at twice their speed (a match starts at a
# quote), to tell whether any is secret before the exact search.
_KEY_ANY = re.compile(r'"([^"\\]{1,100})\\*"\s*:')
# And names with escapes (``\\password``, ``cl\u00e9_api_key``), searched only when a key's end
# (``":``) is left that ``_KEY_ANY`` did not find: this search reads whole strings.
_KEY_ESCAPED = re.compile(r'"([^"\\]{0,100}(?:\\[^"][^"\\]{0,100})*)\\*"\s*:')
# The string value after such a key, up to its closing quote.
_FIELD_VALUE = (
    rf'(?P<q>\\*)"{_KEY_NAME}(?P=q)"\s*:\s*(?P=q)"'
    r'(?P<s>(?!\[REDACTED:)(?:[^"\\]|\\+[^"\\]|\\+"(?!\s*[,}\]:]))+)'
)
# A secret-named field written in prose, a log line or a repr rather than JSON: ``'password':
# 'v4lue'`` (a Python dict's repr; a double-quoted key is JSON's, found above),
# ``password='v4lue'`` (a call's keyword arguments),
# ``password=v4lue7`` and ``password: v4lue7`` (an env file, a query, a log line). A quoted
# value is a secret as JSON's is (four characters or more); a bare one only when it looks
# random, with a letter and a digit (``password=None``, ``token: str`` are code, not secrets),
# or when it is a number of four digits or more, as under a JSON key (``password: 48213377``).
# A value may hold quotes (``pa"ss'w0rd``): inside a bare value, and inside a quoted one where
# its own quote is escaped (a repr's ``\'``) or followed by more of a word.
_BARE = r"[^\s,;&'\"<>(){}\[\]\\*]"  # what a bare (unquoted) value may hold
_BARE_Q = r"[^\s,;&<>(){}\[\]\\*]"  # the same with quotes, inside a bare value
# The name before a separator and the value after it. The name is read backwards from the
# separator (``_name_before``: the text before it reversed), a name quoted as a repr's key
# (``'db password'``) or a bare one (``db_password``), spaces between: matching forwards,
# every position of the text before a separator would be tried.
_NAME_BACK = re.compile(
    r"\s*(?:'(?P<qn>"
    + _KEY_NAME
    + r")'|(?P<n>[A-Za-z0-9_\-.]{0,60}[A-Za-z])(?![A-Za-z0-9_\-.'\"]))"
)
# The same in the clean check's JSON text, where a string's opening quote or an escape
# (``\n``, ``\u00e9``) comes before a name and escaped spaces after it: it finds the parsed
# name, or one ending with it (``npassword``).
_LOOSE_NAME_BACK = re.compile(
    r"(?:\s|[bfnrt]\\|[0-9a-fA-F]{4}u\\)*"
    r"(?:'(?P<qn>" + _KEY_NAME + r")'|(?P<n>[A-Za-z0-9_\-.]{0,60}[A-Za-z])(?![A-Za-z0-9_\-.']))"
)
_PROSE_VALUE = re.compile(
    r"\s*(?:(?P<vq>['\"])(?P<s>(?!\[REDACTED:)"
    r"(?:[^'\"\\\n]|\\[^\n]|(?!(?P=vq))['\"]|(?P=vq)(?=[A-Za-z0-9_\-])){4,300})(?P=vq)"
    r"|(?P<d>[0-9]{4,300})(?![0-9A-Za-z_\-]|\.[0-9])"
    rf"|(?P<b>(?!\[REDACTED:)(?={_BARE_Q}*[0-9])(?={_BARE_Q}*[A-Za-z])"
    rf"{_BARE}(?:{_BARE_Q}{{4,298}}{_BARE})))"
)
# An authorization written in prose is a scheme and its credential (``authorization: Token
# v4lue7``), a credential holding a digit (``Token required`` is a state).
_AUTH_PROSE = re.compile(
    r"\s*(?P<a>[A-Za-z][A-Za-z0-9-]*[ \t]+(?=[^\s,;'\"<>(){}\[\]\\]*[0-9])"
    r"[^\s,;'\"<>(){}\[\]\\]{8,300})"
)
# A mapping key that is an Authorization header's value, a scheme and its credential (a key
# is no prose: ``{"Token v4lue7...": ...}`` is a credential used as a key).
_AUTH_KEY = re.compile(
    r"(?i:bearer|basic|token|digest|bot|apikey|api-key|jwt|dpop)[ \t]+"
    r"(?=[^\s]*[0-9])[A-Za-z0-9\-._~+/=]{8,}"
)
_SEPARATORS = ("=", ": ", "':")  # JSON writes none of them between a key and its value
# Values that are code or an example, not a secret: a dotted name (``base64.decodebytes``), a
# template (``'{0}:{1}'``, ``${env:TOKEN}``, ``%(password)s``) or an elision (``"sk-..."``).
_NOT_A_VALUE = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+|.*(?:[{}]|\.\.\.|…|%\().*")
# A number after a secret-named JSON key (a numeric password, PIN or token, four digits or
# more). Its placeholder is written quoted, at the key's escaping depth, as the value walk
# makes a number under a secret name a placeholder string: a tool's output quoted back with
# ``json.dumps`` in a later prompt reads the same recorded and replayed.
_FIELD_NUMBER = re.compile(
    rf'(?P<q>\\*)"{_KEY_NAME}(?P=q)"\s*:\s*'
    r"(?P<s>-?[0-9]{4,}(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)(?![0-9.eE])"
)


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
    """Decode JSON string escapes until none is left, so every escaping depth agrees; then a
    Python repr's (``'pa"ss\\'w0rd'``), whose ``\\'`` no JSON text writes."""
    while "\\" in text:
        try:
            decoded = json.loads(f'"{text}"')
        except ValueError:
            if "\\'" in text:
                text = _REPR_ESCAPE.sub(r"\1", text)
            break
        if decoded == text:
            break
        text = decoded
    return text


_REPR_ESCAPE = re.compile(r"\\(['\"\\])")


def _name_before(text: str, lo: int, at: int, loose: bool) -> tuple[str, bool] | None:
    """The field name written just before ``at`` (spaces between), within ``text[lo:at]``,
    and whether it is quoted; None when there is none. Read backwards: the name must not go on
    past ``lo``, so the character before it is read too (it bounds the name)."""
    window = text[lo - 1 if lo else 0 : at][::-1]
    m = (_LOOSE_NAME_BACK if loose else _NAME_BACK).match(window)
    if m is None or m.end() > at - lo:
        return None
    quoted = m.group("qn")
    return (quoted[::-1], True) if quoted is not None else (m.group("n")[::-1], False)


def _prose_value(text: str, pos: int, end: int, name: str) -> tuple[int, int, bool] | None:
    """The span of the value written after the secret name ``name`` and its separator, which
    ends at ``pos``, and whether it is a number; None when what follows is no secret: code, a
    template or an example (``_NOT_A_VALUE``), an authorization's state ("approved")."""
    authorization = _normal(name).endswith("authorization")
    if authorization and (m := _AUTH_PROSE.match(text, pos, end)) is not None:
        group = "a"
    elif (m := _PROSE_VALUE.match(text, pos, end)) is not None:
        group = "s" if m.group("s") is not None else "d" if m.group("d") is not None else "b"
    else:
        return None
    value = m.group(group)
    if _NOT_A_VALUE.fullmatch(value) or len(value.strip()) < _MIN_FIELD_VALUE:
        return None
    if authorization and group != "a" and _AUTH_VALUE.fullmatch(value) is None:
        return None
    return m.start(group), m.end(group), group == "d"


Match = tuple[int, int, str]


class _Compiled:
    __slots__ = ("anchors", "check", "group", "name", "regex")

    def __init__(
        self,
        name: str,
        pattern: str,
        anchors: tuple[str, ...] = (),
        check: Callable[[str], bool] | None = None,
    ):
        try:
            self.regex = re.compile(pattern, re.DOTALL)
        except re.error as exc:
            raise ValueError(f"redact pattern {name!r} is not a valid regex: {exc}") from exc
        self.name = name
        self.check = check
        self.anchors = tuple(a.lower() for a in anchors)
        self.group = "s" if "s" in self.regex.groupindex else 0


class Redactor:
    """Find secrets in values and texts and replace them with stable placeholders, one
    redactor per tape (its registry of known secrets lasts the run).

    >>> r = Redactor()
    >>> r.redact_value({"db": {"password": "hunter2hunter2"}})[0]
    {'db': {'password': '[REDACTED:field:...]'}}
    >>> r.redact_string("logged in with hunter2hunter2")
    'logged in with [REDACTED:field:...]'
    """

    def __init__(self, rules: RedactRules | None = None, key: bytes | str | None = None):
        rules = rules or RedactRules()
        if key is None:
            env = os.environ.get("TRACETAPE_REDACT_KEY")
            key = env.encode() if env else DEFAULT_REDACT_KEY
        self._key = key.encode() if isinstance(key, str) else key
        self.key_id = hashlib.sha256(self._key).hexdigest()[:12]
        for name, pattern in rules.patterns.items():
            _Compiled(name, pattern)  # a bad pattern fails here, not at first use
        self._rules = rules
        # Compiled on first use (a cost at startup): a replay whose texts hold no secret never
        # redacts anything, since a recorded text is already redacted.
        self._compiled: tuple[list[tuple[str, list[_Compiled]]], list[_Compiled], dict[str, int]]
        self._compiled = ([], [], {})
        self._field: _Compiled | None = None
        self._ready = False
        names = (DEFAULT_FIELD_NAMES if rules.builtins else ()) + tuple(rules.fields)
        self._field_names = tuple(dict.fromkeys(_normal(n) for n in names))  # secret_name
        self._names: dict[str, bool] = {}
        # The run-wide registry: every secret value met so far -> its placeholder.
        self.known: dict[str, str] = {}
        self._strings: dict[str, tuple[int, str]] = {}  # string -> (registry size, redacted)
        self._cached = 0
        self._clean: dict[str, tuple[str, int]] = {}  # stream -> (last clean text, registry)
        self._known_escaped: list[str] = []
        self._known_re: re.Pattern[str] | None = None
        # Digests of placeholders a recording holds (``recognise``): a word whose digest is
        # one of them is that secret, met live in replay.
        self._recognised: dict[str, str] = {}

    def fresh(self, known: Mapping[str, str] | None = None) -> Redactor:
        """A redactor with the same rules and key and an empty registry (or ``known``, a
        registry a run learned before): one per unit of work (a collector's batch), sharing
        the compiled detectors instead of compiling them again.

        >>> base = Redactor()
        >>> base.redact_value({"password": "hunter2hunter2"})[1], len(base.known)
        (True, 1)
        >>> other = base.fresh()
        >>> other.known, other.redact_string("said hunter2hunter2")
        ({}, 'said hunter2hunter2')
        >>> other.redact_string("key sk-proj-AbcdefghijklmnopQRSTUVWX123456")
        'key [REDACTED:openai_key:...]'
        """
        if not self._ready:
            self._compile()
        other = Redactor(self._rules, self._key)
        other._compiled, other._field, other._ready = self._compiled, self._field, True
        for value, placeholder in (known or {}).items():
            other._remember(value, placeholder)
        return other

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
        compiled = [_Compiled(d.name, d.pattern, d.anchors, d.check) for d in detectors]
        # Secret-named fields are found from where keys are (``_SITE``), not from anchors.
        self._field = _Compiled(FIELD, _FIELD_VALUE) if self._field_names else None
        by_anchor: dict[str, list[_Compiled]] = {}
        for det in compiled:
            for anchor in dict.fromkeys(det.anchors):
                by_anchor.setdefault(anchor, []).append(det)
        free = [c for c in compiled if not c.anchors]
        order = {c.name: i for i, c in enumerate(compiled)}
        order[FIELD] = len(order)
        self._compiled = list(by_anchor.items()), free, order
        self._ready = True

    def _scan(
        self, text: str, start: int, end: int, loose: bool = False, sites: bool = True
    ) -> list[Match]:
        """Find the secrets in ``text[start:end]``, without overlaps, in text order
        (``loose``: prose fields as ``_prose`` says; not ``sites``: no key is a secret's
        name, known beforehand)."""
        if not self._ready:
            self._compile()
        anchored, free, order = self._compiled
        # (start, end, detector order, a shape?, detector, the quote its placeholder takes)
        found: list[tuple[int, int, int, bool, str, str]] = []
        low = text[start:end].lower()
        for anchor, dets in anchored:
            i = low.find(anchor)
            while i >= 0:
                for det in dets:
                    m = det.regex.match(text, start + i, end)
                    if m is not None and (det.check is None or det.check(m.group(det.group))):
                        s, e = m.span(det.group)
                        found.append((s, e, order[det.name], True, det.name, ""))
                i = low.find(anchor, i + 1)
        field = self._field
        # Sites are visited only when one of their (distinct) names is secret: a batch of
        # records repeats the same few keys thousands of times.
        if field is not None and sites and ":" in low and self._secret_key_in(text, start, end):
            for site in _SITE.finditer(text, start, end):
                if self.secret_name(site.group(2)):
                    m = field.regex.match(text, site.start(), end)
                    if m is not None:
                        s, e = m.span(field.group)
                        found.append((s, e, order[FIELD], False, FIELD, ""))
                    elif (m := _FIELD_NUMBER.match(text, site.start(), end)) is not None:
                        s, e = m.span("s")
                        # quoted at the key's depth, as the value walk makes it a string
                        found.append((s, e, order[FIELD], False, FIELD, m.group("q") + '"'))
        if field is not None:
            found += [
                (s, e, order[FIELD], False, FIELD, quote)
                for s, e, quote in self._prose(text, start, end, loose)
            ]
        for det in free:
            for m in det.regex.finditer(text, start, end):
                s, e = m.span(det.group)
                if e > s and (det.check is None or det.check(m.group(det.group))):
                    found.append((s, e, order[det.name], True, det.name, ""))
        if not found:
            return []
        # Token shapes win over field names, then the earlier detector: the same secret gets
        # the same placeholder whether or not it sits under a secret-looking field name.
        found.sort(key=lambda f: (not f[3], f[0], f[2]))
        chosen: list[tuple[int, int, str, str]] = []
        for s, e, _, _, name, quote in found:
            if all(e <= cs or s >= ce for cs, ce, _, _ in chosen):
                chosen.append((s, e, name, quote))
        chosen.sort()
        return [(s, e, q + self.placeholder(n, text[s:e]) + q) for s, e, n, q in chosen]

    def _prose(
        self, text: str, start: int, end: int, loose: bool = False
    ) -> list[tuple[int, int, str]]:
        """The spans of secret-named fields' values written in prose (``_name_before``), each
        with the quote its placeholder takes: found from their separators (``str.find``,
        fast), so JSON's own keys cost nothing here.

        ``loose``: any secret name before a separator is a span, whatever follows. The clean
        check searches JSON text, where a value's quotes and non-ASCII characters are escapes
        the value patterns (written for the parsed string) do not read; the walk then decides.
        """
        spans = []
        for separator in _SEPARATORS:
            i = text.find(separator, start, end)
            while i >= 0:
                at = i + 1 if separator == "':" else i  # the name's closing quote is its own
                named = _name_before(text, max(start, at - 110), at, loose)
                if named is not None:
                    name, quoted = named
                    if self.secret_name(name):
                        if loose:
                            return [(i, i + len(separator), "")]
                        found = _prose_value(text, i + len(separator), end, name)
                        if found is not None:
                            s, e, number = found
                            # a number in a dict's repr: quoted as the repr of replay's output,
                            # where it is a placeholder string (``_FIELD_NUMBER`` says why)
                            spans.append((s, e, "'" if number and quoted else ""))
                i = text.find(separator, i + 1, end)
        return spans

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

    # -- values: matched on the parsed structure, which no replacement changes ----------------

    def redact_value(
        self, value: Any, stream_text: Callable[[tuple[Any, ...]], bool] | None = None
    ) -> tuple[Any, bool]:
        """Redact a JSON value (a decision's output, a payload). Returns ``(value, changed)``.

        Strings are searched for secret shapes (and for secret-named fields of JSON quoted in
        them); the value of a secret-named field is a secret whatever its shape. A string
        stays a string and a list keeps its length; a number under a secret-named field
        becomes a placeholder string. Every secret found is remembered (``known``) and
        replaced wherever it appears later, in any text this redactor sees.

        A stream (``{"events": [...]}``) is also redacted on the texts its events assemble:
        ``stream_text`` says which strings of an event's data, by path, are pieces of one
        streamed text (the provider's rule; by default, strings under a ``delta``).
        """
        events = value.get("events") if type(value) is dict else None
        if not isinstance(events, list) and self._clean_value(value):
            return value, False
        out, changed = self._whole(value)
        events = out.get("events") if type(out) is dict else None
        if isinstance(events, list):
            before = json.dumps(events, default=str)
            out = {**out, "events": json.loads(before)}  # a copy: never edit the caller's
            self._redact_stream(out["events"], stream_text or _under_delta)
            changed = changed or json.dumps(out["events"], default=str) != before
        return out, changed

    def redact_payload(self, payload: Any, text: str, stream: str | None = None) -> str:
        """The redacted canonical text of ``payload``, whose canonical text is ``text``:
        ``text`` itself when nothing in it is secret. Walks the payload's own objects (no
        parse), converting what JSON has no type for as keys do; the same text as
        ``redact_json(text)``.

        ``stream`` names a sequence of payloads that grow by appending (a decision kind): when
        the previous one held no secret, only the text after the prefix they share is searched
        (shapes, secret-named keys, known secrets), and only a hit there costs a walk."""
        if stream is not None:
            memo = self._clean.get(stream)
            if memo is not None and memo[1] == len(self.known):
                start = _token_start(text, common_prefix(memo[0], text))
                if self._clean_from(text, start):
                    self._clean[stream] = (text, len(self.known))
                    return text
        value, changed = self._whole(payload)
        if stream is not None:
            if changed:
                self._clean.pop(stream, None)
            else:
                self._clean[stream] = (text, len(self.known))
        return _canonical(value) if changed else text

    def is_clean(self, text: str) -> bool:
        """Whether a JSON text holds nothing to redact: no secret shape, no secret-named
        field, no secret met before. One scan of the text, no walk: a batch of records is
        checked as one text, and only a batch with a hit is redacted record by record."""
        return self._clean_from(text, 0)

    def _clean_from(self, text: str, start: int) -> bool:
        """Whether a JSON ``text`` holds nothing to redact from ``start`` on: canonical text
        (ASCII), or UTF-8 JSON as orjson writes it (a known secret is searched in both forms)."""
        end = len(text)
        if self._secret_key_in(text, start, end, credentials=True):
            return False
        # no key names a secret: no site to search
        if self._scan(text, start, end, loose=True, sites=False):
            return False
        return not any(text.find(e, start) >= 0 for e in self._known_escaped)

    def _secret_key_in(self, text: str, start: int, end: int, credentials: bool = False) -> bool:
        """Whether a key of JSON ``text`` (``_KEY_ANY``: at any depth, and more) is a secret's
        name, or (``credentials``) an authorization's value used as a key (``_AUTH_KEY``)."""
        names = _KEY_ANY.findall(text, start, end)
        if text.count('":', start, end) > len(names):
            names += [_decoded_name(raw) for raw in _KEY_ESCAPED.findall(text, start, end)]
        # Each distinct name once: a batch of records repeats the same few keys.
        return any(
            self.secret_name(name) or (credentials and _credential_key(name)) for name in set(names)
        )

    def redact_json(self, text: str) -> str:
        """Redact a canonical JSON text on its parsed structure (the key's input): the same
        text when nothing is secret, else the canonical text of the redacted value."""
        # the standard library: orjson reads an integer beyond 64 bits as a float, and no NaN
        value, changed = self._whole(json.loads(text))
        return _canonical(value) if changed else text

    def _clean_value(self, value: Any) -> bool:
        """Whether the walk would leave ``value`` as it is, found without building anything:
        every string stays itself (the cached ``redact_string``), no field name is secret,
        nothing is learned, and nothing needs converting. Most values are clean, and this
        loop costs a fraction of the walk's; anything else is left to the walk."""
        known = len(self.known)
        redact, secret_name = self.redact_string, self.secret_name
        stack = [value]
        pop, push = stack.pop, stack.extend
        while stack:
            item = pop()
            kind = type(item)
            if kind is str:
                if redact(item) != item:
                    return False
            elif kind is dict:
                for key in item:
                    if type(key) is not str or secret_name(key):
                        return False
                    if len(key) >= _MIN_KNOWN and (redact(key) != key or _credential_key(key)):
                        return False  # a secret as a key
                push(item.values())
            elif kind is list or kind is tuple:
                push(item)
            elif kind not in _SCALARS:
                return False
        return len(self.known) == known

    def _whole(self, value: Any) -> tuple[Any, bool]:
        """Walk ``value``; if it taught the registry a secret, walk it again, so a secret is
        replaced wherever it appears in the value, before or after where it was learned (and
        the result does not depend on the order the walk visits it in)."""
        known = len(self.known)
        out = self._walk(value)
        return self._walk(value) if len(self.known) != known else out

    def _walk(self, value: Any) -> tuple[Any, bool]:
        kind = type(value)
        if kind is str:
            new = self.redact_string(value)
            return new, new != value
        if kind is dict:
            done: dict[Any, tuple[Any, bool]] = {}
            for k, v in value.items():
                if type(k) is str and self.secret_name(k):
                    done[k] = self._secret(v, k)
                else:
                    done[k] = self._walk(v)
            keys = self._keys(value)
            if keys is not None or any(c for _, c in done.values()):
                return {(keys or {}).get(k, k): done[k][0] for k in value}, True
            return value, False
        if kind is list or kind is tuple:
            items = [self._walk(v) for v in value]
            if any(c for _, c in items):
                return [v for v, _ in items], True
            return value, False
        if kind not in _SCALARS:  # an SDK model, a set, a mapping, an enum... as keys see it
            new, changed = self._walk(json_default(value))
            if changed:
                return new, True
        return value, False

    def _keys(self, mapping: dict[Any, Any]) -> dict[str, str] | None:
        """The keys of ``mapping`` that hold a secret (a token or an authorization's value used
        as a key, a secret met before), each with its redacted form; None when no key does.
        Record and replay redact keys by this one rule (replay knows a secret met before by
        the recording's placeholders: ``recognise``)."""
        found = None
        for k in mapping:
            if type(k) is str and len(k) >= _MIN_KNOWN:
                new = self.redact_string(k)
                if new == k and _credential_key(k):
                    new = self._learn(FIELD, k)  # the placeholder of {"authorization": k}
                if new != k:
                    found = found or {}
                    found[k] = new
        return found

    def _secret(self, value: Any, name: str) -> tuple[Any, bool]:
        """The value of a secret-named field: every string and number in it is a secret."""
        kind = type(value)
        if kind is str:
            if len(value.strip()) < _MIN_FIELD_VALUE or _PLACEHOLDER_RE.fullmatch(value):
                return value, False
            shaped = self.redact_string(value)
            if shaped != value:  # a known shape keeps its own placeholder
                return shaped, True
            if _normal(name).endswith("authorization") and not _AUTH_VALUE.fullmatch(value):
                return value, False  # "approved", "required": a state, not a credential
            return self._learn(FIELD, value), True
        if kind is int or kind is float:
            return self._learn(FIELD, str(value)), True
        if kind is dict:
            out = {k: self._secret(v, name) for k, v in value.items()}
            keys = self._keys(value)
            if keys is not None or any(c for _, c in out.values()):
                return {(keys or {}).get(k, k): v for k, (v, _) in out.items()}, True
            return value, False
        if kind is list or kind is tuple:
            items = [self._secret(v, name) for v in value]
            if any(c for _, c in items):
                return [v for v, _ in items], True
        elif kind not in _SCALARS:
            new, changed = self._secret(json_default(value), name)
            if changed:
                return new, True
        return value, False

    def secret_name(self, name: str) -> bool:
        """Whether a field of this name holds a secret: its name, lowercased and without
        separators, ends with a secret name (``api_key``, ``apiKey``, ``X-API-KEY``,
        ``db_password``, ``SessionToken``; not ``password_expired`` or ``max_tokens``)."""
        known = self._names.get(name)
        if known is None:
            normal = _normal(name)
            known = self._names[name] = any(normal.endswith(n) for n in self._field_names)
        return known

    def redact_string(self, text: str) -> str:
        """Redact one string (not JSON): secret shapes, secret-named fields of JSON quoted in
        it, and every secret this redactor has met before.

        Remembered per string until the registry grows (or the placeholders ``recognise``
        learned): a conversation repeats its earlier messages in every request, so each is
        scanned once (the incremental rescan), in replay as in record."""
        if not text:
            return text
        cached = self._strings.get(text)
        if cached is not None and cached[0] == len(self.known) + len(self._recognised):
            return cached[1]
        out = self._apply(text, self._spans(text))
        self._cached += len(text)
        if self._cached > _MAX_CACHED:  # bounded memory: start again
            self._strings.clear()
            self._cached = len(text)
        self._strings[text] = (len(self.known) + len(self._recognised), out)
        return out

    def _spans(self, text: str) -> list[Match]:
        """The secrets in ``text`` as ``(start, end, placeholder)``, in order, never
        overlapping one another or a placeholder already there (learning each one found)."""
        matches = self._scan(text, 0, len(text))
        for s, e, placeholder in matches:  # a quoted placeholder is remembered bare
            self._remember(_unescape_fully(text[s:e]), placeholder.strip("\\\"'"))
        if self._recognised:
            for candidate in _candidates(text):
                recorded = self._recognised.get(self.mac(_unescape_fully(candidate)))
                if recorded is not None:
                    self._remember(candidate, recorded)
        if not self.known or len(text) < _MIN_KNOWN:
            return matches
        pattern = self._known_re
        if pattern is None:
            pattern = self._known_re = re.compile(
                "|".join(re.escape(v) for v in sorted(self.known, key=len, reverse=True))
            )
        taken = [(s, e) for s, e, _ in matches]
        if "[REDACTED:" in text:  # never inside a placeholder's own digest
            taken += [m.span() for m in _PLACEHOLDER_RE.finditer(text)]
        extra = [
            (m.start(), m.end(), self.known[m.group()])
            for m in pattern.finditer(text)
            if all(m.end() <= a or m.start() >= b for a, b in taken)
        ]
        return sorted(matches + extra) if extra else matches

    def _redact_stream(self, events: list[Any], piece: Callable[[tuple[Any, ...]], bool]) -> None:
        """Redact the text a stream assembles from its pieces (the strings ``piece`` accepts
        by path, the same path in each event) as one text (a secret split over several events
        is found), and rewrite those pieces in place: the stream keeps its number of events
        and assembles to the redacted whole."""
        parts: dict[tuple[Any, ...], list[tuple[dict[Any, Any] | list[Any], Any, str]]] = {}
        for event in events:
            data = event.get("data") if isinstance(event, dict) else None
            if isinstance(data, dict | list):
                _stream_strings(data, (), piece, parts)
        for fragments in parts.values():
            whole = "".join(text for _, _, text in fragments)
            spans = self._spans(whole)
            if not spans:
                continue
            pos = 0
            for container, slot, text in fragments:
                a, b = pos, pos + len(text)
                pos, i, pieces = b, a, []
                for s, e, placeholder in spans:
                    if e <= a or s >= b:
                        continue
                    if s > i:
                        pieces.append(whole[i:s])
                    if s >= a:
                        pieces.append(placeholder)
                    i = max(i, min(e, b))
                pieces.append(whole[i:b])
                container[slot] = "".join(pieces)

    def recognise(self, recorded: str) -> None:
        """Learn the placeholders ``recorded`` (a recording's text) holds, so that a secret
        met live in replay, in a text no detector recognises, is replaced by the placeholder it
        was recorded as (its digest is checked word by word: used on replay misses only)."""
        for m in _PLACEHOLDER_PARTS.finditer(recorded):
            self._recognised[m.group(2)] = m.group(0)

    def learn(self, value: str, detector: str = "credential") -> None:
        """Treat ``value`` as a secret from now on, wherever it appears (a credential a request
        sent in a header: an answer or an error that echoes it is redacted too)."""
        if len(value) >= _MIN_KNOWN and value not in self.known:
            self._learn(detector, value)

    def _learn(self, detector: str, value: str) -> str:
        placeholder = self.placeholder(detector, value)
        self._remember(value, placeholder)
        return placeholder

    def _remember(self, value: str, placeholder: str) -> None:
        if len(value) >= _MIN_KNOWN and value not in self.known and "[REDACTED:" not in value:
            self.known[value] = placeholder
            # As canonical JSON holds it (ASCII, escaped), and as UTF-8 JSON does (orjson's
            # text of a collector's batch: non-ASCII and DEL raw).
            escaped = json.dumps(value)[1:-1]
            raw = json.dumps(value, ensure_ascii=False)[1:-1]
            self._known_escaped += [escaped] if raw == escaped else [escaped, raw]
            self._known_re = None


def _decoded_name(raw: str) -> str:
    """A key's name as JSON text escapes it, decoded (left as it is where it does not decode:
    a nested key's, whose escaped names the exact search never reads either)."""
    try:
        name: str = json.loads(f'"{raw}"')
    except ValueError:
        return raw
    return name


def _credential_key(key: str) -> bool:
    """Whether a mapping key is an authorization's value: a scheme and its credential."""
    return " " in key and _AUTH_KEY.fullmatch(key) is not None


def _under_delta(path: tuple[Any, ...]) -> bool:
    """The default rule of streamed text: strings under a ``delta`` (chat chunks' content and
    tool arguments, Anthropic text and JSON deltas, Responses text deltas)."""
    return "delta" in path


def _stream_strings(
    node: Any,
    path: tuple[Any, ...],
    piece: Callable[[tuple[Any, ...]], bool],
    parts: dict[tuple[Any, ...], list[tuple[Any, Any, str]]],
) -> None:
    """Collect, by path, the strings of one event that ``piece`` says are streamed text."""
    items = node.items() if isinstance(node, dict) else enumerate(node)
    for k, v in items:
        if type(v) is str:
            if piece((*path, k)):
                parts.setdefault((*path, k), []).append((node, k, v))
        elif isinstance(v, dict | list):
            _stream_strings(v, (*path, k), piece, parts)


_TOKEN = re.compile(r"\S+")
_TRIM = "'\"`,;:.()[]{}<>"
_RUN = 4  # tokens in a row a recognised secret may span: a passphrase of four words


def _candidates(text: str) -> set[str]:
    """The pieces of ``text`` a secret the recording learned may be, to be told by their
    digests (``recognise``): its words (``_WORD``); its whitespace-separated tokens, and runs
    of up to ``_RUN`` of them, as they are and without the punctuation around them (a password
    holding quotes, an authorization's scheme and credential, a passphrase); the whole text (a
    mapping key)."""
    found = {m.group() for m in _WORD.finditer(text)}
    tokens = [m.span() for m in _TOKEN.finditer(text)]
    for k, (s, _) in enumerate(tokens):
        for _, e in tokens[k : k + _RUN]:
            piece = text[s:e]
            found.update((piece, piece.strip(_TRIM)))
    found.update((text, text.strip()))
    return {c for c in found if len(c) >= _MIN_KNOWN}


def _token_start(text: str, pos: int) -> int:
    """Back up from ``pos`` to the start of the JSON key or string element holding it: inside
    a JSON string every quote is escaped, so ``{"``, ``,"`` and ``["`` occur only where one
    begins, and no secret can straddle such a point."""
    width = 256
    while True:
        lo = max(0, pos - width)
        found = max(text.rfind('{"', lo, pos), text.rfind(',"', lo, pos), text.rfind('["', lo, pos))
        if found >= 0 or lo == 0:
            return max(found, 0)
        width *= 8


def redacted(data: Any) -> Any:
    """Return ``data`` with secrets replaced by ``[REDACTED:...]`` placeholders (the
    project's ``[tool.tracetape.redact]`` rules included): what a report quotes passes
    through it before people see it.

    >>> redacted({"note": "key sk-proj-Q1w2E3r4T5y6U7i8O9p0A1s2D3f4"})["note"][:19]
    'key [REDACTED:opena'
    """
    return Redactor(RedactRules.coerce(load_config("redact") or None)).redact_value(data)[0]
