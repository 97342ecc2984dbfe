"""The signatures: each distinct argument text signed on its normalized canonical text, in
batches; keys paired with their texts, hashes that collide told apart, resources carried whole
through SQL; texts no other can equal told alone by their shapes, families of shapes keyed by
DuckDB or Python alike."""

from __future__ import annotations

import json
import random
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest.mock import patch

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.analysis.helpers import call, check, families, told_to_sign, write_jsonl
from tests.suite import bounded
from tracetape.analysis import (
    AnalysisConfig,
    TraceError,
    check_trace,
    sign,
)
from tracetape.analysis.engine import Calls, Input
from tracetape.analysis.load import load


def test_resources_with_quotes_commas_and_newlines_stay_whole(tmp_path: Path) -> None:
    """A resource name that CSV would split is carried through whole: the echo of the run's
    own write to it is found, and its name is the evidence's."""
    name = 'a "quoted", comma\nand newline'
    records = [
        call("A", 1, "get", {"path": name}, "v1", effect="read"),
        call("A", 2, "put", {"path": name, "body": 2}, "ok", effect="write"),
        call("A", 3, "get", {"path": name}, "v2", effect="read"),
        call("A", 4, "get", {"path": ""}, "v1", effect="read"),
        call("A", 5, "get", {"path": ""}, "v3", effect="read"),
    ]
    report = check_trace(write_jsonl(tmp_path / "t.jsonl", records))
    drift = {f.evidence["resource"]: f.pattern for f in report.findings if "cause" in f.evidence}
    assert drift == {name: "write-echo", "": "external-drift"}


def test_resources_of_many_batches_stay_whole(tmp_path: Path) -> None:
    """More distinct argument texts than the signing loop holds at once (its keys and
    resources go to DuckDB in one file each, read in parallel): every signature keeps its
    resource, quotes, commas and newlines in it, and its own signature."""
    n = 70_000  # over one batch of the loop (65,536)
    names = [f'r"{i}",\n{"x" * (i % 7)}' for i in range(n)]
    records = [call("A", i + 1, "get", {"path": name}, "v") for i, name in enumerate(names)]
    with Calls(AnalysisConfig()) as calls:
        load(calls, [Input(write_jsonl(tmp_path / "t.jsonl", records))])
        sign.sign(calls, "1")
        calls.prepare("1")
        found = calls.rows("SELECT resource FROM sigs ORDER BY sid")
    assert [r for (r,) in found] == names


def _parquet(path: Path, texts: list[str], out: str) -> Path:
    """A Parquet export of one run of a call a step, a text each (``out``: SQL, its output)."""
    import duckdb

    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT unnest(?) AS args", [texts])
    con.execute(
        "COPY (SELECT rowid + 1 AS seq, rowid + 1 AS line, 'r' AS run, rowid + 1 AS step, "
        f"'tool' AS kind, 'get' AS name, args, {out} AS out, NULL::VARCHAR AS effect, "
        f"NULL::BIGINT AS tokens FROM t ORDER BY rowid) TO '{path}' (FORMAT parquet)"
    )
    return path


