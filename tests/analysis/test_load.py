"""The loader: the seed-JSONL fast path (DuckDB's JSON reader) reports exactly what the Python
reader's path reports and hands every line it cannot read exactly to that reader; Parquet of
``export --parquet`` read as it is, any other shape refused; a store's record texts read by
DuckDB as their decoded records read; lines counted, progress reported."""

from __future__ import annotations

import itertools
import json
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest.mock import patch

import msgspec
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.analysis.helpers import call, many_calls, write_jsonl
from tests.suite import bounded
from tracetape.analysis import (
    AnalysisConfig,
    TraceError,
    check_records,
    check_trace,
    diff_records,
    diff_traces,
)
from tracetape.analysis import load as loader
from tracetape.analysis.engine import ORD, Calls, Input
from tracetape.analysis.load import load, load_records
from tracetape.analysis.sign import Signer
from tracetape.record import Record, RecordTexts

UUIDS = [f"0b7e1b2c-6a1f-4c1e-9a51-8f0b8f9b2a{i:02d}" for i in range(40)]

args_st = st.fixed_dictionaries(
    {"path": st.sampled_from(["a.py", "b.py", "c.py"])},
    optional={
        "page": st.integers(1, 3),
        "request_id": st.sampled_from(UUIDS),  # volatile: normalized away
        "tmp": st.sampled_from(["/tmp/tmpab12/x", "/tmp/tmpcd34/x", "x"]),  # masked
    },
)
line_st = st.tuples(
    st.sampled_from(["read_file", "write_file", "list_dir"]),
    args_st,
    st.sampled_from(["o1", "o2", "o3"]),
    st.sampled_from([None, "read", "write"]),
    st.one_of(st.none(), st.integers(0, 900)),
    st.booleans(),  # the next call starts a new step
    st.booleans(),  # the next call starts a new run
)


def _trace(lines: list[Any], prefix: str, interleaved: bool = False) -> list[dict[str, Any]]:
    runs: list[list[dict[str, Any]]] = [[]]
    step = 1
    for tool, args, out, effect, tokens, new_step, new_run in lines:
        rec = call(f"{prefix}{len(runs)}", step, tool, args, out, tokens=tokens)
        if effect is not None:
            rec["effect"] = effect
        runs[-1].append(rec)
        step += new_step
        if new_run:
            runs.append([])
            step = 1
    if not interleaved:
        return [rec for run in runs for rec in run]
    # The runs' lines taken in turn, each run's own order kept: runs that overlap in time.
    merged = itertools.zip_longest(*runs)
    return [rec for turn in merged for rec in turn if rec is not None]


def _write(path: Path, records: list[dict[str, Any]], keys_sorted: bool) -> Path:
    option = orjson.OPT_SORT_KEYS if keys_sorted else 0
    path.write_bytes(b"".join(orjson.dumps(r, option=option) + b"\n" for r in records))
    return path


@contextmanager
def python_reader() -> Iterator[None]:
    """Every seed-JSONL file read by the Python reader, never by the fast path."""

    def refuse(calls: Calls, indices: list[int]) -> set[int]:
        return set(indices)

    with patch("tracetape.analysis.load._load_jsonl", refuse):
        yield


def _reference(paths: list[Path], compare: bool) -> dict[str, Any]:
    """The report of the Python reader's path."""
    with python_reader():
        if compare:
            return diff_traces(*paths).to_dict()
        return check_trace(*paths).to_dict()


# Two seed-JSONL traces (runs a1, a2, ... and b1, b2, ...); ``layout`` is (keys sorted,
# runs interleaved line by line).
trace_pairs = given(
    a=st.lists(line_st, min_size=1, max_size=60),
    b=st.lists(line_st, min_size=1, max_size=60),
    layout=st.tuples(st.booleans(), st.booleans()),
)


@contextmanager
def written(a: list[Any], b: list[Any], layout: tuple[bool, bool]) -> Iterator[tuple[Path, Path]]:
    """The two traces of ``trace_pairs`` as files, removed afterwards."""
    keys_sorted, interleaved = layout
    with tempfile.TemporaryDirectory() as tmp:
        yield (
            _write(Path(tmp) / "a.jsonl", _trace(a, "a", interleaved), keys_sorted),
            _write(Path(tmp) / "b.jsonl", _trace(b, "b", interleaved), keys_sorted),
        )


