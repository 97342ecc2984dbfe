"""The only keying code of tracetape: the tape, the SDK and HTTP hooks, the readers and the
analysis all encode and hash here.

``text``: the canonical JSON text of a payload (a fast path proved equal to the reference),
a decision's key by definition (``key_of``), per-field digests, path diffs, normalization
and fingerprints. ``keys``: the keyer a tape picks once (``keyer``), keying each kind's
stream of payloads incrementally, plain (``StreamKey``) or under masks (``MaskedKey``).

    >>> from tracetape.canonical import canonical_json, key_of
    >>> key_of("tool", canonical_json({"name": "search", "args": {"q": "x"}, "step": 1}))
    'tool:7d66ff5c9b68eeda'
"""

from __future__ import annotations

from .keys import MaskedKey, StreamKey, keyer
from .text import (
    DEFAULT_VOLATILE_KEYS,
    ISO_TIME,
    TMP_PATH,
    UUID,
    Change,
    Normalizer,
    all_finite,
    canonical_json,
    changed_paths,
    common_prefix,
    digest,
    digest_changes,
    excerpt,
    field_digests,
    fingerprint,
    json_default,
    key_of,
    normalize,
    reference_json,
)

__all__ = [
    "DEFAULT_VOLATILE_KEYS",
    "ISO_TIME",
    "TMP_PATH",
    "UUID",
    "Change",
    "MaskedKey",
    "Normalizer",
    "StreamKey",
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
    "keyer",
    "normalize",
    "reference_json",
]
