"""Each run's numbers and findings are computed when its lines are stored, by one background
worker, and the run list reads them: it never analyses on view."""

from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path
from typing import Any

import msgspec
import pytest
from fastapi.testclient import TestClient

from tests.collector.conftest import HEADERS
from tests.collector.test_app import jsonl, seed_line
from tracetape.collector import Settings, create_app
from tracetape.collector import summaries as summaries_module
from tracetape.collector.summaries import Summaries, summarize
from tracetape.record import Record, RecordTexts
from tracetape.stores.database import Database

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _texts(*records: Record) -> RecordTexts:
    return RecordTexts([msgspec.json.encode(rec) for rec in records])


def _seed(run: str, step: int, tokens: int, ts: str, tool: str = "search") -> str:
    line = {"run_id": run, "step": step, "tool": tool, "args": {"q": step},
            "output_sha": f"o{step}", "tokens": tokens, "ts": ts}  # fmt: skip
    return json.dumps(line)


def test_a_seed_run_counts_its_tokens_and_its_cost_is_unknown_not_zero() -> None:
    """Seed lines carry tokens on tool calls and name no model: the summary counts them all,
    prices nothing, and keeps the run's own time from the lines' ``ts``."""
    records = [
        Record(kind="tool", name="search", step=1, tokens=812, ts="2026-08-31T09:12:04Z"),
        Record(kind="tool", name="read_file", step=2, tokens=4300, ts="2026-08-31T09:13:00Z"),
    ]
    s = summarize(_texts(*records), "r1")
    assert (s["tokens"], s["tokens_in"], s["tokens_out"]) == (5112, None, None)
    assert (s["models"], s["cost"], s["cost_text"]) == (0, None, None)
    assert s["names"] == "read_file\nsearch"
    assert s["finished"] - s["began"] == 56.0


def test_a_model_run_counts_tokens_in_and_out_and_prices_them() -> None:
    """A recorded model call's usage gives tokens in and out; a known model is priced."""
    rec = Record(
        kind="llm", name="gpt-4o-mini", api="openai.chat.completions", ms=120.0,
        usage={"input": 1000, "output": 200},
        out={"status": 200, "body": {"choices": [{"message": {"content": "It rains."}}]}},
    )  # fmt: skip
    s = summarize(_texts(rec), "r1")
    assert (s["tokens_in"], s["tokens_out"], s["tokens"], s["models"]) == (1000, 200, 1200, 1)
    assert s["latency_ms"] == 120.0 and s["final"] == "It rains."
    assert s["began"] is None  # no record says when it ran
    if s["unpriced"] == 0:  # the price table is the server extra's
        assert s["cost"] > 0 and s["cost_text"].startswith("0.")


def test_a_final_answer_is_redacted_before_it_is_cut() -> None:
    """A secret in the final answer is redacted, then the answer is cut to its bound."""
    key = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0" * 3
    text = f"use {key} " + "word " * 200
    body = {"choices": [{"message": {"content": text}}]}
    rec = Record(
        kind="llm", name="m", api="openai.chat.completions", out={"status": 200, "body": body}
    )
    final = summarize(_texts(rec), "r1")["final"]
    assert key[:12] not in final and "[REDACTED" in final
    assert len(final) == summaries_module._FINAL_CHARS and final.endswith("…")


def test_the_worker_does_each_run_once_per_pass_and_outlives_a_failure() -> None:
    """Runs queued while the worker is busy are done once each, in order; a run whose
    computation raises does not stop the others; ``wait`` says when given runs are done."""
    done: list[str] = []
    release = threading.Event()

    def compute(run: str, diff: bool) -> None:
        if run == "slow":
            release.wait(5)
        if run == "bad":
            raise RuntimeError("boom")
        done.append(run)

    worker = Summaries(compute)
    worker.add(["slow"])
    worker.add(["a", "bad", "a", "b"])
    assert not worker.wait(["a"], timeout=0.05)  # still behind "slow"
    release.set()
    assert worker.wait(["slow", "a", "bad", "b"], timeout=5)
    assert done == ["slow", "a", "b"]
    worker.add(["c"])
    assert worker.wait(["c"], timeout=5) and done[-1] == "c"
    worker.close()
    worker.add(["d"])
    assert worker.wait(["d"], timeout=0.05) is False and "d" not in done


def _runs(client: TestClient, **params: str) -> list[dict[str, Any]]:
    return list(client.get("/v1/runs", params=params).json()["runs"])