@bounded(deep=25, ci=6)
@trace_pairs
def test_fast_path_reports_what_the_event_path_reports(
    a: list[Any], b: list[Any], layout: tuple[bool, bool]
) -> None:
    """check and diff of seed JSONL give the event path's report, finding for finding, for
    runs one after another and runs interleaved line by line."""
    with written(a, b, layout) as (pa, pb):
        assert check_trace(pa).to_dict() == _reference([pa], compare=False)
        assert diff_traces(pa, pb).to_dict() == _reference([pa, pb], compare=True)


GOOD = b'{"run_id":"r1","step":1,"tool":"ls","args":{"d":"/"},"output_sha":"ab"}'
ODD_LINES = [
    pytest.param(b"{not json", id="not-json"),
    pytest.param(b'{"run_id":"r1","step":1,"tool":"ls","output_sha":"ab"}', id="missing-args"),
    pytest.param(
        b'{"run_id":"r1","step":"1","tool":"ls","args":{},"output_sha":"ab"}', id="str-step"
    ),
    pytest.param(b'{"run_id":7,"step":1,"tool":"ls","args":{},"output_sha":"ab"}', id="int-run"),
    pytest.param(
        b'{"run_id":"r1","step":1,"tool":"ls","args":{},"output_sha":"ab","effect":"rm"}',
        id="bad-effect",
    ),
    pytest.param(
        b'{"run_id":"r1","step":123456789012345678901234567890,"tool":"ls","args":{},'
        b'"output_sha":"ab"}',
        id="huge-step",
    ),
    pytest.param(
        b'{"run_id":"r1","step":1,"tool":"ls","args":{"p":"\xff"},"output_sha":"ab"}',
        id="bad-utf8-in-args",
    ),
    pytest.param(b"", id="blank"),
    pytest.param(b"   \r", id="whitespace"),
    pytest.param(GOOD + b"\r", id="crlf"),
    pytest.param(b"[1, 2]", id="array"),
    pytest.param(
        b'{"run_id":"r1","step":1,"tool":"ls","args":{"n":123456789012345678901234567890},'
        b'"output_sha":"ab"}',
        id="huge-int-in-args",
    ),
    pytest.param(
        b'{"run_id":"r1","step":1,"tool":"ls","args":'
        + b"[" * 300
        + b"]" * 300
        + b',"output_sha":"ab"}',
        id="too-deep",
    ),
    pytest.param(b'{"run_id":"r1","step":1,"tool":5,"args":{},"output_sha":"ab"}', id="int-tool"),
    pytest.param(
        b'{"run_id":"r1","step":1.0,"tool":"ls","args":{},"output_sha":"ab"}', id="float-step"
    ),
    pytest.param(
        b'{"run_id":"r1","step":1,"tool":"ls","args":{},"output_sha":"ab","tokens":"9"}',
        id="str-tokens",
    ),
    pytest.param(GOOD + GOOD, id="two-on-a-line"),
    *(
        pytest.param(b'{"run_id":"r1","step":%b,"tool":"ls","args":{},"output_sha":"ab"}' % v, id=i)
        for v, i in [
            (b"true", "bool-step"),
            (b"null", "null-step"),
            (b"-3", "negative-step"),
            (b"-0", "minus-zero-step"),
            (b"1e2", "exponent-step"),
            (b"5.5", "fraction-step"),
            (b"9223372036854775807", "max-step"),
            (b"9223372036854775808", "past-max-step"),
            (b"-9223372036854775809", "past-min-step"),
            (b"[1]", "list-step"),
        ]
    ),
    *(
        pytest.param(GOOD[:-1] + b',"%b":%b}' % (field, v), id=i)
        for field, v, i in [
            (b"tokens", b"9.5", "fraction-tokens"),
            (b"tokens", b"null", "null-tokens"),
            (b"tokens", b"1E3", "exponent-tokens"),
            (b"tokens", b"18446744073709551615", "huge-tokens"),
            (b"tokens", b"false", "bool-tokens"),
            (b"effect", b'"wri\\u0074e"', "escaped-effect"),
            (b"effect", b'"irreversible"', "irreversible-effect"),
            (b"effect", b'"Write"', "capital-effect"),
            (b"effect", b"null", "null-effect"),
            (b"effect", b'["write"]', "list-effect"),
        ]
    ),
]


