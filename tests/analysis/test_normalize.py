"""MemoNormalizer gives exactly what canonical.Normalizer gives, only faster."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.analysis.helpers import call, check, diff, patterns
from tests.suite import bounded
from tracetape.analysis.normalize import MemoNormalizer
from tracetape.canonical import Normalizer

_pieces = st.sampled_from(
    [
        "0b7e1b2c-6a1f-4c1e-9a51-8f0b8f9b2a11",
        "/tmp/tmpa1b2/out.txt",
        "2026-08-31T09:12:04Z",
        "-",
        "/var/folders/ab/cd/T/x",
        "x",
        "é",
        "gpt-4o-mini",
        "0B7E1B2C-6A1F",
        "2026-08-31 09:12:04",
        "٢٠٢٦-٠٨-٣١T٠٩:١٢:٠٤Z",
    ]
)
_text = st.lists(_pieces | st.text(max_size=5), max_size=4).map("".join)
_keys = st.sampled_from(
    [
        *("ts", "created_at", "span_id", "q", "path", "request_id", "n"),
        *("a-b", "x y", "it's", "é_at", "id", "url", "é", 'q"', "a*b", "axb", "x.y", "(n)"),
    ]
) | st.text(max_size=4)
_DUCK = duckdb.connect()
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_keys, inner, max_size=4),
    max_leaves=10,
)


@settings(max_examples=300, deadline=None)
@given(value=_json)
def test_memo_normalizer_equals_normalizer(value: Any) -> None:
    """For any JSON value, the memoized normalizer returns the core normalizer's result."""
    core = Normalizer()
    memo = MemoNormalizer(core)
    assert memo(value) == core(value)
    assert memo(value) == core(value)  # and again, from the memo


@settings(max_examples=100, deadline=None)
@given(value=_json)
def test_memo_normalizer_honours_custom_masks(value: Any) -> None:
    """With custom masks (which defeat the prefilter) the results still agree."""
    core = Normalizer(masks=((r"x+", "<x>"),))
    assert MemoNormalizer(core)(value) == core(value)


@bounded(deep=400, ci=100)
@given(
    value=_json,
    keys=st.sampled_from(
        [
            None,
            ("ts", "*_at", "x?z", "q"),
            ("a-b", "x y", "it's", "é*", ""),
            ("*",),
            ("**y", "*a*b", "*?"),
        ]
    ),
)
@example(value={"it's": 1, "n": 2}, keys=("a-b", "x y", "it's", "é*", ""))
@example(value={"éa": 1}, keys=("a-b", "x y", "it's", "é*", ""))
@example(value={"at": "٢٠٢٦-٠٨-٣١T٠٩:١٢:٠٤Z", "model": "gpt-4o-mini"}, keys=None)
@example(value=["x0B7E1B2C-6A1F-4C1E-9A51-8F0B8F9B2A11y"], keys=None)
def test_a_text_the_prefilter_passes_normalizes_to_itself(
    value: Any, keys: tuple[str, ...] | None
) -> None:
    """The engine skips normalizing an argument text its prefilter (a SQL test, run by
    DuckDB) passes, as orjson and as the engine's JSON reader write it: then normalizing
    changes nothing, whatever characters the volatile keys hold."""
    from tracetape.analysis.normalize import may_change

    core = Normalizer() if keys is None else Normalizer(volatile_keys=keys)
    if not all(_sql_test(may_change(core), value)):
        assert core(value) == value


@bounded(deep=400, ci=100)
@given(
    value=_json,
    keys=st.sampled_from(
        [
            ("path", "file", "url", "id"),
            ("a-b", "x y", "it's", "a*b", "x.y", "(n)"),
            ("é",),
            ('q"', "n"),
            (),
        ]
    ),
)
@example(value={"é": "x"}, keys=("é",))
@example(value={"it's": 3}, keys=("a-b", "x y", "it's", "a*b", "x.y", "(n)"))
@example(value={"a*b": "r"}, keys=("a-b", "x y", "it's", "a*b", "x.y", "(n)"))
def test_a_text_that_names_no_resource_key_has_no_resource(
    value: Any, keys: tuple[str, ...]
) -> None:
    """The engine looks for a resource only in an argument text its SQL test passes, as
    orjson and as the JSON writers write it (non-ASCII escaped or not): where the test
    fails, the value names no resource."""
    from tracetape.analysis.normalize import may_name, resource_finder

    if not all(_sql_test(may_name(keys), value)):
        assert resource_finder(keys)(value) is None


