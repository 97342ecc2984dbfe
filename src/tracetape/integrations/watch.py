"""A ``Tape`` that remembers every ``ReplayMiss`` it raised, even one the program swallowed.

Agents often wrap a step in ``except Exception`` and carry on; a replay that diverged must still
fail. ``tracetape run`` and the pytest plugin use ``WatchedTape`` and check ``misses`` when the
run ends, so a caught miss still ends the run with its diagnosis.
"""

from __future__ import annotations

from typing import Any

from ..errors import ReplayMiss
from ..record import Decision
from ..tape import Tape

__all__ = ["WatchedTape"]


class WatchedTape(Tape):
    """A ``Tape`` whose ``misses`` lists every ``ReplayMiss`` it raised, in order.

    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "run.jsonl"
    >>> WatchedTape(path, mode="record").close()
    >>> tape = WatchedTape(path, mode="replay")
    >>> try:
    ...     tape.call("tool", {"name": "x"}, lambda: 1)
    ... except Exception:
    ...     pass
    >>> [m.kind for m in tape.misses]
    ['tool']
    """

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.misses: list[ReplayMiss] = []

    # ``_miss`` builds every ReplayMiss the tape raises, so watching it costs nothing per hit.
    def _miss(self, decision: Decision) -> ReplayMiss:
        miss = super()._miss(decision)
        self.misses.append(miss)
        return miss
