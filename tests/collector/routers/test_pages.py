"""The pages' routes: a kept diff page is sent as kept (gzip) or inflated for a client that
does not accept gzip; a decision's raw record is there whole, or a 404 that says how many
there are."""

from __future__ import annotations

import gzip
from pathlib import Path

from fastapi.testclient import TestClient

from tests.analysis.helpers import record_tools


def _push(client: TestClient, tmp_path: Path) -> None:
    for run, out in (("first", "9"), ("second", "10")):
        path = record_tools(tmp_path / f"{run}.jsonl", [out])
        params = {"source": "runs/agent.jsonl", "run": run}
        assert client.post("/v1/lines", content=path.read_bytes(), params=params).status_code == 200
    client.app.state.collector.summaries.wait(["first", "second"])  # type: ignore[attr-defined]


def test_a_kept_diff_page_is_sent_gzipped_or_inflated(client: TestClient, tmp_path: Path) -> None:
    """The page drawn when the later run was stored: as kept to a client that accepts gzip,
    the same HTML inflated to one that does not."""
    _push(client, tmp_path)
    url = "/diff?a=first&b=second"
    zipped = client.get(url, headers={"Accept-Encoding": "gzip"})
    plain = client.get(url, headers={"Accept-Encoding": "identity"})
    assert zipped.headers["content-encoding"] == "gzip"
    assert "content-encoding" not in plain.headers
    assert zipped.text == plain.text and "id=verdict" in plain.text
    db, collector = client.app.state.db, client.app.state.collector  # type: ignore[attr-defined]
    events = tuple(r["events"] for r in sorted(db.runs_by_id(["first", "second"]),
                                                 key=lambda r: r["run_id"]))  # fmt: skip
    key = collector.page_key(("first", "second"), events, db.endings(["first", "second"]))
    body = db.page(key)
    assert body is not None and gzip.decompress(body).decode() == plain.text


def test_a_decision_is_there_whole_or_the_404_says_how_many(
    client: TestClient, tmp_path: Path
) -> None:
    """``/runs/RUN/raw/N``: decision N as JSON; past the last, a 404 naming the count."""
    _push(client, tmp_path)
    raw = client.get("/runs/first/raw/1")
    assert raw.status_code == 200 and raw.json()["kind"] == "tool"
    past = client.get("/runs/first/raw/9")
    assert past.status_code == 404 and past.json()["error"] == "run first has 1 decision, not 9"
