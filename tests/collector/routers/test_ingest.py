"""Trace lines in (`POST /v1/lines`, `POST /v1/otlp/v1/traces`) against real SQLite and
real PostgreSQL: stored in order, atomic and deduplicated batches, bad and oversized bodies."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.collector.test_app import jsonl, seed_line
from tests.span.test_model import record_agent
from tracetape.formats.otlp import cassette_to_otlp


def test_lines_are_stored_and_read_back_in_order(client: TestClient) -> None:
    """JSONL and a JSON array both store; a run's events come back in the order received."""
    first = client.post(
        "/v1/lines", content=jsonl(seed_line("r1", 1, q="a"), seed_line("r1", 2, q="b"))
    )
    assert first.status_code == 200, first.text
    assert first.json()["stored"] == 2 and first.json()["runs"] == ["r1"]
    second = client.post("/v1/lines", json=[json.loads(seed_line("r1", 3, q="c"))])
    assert second.json()["stored"] == 1
    events = client.get("/v1/runs/r1").json()
    assert [e["step"] for e in events["events"]] == [1, 2, 3]
    assert events["run"]["events"] == 3 and events["run"]["steps"] == 3
    page = client.get("/v1/runs/r1", params={"limit": 2}).json()
    assert len(page["events"]) == 2 and page["next"] is not None
    rest = client.get("/v1/runs/r1", params={"after": page["next"]}).json()
    assert [e["step"] for e in rest["events"]] == [3]


def test_a_batch_sent_twice_is_stored_once(client: TestClient) -> None:
    body = jsonl(seed_line("r1", 1), seed_line("r1", 2))
    assert client.post("/v1/lines", content=body).json()["duplicate"] is False
    again = client.post("/v1/lines", content=body)
    assert again.status_code == 200 and again.json() | {"batch": ""} == {
        "stored": 0, "known": 2, "duplicate": True, "runs": ["r1"], "redacted": 0, "batch": ""
    }  # fmt: skip
    assert client.get("/v1/runs/r1").json()["run"]["events"] == 2
    # the same lines at another offset of the same source are other lines
    other = client.post("/v1/lines", content=body, params={"offset": 2})
    assert other.json()["stored"] == 2


def test_a_batch_with_bad_lines_stores_nothing_and_names_each(client: TestClient) -> None:
    body = jsonl(
        seed_line("r1", 1),
        '{"run_id": "r1", "step": "two", "tool": "x", "args": {}, "output_sha": "a"}',
        "not json at all",
        seed_line("r1", 4),
    )
    answer = client.post("/v1/lines", content=body, params={"offset": 100})
    assert answer.status_code == 400
    data = answer.json()
    assert data["error"] == "2 bad line(s); nothing of this batch was stored"
    assert [(e["line"], e["field"]) for e in data["lines"]] == [(102, "step"), (103, None)]
    assert "not valid JSON" in data["lines"][1]["message"]
    assert client.get("/v1/runs").json()["runs"] == []


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        pytest.param(b"[1, 2", 400, "not a JSON array", id="torn-array"),
        pytest.param(b'{"a": 1}', 400, "cannot tell the trace format", id="unknown-format"),
        pytest.param(b"\n\n", 400, "holds no trace lines", id="blank"),
        pytest.param(b'[{"x": 1}]', 400, "cannot tell the trace format", id="array-unknown"),
    ],
)
def test_malformed_bodies_are_400(
    client: TestClient, body: bytes, status: int, message: str
) -> None:
    answer = client.post("/v1/lines", content=body)
    assert answer.status_code == status and message in answer.json()["error"]


def test_oversized_bodies_and_batches_are_413(client: TestClient) -> None:
    """Over max_body (by Content-Length, or streamed without one) or max_lines: 413."""
    big = b"x" * ((1 << 20) + 1)
    assert client.post("/v1/lines", content=big).status_code == 413

    def chunks() -> Any:
        for _ in range(20):
            yield b"y" * 65536

    streamed = client.post("/v1/lines", content=chunks())
    assert streamed.status_code == 413 and "bytes" in streamed.json()["error"]
    many = jsonl(*(seed_line("r1", i) for i in range(2001)))
    assert client.post("/v1/lines", content=many).status_code == 413
    assert client.get("/v1/runs").json()["runs"] == []


def test_otlp_http_json_export_is_stored(client: TestClient, tmp_path: Path) -> None:
    """An OpenTelemetry exporter's POST lands as runs; protobuf is 415."""
    cassette = record_agent(tmp_path / "run.jsonl")
    doc = json.dumps(cassette_to_otlp(cassette), indent=2).encode()  # multi-line JSON
    answer = client.post(
        "/v1/otlp/v1/traces", content=doc, headers={"Content-Type": "application/json"}
    )
    assert answer.status_code == 200 and answer.json() == {"partialSuccess": {}}
    runs = client.get("/v1/runs").json()["runs"]
    assert len(runs) == 1 and runs[0]["events"] == 7
    proto = client.post(
        "/v1/otlp/v1/traces",
        content=b"\x0a\x00",
        headers={"Content-Type": "application/x-protobuf"},
    )
    assert proto.status_code == 415


LIMIT = 64 << 10


def test_a_compressed_body_inflates_to_its_bound_and_no_further() -> None:
    """A body that inflates to exactly the bound is whole; one byte more is a 413; a gzip
    bomb is refused having inflated about the bound, not the bomb (peak memory measured)."""
    import gzip
    import tracemalloc

    from tracetape.collector.ingest import BadBatch
    from tracetape.collector.routers.ingest import decoded

    exact = b"x" * LIMIT
    assert decoded(gzip.compress(exact), "gzip", LIMIT) == exact
    with pytest.raises(BadBatch) as over:
        decoded(gzip.compress(exact + b"x"), "gzip", LIMIT)
    assert over.value.status == 413 and f"over {LIMIT} bytes decompressed" in str(over.value)
    bomb = gzip.compress(b"\n" * (256 << 20))  # 256 MiB of newlines in about 256 KiB
    tracemalloc.start()
    try:
        with pytest.raises(BadBatch):
            decoded(bomb, "gzip", LIMIT)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 * LIMIT + len(bomb) * 2  # not the 256 MiB the bomb holds


@pytest.mark.parametrize(
    ("cut", "said"),
    [
        pytest.param(8, "cut short", id="trailer-gone"),  # the CRC and size: the data whole
        pytest.param(1, "cut short", id="last-byte-gone"),
        pytest.param(0, None, id="whole"),
    ],
)
def test_a_gzip_body_without_its_end_is_refused_and_nothing_stored(
    client: TestClient, cut: int, said: str | None
) -> None:
    """A gzip body missing its trailer (its data complete, so every line would parse) is a
    400 that says it is cut short, and none of its lines is stored; whole, all 200 are."""
    import gzip

    body = gzip.compress(jsonl(*(seed_line("r1", i) for i in range(1, 201))))
    answer = client.post(
        "/v1/lines", content=body[: len(body) - cut], headers={"Content-Encoding": "gzip"}
    )
    if said is None:
        assert answer.status_code == 200 and answer.json()["stored"] == 200
    else:
        assert answer.status_code == 400 and said in answer.json()["error"]
        assert client.get("/v1/runs").json()["runs"] == []
