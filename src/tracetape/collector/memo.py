"""The collector's last analyses, each kept under a digest of the stored texts it read.

A page viewed again (a reload, a step back, the run list after a look at one run) shows the
report of an analysis already made of the same texts, in the time it takes to read them:
the analysis of two 200-step runs with their conversations is most of a diff page's time
(benchmarks/README.md, "The pages"). The key is what was read, not a version of the run: a
run that grew, or whose stored texts were redacted again (``Database.rewrite``), has other
texts, so another key. Kept in the server's process (the analyses run in worker processes,
which hand back text: a diff's JSON, a page's HTML or its gzipped bytes): the last ``size``
of them, no more than ``budget`` characters or bytes (a diff page of two 200-step runs with
2 KB answers is 5 MB of HTML, far less gzipped; that diff is 39 KB as JSON). ``get`` makes
a missing result in the caller's thread, ``aget`` awaits it (from a worker process).

>>> memo = Analyses(size=2)
>>> key = memo.key("diff", ("a", "b"), RecordTexts([b'{"kind": "tool"}']))
>>> memo.get(key, lambda: "report"), memo.get(key, lambda: "made again")
('report', 'report')
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable
from typing import TypeVar

from ..record import RecordTexts

__all__ = ["Analyses"]

T = TypeVar("T")


class Analyses:
    """The last ``size`` analyses' results, by ``key`` (least recently used go first), the
    texts among them ``budget`` characters at most."""

    def __init__(self, size: int = 16, budget: int = 64 << 20):
        self.size, self.budget = size, budget
        self._kept: OrderedDict[Hashable, object] = OrderedDict()
        self._weight = 0  # the characters of the texts kept
        self._lock = threading.Lock()

    @staticmethod
    def key(what: str, names: tuple[str, ...], *runs: RecordTexts) -> tuple[str, ...]:
        """The key of analysis ``what`` of ``runs`` named ``names``: a digest of every text,
        each run and each text with its length before it (no two inputs share one)."""
        digest = hashlib.blake2b(digest_size=20)
        for run in runs:
            digest.update(len(run.texts).to_bytes(8, "little"))
            for text in run.texts:
                digest.update(len(text).to_bytes(8, "little"))
                digest.update(text)
        return (what, *names, digest.hexdigest())

    def get(self, key: Hashable, make: Callable[[], T]) -> T:
        """The result kept under ``key``, else ``make()``'s, kept (an error is not)."""
        found, kept = self._find(key)
        if found:
            return kept  # type: ignore[return-value]
        return self._keep(key, make())  # outside the lock: other analyses go on meanwhile

    async def aget(self, key: Hashable, make: Callable[[], Awaitable[T]]) -> T:
        """``get``, awaiting ``make()``."""
        found, kept = self._find(key)
        if found:
            return kept  # type: ignore[return-value]
        return self._keep(key, await make())

    def _find(self, key: Hashable) -> tuple[bool, object]:
        with self._lock:
            if key in self._kept:
                self._kept.move_to_end(key)
                return True, self._kept[key]
        return False, None

    def _keep(self, key: Hashable, made: T) -> T:
        weight = _weight(made)
        if weight > self.budget:
            return made
        with self._lock:
            self._weight += weight - _weight(self._kept.pop(key, None))
            self._kept[key] = made
            while len(self._kept) > self.size:
                self._weight -= _weight(self._kept.popitem(last=False)[1])
            while self._weight > self.budget:  # the least recently used text goes
                oldest = next(k for k, v in self._kept.items() if _weight(v))
                self._weight -= _weight(self._kept.pop(oldest))
        return made

    def clear(self) -> None:
        """Forget every result (the benchmarks time a first view this way)."""
        with self._lock:
            self._kept.clear()
            self._weight = 0


def _weight(value: object) -> int:
    return len(value) if isinstance(value, str | bytes) else 0