def test_keys_of_many_batches_pair_with_their_texts(tmp_path: Path) -> None:
    """The keys of the texts that need no walk come back one a line, in the order of the
    table, and are paired with their texts by position: over several batches, read on
    several threads, with texts orjson cannot read (400 digits) in batches past the first
    (such a batch is signed again, row by row). Each text in two key orders is one
    signature, its own."""
    n = 66_000  # two texts each: over two batches of the loop (65,536)
    huge = "1" * 400

    def value(i: int) -> str:
        return huge if i % 10_000 == 7 else str(i)

    texts = [
        t for i in range(n) for t in (f'{{"a":{value(i)},"b":0}}', f'{{"b":0,"a":{value(i)}}}')
    ]
    path = _parquet(tmp_path / "t.parquet", texts, "'o'")
    with Calls(AnalysisConfig()) as calls:
        load(calls, [Input(path)])
        calls.con.execute("SET threads = 4")
        sign.sign(calls, "1")
        calls.prepare("1")
        found = calls.rows("SELECT c.ord, s.args FROM calls c JOIN sigs s USING (sid)")
        lines_of = calls.lines(o for o, _ in found)
        (sigs,) = calls.one("SELECT count(*) FROM sigs")
    assert sigs == n - sum(i % 10_000 == 7 for i in range(n)) + 1  # the huge ones are one
    got = {lines_of[o]: json.loads(args)["a"] for o, args in found}
    assert got == {line: json.loads(value((line - 1) // 2)) for line in range(1, 2 * n + 1)}


def test_texts_whose_keys_hashes_collide_are_told_apart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A text whose key's hash no other shares is its own signature; texts that share one
    (the same value written twice, or a collision: here every few) are grouped by their
    keys. The report is the same as with few collisions."""
    records = [
        call(
            f"r{i % 7}",
            i,
            "t",
            {"k": i % 23, "x": i % 5} if i % 2 else {"x": i % 5, "k": i % 23},
            f"o{i % 3}",
        )
        for i in range(1, 400)
    ]
    path = write_jsonl(tmp_path / "t.jsonl", records)
    expected = check_trace(path).to_dict()
    monkeypatch.setattr(sign, "_KEY_HASH", "strlen(coalesce(key, args)) % 3")
    assert check_trace(path).to_dict() == expected
    assert expected["signatures"] == 23 * 5


def test_a_text_that_is_its_own_key_comes_back_as_a_mark(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A text written as its key is (sorted keys, minified) comes back from the loop as a
    mark, not copied: it is signed with a text of the same value in another key order."""
    blocks: list[bytes] = []
    write_block = sign._CsvFile.write_block

    def spy(self: Any, block: bytes) -> None:
        blocks.append(bytes(block))
        write_block(self, block)

    monkeypatch.setattr(sign._CsvFile, "write_block", spy)
    text = "x" * 100
    records = [call("r", 1, "t", {"a": 1, "b": text}, "o1")]
    records.append(call("r", 2, "t", {"b": text, "a": 1}, "o2"))
    report = check_trace(write_jsonl(tmp_path / "t.jsonl", records))
    assert sorted(b"".join(blocks).splitlines()) == sorted(
        [sign._OWN, b'{"a":1,"b":"%s"}' % text.encode()]
    )
    assert report.signatures == 1


def test_the_texts_signatures_are_a_view_with_the_few_kept_apart(tmp_path: Path) -> None:
    """Where no volatile key was dropped, ``dmap`` is a view of the distinct texts: only the
    texts that share a key with another (twins) or name a resource are kept apart."""
    records = [call("r", 1, "t", {"a": 1, "b": 2}, "o1"), call("r", 2, "t", {"b": 2, "a": 1}, "o2")]
    records += [call("r", 3, "t", {"path": "x"}, "o3"), call("r", 4, "t", {"c": 3}, "o4")]
    with Calls(AnalysisConfig()) as calls:
        load(calls, [Input(write_jsonl(tmp_path / "t.jsonl", records))])
        sign.sign(calls, "1")
        (kind,) = calls.one(
            "SELECT table_type FROM information_schema.tables WHERE table_name = 'dmap'"
        )
        apart = calls.rows("SELECT sid, resource FROM text_signatures ORDER BY first")
        signatures = calls.rows("SELECT sid, resource FROM dmap ORDER BY first")
    assert kind == "VIEW"
    assert [resource for _, resource in apart] == [None, None, "x"]
    assert [sid for sid, _ in signatures[:2]] == [signatures[0][0]] * 2
    assert len({sid for sid, _ in signatures}) == 3


def test_a_key_over_the_csv_readers_line_is_read_whole(tmp_path: Path) -> None:
    """Keys are read one a line by DuckDB's CSV reader, whose lines stop at 2 MB unless it is
    told the longest: a longer key has its lines measured, and is read whole (its value is
    written in two key orders too, so that its texts are keyed, not alone)."""
    records = [call("r", 1, "t", {"b": "x" * (3 << 20), "a": 1}, "o1"), call("r", 2, "t", {}, "o2")]
    records.append(call("r", 3, "t", {"a": 1, "b": "x" * (3 << 20)}, "o3"))
    with Calls(AnalysisConfig()) as calls:
        load(calls, [Input(write_jsonl(tmp_path / "t.jsonl", records))])
        sign.sign(calls, "1")
        calls.prepare("1")
        found = calls.rows("SELECT args FROM sigs ORDER BY sid")
    assert [json.loads(a) for (a,) in found] == [r["args"] for r in records[:2]]


# -- texts alone in their shape (Calls._to_sign) --------------------------------------------


# Every shape of the texts of calls0 (those DuckDB reads as JSON), as common shapes.
_EVERY_SHAPE = (
    "SELECT DISTINCT try(json_structure(args))::VARCHAR AS s FROM calls0 WHERE s NOT NULL"
)


@contextmanager
def _shapes(found: bool, matched: bool = True) -> Iterator[list[str | None]]:
    """Shapes found (or not) whatever a sample says, every text's shape matched by its
    pattern where it has one (``matched``, ``shapes.shape_columns``), else found by
    ``json_structure`` alone; yields what ``_to_sign`` returned."""

    def shaped(self: sign.Signer, sides: str, rows: int) -> list[str] | None:
        if not found or self.calls.verbatim:
            return None
        return [shape for (shape,) in self.calls.rows(_EVERY_SHAPE)] if matched else []

    with patch.object(sign.Signer, "_shaped", shaped), told_to_sign() as told:
        yield told


def _alone_and_keyed(path: Path) -> tuple[Any, Any]:
    """The outcome of check with texts told alone by their shapes (matched by patterns, and
    not), and with every text keyed; and that some were told alone."""
    outcomes = []
    for matched in (True, False):
        with _shapes(True, matched) as told:
            outcomes.append(_outcome(lambda: check_trace(path)))
        assert told and all(t is not None for t in told)
    assert outcomes[0] == outcomes[1]
    with _shapes(False) as told:
        keyed = _outcome(lambda: check_trace(path))
    assert not told
    return outcomes[0], keyed


def _outcome(run: Any) -> Any:
    try:
        return run().to_dict()
    except TraceError as exc:
        return (str(exc), exc.line, exc.field)


def _filled(path: Path, texts: list[str], outs: list[str]) -> Path:
    """A trace of ``texts`` (tool ``t``, one call a step) after 100 calls whose texts are
    alone (tool ``f``), so that shapes are worth finding."""
    lines = [
        f'{{"run_id":"r","step":{i + 1},"tool":"f","args":{{"i":{i}}},"output_sha":"f"}}'
        for i in range(100)
    ]
    lines += [
        f'{{"run_id":"r","step":{i + 101},"tool":"t","args":{text},"output_sha":"{out}"}}'
        for i, (text, out) in enumerate(zip(texts, outs, strict=True))
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize(
    "texts",
    [
        pytest.param(['{"a":1,"b":2}', '{"b":2,"a":1}'], id="key-order"),
        pytest.param(['{"o":{"a":1,"b":"x"},"p":0}', '{"o":{"b":"x","a":1},"p":0}'], id="nested"),
        pytest.param(['{"l":[{"a":1,"b":2}]}', '{"l":[{"b":2,"a":1}]}'], id="object-in-array"),
        pytest.param(['{"l":[0,{"a":1,"b":2}]}', '{"l":[0,{"b":2,"a":1}]}'], id="object-after"),
        pytest.param(
            ['{"l":[{"a":1,"b":2},{"b":2,"a":1}]}', '{"l":[{"a":1,"b":2},{"a":1,"b":2}]}'],
            id="objects-in-array",
        ),
        pytest.param(['{"a":1,"a":2}', '{"a":[],"a":2}'], id="key-twice"),
        pytest.param(['{"a":"x","a":"y"}', '{"a":"z","a":"y"}'], id="key-twice-same-type"),
        pytest.param(['{"n":' + "1" * 30 + "}", '{"n":' + "1" * 29 + "2}"], id="past-64-bits"),
        pytest.param(['{"n":18446744073709551616}', '{"n":1.8446744073709552e19}'], id="2**64"),
        pytest.param(['{"x":1e2}', '{"x":100.0}'], id="float"),
        pytest.param(['{"x":[1,"a"]}', '{"x":[1, "a"]}'], id="mixed-array"),
        pytest.param(['{"a":"x y","b":1}', '{"b":1,"a":"x y"}', '{"a":"x","b":1}'], id="spaces"),
        pytest.param(['{"k":"a\\u0062"}', '{"k":"ab"}'], id="escape"),
    ],
)
def test_texts_of_one_value_are_one_signature_whatever_their_shapes(
    tmp_path: Path, texts: list[str]
) -> None:
    """Texts of one value written in different ways (key orders, at any depth, in an array;
    a key twice; numbers past 64 bits or written as floats; an escape): one signature, as
    when every text is keyed; the other texts are alone."""
    path = _filled(tmp_path / "t.jsonl", texts, [f"o{i}" for i in range(len(texts))])
    alone, keyed = _alone_and_keyed(path)
    assert alone == keyed
    assert alone["signatures"] == 100 + 1 + (len(texts) == 3)


def _written(value: Any, rnd: random.Random, plain: bool = False) -> str:
    """``value`` as minified JSON text, each object's keys in a random order, some written
    twice (the first value is lost: JSON readers keep the last), strings with or without
    escapes; ``plain``: no key twice, no escape."""

    def text(scalar: Any) -> str:
        return json.dumps(scalar, ensure_ascii=not plain and rnd.random() < 0.5)

    if isinstance(value, dict):
        items = [f"{text(k)}:{_written(v, rnd, plain)}" for k, v in value.items()]
        rnd.shuffle(items)
        if value and not plain and rnd.random() < 0.2:
            items.insert(0, f"{json.dumps(rnd.choice(list(value)))}:{rnd.choice(['0', '[]'])}")
        return "{" + ",".join(items) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_written(v, rnd, plain) for v in value) + "]"
    return text(value)


_scalars = (
    st.none()
    | st.booleans()
    | st.integers(0, 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet='ab :,{}[]"é-', max_size=4)
)
_values = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(alphabet="abcA'é", max_size=2), inner, max_size=3)
    ),
    max_leaves=6,
)


