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

from . import keys, text
from .keys import *  # noqa: F403 - the package's face: each module's public names, as listed
from .text import *  # noqa: F403

__all__ = keys.__all__ + text.__all__
