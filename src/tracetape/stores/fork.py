"""``ForkStore``: the store of a fork, its branch written from the fork point on.

``Tape(path, mode="fork")`` replays ``path`` (the parent) while the run matches it and goes
live at its first decision that does not, or at step ``fork_at`` (``due``). Its store is a
``ForkStore`` over the branch file: until the fork point it keeps the records replay played
(``played``); ``go_live`` writes the branch's header (naming its parent, the parent's final
chain digest and run id, and the fork point), then those records, and the live rest is
appended after them. The branch is a cassette of its own, ``NAME.fork-N.jsonl`` beside the
parent by default, under a run id of its own; the parent never changes.

    >>> import tempfile
    >>> parent = Path(tempfile.mkdtemp()) / "run.jsonl"
    >>> ForkStore(parent, fork_at=3).name.endswith("run.fork-3.jsonl")
    True
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..formats.cassette import MAX_RECORD_BYTES, Cassette, final_chain, new_run_id
from ..record import Record
from .file import FileStore

__all__ = ["ForkStore", "branch_path"]


def branch_path(parent: Path, fork_at: int | None) -> Path:
    """Where a fork of ``parent`` goes by default: named for its fork point,
    ``NAME.fork-3.jsonl`` for step 3 (``NAME.fork-miss.jsonl`` at the first miss), then
    ``NAME.fork-3-2.jsonl``... while taken.

    >>> parent = Path("/nowhere/run.jsonl")
    >>> branch_path(parent, 3).name, branch_path(parent, None).name
    ('run.fork-3.jsonl', 'run.fork-miss.jsonl')
    """
    name = f"{parent.name.removesuffix('.jsonl')}.fork-{'miss' if fork_at is None else fork_at}"
    found, n = parent.with_name(f"{name}.jsonl"), 1
    while found.exists():
        n += 1
        found = parent.with_name(f"{name}-{n}.jsonl")
    return found


class ForkStore:
    """A ``RecordStore`` over the ``branch`` of a fork of ``parent`` (see the module docstring).

    ``fork_at`` is the step the fork goes live at even where the run matches (None: at its
    first miss); ``point`` is the fork point once it went live (its sequence number, step,
    kind, key and reason), None before.
    """

    def __init__(
        self,
        parent: str | os.PathLike[str],
        fork_at: int | None = None,
        branch: str | os.PathLike[str] | None = None,
        max_record_bytes: int = MAX_RECORD_BYTES,
    ):
        self.parent = Path(parent)
        self.branch = Path(branch) if branch is not None else branch_path(self.parent, fork_at)
        if self.branch.resolve() == self.parent.resolve():
            raise ValueError("the branch of a fork must not be its parent cassette")
        self.fork_at = fork_at
        self.point: dict[str, Any] | None = None
        self._inner = FileStore(self.branch, max_record_bytes)
        self._prefix: list[Record] = []
        self._lock = threading.Lock()

    def due(self, step: int | None) -> bool:
        """Whether the decision of ``step`` goes live even where it matches (``fork_at``)."""
        return self.fork_at is not None and step is not None and step >= self.fork_at

    def played(self, record: Record) -> None:
        """Keep a record replay played: the branch starts with them."""
        with self._lock:
            self._prefix.append(record)

    def go_live(
        self,
        header: Callable[..., dict[str, Any]],
        parent_header: Mapping[str, Any] | None,
        run_id: str | None,
        *,
        kind: str = "",
        key: str = "",
        step: int | None = None,
        reason: str = "",
    ) -> int | None:
        """Begin the branch at the fork point (the decision ``kind``/``key`` of ``step``, for
        ``reason``; default: ``fork_at``, else the first miss): its header, from
        ``header(run_id, parent=..., fork=...)`` (``run_id`` default: the branch's own), then
        the records played so far. Returns the sequence number of the last one written (0:
        none), or None when the fork went live before."""
        with self._lock:
            if self.point is not None:
                return None
            at = reason or (f"fork_at {self.fork_at}" if self.due(step) else "first miss")
            self.point = {
                "seq": len(self._prefix) + 1,
                "step": step,
                "kind": kind or None,
                "key": key or None,
                "reason": at,
            }
            parent = {"path": str(self.parent), "chain": final_chain(self.parent)}
            if parent_header and isinstance(parent_header.get("run_id"), str):
                parent["run_id"] = parent_header["run_id"]
            # the branch's own name (``NAME.fork-3``), not its parent's stem
            run_id = run_id or new_run_id(self.branch.name.removesuffix(".jsonl"))
            self._inner.begin(header(run_id, parent=parent, fork=self.point))
            written = 0
            for rec in self._prefix:
                written = self._inner.append(rec)
            return written

    # -- the RecordStore protocol: the branch file -----------------------------------------

    @property
    def name(self) -> str:
        """The branch file's path, as messages name it."""
        return self._inner.name

    def exists(self) -> bool:
        """Whether the branch file holds a recording."""
        return self._inner.exists()

    def load(self) -> Cassette:
        """The branch's recording."""
        return self._inner.load()

    def begin(self, header: Mapping[str, Any]) -> None:
        """Start the branch with ``header`` (``go_live`` does, at the fork point)."""
        self._inner.begin(header)

    def append(self, record: Record) -> int:
        """Write one record to the branch; returns its sequence number."""
        return self._inner.append(record)

    def commit(self, ended: str = "completed") -> None:
        """Seal the branch with how it ``ended`` and move it into place."""
        self._inner.commit(ended)

    def abort(self) -> None:
        """Drop the branch."""
        self._inner.abort()

    def __repr__(self) -> str:
        return f"ForkStore({str(self.parent)!r}, branch={self.name!r})"