@bounded(deep=40, ci=4)
@given(
    values=st.lists(st.dictionaries(st.text(alphabet="abcA'é", max_size=2), _values), min_size=1),
    picks=st.lists(st.tuples(st.integers(0, 9), st.integers(0, 2**16)), min_size=1, max_size=12),
)
def test_texts_alone_by_their_shape_are_signed_as_keyed_texts(
    values: list[dict[str, Any]], picks: list[tuple[int, int]]
) -> None:
    """Any values, each written in several ways (``_written``), among texts that are alone:
    the report of check is the one of every text keyed."""
    texts = [_written(values[i % len(values)], random.Random(seed)) for i, seed in picks]
    with tempfile.TemporaryDirectory() as tmp:
        path = _filled(Path(tmp) / "t.jsonl", texts, [f"o{seed % 3}" for _, seed in picks])
        alone, keyed = _alone_and_keyed(path)
    assert alone == keyed


@pytest.mark.parametrize(
    ("texts", "caps", "expected"),
    [
        pytest.param(['{"a":{"b":1},"c":2}', '{"a":{"c":1},"c":2}'], {}, (2, 0, False), id="keys"),
        pytest.param(['{"it\'s":1,"b":2}', '{"b":2,"it\'s":1}'], {}, (1, 1, False), id="quote"),
        pytest.param(['{"a":1,"A":2}', '{"A":2,"a":1}'], {}, (1, 0, True), id="case"),
        pytest.param(['{"":1,"b":2}', '{"b":2,"":1}'], {}, (1, 0, True), id="empty-key"),
        pytest.param(
            ['{"a":1,"b":2}', '{"b":2,"a":1}', '{"c":1,"d":[2]}', '{"d":[2],"c":1}'],
            {"_FAMILIES": 1},
            (2, 1, True),
            id="families-cap",
        ),
        pytest.param(
            ['{"a":1,"b":2}', '{"b":2,"a":1}'], {"_FAMILY_SHAPES": 1}, (1, 0, True), id="shapes-cap"
        ),
    ],
)
def test_families_of_shapes_are_keyed_by_duckdb_or_python(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    texts: list[str],
    caps: dict[str, int],
    expected: tuple[int, int, bool],
) -> None:
    """A class's shapes of other keys are alone; a family's texts (the same keys in other
    orders) are keyed by DuckDB, unless their keys are not a struct's (empty, the same but
    for case) or past the caps: then by Python, as before. ``expected``: the signatures of
    ``texts``, the families DuckDB keyed, whether Python keyed some texts."""
    for name, value in caps.items():
        monkeypatch.setattr(sign, name, value)
    path = _filled(tmp_path / "t.jsonl", texts, [f"o{i}" for i in range(len(texts))])
    with _shapes(True) as told, families() as keyed_in_duckdb:
        report = check_trace(path).to_dict()
    signatures, structures, python = expected
    assert keyed_in_duckdb == [structures]
    assert (told[0] == "dplain") == python
    with _shapes(False):
        assert check_trace(path).to_dict() == report
    assert report["signatures"] == 100 + signatures