def test_the_run_list_reads_numbers_stored_with_the_lines(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once a run's lines are stored, its summary is computed in the background; the run list
    shows its tokens, findings and own time without analysing anything on view."""
    lines = [_seed("r1", 1, 812, "2026-08-31T09:12:04Z"),
             _seed("r1", 2, 4300, "2026-08-31T09:13:00Z"),
             _seed("r1", 3, 10, "2026-08-31T09:14:00Z", tool="delete_file")]  # fmt: skip
    assert client.post("/v1/lines", content=jsonl(*lines)).status_code == 200
    client.app.state.collector.summaries.wait(["r1"])  # type: ignore[attr-defined]

    def never(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the run list analysed on view")

    monkeypatch.setattr(summaries_module, "summarize", never)
    monkeypatch.setattr(summaries_module, "check_records", never)
    page = client.get("/")
    assert page.status_code == 200
    assert "5,122" in page.text and "unknown" in page.text and "$0" not in page.text
    assert "ran 2026-08-31 09:12:04 UTC" in page.text
    (row,) = _runs(client)
    assert row["summary"]["tokens"] == 5122 and row["summary_of"] == 3
    assert "names" not in row  # the filter's column, not the API's


def test_a_run_list_opened_at_once_waits_for_the_summary_once(client: TestClient) -> None:
    """A run list opened right after a push shows the new run's numbers: it waits for the
    worker (once, at most ``WAIT_S``)."""
    client.post("/v1/lines", content=jsonl(_seed("r1", 1, 77, "2026-08-31T09:12:04Z")))
    page = client.get("/")
    assert "77" in page.text and "…" not in page.text


def test_lines_stored_later_make_the_summary_stale_and_it_is_computed_again(
    client: TestClient,
) -> None:
    """A summary is kept only while its run holds the events it read: the next batch queues
    the run again, and the list shows the grown numbers."""
    client.post("/v1/lines", content=jsonl(_seed("r1", 1, 100, "2026-08-31T09:12:04Z")))
    client.get("/")
    db: Database = client.app.state.db  # type: ignore[attr-defined]
    assert not db.set_summary("r1", {"tokens": 1}, read=7)  # read from another count: refused
    client.post("/v1/lines", content=jsonl(_seed("r1", 2, 23, "2026-08-31T09:12:05Z")))
    assert "123" in client.get("/").text
    (row,) = _runs(client)
    assert row["summary"]["tokens"] == 123 and row["summary_of"] == row["events"] == 2


def test_runs_stored_before_summaries_are_backfilled_when_the_collector_starts(
    tmp_path: Path,
) -> None:
    """A database written at schema 0001 (tests/fixtures/collector_schema_0001.db) upgrades,
    and the collector computes its runs' summaries in the background when it starts."""
    path = tmp_path / "c.db"
    shutil.copy(FIXTURES / "collector_schema_0001.db", path)
    db = Database.open(f"sqlite:///{path}")
    try:
        assert sorted(db.unsummarized()) == ["agent", "r1"]
        app = create_app(db, Settings())
        assert app.state.collector.summaries.wait(["agent", "r1"])
        assert db.unsummarized() == []
        client = TestClient(app, base_url="http://127.0.0.1", headers=HEADERS)
        rows = {r["run_id"]: r for r in _runs(client)}
        assert rows["r1"]["summary"]["tokens"] >= 0 and "names" not in rows["r1"]["summary"]
        assert rows["agent"]["summary"]["models"] >= 1
    finally:
        db.close()


def test_the_text_filter_and_the_severity_filter_read_the_summaries(client: TestClient) -> None:
    """``q`` matches a run's id or a tool or model it called (as stored with its summary);
    ``severity`` keeps runs whose worst finding is at least that bad."""
    client.post("/v1/lines", content=jsonl(seed_line("calm", 1, tool="Lookup_Weather")))
    client.post(
        "/v1/lines",
        content=jsonl(*(seed_line("loop", i, tool="search", q="same") for i in range(1, 8))),
    )
    client.get("/")  # waits for both summaries
    assert [r["run_id"] for r in _runs(client)] == ["loop", "calm"]
    listed = client.get("/", params={"q": "weather"}).text
    assert "calm" in listed and "/runs/loop" not in listed
    worst = client.get("/", params={"severity": "suspicious"}).text
    assert "/runs/loop" in worst and "/runs/calm" not in worst
    none = client.get("/", params={"q": "no-such-tool"}).text
    assert "no runs match these filters" in none


def test_a_page_waits_for_a_slow_summary_once_then_shows_it_pending() -> None:
    """A run whose summary takes long stalls one wait of at most its timeout; the next
    page does not wait for it again (it shows it pending); lines stored again make it
    waitable again."""
    import time

    release = threading.Event()
    worker = Summaries(lambda run, diff: release.wait(5))
    worker.add(["slow"])
    start = time.perf_counter()
    assert worker.wait_once(["slow"], timeout=0.2) is False
    first = time.perf_counter() - start
    start = time.perf_counter()
    assert worker.wait_once(["slow"], timeout=5) is False  # not waited for again
    again = time.perf_counter() - start
    assert 0.2 <= first < 2 and again < 0.1
    assert worker.queued("slow")
    worker.add(["slow"])  # its lines changed: a page may wait once more
    release.set()
    assert worker.wait_once(["slow"], timeout=5) is True
    assert not worker.queued("slow")
