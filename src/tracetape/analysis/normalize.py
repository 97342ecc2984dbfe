"""A memoizing front for ``canonical.Normalizer``, for the analysis hot path.

``Normalizer`` checks every mapping key against its glob list with ``fnmatch`` and runs its
regexes over every string. A trace repeats the same few keys and many of the same strings
(paths, queries), so this wrapper remembers both answers; its output equals the wrapped
normalizer's as a value (a property test holds them equal; only the order of mapping keys
may differ, which canonical JSON ignores). The string memo is bounded.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..canonical import Normalizer

__all__ = ["MemoNormalizer"]

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
