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
        self._volatile_names: set[str] = set()  # the names _volatile holds True for
        self._classified: set[str] = set()  # the str keys _volatile holds an answer for
        self._strings: dict[str, str] = {}
        # Each built-in mask needs one of these substrings to match: a UUID and an ISO time
        # hold a dash, a temp path names /tmp/ or /var/folders/. Custom masks can match
        # anything, so with masks every string goes through the regexes.
        self._prefilter = not normalizer.masks

    def without_volatile_keys(self, obj: Any) -> Any:
        """``obj`` without its top-level volatile keys (``obj`` itself if it has none).

        Normalizing the result gives what normalizing ``obj`` gives; it is only cheaper to
        serialize, and equal to a call seen before that lacked the volatile key.

        >>> MemoNormalizer(Normalizer()).without_volatile_keys({"q": 1, "request_id": "x"})
        {'q': 1}
        """
        if type(obj) is not dict:
            return obj
        keys = obj.keys()
        if not keys <= self._classified:
            for k in obj:
                name = str(k)
                skip = self._volatile.get(name)
                if skip is None:
                    skip = self._volatile[name] = self.normalizer.is_volatile(name)
                if skip:
                    self._volatile_names.add(name)
                if type(k) is str:
                    self._classified.add(k)
            if not keys <= self._classified:  # a key that is not a string
                return {k: v for k, v in obj.items() if not self._volatile[str(k)]}
        drop = keys & self._volatile_names
        if not drop:
            return obj
        rest = obj.copy()
        for k in drop:
            del rest[k]
        return rest

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