def test_a_structure_duckdb_refuses_leaves_its_family_to_python(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Should DuckDB refuse a family's sorted shape as a structure (here keys the same but
    for case, let through), Python keys the family's texts: the same report."""
    sorted_shape = sign.sorted_shape
    monkeypatch.setattr(sign, "sorted_shape", lambda shape: (sorted_shape(shape)[0], True))
    texts = ['{"a":1,"A":2}', '{"A":2,"a":1}', '{"A":2,"a":3}']
    path = _filled(tmp_path / "t.jsonl", texts, ["o1", "o2", "o3"])
    with _shapes(True) as told, families() as keyed_in_duckdb:
        report = check_trace(path).to_dict()
    assert told == ["dplain"]
    assert keyed_in_duckdb == [0]
    assert report["signatures"] == 100 + 2


def test_a_family_among_texts_too_few_to_sign_in_duckdb_is_keyed_by_python(
    tmp_path: Path,
) -> None:
    """Where the texts DuckDB would sign are under an eighth of those Python keys anyway (of
    floats here), Python keys them all, a family's too."""
    floats = [f'{{"x":{i}.5}}' for i in range(1000)]
    texts = ['{"a":1,"b":2}', '{"b":2,"a":1}', *floats]
    path = _filled(tmp_path / "t.jsonl", texts[:2], ["o1", "o2"])
    with path.open("a") as out:
        out.writelines(
            f'{{"run_id":"r","step":{i + 200},"tool":"g","args":{text},"output_sha":"o"}}\n'
            for i, text in enumerate(floats)
        )
    with _shapes(True) as told:
        report = check_trace(path).to_dict()
    assert told == [None]
    assert report["signatures"] == 100 + 1 + 1000


