"""What every reader shares: effects checked by type, refused values named by their JSON type
(never echoed), the sniffers' order, keyed records and the depth a record may reach."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tracetape import Tape, read_cassette
from tracetape.formats import TraceFormat
from tracetape.formats.schemas import (
    MAX_DEPTH,
    SNIFFERS,
    fmt_of,
    is_effect,
    json_type,
    keyed,
    not_an_effect,
    readable,
    schema_of,
)


@pytest.mark.parametrize(
    ("value", "effect"),
    [
        pytest.param("read", True, id="read"),
        pytest.param("irreversible", True, id="irreversible"),
        pytest.param("READ", False, id="case"),
        pytest.param(["write"], False, id="list"),
        pytest.param({"write": 1}, False, id="object"),
        pytest.param(None, False, id="null"),
    ],
)
def test_an_effect_is_one_of_the_three_strings(value: object, effect: bool) -> None:
    """Only the exact strings are effects; a list or an object is not, and no error."""
    assert is_effect(value) is effect


def test_a_refused_effect_is_named_by_its_type_never_its_value() -> None:
    """The message lists the valid effects and the refused value's type and length."""
    said = not_an_effect("sk-proj-Zz9Yy8Xx7Ww6Vv5Uu4Tt3")
    assert said == "must be one of 'read', 'write', 'irreversible', found a string of 29 characters"


@pytest.mark.parametrize(
    ("value", "named"),
    [
        (True, "a boolean"),
        (1.5, "a number"),
        ([1], "a list"),
        ("", "a string of 0 characters"),
        (b"x", "bytes"),
    ],
)
def test_a_value_is_named_by_its_json_type(value: object, named: str) -> None:
    """A boolean is not an integer; anything else not JSON is named by its Python type."""
    assert json_type(value) == named


@pytest.mark.parametrize(
    ("line", "fmt", "schema"),
    [
        pytest.param(
            {"tracetape": 2}, TraceFormat.CASSETTE, "a tracetape cassette record", id="header"
        ),
        pytest.param(
            {"key": "k", "kind": "tool", "out": 1, "run_id": "r", "tool": "t"},
            TraceFormat.CASSETTE,
            "a tracetape cassette record",
            id="cassette-before-jsonl",
        ),
        pytest.param({"resourceSpans": []}, TraceFormat.OTLP, "an OTLP/JSON document", id="otlp"),
        pytest.param(
            {"run_id": "r", "tool": "t", "span_id": "s", "tool_call": {}},
            TraceFormat.JSONL,
            "a seed JSONL trace record",
            id="jsonl-before-spans",
        ),
        pytest.param(
            {"span_id": "s", "tool_result": {}}, TraceFormat.SPANS, "a span record", id="span"
        ),
        pytest.param({"span_id": "s"}, None, "an object with fields span_id", id="span-id-alone"),
        pytest.param([1], None, "a JSON list", id="list"),
    ],
)
def test_a_line_is_of_the_first_format_it_looks_like(
    line: Any, fmt: TraceFormat | None, schema: str
) -> None:
    """The sniffers are tried in order; a line none accepts has no format, and its schema
    names its fields."""
    assert fmt_of(line) == fmt
    assert schema_of(line) == schema


def test_every_format_has_a_sniffer() -> None:
    """Each format a file can be in is told by one sniffer (``auto`` is none)."""
    assert sorted(fmt for fmt, _, _ in SNIFFERS) == sorted(
        f for f in TraceFormat if f is not TraceFormat.AUTO
    )


def test_an_unnamed_object_lists_eight_of_its_fields_sorted() -> None:
    """A line of no known schema is named by its first eight field names, sorted."""
    line = {f"f{i}": i for i in range(10, 0, -1)}
    assert schema_of(line) == "an object with fields " + ", ".join(sorted(map(str, line))[:8])


def test_a_keyed_record_has_the_key_the_tape_records(tmp_path: Path) -> None:
    """A tool call read from a trace is keyed as ``Tape.call`` keys the same call."""
    payload = {"name": "search", "args": {"q": "x", "n": [1, 2.5]}, "step": 3}
    with Tape(tmp_path / "c.jsonl", mode="record") as tape:
        tape.call("tool", payload, lambda: "ok")
    (recorded,) = read_cassette(tmp_path / "c.jsonl").records
    rec = keyed("tool", payload, name="search", run="r")
    assert (rec.key, rec.step, rec.input, rec.name, rec.run) == (
        recorded.key,
        3,
        payload,
        "search",
        "r",
    )


def _nested(depth: int) -> Any:
    value: Any = 0
    for level in range(depth):
        value = [value] if level % 2 else {"k": value}
    return value


@given(st.integers(0, MAX_DEPTH + 5))
def test_a_value_is_readable_down_to_the_depth_limit(depth: int) -> None:
    """Lists and objects nested up to ``MAX_DEPTH`` levels are readable, deeper ones not;
    strings that hold brackets are no levels."""
    assert readable(_nested(depth)) is (depth <= MAX_DEPTH)
    assert readable({"q": "[{" * (2 * MAX_DEPTH)})


def _depth(value: Any) -> int:
    """The deepest level a value of ``value`` sits at (the reference: recursive)."""
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=-1)
    return 0


_trees = st.recursive(
    st.none() | st.integers() | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=2), inner),
    max_leaves=12,
)


@given(_trees, st.integers(MAX_DEPTH - 3, MAX_DEPTH + 2), st.data())
def test_readable_is_the_depth_of_the_deepest_value(tree: Any, depth: int, data: Any) -> None:
    """Beside values of every depth, a chain of ``depth`` levels is readable exactly when the
    deepest value of the whole is within ``MAX_DEPTH`` (an empty list or object is a value)."""
    chain = _nested(depth) if data.draw(st.booleans()) else _nested(depth - 1) or []
    value = [tree, {"deep": chain}, tree] if data.draw(st.booleans()) else [chain, tree]
    assert readable(value) is (_depth(value) <= MAX_DEPTH)