def _outcome(run: Any) -> Any:
    try:
        return run().to_dict()
    except TraceError as exc:
        return (str(exc), exc.line, exc.field)


@pytest.mark.parametrize("skip", [False, True])
@pytest.mark.parametrize("odd", ODD_LINES)
def test_a_file_with_an_odd_line_reads_as_the_python_reader_reads_it(
    tmp_path: Path, odd: bytes, skip: bool
) -> None:
    """A bad, blank or unusual line: the same report, or the same error (file, line, field),
    or the same lines skipped, as when the Python reader reads the file."""
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"\n".join([GOOD, GOOD, odd, GOOD]))  # no newline at the end either
    got = _outcome(lambda: check_trace(path, skip_bad_lines=skip))
    with python_reader():
        expected = _outcome(lambda: check_trace(path, skip_bad_lines=skip))
    assert got == expected


def test_a_trace_over_many_files_is_one_trace(tmp_path: Path) -> None:
    """check of a glob (and of a list) reads every file; a run spread over two files is one
    run."""
    records = [
        call("r1", 1, "s", {}, "o"),
        call("r1", 2, "s", {}, "o"),
        call("r2", 1, "t", {}, "o"),
    ]
    for i, rec in enumerate(records):
        _write(tmp_path / f"part{i}.jsonl", [rec], keys_sorted=False)
    whole = check_trace(_write(tmp_path / "whole.jsonl", records, keys_sorted=False))
    parts = check_trace(str(tmp_path / "part*.jsonl"))
    assert parts.runs == whole.runs == 2
    assert [f.message for f in parts.findings] == [f.message for f in whole.findings]
    assert parts.inputs == [str(tmp_path / f"part{i}.jsonl") for i in range(3)]
    with pytest.raises(TraceError, match="no file matches"):
        check_trace(str(tmp_path / "nothing*.jsonl"))
    (tmp_path / "folder.jsonl").mkdir()
    with pytest.raises(TraceError, match="no file matches"):
        check_trace(str(tmp_path / "folder*"))


def test_a_huge_line_reads_as_the_python_reader_reads_it(tmp_path: Path) -> None:
    """A 20 MB line: DuckDB reads it (its key is over the CSV reader's 2 MB default line), and
    the Python reader's records go through our own JSONL (over DuckDB's 16 MB default object):
    the same report."""
    records = [call("r", 1, "t", {"blob": "x" * (20 << 20)}, "o1"), call("r", 2, "t", {}, "o2")]
    path = _write(tmp_path / "t.jsonl", records, keys_sorted=False)
    with Calls(AnalysisConfig()) as calls:
        load(calls, [Input(path)])
        assert set(calls.first_rows) == {0}
    got = check_trace(path).to_dict()
    with python_reader():
        assert check_trace(path).to_dict() == got


@pytest.mark.parametrize(
    ("args", "fast"),
    [
        ('{"q": "a:nan, [inf"}', True),  # spelled in a string: orjson reads it
        ('{"x": 1.5e308, "y": 7e-300}', True),
        ('{"q": "' + "[" * 300 + '"}', True),  # brackets in a string: not nested
        ('{"x": NaN}', False),
        ('{"x": -Infinity}', False),
        ('{"x": 1e310}', False),
        ('{"x": ' + "7" * 320 + "}", False),
        ('{"x": ' + "[" * 201 + "]" * 201 + "}", False),  # deeper than MAX_DEPTH
    ],
)
def test_texts_the_signing_cannot_read_are_judged_where_they_are_loaded(
    tmp_path: Path, args: str, fast: bool
) -> None:
    """A text DuckDB reads and orjson may not (or nested too deep) is asked to orjson as its
    file is loaded: read, the file stays on the fast path; refused, the file is read by the
    Python reader there, before any signing, which names the line (the signing has no retry)."""
    line = '{"run_id": "r", "step": 1, "tool": "t", "output_sha": "o", "args": %s}\n'
    path = tmp_path / "t.jsonl"
    path.write_text(line % '{"a": 1}' + line % args + line % '{"a": 2}')
    with Calls(AnalysisConfig(), skip_bad_lines=True) as calls:
        load(calls, [Input(path)])
        assert (0 in calls.first_rows) is fast
        assert calls.one("SELECT count(*) FROM calls0 WHERE line < 0") == (0,)
    outcome = _outcome(lambda: check_trace(path))
    assert isinstance(outcome, dict) is fast  # else the error names line 2
    assert fast or outcome[1] == 2
    with python_reader():
        assert _outcome(lambda: check_trace(path)) == outcome


