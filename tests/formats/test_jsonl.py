"""The seed's JSONL trace: one tool call a line, every line validated, a bad one named by its
file, line and field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.suite import bounded
from tracetape import Tape, read_cassette
from tracetape.errors import TraceError
from tracetape.formats import TraceFormat, detect_format, read_records
from tracetape.formats.jsonl import SUSPECT, bulk_select
from tracetape.formats.schemas import MAX_DEPTH
from tracetape.record import call_args

from ..analysis.helpers import SEED_A, call, write_jsonl
from .helpers import read_all


def test_seed_jsonl_lines_become_tool_events(tmp_path: Path) -> None:
    """Each seed-schema line becomes one tool event carrying its run, step, args and output."""
    path = write_jsonl(tmp_path / "t.jsonl", SEED_A)
    events = read_all(path)
    assert [(e.run, e.step, e.kind, e.name, e.out_digest, e.tokens, e.line) for e in events] == [
        ("run_0042", 1, "tool", "search_issues", "a1b2c3", 812, 1),
        ("run_0042", 2, "tool", "search_issues", "a1b2c3", 812, 2),
    ]
    assert call_args(events[0]) == {"q": "broken:true", "page": 1}
    assert detect_format(path) is TraceFormat.JSONL


def test_optional_seed_fields_are_honoured(tmp_path: Path) -> None:
    """effect, span_id, parent_id and ms are read when a line has them."""
    rec = call(
        "r",
        1,
        "write_file",
        {"path": "a"},
        "x",
        effect="write",
        span_id="s1",
        parent_id="p0",
        ms=3.5,
    )
    (event,) = read_all(write_jsonl(tmp_path / "t.jsonl", [rec]))
    assert (event.effect, event.span_id, event.parent_id, event.ms) == ("write", "s1", "p0", 3.5)


@pytest.mark.parametrize(
    ("bad_line", "field", "match"),
    [
        pytest.param(b"{not json}\n", None, "not valid JSON", id="malformed-line"),
        pytest.param(
            b'{"run_id": "r", "step": 3, "tool": "t", "args": {}}\n',
            "output_sha",
            "missing",
            id="missing-field",
        ),
        pytest.param(
            b'{"run_id": "r", "step": "3", "tool": "t", "args": {}, "output_sha": "x"}\n',
            "step",
            "integer",
            id="wrong-type",
        ),
        pytest.param(
            b'{"run_id": "r", "step": 3, "tool": "t", "args": {}, "output_sha": "x", '
            b'"effect": "delete"}\n',
            "effect",
            "'read', 'write'",
            id="bad-effect",
        ),
        *(
            pytest.param(
                b'{"run_id": "r", "step": 3, "tool": "t", "args": {}, "output_sha": "x", '
                b'"effect": %b}\n' % effect,
                "effect",
                "'read', 'write'",
                id=name,
            )
            for effect, name in [(b'["write"]', "list-effect"), (b'{"w": 1}', "object-effect")]
        ),
        pytest.param(
            b'{"key": "tool:1", "kind": "tool", "out": 1}\n',
            "run_id",
            "mixed schemas",
            id="mixed-schemas",
        ),
        pytest.param(b"[1, 2]\n", None, "list", id="array-line"),
        pytest.param(
            b'{"run_id": "r", "step": 3, "tool": "t", "output_sha": "x", "args": '
            + b"[" * 202
            + b"]" * 202
            + b"}\n",
            "args",
            "nested deeper than the 200 levels",
            id="args-too-deep",
        ),
    ],
)
def test_bad_lines_name_file_line_and_field(
    tmp_path: Path, bad_line: bytes, field: str | None, match: str
) -> None:
    """A bad line raises a TraceError with the file, the line number and the field at fault."""
    good = orjson.dumps(SEED_A[0]) + b"\n"
    path = tmp_path / "t.jsonl"
    path.write_bytes(good + bad_line + good)
    with pytest.raises(TraceError, match=match) as info:
        read_all(path)
    assert info.value.line == 2
    assert info.value.field == field
    assert str(info.value).startswith(f"{path}:2: ")
    assert "--skip-bad-lines" in str(info.value)


def test_args_as_deep_as_the_limit_are_read_and_brackets_in_strings_cost_nothing(
    tmp_path: Path,
) -> None:
    """Arguments nested 200 levels deep are read; a line whose strings hold many brackets is
    walked for its depth and read too (the bracket count only decides whether to walk)."""
    deep = {"run_id": "r", "step": 1, "tool": "t", "output_sha": "x", "args": {"q": "[{" * 300}}
    nested: Any = 0
    for _ in range(199):
        nested = [nested]
    path = write_jsonl(tmp_path / "t.jsonl", [deep, {**deep, "args": {"a": nested}}])
    assert [e.input["args"] for e in read_all(path)] == [deep["args"], {"a": nested}]


def test_skip_bad_lines_counts_what_it_skipped(tmp_path: Path) -> None:
    """With skip_bad_lines the good lines are read and the bad ones counted."""
    good = orjson.dumps(SEED_A[0]) + b"\n"
    path = tmp_path / "t.jsonl"
    path.write_bytes(good + b"{oops\n" + good + b'{"run_id": "r"}\n')
    sources: list = []
    events = list(read_records(path, skip_bad_lines=True, sources=sources))
    assert len(events) == 2
    assert sources[0].skipped == 2
    assert "t.jsonl:2:" in sources[0].first_skipped[0]


_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=60, deadline=None)
@given(
    records=st.lists(
        st.fixed_dictionaries(
            {
                "run_id": _text,
                "step": st.integers(0, 10**6),
                "tool": _text,
                "args": _json,
                "output_sha": _text,
            },
            optional={
                "tokens": st.integers(0, 10**9),
                "effect": st.sampled_from(["read", "write", "irreversible"]),
            },
        ),
        min_size=1,
        max_size=8,
    )
)
def test_jsonl_reader_round_trips_any_valid_record(
    tmp_path_factory: pytest.TempPathFactory, records: list[dict[str, object]]
) -> None:
    """Any valid seed-schema record is read back with the same run, step, tool, args and output."""
    path = write_jsonl(tmp_path_factory.mktemp("rt") / "t.jsonl", records)
    events = list(read_records(path, TraceFormat.JSONL))
    assert [
        (e.run, e.step, e.name, call_args(e), e.out_digest, e.tokens, e.effect) for e in events
    ] == [
        (
            r["run_id"],
            r["step"],
            r["tool"],
            r["args"],
            r["output_sha"],
            r.get("tokens"),
            r.get("effect"),
        )
        for r in records
    ]


@pytest.mark.parametrize(
    ("tool", "args", "step"),
    [
        pytest.param("search_issues", {"q": "broken:true", "page": 1}, 1, id="flat"),
        pytest.param(
            "edit", {"z": [1, {"b": None, "a": "é"}], "a": {"y": 2.5, "x": True}}, 7, id="nested"
        ),
        pytest.param("ping", [], 3, id="list-args"),
    ],
)
def test_a_jsonl_record_is_keyed_as_the_tape_keys_the_call(
    tmp_path: Path, tool: str, args: Any, step: int
) -> None:
    """A seed-JSONL line's key is the key Tape.call records for the same call (no secret in it)."""
    cassette = tmp_path / "c.jsonl"
    with Tape(cassette, mode="record", harness_sha="h") as tape:
        tape.call("tool", {"name": tool, "args": args, "step": step}, lambda: "ok")
    (taped,) = read_cassette(cassette).records
    (line,) = read_records([orjson.dumps(call("r", step, tool, args, "ab"))])
    assert line.key == taped.key
    assert line.input == taped.input


