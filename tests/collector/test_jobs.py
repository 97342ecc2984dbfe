"""The analyses as worker jobs: what a worker process answers is, byte for byte, what the
server's own process answers (and what the routes answered when they analysed in it): a
diff, a check, a diff page, a run page, a run's summary with its verdict; with the rule
table as it is and with a severity overridden; over HTTP too."""

from __future__ import annotations

import gzip
import json
import pickle
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from fastapi.testclient import TestClient

from tests.span.test_model import record_agent
from tracetape.analysis import AnalysisConfig, check_records, diff_records
from tracetape.analysis.report import redacted
from tracetape.analysis.rules import classify_table
from tracetape.collector import jobs, pages
from tracetape.collector.jobs import Failed, perform
from tracetape.collector.workers import Workers
from tracetape.errors import TraceError
from tracetape.formats.cassette import read_cassette, run_id_of
from tracetape.record import RecordTexts
from tracetape.stores.database import Database


@pytest.fixture(scope="module")
def pool() -> Iterator[Workers]:
    workers = Workers(1)
    try:
        yield workers
    finally:
        workers.close()


@pytest.fixture(scope="module")
def agents(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two recordings of the same agent on two tasks (their runs diverge at the input)."""
    tmp = tmp_path_factory.mktemp("agents")
    good = record_agent(tmp / "good.jsonl")
    bad = record_agent(tmp / "bad.jsonl", "Find why the parser loses the last row of CSV exports")
    return good, bad


def _texts(path: Path) -> RecordTexts:
    return RecordTexts([msgspec.json.encode(rec) for rec in read_cassette(path).records])


def _old_diff(ra: RecordTexts, rb: RecordTexts, names: tuple[str, str], config: Any) -> str:
    """The diff's JSON as the route made it in the server's process."""
    report = diff_records(ra, rb, names=names, config=config, endings={})
    return json.dumps(redacted(report.to_dict()), ensure_ascii=False, default=str)


OVERRIDDEN = AnalysisConfig(rules=classify_table({"divergence": "suspicious"}))


@pytest.mark.parametrize(
    "config",
    [
        pytest.param(AnalysisConfig(), id="the-rule-table"),
        pytest.param(OVERRIDDEN, id="a-severity-overridden"),
    ],
)
def test_a_workers_diff_and_check_are_the_server_process_ones_byte_for_byte(
    pool: Workers, agents: tuple[Path, Path], config: AnalysisConfig
) -> None:
    """The divergence of two tasks is ``expected`` by its effect, unless the severity table
    says otherwise: the same in a worker, where the configuration arrives pickled."""
    ra, rb = map(_texts, agents)
    names = (str(agents[0]), str(agents[1]))
    here = jobs.diff(ra, rb, names, {}, config)
    there = pool.call(jobs.diff, ra, rb, names, {}, config)
    assert there == here == _old_diff(ra, rb, names, config)
    severity = {r["pattern"]: r["severity"] for r in json.loads(there)["table"]}
    assert severity["divergence"] == ("suspicious" if config is OVERRIDDEN else "expected")
    report = check_records(ra, name="good", config=config)
    old = json.dumps(redacted(report.to_dict()), ensure_ascii=False, default=str)
    assert pool.call(jobs.check, ra, "good", config) == jobs.check(ra, "good", config) == old


def test_a_workers_pages_and_summary_are_the_server_process_ones_byte_for_byte(
    pool: Workers, agents: tuple[Path, Path], tmp_path: Path
) -> None:
    ra, rb = map(_texts, agents)
    config = AnalysisConfig()
    ended = {"good": "completed", "bad": "completed"}
    page = pool.call(jobs.diff_page, ("good", "bad"), ra, rb, ended, config)
    assert page == jobs.diff_page(("good", "bad"), ra, rb, ended, config)
    report = diff_records(
        ra.records(), rb.records(), names=("good", "bad"), config=jobs.many(config), endings=ended
    )
    old = pages.diff_page("good", "bad", ra.records(), rb.records(), report)
    assert gzip.decompress(page) == old.encode()
    db = Database.open(f"sqlite:///{tmp_path / 'c.db'}")
    db.store(ra.records(), digest="good")
    (summary,) = db.runs_by_id([ra.records()[0].run])
    db.close()
    assert pool.call(jobs.run_page, "good", summary, ra) == jobs.run_page("good", summary, ra)
    there = pool.call(jobs.summary, "bad", rb, config, ("good", ra), ended)
    assert there == jobs.summary("bad", rb, config, ("good", ra), ended)
    assert (there.verdict or "").startswith("B diverged from A at step 1 (call #1)")
    assert (
        gzip.decompress(there.page or b"")
        == pages.diff_page("good", "bad", ra.records(), rb.records(), report).encode()
    )


def test_the_api_answers_the_bytes_the_server_process_gave(
    client: TestClient, agents: tuple[Path, Path]
) -> None:
    """``/v1/diff``, ``/v1/runs/R/check`` and the diff page, served from the workers: the
    bytes the routes gave when they analysed in the server's process."""
    for path in agents:
        params = {"source": str(path), "run": run_id_of(path)}
        assert client.post("/v1/lines", content=path.read_bytes(), params=params).status_code == 200
    a, b = map(run_id_of, agents)
    db = client.app.state.db  # type: ignore[attr-defined]
    ra, rb = db.record_texts(a), db.record_texts(b)
    config = client.app.state.settings.config  # type: ignore[attr-defined]
    ended = db.endings((a, b))
    report = diff_records(
        ra, rb, names=(str(agents[0]), str(agents[1])), config=config, endings=ended
    )
    old = json.dumps(redacted(report.to_dict()), ensure_ascii=False, default=str)
    assert client.get("/v1/diff", params={"a": a, "b": b}).content == old.encode()
    check = check_records(ra, name=a, config=config)
    old = json.dumps(redacted(check.to_dict()), ensure_ascii=False, default=str)
    assert client.get(f"/v1/runs/{a}/check").content == old.encode()
    shown = diff_records(
        ra.records(), rb.records(), names=(a, b), config=jobs.many(config), endings=ended
    )
    old = pages.diff_page(a, b, ra.records(), rb.records(), shown)
    assert client.get("/diff", params={"a": a, "b": b}).text == old


def _raises(exc: BaseException) -> None:
    raise exc


@pytest.mark.parametrize(
    ("exc", "name", "tape"),
    [
        pytest.param(TraceError("no calls", path="r1"), "TraceError", True, id="a-tape-error"),
        pytest.param(OverflowError("too big"), "OverflowError", False, id="another-error"),
    ],
)
def test_what_a_job_raises_crosses_back_as_failed(exc: Exception, name: str, tape: bool) -> None:
    """Whatever a job raises comes back as ``Failed``, which pickles (an error whose own
    arguments do not would break the pool), naming its type and whether it was a TapeError."""
    with pytest.raises(Failed) as raised:
        perform(_raises, exc)
    again = pickle.loads(pickle.dumps(raised.value))
    assert (again.name, again.tape, str(again)) == (name, tape, str(exc))
