"""The entry points: ``diff_traces`` of the named runs of one file or of two files (run ids per
file, quotes as values), ``diff_records`` as its files, ``export_parquet`` read back as the
traces and its output named when it cannot be written."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.analysis.helpers import SEED_A, SEED_B, call, diff, write_jsonl
from tracetape.analysis import (
    TraceError,
    check_trace,
    diff_traces,
)
from tracetape.analysis.api import export_parquet
from tracetape.cli import main


def test_identical_runs_have_no_findings(tmp_path: Path) -> None:
    """Two runs that made the same calls with the same outputs produce no finding."""
    a = [call("A", 1, "s", {"q": "x"}, "o"), call("A", 2, "t", {"q": "y"}, "p")]
    b = [{**r, "run_id": "B"} for r in a]
    report = diff(tmp_path, a, b)
    assert report.findings == []
    assert report.divergence is None
    assert report.aligned == 2


def test_one_file_with_many_runs_diffs_the_named_runs(tmp_path: Path) -> None:
    """diff FILE --runs A B compares those two runs and ignores the others."""
    records = [
        call("r1", 1, "s", {"q": 1}, "x"),
        call("r2", 1, "s", {"q": 1}, "y"),
        call("r3", 1, "s", {"q": 9}, "z"),
    ]
    path = write_jsonl(tmp_path / "t.jsonl", records)
    report = diff_traces(path, runs=("r1", "r3"))
    assert (report.baseline["run"], report.candidate["run"]) == ("r1", "r3")  # type: ignore[index]
    assert report.divergence is not None and report.divergence.changes[0].path == "args.q"
    assert report.runs == 2


def test_the_same_run_id_in_both_files_names_two_runs(tmp_path: Path) -> None:
    """Run ids are per file: run_1 in A and run_1 in B are compared, not merged."""
    a = [call("run_1", 1, "s", {"q": 1}, "x")]
    b = [call("run_1", 1, "s", {"q": 1}, "x")]
    report = diff(tmp_path, a, b)
    assert report.findings == []
    assert report.runs == 2


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