# -- the bulk reader's guarantee: what DuckDB reads that orjson refuses, SUSPECT marks ----------

# Number spellings DuckDB reads: NaN and infinities in any case (with a minus), exponents of
# any length, long digit runs; strings that spell them too.
_CASES = st.sampled_from(["nan", "inf", "infinity"]).flatmap(
    lambda word: st.lists(st.booleans(), min_size=len(word), max_size=len(word)).map(
        lambda upper: "".join(c.upper() if u else c for c, u in zip(word, upper, strict=True))
    )
)
_NUMBER = st.one_of(
    st.tuples(st.sampled_from(["", "-"]), _CASES).map("".join),
    st.tuples(
        st.sampled_from(["", "-"]),
        st.integers(1, 9).map(str),
        st.one_of(st.integers(0, 30), st.integers(195, 215), st.integers(300, 330)).map(
            lambda n: "7" * n
        ),
        st.sampled_from(["", ".5", ".0001", "." + "3" * 320]),
        st.sampled_from(["", "e", "E", "e+", "e-", "E+"]).flatmap(
            lambda e: (
                st.just("")
                if not e
                else st.integers(0, 99999).map(lambda x: e + str(x).zfill(1 + x % 4))
            )
        ),
    ).map("".join),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
)
_READ_ARGS = "SELECT * FROM read_json(?, format = 'newline_delimited', columns = {args: 'JSON'})"
_STRING = st.sampled_from(['"x"', '":nan"', '"[inf"', '"1e400"', '","', '"\\u00e9"'])
_VALUE = st.recursive(
    st.one_of(_NUMBER, _STRING, st.sampled_from(["true", "false", "null"])),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3).map(lambda vs: "[" + " , ".join(vs) + "]"),
        st.lists(st.tuples(st.sampled_from(["a", "nan", "inf"]), inner), max_size=3).map(
            lambda ms: "{" + ",".join(f'"{k}": {v}' for k, v in ms) + "}"
        ),
    ),
    max_leaves=8,
)