@bounded(deep=300, ci=75)
@given(
    value=_json,
    volatile=st.sampled_from([None, ("ts", "*_at", "x?z", "q"), ("a-b", "it's", "é*", "")]),
    keys=st.sampled_from([("path", "file", "url", "id"), ("a-b", "x y", "é", 'q"'), ()]),
)
def test_what_the_loop_does_to_a_text_is_told_in_one_pass(
    value: Any, volatile: tuple[str, ...] | None, keys: tuple[str, ...]
) -> None:
    """What the signing loop must do to a text (walk it, look for a resource) is told by one
    pass of both key patterns first: the same as testing each pattern."""
    from tracetape.analysis.normalize import DEEP, how_sql, may_change, may_name

    core = Normalizer() if volatile is None else Normalizer(volatile_keys=volatile)
    each = (
        f"CASE WHEN {may_change(core)} THEN 1 ELSE 0 END + CASE WHEN {DEEP} THEN 2 ELSE 0 END"
        f" + CASE WHEN {may_name(keys)} THEN 4 ELSE 0 END"
    )
    assert _sql_values(how_sql(core, keys), value) == _sql_values(each, value)


def _sql_test(test: str, value: Any) -> list[bool]:
    """A SQL test on the column ``args``: ``_sql_values``, as booleans."""
    return list(map(bool, _sql_values(test, value)))


def _sql_values(expression: str, value: Any) -> list[Any]:
    """A SQL expression over the column ``args``, run by DuckDB on ``value``'s JSON text as
    each writer writes it: the standard library (non-ASCII raw and escaped) and orjson."""
    import contextlib
    import json

    import orjson

    texts = [json.dumps(value, ensure_ascii=False), json.dumps(value)]
    with contextlib.suppress(TypeError):  # an int past 64 bits: orjson does not write it
        texts.append(orjson.dumps(value).decode())
    query = f"SELECT {expression} FROM (SELECT $1 AS args)"
    return [row[0] for text in texts if (row := _DUCK.execute(query, [text]).fetchone())]


UUID_1 = "0b7e1b2c-6a1f-4c1e-9a51-8f0b8f9b2a11"


UUID_2 = "4d3c2b1a-0f9e-4d8c-8b7a-6f5e4d3c2b1a"


def test_fresh_request_uuids_do_not_make_calls_differ(tmp_path: Path) -> None:
    """A request UUID or timestamp in args is normalized away (the seed's second comment)."""
    a = [call("A", 1, "s", {"q": "x", "request_id": UUID_1, "at": "2026-01-01T00:00:00Z"}, "o")]
    b = [call("B", 1, "s", {"q": "x", "request_id": UUID_2, "at": "2026-02-02T10:00:00Z"}, "o")]
    report = diff(tmp_path, a, b)
    assert report.findings == []
    assert report.aligned == 1


def test_a_uuid_inside_a_string_is_masked(tmp_path: Path) -> None:
    """A UUID inside an argument string is masked, so the calls count as repeats."""
    records = [call("A", 1, "get", {"url": f"/items/{u}"}, "o") for u in (UUID_1, UUID_2)]
    assert patterns(check(tmp_path, records)) == ["duplicate-call"]


def test_the_first_resource_key_names_the_resource(tmp_path: Path) -> None:
    """With several resource keys in args, the one listed first in resource_keys wins."""
    records = [
        call("A", 1, "get", {"id": 1, "path": "p"}, "v1", effect="read"),
        call("A", 2, "put", {"path": "p", "body": 2}, "ok", effect="write"),
        call("A", 3, "get", {"id": 1, "path": "p"}, "v2", effect="read"),
    ]
    drift = [f for f in check(tmp_path, records).findings if f.message.startswith("drift")]
    assert [(f.pattern, f.evidence["resource"]) for f in drift] == [("write-echo", "p")]