_plain_strings = st.text(alphabet="ab ,{}[]:é日'/", max_size=4)
_plain_scalars = st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | _plain_strings
# Keys of structure characters, type names of a shape and the empty key: a family's sorted
# shape is a DuckDB structure, and a shape's value types are told apart from its keys.
_plain_keys = st.text(alphabet="abAB'é :,{[", min_size=1, max_size=2) | st.sampled_from(
    ["", "UBIGINT", "VARCHAR", "NULL", "JSON", "DOUBLE", "null", "-0"]
)
_plain_values = st.recursive(
    _plain_scalars,
    lambda inner: (
        st.lists(st.integers(-(2**63), 2**64 - 1), max_size=3)
        | st.lists(_plain_strings | st.none(), max_size=3)
        | st.lists(st.lists(st.integers(-9, 9) | st.booleans(), max_size=2), max_size=2)
        | st.dictionaries(_plain_keys, inner, max_size=3)
    ),
    max_leaves=8,
)


@bounded(deep=40, ci=4)
@given(
    values=st.lists(
        st.dictionaries(_plain_keys, _plain_values, min_size=2, max_size=4), min_size=1, max_size=3
    ),
    picks=st.lists(st.tuples(st.integers(0, 9), st.integers(0, 2**16)), min_size=1, max_size=12),
)
def test_texts_keyed_by_duckdb_are_signed_as_keyed_texts(
    values: list[dict[str, Any]], picks: list[tuple[int, int]]
) -> None:
    """Values written one way only but for their key orders (``_written``, ``plain``): the
    texts of a family of shapes (the same keys in other orders) are keyed by DuckDB, and the
    report of check is the one of every text keyed by Python. Keys that differ but for case,
    or are empty, leave the family to Python."""
    texts = [_written(values[i % len(values)], random.Random(seed), True) for i, seed in picks]
    with tempfile.TemporaryDirectory() as tmp:
        path = _filled(Path(tmp) / "t.jsonl", texts, [f"o{seed % 3}" for _, seed in picks])
        alone, keyed = _alone_and_keyed(path)
    assert alone == keyed


