"""The one event model every trace reader yields, and the error a bad trace raises.

An :class:`Event` is one decision of one run: a tool call or a model request. Readers turn
each supported format (tracetape cassettes, the seed's JSONL traces, span traces, OTLP/JSON)
into events, so the findings never look at a format again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from .._enums import LoudEnum
from ..errors import CassetteError

__all__ = ["CallBatch", "Event", "RawCall", "TraceError", "TraceFormat"]


class TraceFormat(LoudEnum):
    """The trace formats the readers understand (``auto`` sniffs the file)."""

    AUTO = "auto"
    CASSETTE = "cassette"
    JSONL = "jsonl"
    SPANS = "spans"
    OTLP = "otlp"

    @classmethod
    def label(cls) -> str:
        """Named "trace format" in errors."""
        return "trace format"


class TraceError(CassetteError):
    """Raised when a trace file is missing, empty, malformed or holds mixed schemas.

    ``.path`` and ``.line`` locate the fault; ``.field`` names the record field at fault.
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | Path | None = None,
        line: int | None = None,
        field: str | None = None,
    ):
        self.field = field
        super().__init__(message, path=path, line=line)


class Event(NamedTuple):
    """One decision of one run, whatever file it came from.

    ``seq`` is the record's position in its source (its line, or its record number), ``step``
    the agent step it belongs to, ``kind`` ``"tool"`` or ``"llm"`` (or a cassette's own kind),
    ``name`` the tool or model, ``args`` the call's arguments as plain JSON data, ``out`` the
    output fingerprint, ``effect`` ``"read"``/``"write"``/``"irreversible"`` when the trace
    says so, and ``line`` the 1-based file line (for messages).

    >>> Event("run_1", 1, 1, "tool", "search", {"q": "x"}, "a1b2c3").name
    'search'
    """

    run: str
    seq: int
    step: int | None
    kind: str
    name: str
    args: Any
    out: str | None
    effect: str | None = None
    tokens: int | None = None
    ms: float | None = None
    ts: str | None = None
    span_id: str | None = None
    parent_id: str | None = None
    line: int = 0


class RawCall(Protocol):
    """A tool call decoded only as far as the findings need: ``args`` is still raw JSON.

    The seed-JSONL block reader yields these instead of :class:`Event` s: most lines of a
    trace repeat a few thousand distinct calls, so the packer keys its work on the raw bytes
    of ``args`` and decodes them only the first time it sees them.
    """

    @property
    def run(self) -> str: ...
    @property
    def step(self) -> int: ...
    @property
    def name(self) -> str: ...
    @property
    def args(self) -> Any: ...  # a bytes-like object holding the JSON text of the arguments
    @property
    def out(self) -> str: ...
    @property
    def effect(self) -> str | None: ...
    @property
    def tokens(self) -> int | None: ...


class CallBatch(NamedTuple):
    """Consecutive lines of one file as :class:`RawCall` s: ``calls[i]`` is on ``line + i``.

    ``bad(message, line)`` reports a line whose ``args`` turn out not to be valid JSON (it
    raises a ``TraceError``, or counts the line under ``skip_bad_lines``).
    """

    line: int
    calls: Sequence[RawCall]
    bad: Callable[[str, int], None]
