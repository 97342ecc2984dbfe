"""The analysis workspace: every call of every input in one DuckDB table, its runs whole wherever
their calls are, its memory bounded, its files removed, analyses at once apart."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any
from unittest.mock import patch

import msgspec
import pytest
from click.testing import CliRunner

from tests.analysis.helpers import (
    SEED_A,
    call,
    check,
    many_calls,
    report_of,
    told_to_sign,
    write_jsonl,
)
from tracetape.analysis import AnalysisConfig, TraceError, check_trace, diff_records, engine, sign
from tracetape.analysis.engine import Calls, Input
from tracetape.analysis.load import load
from tracetape.cli import main
from tracetape.errors import ConfigError
from tracetape.record import Record, RecordTexts


def test_interleaved_runs_are_analyzed_whole(tmp_path: Path) -> None:
    """A run whose calls are spread among other runs' calls is still one run."""
    records = [call(r, 1, "s", {}, "o") for r in ["r1", "r2", "r3", "r1"]]
    report = check(tmp_path, records)
    assert report.runs == 3
    assert [f.message for f in report.findings] == [
        "repeat: r1 step 1 == step 1 (same args, same output)"
    ]


@pytest.mark.parametrize("runs", [1, 2])
@pytest.mark.parametrize("hashed", ["text_hash", "run_hash"])
def test_calls_of_texts_or_runs_that_share_a_hash_are_joined_by_name_and_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, runs: int, hashed: str
) -> None:
    """Calls join their texts and runs by the texts' and runs' hashes; where two share one
    (every text, or run, here: a hash of one bit), calls is built again, joined by the text
    and the run's name: the same report, of runs whose steps go back (a window) or not."""
    path = many_calls(tmp_path, 2_000)
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
        report = report_of(path)
        to_hash = getattr(engine, hashed)
        for module in (engine, sign):  # signing hashes the texts, prepare joins by the hash
            if hasattr(module, hashed):
                monkeypatch.setattr(module, hashed, lambda *column: f"{to_hash(*column)} % 2")
        assert report_of(path) == report
    assert rebuilt == [False, True]


def test_the_memory_limit_is_the_engines_and_a_tight_one_gives_the_same_report(
    tmp_path: Path,
) -> None:
    """memory_limit is set on the engine; under a tight one the report does not change."""
    with Calls(AnalysisConfig(memory_limit="200MB")) as calls:
        (limit,) = calls.one("SELECT current_setting('memory_limit')")
    assert limit.startswith(("190", "200"))  # DuckDB shows MiB
    path = many_calls(tmp_path)
    assert report_of(path, memory_limit="96MB") == report_of(path)


def test_a_limit_below_what_the_engine_needs_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Too little memory: a ConfigError saying what to raise, exit 2 from the CLI."""
    path = many_calls(tmp_path)
    with pytest.raises(ConfigError, match=r"raise memory_limit in \[tool.tracetape.analysis\]"):
        check_trace(path, config=AnalysisConfig(memory_limit="16MB"))
    (tmp_path / "pyproject.toml").write_text('[tool.tracetape.analysis]\nmemory_limit = "16MB"\n')
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["check", str(path)])
    assert result.exit_code == 2
    assert result.output.startswith("tracetape: error: the analysis needs more memory")


def test_no_temporary_file_is_left_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine's spill folder and load files go when the analysis ends, also on an error."""
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", None)
    check_trace(many_calls(tmp_path, 500))
    with pytest.raises(TraceError):
        check_trace(tmp_path / "missing.jsonl")
    with Calls(AnalysisConfig()) as calls:
        load(calls, [Input(write_jsonl(tmp_path / "x.jsonl", SEED_A))])
    assert list((tmp_path / "tmp").iterdir()) == []


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


def _texts(recs: list[Record]) -> RecordTexts:
    """``recs`` as a store keeps them."""
    return RecordTexts([msgspec.json.encode(r) for r in recs])


def test_token_sums_saturate_at_64_bits_as_the_store_does() -> None:
    """Three calls of 2**62 tokens each: the run's tokens stop at the largest 64-bit number
    (the store's rule), and check and diff answer instead of failing on the sum."""
    import json as _json

    from tracetape.analysis import check_records, diff_records
    from tracetape.formats import read_records
    from tracetape.record import INT64_MAX

    def run(name: str) -> list[Record]:
        return list(read_records([
            _json.dumps({"run_id": name, "step": i, "tool": "t", "args": {"i": i},
                         "output_sha": "o", "tokens": 2**62}).encode()
            for i in range(1, 4)
        ]))  # fmt: skip

    assert "token-budget" in [f.pattern for f in check_records(run("a")).findings]
    summary = diff_records(run("a"), run("b")).to_dict()["summary"]
    assert summary["tokens"] == [INT64_MAX, INT64_MAX]
