"""Shapes: a text matched by a common shape's pattern has the shape ``json_structure`` gives it,
for texts as Python and as DuckDB write them; plain texts match their shape's pattern, others
do not."""

from __future__ import annotations

import json
from typing import Any

import duckdb
from hypothesis import given
from hypothesis import strategies as st

from tests.suite import bounded
from tracetape.analysis import (
    shapes,
)

# Values near what a shape's pattern matches: integers at the edges of 64 bits and of the
# patterns' digits, floats, strings of quotes, escapes and control characters, keys of
# pattern syntax.
_edges = [2**63 - 1, 2**63, 2**64 - 1, 2**64, 10**17, 10**18 - 1, 10**18, 10**19 - 1, 10**19]


_edge_integers = st.sampled_from([0, 1, *_edges, *(-n for n in _edges), -(2**63) - 1])


_edge_scalars = (
    st.none()
    | st.booleans()
    | _edge_integers
    | st.integers(-(2**66), 2**66)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet='a"\\\x00\x1f\x7fé日\u2028 ', max_size=3)
)


_edge_keys = st.text(alphabet='a.*+?()[]{}|^$\\"é\x01 ', max_size=2)


_edge_values = st.recursive(
    _edge_scalars,
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(_edge_keys, inner, max_size=3),
    max_leaves=6,
)


@bounded(deep=60, ci=15)
@given(values=st.lists(st.dictionaries(_edge_keys, _edge_values, max_size=3), max_size=6))
def test_a_text_matched_by_a_shapes_pattern_has_that_shape(values: list[dict[str, Any]]) -> None:
    """A text is given a common shape where it fully matches the shape's pattern
    (``shapes.shape_pattern``): then ``json_structure`` gives it that shape, for texts as
    Python writes them (escapes or not) and as DuckDB writes them again."""
    texts = [
        json.dumps(v, separators=(",", ":"), ensure_ascii=i % 2 == 0) for i, v in enumerate(values)
    ]
    con = duckdb.connect()
    texts += [
        t
        for (t,) in con.execute("SELECT json_extract(unnest($1), '$')::VARCHAR", [texts]).fetchall()
    ]
    structures = {
        t: con.execute("SELECT json_structure(?)::VARCHAR", [t]).fetchone()[0] for t in texts
    }
    for shape in set(structures.values()):
        found = shapes.shape_pattern(shape)
        if found is None:
            continue
        pattern, keys = found
        for text in texts:
            (matched,) = con.execute("SELECT regexp_full_match(?, ?)", [text, pattern]).fetchone()
            if matched:
                assert structures[text] == shape, (text, shape)
                assert keys == text.count('":')


def test_plain_texts_match_the_pattern_of_their_shape() -> None:
    """Texts of plain values (strings with no escape, integers of 64 bits, booleans, null, in
    objects) match the pattern of their shape, and a text of other keys, key order or types
    does not."""
    shape = (
        '{"q":"VARCHAR","n":"UBIGINT","m":"BIGINT","o":{"b":"BOOLEAN","z":"NULL"},"é.*":"VARCHAR"}'
    )
    found = shapes.shape_pattern(shape)
    assert found is not None
    pattern, keys = found
    assert keys == 7
    con = duckdb.connect()
    matches = [
        '{"q":"x \'日","n":9999999999999999999,"m":-5,"o":{"b":true,"z":null},"é.*":""}',
        '{"q":"","n":0,"m":-99999999999999999,"o":{"b":false,"z":null},"é.*":"{}"}',
    ]
    others = [
        '{"n":1,"q":"x","m":-5,"o":{"b":true,"z":null},"é.*":""}',  # another key order
        '{"q":"x","n":1,"m":5,"o":{"b":true,"z":null},"é.*":""}',  # 5 is UBIGINT
        '{"q":"x","n":1,"m":-5,"o":{"b":true,"z":null},"éa*":""}',  # a key of pattern syntax
        '{"q":"x","n":1.5,"m":-5,"o":{"b":true,"z":null},"é.*":""}',  # a float
        '{"q":"x\\"","n":1,"m":-5,"o":{"b":true,"z":null},"é.*":""}',  # an escape
        '{"q":"x","n":1,"m":-5,"o":{"b":true,"z":null},"é.*":"","a":1}',  # one key more
    ]
    for text in matches + others:
        (matched,) = con.execute("SELECT regexp_full_match(?, ?)", [text, pattern]).fetchone()
        assert matched == (text in matches), text
    for text in matches:
        assert con.execute("SELECT json_structure(?)::VARCHAR", [text]).fetchone()[0] == shape
    assert shapes.shape_pattern('{"a":["UBIGINT"]}') is None
    assert shapes.shape_pattern('{"a":"DOUBLE"}') is None
    assert shapes.shape_pattern('"JSON"') is None
