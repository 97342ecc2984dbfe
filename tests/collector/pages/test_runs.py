"""The run list: each run's row from the summary stored with its lines (pending: "…"), a
seed run's tokens and unknown cost, a compare form that works without JavaScript."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from tests.collector.test_app import jsonl, seed_line
from tracetape.collector.pages import RunsPaging, runs_page

PAGING = RunsPaging({}, None, None, False)


def _row(run: str, summary: dict[str, Any] | None, **extra: Any) -> dict[str, Any]:
    return {"run_id": run, "last_seen": 0.0, "steps": 1, "events": 2, "summary": summary,
            "began": None, **extra}  # fmt: skip


SEED = {"latency_ms": 125.0, "tokens": 7212, "tokens_in": None, "tokens_out": None,
        "models": 0, "unpriced": 0, "cost_text": None, "findings": {"suspicious": 1},
        "final": None}  # fmt: skip
PRICED = {**SEED, "tokens_in": 1000, "tokens_out": 200, "models": 2, "unpriced": 1,
          "cost_text": "0.00021", "findings": {}, "final": "Pack a coat."}  # fmt: skip


def test_a_rows_numbers_come_from_its_summary() -> None:
    """Seed: its tokens, cost unknown (never $0), its findings; priced: tokens in → out, the
    price and how many calls were not priced; pending: "…" in every number."""
    html = runs_page(
        [_row("seed", SEED), _row("priced", PRICED), _row("new", None)], PAGING
    )  # fmt: skip
    seed, priced, new = html.split("<tr>")[2:5]
    assert "7,212" in seed and "unknown" in seed and "$0" not in seed
    assert "1 suspicious" in seed
    assert "1,000 → 200" in priced and "$0.00021" in priced and "+ 1 unknown" in priced
    assert "Pack a coat." in priced
    assert new.count("…") == 5


def test_a_run_whose_check_failed_says_so() -> None:
    """A summary whose check failed shows that, with the reason on hover, not "none"."""
    html = runs_page([_row("r", {**SEED, "problem": "the check failed: TraceError: x"})], PAGING)
    assert "check failed" in html and "TraceError" in html


def test_the_compare_form_is_a_plain_get_form(client: TestClient) -> None:
    """Each row's box belongs to the compare form (``name=run``); two ticked runs open their
    diff, the earlier as the baseline; another count is a 400 that says what to do."""
    for run in ("first", "second"):
        client.post("/v1/lines", content=jsonl(seed_line(run, 1)))
    html = client.get("/").text
    assert "<form id=compare method=get action='/diff'>" in html
    assert "name=run form=compare value='first'" in html
    answer = client.get(
        "/diff", params=[("run", "second"), ("run", "first")], follow_redirects=False
    )
    assert answer.status_code == 303 and answer.headers["location"] == "/diff?a=first&b=second"
    one = client.get("/diff", params={"run": "first"}, headers={"Accept": "text/html"})
    assert one.status_code == 400 and "tick two runs to compare, not 1" in one.text
    missing = client.get("/diff", params=[("run", "first"), ("run", "gone")])
    assert missing.status_code == 404
    three = client.get("/diff", params=[("run", "first"), ("run", "second"), ("run", "x")])
    assert three.status_code == 400 and "at most 2" in three.json()["error"]