@bounded(deep=800, ci=150)
@given(values=st.lists(_VALUE, min_size=1, max_size=20))
def test_every_argument_text_orjson_refuses_is_suspect(
    tmp_path_factory: pytest.TempPathFactory, values: list[str]
) -> None:
    """Of the argument texts DuckDB's reader keeps, every one orjson refuses matches
    ``SUSPECT`` (as DuckDB runs it): the analysis's loader asks orjson only those, so no text
    it loads can fail the signing."""
    path = tmp_path_factory.getbasetemp() / "args.jsonl"
    path.write_text("".join(f'{{"args": {v}}}\n' for v in values))
    with duckdb.connect() as con:
        rows = con.execute(
            f"SELECT args::VARCHAR, regexp_matches(args::VARCHAR, ?) FROM ({_READ_ARGS})",
            [SUSPECT, str(path)],
        ).fetchall()
    assert len(rows) == len(values)
    for text, suspect in rows:
        if text is None:  # a null argument: the Python reader reads it (``unread``)
            continue
        try:
            orjson.loads(text)
        except orjson.JSONDecodeError:
            assert suspect, text


def test_duckdb_refuses_what_orjson_refuses_but_numbers(tmp_path: Path) -> None:
    """The rest of the guarantee: DuckDB's reader refuses a lone surrogate, a control
    character and bad UTF-8; it reads a line nested deeper than the analysis walks
    (``MAX_DEPTH``), which ``bulk_select`` marks suspect, not one as deep as that."""
    for value in [b'"\\ud800"', b'"\\udc00x"', b'"a\x01"', b'"\xff"', b'"\xed\xa0\x80"']:
        path = tmp_path / "odd.jsonl"
        path.write_bytes(b'{"args": %b}\n' % value)
        with duckdb.connect() as con, pytest.raises(duckdb.InvalidInputException):
            con.execute(_READ_ARGS, [str(path)]).fetchall()
    line = '{{"run_id": "r", "step": 1, "tool": "t", "output_sha": "o", "args": {}}}\n'
    path.write_text("".join(line.format("[" * d + "]" * d) for d in (MAX_DEPTH, MAX_DEPTH + 1)))
    with duckdb.connect() as con:
        rows = con.execute(bulk_select(-1, -2), [[str(path)], [0]]).fetchall()
    assert [row[1] for row in rows] == [None, -2]
