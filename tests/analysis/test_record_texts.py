"""``RecordTexts``: a store's runs, read by DuckDB from their JSON texts, give the report the
decoded records give (``call_args`` in SQL equals the Python one, for any input shape), and a
text DuckDB cannot read as Python would falls back to the decoded records."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.suite import bounded
from tracetape.analysis import AnalysisConfig, check_records, diff_records, load
from tracetape.analysis.engine import ORD, Calls
from tracetape.analysis.load import load_records
from tracetape.record import Record, RecordTexts

from .helpers import told_to_sign

_encode = msgspec.json.Encoder().encode

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(["a", "b", "step", "args", "é", "k\x00"]), inner, max_size=3
        )
    ),
    max_leaves=8,
)
inputs = st.one_of(
    st.none(),  # not stored: compared by key
    values,  # a list, a scalar, or an object with or without "args" and "step"
    st.fixed_dictionaries({"args": values, "step": st.integers(0, 5)}),
    st.fixed_dictionaries({"name": st.text(max_size=3), "step": st.integers(0, 5)}),
)
records = st.builds(
    Record,
    kind=st.sampled_from(["tool", "llm", "env"]),
    key=st.one_of(st.none(), st.sampled_from(["tool:1", "llm:2"])),
    run=st.one_of(st.none(), st.sampled_from(["", "r1", "r2"])),
    name=st.one_of(st.none(), st.sampled_from(["", "search", "gpt"])),
    step=st.one_of(st.none(), st.integers(0, 4)),
    input=inputs,
    out_digest=st.one_of(st.none(), st.sampled_from(["o1", "o2"])),
    effect=st.one_of(st.none(), st.sampled_from(["read", "write"])),
    tokens=st.one_of(st.none(), st.integers(0, 1000)),
    line=st.integers(0, 50),
)


def _texts(recs: list[Record]) -> RecordTexts:
    return RecordTexts([_encode(r) for r in recs])


@bounded(deep=25, ci=8)
@given(st.lists(records, min_size=1, max_size=12), st.lists(records, min_size=1, max_size=12))
def test_texts_report_as_their_records_do(a: list[Record], b: list[Record]) -> None:
    """For any records: diff and check of their texts equal those of the records."""
    ta, tb = _texts(a), _texts(b)
    assert diff_records(ta, tb).to_dict() == diff_records(a, b).to_dict()
    assert check_records(ta).to_dict() == check_records(a).to_dict()


def _loaded_by(texts: RecordTexts, monkeypatch: pytest.MonkeyPatch) -> tuple[str, Any]:
    """Which path loaded ``texts`` ("sql" or "python"), and the calls0 rows."""
    used: list[str] = []
    add = load._add_records
    monkeypatch.setattr(
        load, "_add_records", lambda calls, *a: (used.append("python"), add(calls, *a))[1]
    )
    with Calls(AnalysisConfig()) as calls:
        load_records(calls, texts, "run")
        rows = calls.rows(
            f"SELECT rowid, line, run, step, kind, name, args FROM calls0 ORDER BY {ORD}"
        )
    return ("python" if used else "sql"), rows


def test_the_store_path_is_sql_and_keeps_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ordinary texts are read by DuckDB (no Python decoding), in their order, with
    ``call_args`` computed as Python computes it."""
    recs = [
        Record(kind="tool", run="r", name="ls", step=i, input={"args": {"n": i}, "step": i})
        for i in range(300)
    ] + [
        Record(kind="llm", key="llm:9", run="r"),
        Record(kind="llm", run="r", input={"z": 1, "step": 3, "a": {"step": 2}}),
        Record(kind="env", run="r", name="", input=[1, "x"]),
    ]
    path, rows = _loaded_by(_texts(recs), monkeypatch)
    assert path == "sql"
    assert [r[3] for r in rows[:300]] == list(range(300))  # in the records' order
    assert rows[5][6] == '{"n":5}'
    assert rows[-3][6] == '{"key":"llm:9"}'
    assert rows[-2][6] == '{"z":1,"a":{"step":2}}'  # the top-level step only, order kept
    assert rows[-1][5] == "env"  # an empty name is the kind, as in Python


