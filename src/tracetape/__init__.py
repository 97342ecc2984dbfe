"""tracetape: record an agent run's decisions, replay them offline, diff runs.

>>> from tracetape import Tape, key
>>> key("tool", {"name": "search", "args": {"q": "x"}, "step": 1})
'tool:7d66ff5c9b68eeda'
"""

from __future__ import annotations

from ._version import __version__
from .canonical import Normalizer, canonical_json, fingerprint, normalize
from .cassette import Cassette, read_cassette
from .errors import (
    CassetteError,
    CassetteNotFoundError,
    CassetteVersionError,
    EnvironmentDriftError,
    IrreversibleEffectError,
    NetworkBlockedError,
    ReplayMiss,
    TapeError,
    TapeWarning,
    UnplayedDecisionsError,
)
from .integrations.tools import env, tool
from .redact import Detector, Redactor, RedactRules
from .tape import Decision, Effect, Mode, Tape, current_tape, key

__all__ = [
    "Cassette",
    "CassetteError",
    "CassetteNotFoundError",
    "CassetteVersionError",
    "Decision",
    "Detector",
    "Effect",
    "EnvironmentDriftError",
    "IrreversibleEffectError",
    "Mode",
    "NetworkBlockedError",
    "Normalizer",
    "RedactRules",
    "Redactor",
    "ReplayMiss",
    "Tape",
    "TapeError",
    "TapeWarning",
    "UnplayedDecisionsError",
    "__version__",
    "canonical_json",
    "current_tape",
    "env",
    "fingerprint",
    "key",
    "normalize",
    "read_cassette",
    "tool",
]
