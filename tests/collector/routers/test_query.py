"""The JSON API over what is stored: runs filtered and paged, unknown runs, and the diff
JSON exactly as `tracetape diff --format json` gives it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from tests.collector.test_app import jsonl, seed_line
from tests.span.test_model import record_agent
from tracetape.analysis import check_trace, diff_traces
from tracetape.analysis.report import redacted
from tracetape.formats.cassette import run_id_of


def test_diff_is_exactly_the_json_of_tracetape_diff(client: TestClient, tmp_path: Path) -> None:
    """Two cassettes pushed under their file names: /v1/diff equals `tracetape diff --format
    json` on the files, byte for byte as JSON values."""
    good = record_agent(tmp_path / "good.jsonl")
    bad = record_agent(
        tmp_path / "bad.jsonl", "Find why the parser loses the last row of CSV exports"
    )
    for path in (good, bad):
        params = {"source": str(path), "run": run_id_of(path)}
        answer = client.post("/v1/lines", content=path.read_bytes(), params=params)
        assert answer.status_code == 200, answer.text
    api = client.get("/v1/diff", params={"a": run_id_of(good), "b": run_id_of(bad)}).json()
    cli = json.loads(json.dumps(redacted(diff_traces(good, bad).to_dict()), default=str))
    assert api == cli
    assert api["summary"]["ending"] == ["completed", "completed"]  # from the trailers pushed
    assert api["origin"]["cause"] == "input" and api["summary"]["final"]["changed"] is False
    assert api["divergence"]["position"] == 1
    check = client.get(f"/v1/runs/{run_id_of(good)}/check").json()
    expected = json.loads(json.dumps(redacted(check_trace(good).to_dict()), default=str))
    assert check | {"inputs": []} == expected | {"inputs": []}


def test_seed_jsonl_in_batches_diffs_like_the_file(client: TestClient, tmp_path: Path) -> None:
    """A file sent in batches (source and offset) is numbered as the file is."""
    trace = tmp_path / "trace.jsonl"
    lines = [seed_line("a", i, q=str(i % 3)) for i in range(1, 8)]
    lines += [seed_line("b", i, q=str(i % 4)) for i in range(1, 8)]
    trace.write_text("\n".join(lines) + "\n")
    for offset in range(0, len(lines), 5):
        body = jsonl(*lines[offset : offset + 5])
        params = {"source": str(trace), "offset": str(offset)}
        assert client.post("/v1/lines", content=body, params=params).status_code == 200
    api = client.get("/v1/diff", params={"a": "a", "b": "b"}).json()
    cli = json.loads(
        json.dumps(redacted(diff_traces(trace, runs=("a", "b")).to_dict()), default=str)
    )
    assert api == cli | {"inputs": api["inputs"]}


def test_runs_filter_by_time_and_tool_and_paginate(client: TestClient) -> None:
    for i in range(5):
        client.post(
            "/v1/lines", content=jsonl(seed_line(f"r{i}", 1, tool="read" if i % 2 else "write"))
        )
    everything = client.get("/v1/runs").json()["runs"]
    assert [r["run_id"] for r in everything] == ["r4", "r3", "r2", "r1", "r0"]
    reads = client.get("/v1/runs", params={"tool": "read"}).json()["runs"]
    assert sorted(r["run_id"] for r in reads) == ["r1", "r3"]
    seen: list[str] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": 2}
        if cursor:
            params["cursor"] = cursor
        page = client.get("/v1/runs", params=params).json()
        seen += [r["run_id"] for r in page["runs"]]
        cursor = page["next"]
        if cursor is None:
            break
    assert seen == ["r4", "r3", "r2", "r1", "r0"]
    last = everything[0]["last_seen"]
    assert client.get("/v1/runs", params={"since": last + 1}).json()["runs"] == []
    assert len(client.get("/v1/runs", params={"until": last + 1}).json()["runs"]) == 5
    assert client.get("/v1/runs", params={"limit": 0}).status_code == 400


def test_unknown_runs_are_404(client: TestClient) -> None:
    client.post("/v1/lines", content=jsonl(seed_line("r1", 1)))
    assert client.get("/v1/runs/nope").status_code == 404
    assert client.get("/v1/diff", params={"a": "r1", "b": "nope"}).status_code == 404
    assert client.get("/v1/runs/nope/check").status_code == 404


def test_a_run_whose_tokens_overflow_64_bits_is_still_analysed(client: TestClient) -> None:
    """Lines of 2**62 tokens each are stored (the run's tokens saturate), and the check, the
    diff and the diff page of that run answer 200, not 500."""
    import json

    def lines(run: str) -> bytes:
        line = {"run_id": run, "tool": "t", "output_sha": "o", "tokens": 2**62}
        return jsonl(*(json.dumps({**line, "step": i, "args": {"i": i}}) for i in range(1, 4)))

    for run in ("big", "big2"):
        assert client.post("/v1/lines", content=lines(run)).status_code == 200
    for url in ("/v1/runs/big/check", "/v1/diff?a=big&b=big2", "/diff?a=big&b=big2", "/"):
        assert client.get(url).status_code == 200, url