# JSON value texts as a writer may spell them, odd ones too (DuckDB reads NaN, infinities and
# trailing commas; orjson refuses them, or reads a long exponent as infinity).
_NUMBERS = ["1", "-0", "1.0", "1e5", "1E+400", "1e-400", "-1.5e300", "NaN", "-Infinity", "inf"]
_NUMBERS += [str(1 << 70), "0.1234567890123456789012", "7" * 310]
_STRINGS = ['"x"', '"0b7e1b2c-6a1f-4c1e-9a51-8f0b8f9b2a11"', '"\\ud800"', '"t\\u0073"', '"é"']
_STRINGS += ['"/tmp/tmpab12/x"', '"info, inf"', '"a:1e400"']
_KEYS = ["a", "b", "ts", "request_id", "time", "made_at", "t\\u0073", "é"]
value_text = st.recursive(
    st.sampled_from(_NUMBERS + _STRINGS + ["true", "null", "[]", "{}"]),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3).map(lambda vs: "[" + ",".join(vs) + "]"),
        st.lists(st.tuples(st.sampled_from(_KEYS), inner), max_size=3).map(
            lambda ms: "{" + ",".join(f'"{k}":{v}' for k, v in ms) + "}"
        ),
    ),
    max_leaves=6,
)
object_text = st.tuples(
    st.lists(st.tuples(st.sampled_from(_KEYS), value_text), max_size=5),
    st.sampled_from([",", ", ", " , "]),  # how members are parted
    st.booleans(),  # a trailing comma
).map(lambda t: "{" + t[1].join(f'"{k}":{v}' for k, v in t[0]) + ("," if t[2] else "") + "}")


def _without_unvolatile() -> Any:
    return patch("tracetape.analysis.sign.unvolatile", lambda normalizer: "NULL")


_ODD_ARGS = ["NaN", "-Infinity", "inf", "1E+400", "7" * 310, '"\\ud800"', '{"x":NaN}']
_ODD_ARGS += ["[" * 201 + "]" * 201]  # too deep: the Python reader judges the whole text
_ODD_ARGS = [f'{{"ts":{v},"a":1}}' for v in _ODD_ARGS] + ['{"ts":1,"a":1,}', '[{"ts":1,"a":1}]']


def _signed_texts(path: Path) -> tuple[Any, list[str]]:
    """The outcome of check, and the tables ``_keys`` signed."""
    signed: list[str] = []
    keys = Signer.keys

    def spy(self: Signer, texts: str, bare: str) -> None:
        signed.append(texts)
        return keys(self, texts, bare)

    with patch.object(Signer, "keys", spy):
        return _outcome(lambda: check_trace(path)), signed


def test_a_parquet_file_of_another_shape_is_refused(tmp_path: Path) -> None:
    """Parquet not written by export --parquet: an error naming the missing columns."""
    import duckdb

    path = tmp_path / "other.parquet"
    duckdb.connect().execute(f"COPY (SELECT 1 AS run) TO '{path}' (FORMAT parquet)")
    with pytest.raises(TraceError, match="lacks the column"):
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
    fast = many_calls(tmp_path, 2000)
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
        assert set(calls.first_rows) == {0, 2, 3, 4, 6, 7}  # not the bad file, nor the pattern
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


def _loaded_by(texts: RecordTexts, monkeypatch: pytest.MonkeyPatch) -> tuple[str, Any]:
    """Which path loaded ``texts`` ("sql" or "python"), and the calls0 rows."""
    used: list[str] = []
    add = loader._add_records
    monkeypatch.setattr(
        loader, "_add_records", lambda calls, *a: (used.append("python"), add(calls, *a))[1]
    )
    with Calls(AnalysisConfig()) as calls:
        load_records(calls, texts, "run")
        rows = calls.rows(
            f"SELECT rowid, line, run, step, kind, name, args FROM calls0 ORDER BY {ORD}"
        )
    return ("python" if used else "sql"), rows


@bounded(deep=25, ci=3)
@given(st.lists(records, min_size=1, max_size=12), st.lists(records, min_size=1, max_size=12))
def test_texts_report_as_their_records_do(a: list[Record], b: list[Record]) -> None:
    """For any records: diff and check of their texts equal those of the records."""
    ta, tb = _texts(a), _texts(b)
    assert diff_records(ta, tb).to_dict() == diff_records(a, b).to_dict()
    assert check_records(ta).to_dict() == check_records(a).to_dict()


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


