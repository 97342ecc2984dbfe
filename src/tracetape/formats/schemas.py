"""What every reader shares: the effects a record may carry, and the table that tells a
line's format from its fields (format sniffing, and naming the schema in mixed-schema errors).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .._enums import EFFECT_NAMES, EFFECTS
from ..canonical import canonical_json, key_of
from ..record import INT64_MAX, Record
from ._source import TraceFormat

__all__ = [
    "EFFECTS",
    "INT64",
    "MAX_DEPTH",
    "SNIFFERS",
    "TOO_DEEP",
    "deep_sql",
    "fmt_of",
    "is_effect",
    "json_type",
    "keyed",
    "not_an_effect",
    "readable",
    "schema_of",
]


def is_effect(value: object) -> bool:
    """Whether a field's value is one of ``EFFECTS`` (a list or an object is not: no error)."""
    return type(value) is str and value in EFFECTS


def not_an_effect(value: object) -> str:
    """What a reader says of an effect field whose value is not one of ``EFFECTS`` (its type
    or length, never the value: a refused value may be a secret)."""
    return f"must be one of {EFFECT_NAMES}, found {json_type(value)}"


def json_type(value: object) -> str:
    """What a reader names a refused value by: its JSON type (and a string's length), never
    the value itself, which may be a secret.

    >>> json_type("sk-proj-abc"), json_type(7), json_type({"id": 1}), json_type(None)
    ('a string of 11 characters', 'an integer', 'an object', 'null')
    """
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return f"a string of {len(value)} characters"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


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


def keyed(kind: str, data: dict[str, Any], **fields: Any) -> Record:
    """A record read from a trace, its input ``data`` keyed as the tape keys one (a tool call's
    is ``{"name", "args", "step"}``); ``fields`` are the record's other fields.

    >>> keyed("tool", {"name": "search", "args": {"q": "x"}, "step": 1}, name="search").key
    'tool:7d66ff5c9b68eeda'
    """
    key = key_of(kind, canonical_json(data))
    return Record(kind=kind, key=key, step=data.get("step"), input=data, **fields)


MAX_DEPTH = 200  # levels of nesting the analysis walks (recursively) in a record
# The range of a step or a token count: 64-bit integers, as the analysis engine and the stores
# hold them (orjson reads up to 2**64 - 1).
INT64 = (-INT64_MAX - 1, INT64_MAX)
TOO_DEEP = (
    f"nested deeper than the {MAX_DEPTH} levels of lists or objects tracetape reads; flatten it"
)


def deep_sql(text: str) -> str:
    """SQL: whether the JSON text ``text`` (a SQL expression) may be nested deeper than
    ``MAX_DEPTH``: it holds more brackets than that (``readable`` then tells)."""
    return (
        f"(strlen({text}) > {MAX_DEPTH} AND "
        f"strlen({text}) - strlen(replace(replace({text}, '[', ''), '{{', '')) > {MAX_DEPTH})"
    )


def readable(value: Any) -> bool:
    """Whether ``value`` is nested shallowly enough for the recursive walks of the analysis
    (digests, normalization): at most ``MAX_DEPTH`` levels, checked without recursion."""
    level, depth = [value], 0  # every value at ``depth``: a level at a time, no pair a value
    while level:
        if depth > MAX_DEPTH:
            return False
        inner: list[Any] = []
        for item in level:
            kind = type(item)
            if kind is dict:
                inner.extend(item.values())
            elif kind is list:
                inner.extend(item)
        level, depth = inner, depth + 1
    return True
