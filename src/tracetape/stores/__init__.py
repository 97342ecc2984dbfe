"""Where a tape's records live: one small protocol, the file store as its default.

``Tape(path)`` records to and replays from a ``FileStore``; ``Tape(store)`` takes any object
with this protocol (a database store, an in-memory one in tests)::

    exists() -> bool                  is there a recording to replay?
    load() -> Cassette                its header and records (CassetteNotFoundError if none)
    begin(header)                     start a new recording
    append(record) -> int             write one record, durably; returns its sequence number
    commit(ended="completed")         make the new recording the one that replays; ``ended``
                                      says how it ended (``interrupted``, ``failed: Type``)
    abort()                           drop the new recording, keep the old one

``name`` names the store in messages (a file store: its path).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from ..formats.cassette import Cassette
from ..record import Record
from .file import FileStore

__all__ = ["FileStore", "RecordStore"]


@runtime_checkable
class RecordStore(Protocol):
    """What ``Tape`` needs of a store (see the module docstring)."""

    @property
    def name(self) -> str:
        """How messages name the store."""
        ...

    def exists(self) -> bool:
        """Whether a recording is there to replay."""
        ...

    def load(self) -> Cassette:
        """The recording's header and records."""
        ...

    def begin(self, header: Mapping[str, Any]) -> None:
        """Start a new recording with ``header``."""
        ...

    def append(self, record: Record) -> int:
        """Write one record durably; return its sequence number."""
        ...

    def commit(self, ended: str = "completed") -> None:
        """Make the new recording the one that replays; ``ended``: how it ended."""
        ...

    def abort(self) -> None:
        """Drop the new recording."""
        ...