def _layout(layout: str, side: int, i: int) -> dict[str, Any]:
    if layout == "two orders" and side:
        return {"o": {"m": i % 3, "l": [i]}, "n": i, "q": f"x {i}"}
    if layout == "keys name values":
        return {f"q{i}": f"x {i}", "n": i}
    if layout == "floats":
        return {"q": f"x {i}", "n": i + 0.5}
    return {"q": f"x {i}", "n": i, "o": {"l": [i], "m": i % 3}}


@pytest.mark.parametrize("layout", ["one order", "two orders", "keys name values", "floats"])
def test_shapes_are_found_where_a_sample_finds_texts_to_sign_in_duckdb(
    tmp_path: Path, layout: str
) -> None:
    """Past ``_SHAPED_FROM`` calls, a sample of the texts tells whether shapes pay: where a
    trace writes each value in one key order, every text is alone; where it writes them in
    two (one file each, nested objects too), DuckDB keys every text, in one family; where its
    values are floats (written in more ways than one), or its keys name values (a shape a
    text, as costly to tell alone as to key), shapes do not pay, and Python keys every text.
    The report is the same either way."""
    n = sign._SHAPED_FROM // 2 + 1
    paths = [
        write_jsonl(
            tmp_path / f"{side}.jsonl",
            [call("r", i, "t", _layout(layout, side, i), f"o{i % 7}") for i in range(n)],
        )
        for side in range(2)
    ]
    with told_to_sign() as told, families() as keyed_in_duckdb:
        report = check_trace(paths).to_dict()
    assert (told == []) == (layout in ("floats", "keys name values"))
    assert all(t is not None and "LIMIT 0" in t for t in told)
    assert keyed_in_duckdb == ([1] if layout == "two orders" else [0] * len(told))
    with _shapes(False):
        assert check_trace(paths).to_dict() == report
    assert report["signatures"] == n


def test_texts_of_parquet_are_as_written_and_never_alone(tmp_path: Path) -> None:
    """A Parquet file's texts are as written (here with spaces and without): never told apart
    by their shapes, which see no spaces."""
    n = sign._SHAPED_FROM
    texts = [f'{{"i":{i}}}' for i in range(n)] + ['{"a": 1, "b": 2}', '{"a":1,"b":2}']
    path = _parquet(tmp_path / "t.parquet", texts, "'o' || rowid")
    assert check_trace(path).signatures == n + 1


