"""The engine: bounded memory, Parquet in and out, temporary files, and the values it carries
through SQL (resources with quotes, commas and newlines)."""

from __future__ import annotations

import json
import random
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest.mock import patch

import duckdb
import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from tests.suite import bounded
from tracetape.analysis import (
    AnalysisConfig,
    TraceError,
    check_trace,
    diff_traces,
    engine,
    shapes,
    sign,
)
from tracetape.analysis import load as loader
from tracetape.analysis.api import export_parquet
from tracetape.analysis.engine import ORD, Calls, Input
from tracetape.analysis.load import load
from tracetape.cli import main
from tracetape.errors import ConfigError

from .helpers import SEED_A, SEED_B, call, families, told_to_sign, write_jsonl


def _many(tmp_path: Path, n: int = 20_000) -> Path:
    records = [
        call(f"r{i // 40}", 1 + i % 40 // 3, "t", {"k": i % 97, "x": "y" * (i % 5)}, f"o{i % 89}")
        for i in range(n)
    ]
    return write_jsonl(tmp_path / "many.jsonl", records)


def _report(path: Path, **config: Any) -> dict[str, Any]:
    data = check_trace(path, config=AnalysisConfig(**config)).to_dict()
    data.pop("inputs")
    return data


@pytest.mark.parametrize("runs", [1, 2])
@pytest.mark.parametrize("hashed", ["text_hash", "run_hash"])
def test_calls_of_texts_or_runs_that_share_a_hash_are_joined_by_name_and_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, runs: int, hashed: str
) -> None:
    """Calls join their texts and runs by the texts' and runs' hashes; where two share one
    (every text, or run, here: a hash of one bit), calls is built again, joined by the text
    and the run's name: the same report, of runs whose steps go back (a window) or not."""
    path = _many(tmp_path, 2_000)
    if runs == 2:
        path.write_text(path.read_text() + path.read_text().replace('"step":1,', '"step":99,'))
    rebuilt: list[bool] = []
    one = Calls.one

    def spy(self: Calls, query: str, params: Any = ()) -> tuple[Any, ...]:
        row = one(self, query, params)
        if "sum(calls) FROM runs" in query:
            rebuilt.append(row[0])
        return row

    with patch.object(Calls, "one", spy):
        report = _report(path)
        to_hash = getattr(engine, hashed)
        for module in (engine, sign):  # signing hashes the texts, prepare joins by the hash
            if hasattr(module, hashed):
                monkeypatch.setattr(module, hashed, lambda *column: f"{to_hash(*column)} % 2")
        assert _report(path) == report
    assert rebuilt == [False, True]


def test_the_memory_limit_is_the_engines_and_a_tight_one_gives_the_same_report(
    tmp_path: Path,
) -> None:
    """memory_limit is set on the engine; under a tight one the report does not change."""
    with Calls(AnalysisConfig(memory_limit="200MB")) as calls:
        (limit,) = calls.one("SELECT current_setting('memory_limit')")
    assert limit.startswith(("190", "200"))  # DuckDB shows MiB
    path = _many(tmp_path)
    assert _report(path, memory_limit="96MB") == _report(path)


def test_a_limit_below_what_the_engine_needs_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Too little memory: a ConfigError saying what to raise, exit 2 from the CLI."""
    path = _many(tmp_path)
    with pytest.raises(ConfigError, match=r"raise memory_limit in \[tool.tracetape.analysis\]"):
        check_trace(path, config=AnalysisConfig(memory_limit="16MB"))
    (tmp_path / "pyproject.toml").write_text('[tool.tracetape.analysis]\nmemory_limit = "16MB"\n')
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["check", str(path)])
    assert result.exit_code == 2
    assert result.output.startswith("tracetape: error: the analysis needs more memory")


def test_parquet_export_reads_back_as_the_traces(tmp_path: Path) -> None:
    """export --parquet of two traces, read back: the same report as the traces; a run spread
    over the two files stays one run, and diff takes Parquet on either side."""
    a = write_jsonl(tmp_path / "a.jsonl", SEED_A)
    b = write_jsonl(tmp_path / "b.jsonl", SEED_B)
    out = tmp_path / "both.parquet"
    assert export_parquet([a, b], out) == len(SEED_A) + len(SEED_B)
    from_traces = check_trace([a, b]).to_dict()
    from_parquet = check_trace(out).to_dict()
    assert from_parquet.pop("inputs") == [str(out)]
    from_traces.pop("inputs")
    assert from_parquet == from_traces
    result = CliRunner().invoke(main, ["export", "--parquet", str(a), "-o", str(tmp_path / "a.pq")])
    assert result.exit_code == 0, result.output
    assert result.output == f"wrote {len(SEED_A)} call(s) to {tmp_path / 'a.pq'}\n"
    assert (
        diff_traces(tmp_path / "a.pq", b).to_dict()["findings"]
        == (diff_traces(a, b).to_dict()["findings"])
    )
    assert CliRunner().invoke(main, ["export", "--parquet", str(a)]).exit_code == 2  # no -o


def test_a_parquet_file_of_another_shape_is_refused(tmp_path: Path) -> None:
    """Parquet not written by export --parquet: an error naming the missing columns."""
    import duckdb

    path = tmp_path / "other.parquet"
    duckdb.connect().execute(f"COPY (SELECT 1 AS run) TO '{path}' (FORMAT parquet)")
    with pytest.raises(TraceError, match="lacks the column"):
        check_trace(path)


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
    monkeypatch.setattr(sign, "_KEY_HASH", "strlen(key) % 3")
    assert check_trace(path).to_dict() == expected
    assert expected["signatures"] == 23 * 5


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


@bounded(deep=40, ci=10)
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


@bounded(deep=40, ci=10)
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


def test_no_temporary_file_is_left_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine's spill folder and load files go when the analysis ends, also on an error."""
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", None)
    check_trace(_many(tmp_path, 500))
    with pytest.raises(TraceError):
        check_trace(tmp_path / "missing.jsonl")
    with Calls(AnalysisConfig()) as calls:
        load(calls, [Input(write_jsonl(tmp_path / "x.jsonl", SEED_A))])
    assert list((tmp_path / "tmp").iterdir()) == []


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