def test_arguments_are_grouped_on_their_json_text_not_an_inferred_type(tmp_path: Path) -> None:
    """A missing key and an explicit null, a number and the same digits as a string, stay
    apart; key order does not matter."""
    args = [{"n": 1, "m": None}, {"m": None, "n": 1}, {"n": 1}, {"n": "1", "m": None}]
    records = [call("r", 1, "s", a, f"o{i}") for i, a in enumerate(args)]
    report = check_trace(_write(tmp_path / "t.jsonl", records, keys_sorted=False))
    assert report.signatures == 3
    assert sorted(f.message for f in report.findings) == [
        "drift: s -> 2 distinct outputs (step 1, call #2)",
        "repeat: r step 1 == step 1 (same args, different output)",
    ]


@pytest.mark.parametrize(
    "value",
    [
        "\x01 \x00 \n \r \t",
        'quote " backslash \\ slash /',
        "é ü 中文 \u2028 \u2029 \U0001f600",
        "\x7f",
        1 << 70,  # past 64 bits: keyed by the stdlib's canonical text, not orjson's
        -1.5e300,
        [{"b": None, "a": [1, "x"]}],
    ],
    ids=["controls", "quotes", "non-ascii", "del", "huge-int", "float", "nested"],
)
def test_signature_keys_hold_any_value_exactly(tmp_path: Path, value: object) -> None:
    """The canonical text is the signature key, sent to DuckDB unquoted, one a line: values
    with control characters, quotes, non-ASCII and numbers beyond orjson stay whole; the same
    value in another key order is the same signature, a different one is not."""
    args = [{"v": value, "k": 1}, {"k": 1, "v": value}, {"v": [value], "k": 1}, {"v": value}]
    lines = [
        json.dumps({**call("r", i + 1, "s", {}, f"o{i}"), "args": a}).encode()
        for i, a in enumerate(args)
    ]
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    report = check_trace(path)
    assert report.signatures == 3
    assert sorted(f.message for f in report.findings) == [
        "drift: s -> 2 distinct outputs (step 2, call #2)",
        "repeat: r step 1 == step 2 (same args, different output)",
    ]
    with python_reader():
        assert check_trace(path).to_dict() == report.to_dict()


def test_a_resource_over_two_megabytes_with_newlines_stays_whole(tmp_path: Path) -> None:
    """A resource (the written path) of 3 MB holding newlines goes to DuckDB quoted, over its
    CSV reader's default line: the second write is the echo of the first, as in Python."""
    big = "a\n" * 1_500_000
    records = [
        {**call("r", i, "write_file", {"path": big}, f"o{i}"), "effect": "write"} for i in (1, 2)
    ]
    path = _write(tmp_path / "t.jsonl", records, keys_sorted=False)
    got = check_trace(path).to_dict()
    assert got["counts"] == {"write-echo": 1}
    with python_reader():
        assert check_trace(path).to_dict() == got


@bounded(deep=60, ci=6)
@given(
    texts=st.lists(object_text, min_size=1, max_size=6),
    picks=st.lists(st.integers(0, 5), min_size=1, max_size=12),
    skip=st.booleans(),
)
def test_volatile_keys_dropped_in_sql_change_nothing(
    texts: list[str], picks: list[int], skip: bool
) -> None:
    """Dropping top-level volatile keys in DuckDB before the Python walk (``_unvolatile``)
    gives the report, or the error, of the walk alone, whatever the argument texts hold:
    odd numbers, escapes, duplicate and nested volatile keys, NaN, trailing commas."""
    lines = [GOOD]  # the first line tells the format: an odd one would stop both alike
    lines += [
        f'{{"run_id":"r","step":{i + 1},"tool":"t","args":{texts[p % len(texts)]},'
        f'"output_sha":"o{i % 3}"}}'.encode()
        for i, p in enumerate(picks)
    ]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t.jsonl"
        path.write_bytes(b"\n".join(lines) + b"\n")
        got = _outcome(lambda: check_trace(path, skip_bad_lines=skip))
        with _without_unvolatile():
            expected = _outcome(lambda: check_trace(path, skip_bad_lines=skip))
    assert got == expected