@pytest.mark.parametrize(
    ("select", "match"),
    [
        pytest.param("'{not json'", r"\.parquet:1: field 'args': not JSON", id="args-not-json"),
        pytest.param(
            "'" + "[" * 300 + "]" * 300 + "'", r"field 'args': nested deeper", id="args-too-deep"
        ),
    ],
)
def test_bad_arguments_in_parquet_name_the_file_and_row(
    tmp_path: Path, select: str, match: str
) -> None:
    """A Parquet row whose args the reader would refuse: the file, row and field named."""
    import duckdb

    path = tmp_path / "bad.parquet"
    duckdb.connect().execute(
        "COPY (SELECT 1::BIGINT AS seq, 1::BIGINT AS line, 'r' AS run, 1::BIGINT AS step, "
        f"'tool' AS kind, 'x' AS name, {select} AS args, 'o' AS out, NULL::VARCHAR AS effect, "
        f"NULL::BIGINT AS tokens) TO '{path}' (FORMAT parquet)"
    )
    with pytest.raises(TraceError, match=match):
        check_trace(path)


def test_a_bad_argument_past_a_batch_names_its_row(tmp_path: Path) -> None:
    """Texts past the first batch of the signing loop: the bad one is named by its row (the
    batch it is in is signed again with the ids of its texts)."""
    import duckdb

    path = tmp_path / "bad.parquet"
    duckdb.connect().execute(
        "COPY (SELECT i AS seq, i AS line, 'r' AS run, i AS step, 'tool' AS kind, 'x' AS name, "
        "CASE WHEN i = 70000 THEN '{not json' ELSE '{\"i\":' || i || '}' END AS args, 'o' AS out, "
        "NULL::VARCHAR AS effect, NULL::BIGINT AS tokens FROM range(1, 70002) t(i)) "
        f"TO '{path}' (FORMAT parquet)"
    )
    with pytest.raises(TraceError, match=r"\.parquet:70000: field 'args': not JSON"):
        check_trace(path)


@pytest.mark.parametrize("first_bad", ["not-json", "too-deep"])
def test_of_many_bad_arguments_the_first_in_the_input_is_named(
    tmp_path: Path, first_bad: str
) -> None:
    """Distinct argument texts are signed in no particular order: whichever comes up first,
    the error names the first bad row of the input."""
    import duckdb

    deep, broken = "[" * 300 + "]" * 300, "{not json"
    early, late = (broken, deep) if first_bad == "not-json" else (deep, broken)
    path = tmp_path / "bad.parquet"
    duckdb.connect().execute(
        "COPY (SELECT i AS seq, i AS line, 'r' || (i // 50) AS run, i AS step, 'tool' AS kind, "
        "'x' AS name, CASE i WHEN 1234 THEN $1 WHEN 3000 THEN $2 WHEN 3001 THEN $1 "
        "ELSE json_object('k', i)::VARCHAR END AS args, 'o' AS out, NULL::VARCHAR AS effect, "
        f"NULL::BIGINT AS tokens FROM range(1, 5001) t(i)) TO '{path}' (FORMAT parquet)",
        [early, late],
    )
    what = "not JSON" if first_bad == "not-json" else "nested deeper"
    for _ in range(3):
        with pytest.raises(TraceError, match=rf"bad\.parquet:1234: field 'args': {what}"):
            check_trace(path)


def test_many_runs_of_the_same_calls_share_their_signatures(tmp_path: Path) -> None:
    """Many short runs of the same calls (a fresh request id each) make three signatures;
    every run is whole and every repeat is counted."""
    records = [
        call(
            f"run_{r}", i, "s", {"q": i % 3, "request_id": f"{r:08d}-0000-4000-8000-{i:012d}"}, "o"
        )
        for r in range(500)
        for i in range(1, 7)
    ]
    report = check(tmp_path, records)
    assert report.signatures == 3
    assert report.runs == 500
    assert report.counts["duplicate-call"] == 3 * 500