def test_a_call_without_a_line_is_evidence_without_one(tmp_path: Path) -> None:
    """A Parquet row with no line (NULL): its finding's evidence says none, as the row did;
    a row with a line keeps it."""
    import duckdb

    path = tmp_path / "lines.parquet"
    duckdb.connect().execute(
        "COPY (SELECT i AS seq, CASE WHEN i < 3 THEN NULL ELSE i END::BIGINT AS line, "
        "'r' || (i // 3) AS run, 1::BIGINT AS step, 'tool' AS kind, 'x' AS name, "
        "'{}' AS args, 'o' AS out, NULL::VARCHAR AS effect, NULL::BIGINT AS tokens "
        f"FROM range(1, 6) t(i)) TO '{path}' (FORMAT parquet)"
    )
    report = check_trace(path)
    assert [(f.run, f.evidence["line"]) for f in report.findings] == [("r0", None), ("r1", 3)]


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


def test_a_parquet_column_of_another_type_is_refused(tmp_path: Path) -> None:
    """A column whose values do not cast (a step that is not a number): a TraceError."""
    import duckdb

    path = tmp_path / "typed.parquet"
    duckdb.connect().execute(
        "COPY (SELECT 1::BIGINT AS seq, 1::BIGINT AS line, 'r' AS run, 'one' AS step, "
        "'tool' AS kind, 'x' AS name, '{}' AS args, 'o' AS out, NULL::VARCHAR AS effect, "
        f"NULL::BIGINT AS tokens) TO '{path}' (FORMAT parquet)"
    )
    with pytest.raises(TraceError, match="do not hold what tracetape export --parquet writes"):
        check_trace(path)


def test_progress_reaches_every_files_size(tmp_path: Path) -> None:
    """The progress callback gets bytes read per file, ending at each file's size, through
    the fast path and the Python reader alike."""
    fast = _many(tmp_path, 2000)
    slow = tmp_path / "bad.jsonl"
    slow.write_bytes(fast.read_bytes() + b"\n{not json}\n")
    seen: dict[Path, list[int]] = {}
    check_trace(
        [fast, slow],
        skip_bad_lines=True,
        progress=lambda path, done: seen.setdefault(path, []).append(done),
    )
    assert seen[fast][-1] == fast.stat().st_size
    assert seen[slow][-1] == slow.stat().st_size
    assert all(a <= b for a, b in zip(seen[fast], seen[fast][1:], strict=False))


def test_records_diff_as_their_files_do(tmp_path: Path) -> None:
    """diff_records (a store's runs, a request body) gives diff_traces's report."""
    from tracetape.analysis import diff_records, read_records

    a = write_jsonl(tmp_path / "a.jsonl", SEED_A)
    b = write_jsonl(tmp_path / "b.jsonl", SEED_B)
    from_files = diff_traces(a, b).to_dict()
    from_records = diff_records(read_records(a), read_records(b), names=(str(a), str(b)))
    assert from_records.to_dict() == from_files
    with pytest.raises(TraceError, match="run 'nope' is not in this trace"):
        diff_records(read_records(a), read_records(b), runs=("nope", "run_0043"))


def test_an_unwritable_parquet_output_is_named(tmp_path: Path) -> None:
    """-o naming a folder, or a file in a missing folder: one error line, exit 2, and no
    partial file left anywhere."""
    a = write_jsonl(tmp_path / "a.jsonl", SEED_A)
    for out, says in (
        (tmp_path, "is a folder; name the Parquet file"),
        (tmp_path / "nope" / "x.parquet", "no such folder"),
    ):
        result = CliRunner().invoke(main, ["export", "--parquet", str(a), "-o", str(out)])
        assert result.exit_code == 2
        assert says in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.jsonl"]