def test_texts_duckdb_cannot_read_as_python_does_fall_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A text that is not one line (JSON spread over lines: no store writes one, but a
    caller may) is decoded and loaded as a record, and the report is the records' own."""
    one = Record(kind="tool", run="r", name="a", input={"args": {"q": 1}})
    spread = msgspec.json.format(_encode(one), indent=2)
    texts = RecordTexts([_encode(one), spread])
    path, rows = _loaded_by(texts, monkeypatch)
    assert path == "python"
    assert [r[6] for r in rows] == ['{"q":1}', '{"q":1}']
    monkeypatch.undo()
    assert check_records(texts).to_dict() == check_records(texts.records()).to_dict()


def test_texts_stored_with_every_field_read_as_those_without_defaults() -> None:
    """A store written before records left their defaults out (every field, nulls and all)
    reads the same: a missing field and an explicit null are one thing to the analysis."""
    recs = [
        Record(kind="tool", run="r", name="ls", step=1, input={"args": {"p": "."}, "step": 1}),
        Record(kind="tool", run="r", name="ls", step=2, input={"args": {"p": "."}, "step": 2}),
        Record(kind="llm", key="llm:1", run="r", step=3),
    ]
    full = RecordTexts([msgspec.json.encode(msgspec.structs.asdict(r)) for r in recs])
    assert b'"out":null' in full.texts[0]
    assert b'"out"' not in _texts(recs).texts[0]
    assert check_records(full).to_dict() == check_records(_texts(recs)).to_dict()
    assert full.records() == recs


def test_concurrent_analyses_in_one_workspace_keep_apart() -> None:
    """A collector's requests analyse at once in one workspace (a schema each): each gets
    its own report, the one a database of its own gives, and no schema is left behind."""
    from concurrent.futures import ThreadPoolExecutor

    from tracetape.analysis.engine import Workspace

    def run(k: int) -> list[Record]:
        return [
            Record(kind="tool", run=f"r{k}", name="t", step=i // 3 + 1,
                   input={"args": {"q": (i * k) % 7}}, out_digest=f"o{i % (k + 2)}", line=i + 1)
            for i in range(40 + k)
        ]  # fmt: skip

    pairs = [(_texts(run(k)), _texts(run(k + 1))) for k in range(8)]
    alone = [diff_records(a, b).to_dict() for a, b in pairs]
    workspace = Workspace()
    try:
        with ThreadPoolExecutor(4) as pool:
            shared = list(pool.map(lambda ab: diff_records(*ab, workspace=workspace), pairs * 3))
        assert [r.to_dict() for r in shared] == alone * 3
        (left,) = workspace.con.execute(
            "SELECT count(*) FROM duckdb_schemas() WHERE schema_name LIKE 'analysis_%'"
        ).fetchone() or (None,)
        assert left == 0
    finally:
        workspace.close()


def test_texts_alone_in_a_workspace_keep_apart() -> None:
    """Past the size where texts are told alone by their shapes (and ``dmap`` is a view of
    the analysis's own texts), analyses at once in one workspace give each its own report."""
    from concurrent.futures import ThreadPoolExecutor

    from tracetape.analysis.engine import Workspace
    from tracetape.analysis.sign import _SHAPED_FROM

    def run(k: int) -> list[Record]:
        return [
            Record(kind="tool", run=f"r{i // 50}", name="t", step=i % 50 + 1,
                   input={"args": {"q": f"x {i * k}", "n": i % 9}}, out_digest=f"o{i % (k + 2)}",
                   line=i + 1)
            for i in range(_SHAPED_FROM // 2 + k)
        ]  # fmt: skip

    pairs = [(_texts(run(k)), _texts(run(k + 1))) for k in range(1, 3)]
    alone = [diff_records(a, b).to_dict() for a, b in pairs]
    workspace = Workspace()
    try:
        with told_to_sign() as told, ThreadPoolExecutor(2) as pool:
            shared = list(pool.map(lambda ab: diff_records(*ab, workspace=workspace), pairs * 2))
        assert [r.to_dict() for r in shared] == alone * 2
        assert len(told) == 4 and all(t is not None for t in told)
    finally:
        workspace.close()
