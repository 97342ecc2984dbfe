"""tracetape: record an agent run's decisions, replay them offline, diff runs.

>>> from tracetape import Tape, key
>>> key("tool", {"name": "search", "args": {"q": "x"}, "step": 1})
'tool:7d66ff5c9b68eeda'
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._lazy import lazy_attributes as _lazy_attributes
from ._version import __version__
from .errors import (
    CassetteError,
    CassetteExistsError,
    CassetteLockedError,
    CassetteNotFoundError,
    CassetteVersionError,
    ConfigError,
    EnvironmentDriftError,
    IrreversibleEffectError,
    MatchRulesError,
    NetworkBlockedError,
    NotACassetteError,
    OptionError,
    ReplayMiss,
    SpanError,
    TapeError,
    TapeWarning,
    TraceError,
    UnplayedDecisionsError,
)

if TYPE_CHECKING:
    from .canonical import Normalizer, canonical_json, fingerprint, normalize
    from .formats import TraceFormat, read_records
    from .formats.cassette import Cassette, read_cassette
    from .integrations.http import async_http_transport, http_transport, patch_http
    from .integrations.sdk import Patch, patch, patch_sdks
    from .integrations.tools import env, tool
    from .matching import Match
    from .options import TapeOptions
    from .record import Decision, Record
    from .redact import Detector, Redactor, RedactRules
    from .stores import FileStore, RecordStore
    from .tape import Effect, Mode, Tape, current_tape, key

# Loaded on first use, so that `import tracetape` imports only the errors: a process pays
# for what it uses (the integrations pull in threading helpers and SDK lookups, an analysis
# (tracetape diff, check) needs none of the tape's modules, the command line its command's
# modules only), and what it uses is imported with the collector paused (``_lazy``).
_LAZY = dict.fromkeys(("Normalizer", "canonical_json", "fingerprint", "normalize"), ".canonical")
_LAZY.update(dict.fromkeys(("TraceFormat", "read_records"), ".formats"))
_LAZY.update(dict.fromkeys(("Decision", "Record"), ".record"))
_LAZY.update(dict.fromkeys(("Patch", "patch", "patch_sdks"), ".integrations.sdk"))
_LAZY.update(
    dict.fromkeys(("async_http_transport", "http_transport", "patch_http"), ".integrations.http")
)
_LAZY.update(dict.fromkeys(("env", "tool"), ".integrations.tools"))
_LAZY.update(dict.fromkeys(("Cassette", "read_cassette"), ".formats.cassette"))
_LAZY.update(dict.fromkeys(("Detector", "Redactor", "RedactRules"), ".redact"))
_LAZY["Match"] = ".matching"
_LAZY["TapeOptions"] = ".options"
_LAZY.update(dict.fromkeys(("FileStore", "RecordStore"), ".stores"))
_LAZY.update(dict.fromkeys(("Effect", "Mode", "Tape", "current_tape", "key"), ".tape"))
__getattr__ = _lazy_attributes(__name__, _LAZY, globals())


__all__ = [
    "Cassette",
    "CassetteError",
    "CassetteExistsError",
    "CassetteLockedError",
    "CassetteNotFoundError",
    "CassetteVersionError",
    "ConfigError",
    "Decision",
    "Detector",
    "Effect",
    "EnvironmentDriftError",
    "FileStore",
    "IrreversibleEffectError",
    "Match",
    "MatchRulesError",
    "Mode",
    "NetworkBlockedError",
    "Normalizer",
    "NotACassetteError",
    "OptionError",
    "Patch",
    "Record",
    "RecordStore",
    "RedactRules",
    "Redactor",
    "ReplayMiss",
    "SpanError",
    "Tape",
    "TapeError",
    "TapeOptions",
    "TapeWarning",
    "TraceError",
    "TraceFormat",
    "UnplayedDecisionsError",
    "__version__",
    "async_http_transport",
    "canonical_json",
    "current_tape",
    "env",
    "fingerprint",
    "http_transport",
    "key",
    "normalize",
    "patch",
    "patch_http",
    "patch_sdks",
    "read_cassette",
    "read_records",
    "tool",
]