def test_run_ids_with_quotes_are_values_not_sql(tmp_path: Path) -> None:
    """Run ids with quotes and SQL in them are compared as the strings they are."""
    runs = ["a'b", 'c"; DROP TABLE calls0; --']
    records = [call(r, 1, "t", {"x": 1}, f"o{i}") for i, r in enumerate(runs)]
    path = write_jsonl(tmp_path / "t.jsonl", records)
    report = diff_traces(path, runs=(runs[0], runs[1]))
    assert (report.baseline or {})["run"] == runs[0]
    assert (report.candidate or {})["run"] == runs[1]
    assert report.replay == {"unique": 1, "mismatches": 1, "unrecorded": 0}


def _split(tmp_path: Path, name: str, parts: int, records: list[dict[str, Any]]) -> list[Path]:
    """``records`` dealt round-robin over ``parts`` files (a run's calls in every file)."""
    return [write_jsonl(tmp_path / f"{name}-{k}.jsonl", records[k::parts]) for k in range(parts)]


def test_many_files_are_read_in_one_statement_as_one_by_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A side of several seed-JSONL files is read by one read_json (a fleet's day is many
    small files) and reports as the Python reader does; a file DuckDB cannot read exactly (a
    bad line, skipped) and one whose name DuckDB would take for a pattern are read by Python;
    a file given twice is read twice (one statement each)."""
    from .test_fast_path import python_reader

    records = [
        call(f"r{i % 7}", 1 + i // 7, f"t{i % 3}", {"k": i % 11}, f"o{i % 5}") for i in range(400)
    ]
    a = _split(tmp_path, "a", 4, records[:200])
    b = _split(tmp_path, "b", 3, records[200:])
    statements: list[int] = []
    read = loader._load_jsonl
    monkeypatch.setattr(
        loader, "_load_jsonl", lambda calls, ix: (statements.append(len(ix)), read(calls, ix))[1]
    )
    with python_reader():
        expected = diff_traces(a, b).to_dict()
    assert diff_traces(a, b).to_dict() == expected
    assert statements[0] == 7  # every file in the first statement

    bad = a[1].read_bytes() + b"{not json}\n"
    a[1].write_bytes(bad)
    pattern = tmp_path / "b[1].jsonl"
    pattern.write_bytes(b[1].read_bytes())
    (tmp_path / "b1.jsonl").write_bytes(b[0].read_bytes())  # what the pattern would match
    b[1] = pattern
    with Calls(AnalysisConfig(), skip_bad_lines=True) as calls:
        load(calls, [Input(p) for p in [*a, *b, a[0]]])
        assert calls.fast == {0, 2, 3, 4, 6, 7}  # not the bad file, nor the pattern
        line = calls.line()
        rows = calls.rows(
            f"SELECT file, count(*), min({line}), max({line}) FROM calls0 GROUP BY file"
        )
        # A call's ord orders a file's lines.
        (unordered,) = calls.one(
            f"SELECT count(*) FROM (SELECT file, {line} AS line, lag({line}) OVER "
            f"(PARTITION BY file ORDER BY {ORD}) AS before FROM calls0) WHERE line <= before"
        )
        assert unordered == 0
    counts = {f: (n, lo, hi) for f, n, lo, hi in rows}
    sizes = [len(p.read_bytes().splitlines()) for p in [*a, *b, a[0]]]
    assert counts == {i: (n - (i == 1), 1, n - (i == 1)) for i, n in enumerate(sizes)}


@pytest.mark.parametrize("size", [0, 1, (1 << 20) - 1, 1 << 20, (1 << 20) + 1, 3 << 20])
@pytest.mark.parametrize("newline_last", [True, False])
def test_lines_are_counted_across_read_buffers(
    tmp_path: Path, size: int, newline_last: bool
) -> None:
    """The line count that checks DuckDB's read counts a last line without a newline, also
    where a line or the file ends at a buffer's edge."""
    from tracetape.analysis.load import _lines_in

    data = bytearray(b"x" * size)
    data[99::100] = b"\n" * len(data[99::100])
    if size and data[-1:] == b"\n" and not newline_last:
        data[-1:] = b"y"
    elif size and newline_last:
        data[-1:] = b"\n"
    path = tmp_path / "lines.jsonl"
    path.write_bytes(bytes(data))
    expected = len(bytes(data).splitlines())
    assert _lines_in(path) == expected


@pytest.mark.parametrize("what", ["step", "tokens"])
def test_a_number_past_64_bits_from_any_reader_is_named(what: str) -> None:
    """A record whose step or token count does not fit 64 bits (orjson reads up to 2**64 - 1)
    is a TraceError that names the field, not an engine error."""
    from tracetape.analysis import check_records
    from tracetape.record import Record

    fields = {"step": 1, what: 1 << 63}
    records = [Record(kind="tool", name="ls", input={"args": {}}, out_digest="o", line=7, **fields)]
    with pytest.raises(TraceError, match=rf"records:7: field '{what}': 9223372036854775808"):
        check_records(records)