@pytest.mark.parametrize("skip", [False, True])
@pytest.mark.parametrize("odd", _ODD_ARGS)
def test_a_volatile_key_hides_no_error_of_its_value(tmp_path: Path, odd: str, skip: bool) -> None:
    """Arguments that the Python reader refuses (or reads otherwise) where DuckDB could drop
    a volatile key: the same error, skipped line or report as when the Python walk sees the
    whole text."""
    lines = [GOOD.decode()] + [
        f'{{"run_id":"r","step":2,"tool":"t","args":{args},"output_sha":"o"}}'
        for args in (odd, odd.replace('"a":1', '"a":2'), '{"ts":2,"a":1}')
    ]
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(lines) + "\n")
    got = _outcome(lambda: check_trace(path, skip_bad_lines=skip))
    with _without_unvolatile():
        assert _outcome(lambda: check_trace(path, skip_bad_lines=skip)) == got


def test_texts_differing_in_volatile_keys_are_walked_once(tmp_path: Path) -> None:
    """Texts that differ only in top-level volatile keys reach the Python walk as one text
    (``dsign``), and the report is the walk's own."""
    lines = [GOOD.decode()] + [
        f'{{"run_id":"r","step":2,"tool":"t","args":{{"request_id":"{u}","a":1}},'
        f'"output_sha":"o{i % 2}"}}'
        for i, u in enumerate(UUIDS[:5])
    ]
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(lines) + "\n")
    got, signed = _signed_texts(path)
    assert signed == ["dsign"]
    with _without_unvolatile():
        assert _signed_texts(path) == (got, ["distinct_args"])


def _answer(rid: str, text: str) -> dict[str, Any]:
    body = {"id": rid, "choices": [{"index": 0, "message": {"role": "assistant", "content": text}}]}
    return {"status": 200, "body": body}


@pytest.mark.parametrize("as_texts", [True, False], ids=["store-texts", "records"])
def test_a_model_answers_digest_is_what_it_says(as_texts: bool) -> None:
    """Two answers to one request in other envelopes (a new id each) are one output; two that
    say other things are two: from a store's texts (read by DuckDB) as from records. An
    output not recorded at a provider's boundary keeps its whole digest."""
    ask = {"messages": [{"role": "user", "content": "hi"}]}

    def run(name: str, rid: str, text: str) -> list[Record]:
        return [
            Record(kind="llm", run=name, name="m", step=1, api="openai.chat.completions",
                   input=ask, out=_answer(rid, text), out_digest=f"envelope-{rid}"),
            Record(kind="llm", run=name, name="m", step=2, input={"q": 1}, out={"x": rid},
                   out_digest=f"whole-{rid}"),
        ]  # fmt: skip

    def diffed(a: list[Record], b: list[Record]) -> dict[str, Any]:
        pair = [_texts(a), _texts(b)] if as_texts else [a, b]
        return diff_records(*pair).to_dict()

    same = diffed(run("a", "chatcmpl-1", "Pack."), run("b", "chatcmpl-2", "Pack."))
    assert same["origin"]["call"] == 2  # the tape.call answer's whole output differs
    assert "model-drift" in same["counts"] and same["counts"]["model-drift"] == 1
    other = diffed(run("a", "chatcmpl-1", "Pack."), run("b", "chatcmpl-1", "Stay."))
    assert (other["origin"]["call"], other["origin"]["cause"]) == (1, "model")


def test_what_was_never_keyed_is_no_part_of_a_calls_arguments() -> None:
    """A store's texts (read by DuckDB) and a list of records (read in Python) give a model
    call the same arguments: its input without ``step`` and ``unkeyed``, so two sessions
    whose noise differs call alike."""
    base = {"messages": [{"role": "user", "content": "hi"}], "params": {"model": "m"}, "step": 1}
    records = [
        Record(kind="llm", run="r", name="m", input={**base, "unkeyed": {"user": user}}, out=1)
        for user in ("u-1", "u-2")
    ]
    with Calls(AnalysisConfig()) as calls:
        load_records(calls, RecordTexts([msgspec.json.encode(r) for r in records]), "s")
        load_records(calls, records, "p")
        args = [json.loads(a) for (a,) in calls.rows("SELECT args FROM calls0 ORDER BY rowid")]
    assert args == [{k: v for k, v in base.items() if k != "step"}] * 4
