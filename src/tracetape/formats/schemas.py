"""What every reader shares: the effects a record may carry, and the table that tells a
line's format from its fields (format sniffing, and naming the schema in mixed-schema errors).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._source import TraceFormat

__all__ = ["EFFECTS", "SNIFFERS", "fmt_of", "schema_of"]

EFFECTS = frozenset({"read", "write", "irreversible"})

# In order: the first format whose test a record passes is its format.
SNIFFERS: tuple[tuple[TraceFormat, str, Callable[[dict[str, Any]], bool]], ...] = (
    (
        TraceFormat.CASSETTE,
        "a tracetape cassette record",
        lambda o: "tracetape" in o or {"key", "kind", "out"} <= o.keys(),
    ),
    (TraceFormat.OTLP, "an OTLP/JSON document", lambda o: "resourceSpans" in o),
    (TraceFormat.JSONL, "a seed JSONL trace record", lambda o: "run_id" in o and "tool" in o),
    (
        TraceFormat.SPANS,
        "a span record",
        lambda o: (
            "span_id" in o and bool({"tool_call", "tool_result", "model_decision"} & o.keys())
        ),
    ),
)


def fmt_of(obj: Any) -> TraceFormat | None:
    """The format a record looks like, or None.

    >>> fmt_of({"run_id": "r", "tool": "ls"})
    <TraceFormat.JSONL: 'jsonl'>
    """
    if isinstance(obj, dict):
        for fmt, _, test in SNIFFERS:
            if test(obj):
                return fmt
    return None


def schema_of(obj: Any) -> str:
    """Name the schema a record looks like, for mixed-schema error messages."""
    if not isinstance(obj, dict):
        return f"a JSON {type(obj).__name__}"
    for _, name, test in SNIFFERS:
        if test(obj):
            return name
    return "an object with fields " + ", ".join(sorted(map(str, obj))[:8])
