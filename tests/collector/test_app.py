"""The collector's API against real SQLite and real PostgreSQL: storage, atomic and
deduplicated batches, limits, auth, hostile input, and the diff/check JSON of the CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient

from tests.analysis.helpers import record_tools
from tests.collector.conftest import TOKEN
from tests.span.test_model import record_agent
from tracetape.analysis import check_trace, diff_traces
from tracetape.analysis.report import redacted
from tracetape.formats.cassette import run_id_of
from tracetape.formats.otlp import cassette_to_otlp
from tracetape.stores.database import Database
from tracetape.stores.migrations import HEAD

SECRET = "sk-proj-CollectorLeak0123456789abcdefXYZ"


def seed_line(run: str, step: int, tool: str = "search", **args: Any) -> str:
    out = {"run_id": run, "step": step, "tool": tool, "args": args, "output_sha": f"o{step}"}
    return json.dumps(out)


def jsonl(*lines: str) -> bytes:
    return ("\n".join(lines) + "\n").encode()


def test_healthz_needs_no_token(client: TestClient) -> None:
    answer = client.get("/healthz", headers={"Authorization": ""})
    assert answer.status_code == 200
    assert answer.json()["ok"] is True and answer.json()["schema"] == HEAD


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


@pytest.mark.parametrize(
    ("header", "said"),
    [
        pytest.param("", "bearer token is required", id="missing"),
        pytest.param("Bearer wrong", "not this collector's", id="wrong"),
        pytest.param("Basic dGVzdA==", "Bearer scheme", id="basic"),
        pytest.param("Bearer", "not this collector's", id="empty"),
        # the right token under another scheme is refused: the scheme is checked
        pytest.param(f"Basic {TOKEN}", "Bearer scheme", id="right-token-basic"),
        pytest.param(f"Token {TOKEN}", "Bearer scheme", id="right-token-other-scheme"),
    ],
)
def test_every_v1_route_needs_the_token(client: TestClient, header: str, said: str) -> None:
    """A missing token, a wrong one and another scheme each get their own words."""
    for method, path in [
        ("post", "/v1/lines"), ("get", "/v1/runs"), ("get", "/v1/runs/r1"),
        ("get", "/v1/diff?a=r1&b=r2"), ("get", "/v1/runs/r1/check"),
        ("post", "/v1/otlp/v1/traces"),
    ]:  # fmt: skip
        answer = client.request(method, path, headers={"Authorization": header}, content=b"{}")
        assert answer.status_code == 401, (method, path)
        assert said in answer.json()["error"]


INJECTIONS = [
    "r1' OR '1'='1",
    "r1; DROP TABLE events;--",
    'r1" --',
    "../../etc/passwd",
    "r1\x00",
    "ｒ1",
]


@pytest.mark.parametrize("run", INJECTIONS)
def test_sql_in_run_ids_is_refused_and_harmless(client: TestClient, db: Database, run: str) -> None:
    """Run ids are validated everywhere; nothing is built from strings, tables survive."""
    client.post("/v1/lines", content=jsonl(seed_line("r1", 1)))
    pushed = client.post("/v1/lines", content=jsonl(seed_line(run, 1)))
    assert pushed.status_code == 400 and "must be a run id" in json.dumps(pushed.json())
    bad = client.get("/v1/diff", params={"a": run, "b": "r1"})
    assert bad.status_code == 400 and "the run id must be" in bad.json()["error"]
    assert client.get(f"/v1/runs/{quote(run, safe='')}").status_code in (400, 404)
    by_tool = client.get("/v1/runs", params={"tool": run})
    assert by_tool.status_code == 400 or by_tool.json()["runs"] == []
    assert client.get("/v1/runs", params={"cursor": run}).status_code == 400
    with db.engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM events")).scalar() == 1


def test_unknown_runs_are_404(client: TestClient) -> None:
    client.post("/v1/lines", content=jsonl(seed_line("r1", 1)))
    assert client.get("/v1/runs/nope").status_code == 404
    assert client.get("/v1/diff", params={"a": "r1", "b": "nope"}).status_code == 404
    assert client.get("/v1/runs/nope/check").status_code == 404


def _raw(db: Database) -> str:
    with db.engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT run_id, name, record FROM events")).all()
    return json.dumps([list(r) for r in rows])


def test_secrets_never_reach_the_database(client: TestClient, db: Database, tmp_path: Path) -> None:
    """A key in args, in a tool result, in prose and in a nested field is redacted first."""
    span = {
        "span_id": "s1",
        "run_id": "r9",
        "tool_call": {"argv": ["deploy", f"--key={SECRET}"]},
        "tool_result": {
            "stdout": f"using key {SECRET} now",
            "nested": {"api_key": "hunter2hunter2"},
        },
        "model_decision": {"tool_name": "deploy", "args": {"note": f"Bearer {SECRET}"}},
    }
    answer = client.post("/v1/lines", content=jsonl(json.dumps(span)))
    assert answer.status_code == 200 and answer.json()["redacted"] == 1
    seed = client.post("/v1/lines", content=jsonl(seed_line("r8", 1, token=SECRET)))
    assert seed.json()["redacted"] == 1
    raw = _raw(db)
    assert SECRET not in raw and "hunter2hunter2" not in raw
    assert "[REDACTED:" in raw
    if db.engine.dialect.name == "sqlite":
        database = Path(str(db.engine.url.database))
        for path in (database, Path(f"{database}-wal")):
            if path.exists():
                assert SECRET.encode() not in path.read_bytes()


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


def test_the_openapi_spec_documents_every_route(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    assert {"/v1/lines", "/v1/otlp/v1/traces", "/v1/runs", "/v1/runs/{run_id}",
            "/v1/runs/{run_id}/check", "/v1/diff", "/healthz"} <= set(paths)  # fmt: skip


def test_a_run_id_that_is_a_secret_is_refused_not_stored(client: TestClient, db: Database) -> None:
    """Redaction runs before the run id is checked: a key used as a run id never lands."""
    answer = client.post("/v1/lines", content=jsonl(seed_line(SECRET, 1)))
    assert answer.status_code == 400
    assert answer.json()["lines"][0]["field"] == "run_id"
    assert SECRET not in json.dumps(answer.json())
    assert SECRET not in _raw(db)


def test_a_pushed_cassettes_ending_reaches_the_diff(client: TestClient, tmp_path: Path) -> None:
    """A cassette whose recording failed, pushed: the collector keeps its trailer's ending, so
    /v1/diff and the diff page say the candidate ended failed where the baseline went on, a
    fatal divergence, as tracetape diff does on the files."""
    paths = [
        record_tools(tmp_path / "good.jsonl", ["9", "8"]),
        record_tools(tmp_path / "bad.jsonl", ["9"], fail=True),
    ]
    for path in paths:
        params = {"source": str(path), "run": path.stem}
        assert client.post("/v1/lines", content=path.read_bytes(), params=params).status_code == 200
    api = client.get("/v1/diff", params={"a": "good", "b": "bad"}).json()
    assert api["summary"]["ending"] == ["completed", "failed: ValueError"]
    assert (api["origin"]["cause"], api["origin"]["call"]) == ("ending", 2)
    assert api["worst"] == "fatal"
    cli = json.loads(json.dumps(redacted(diff_traces(*paths).to_dict()), default=str))
    assert api["origin"] == cli["origin"] and api["summary"] == cli["summary"]
    page = client.get("/diff", params={"a": "good", "b": "bad"}).text
    assert "B ended where A went on" in page and "failed: ValueError" in page


def test_only_a_trailer_says_how_a_pushed_run_ended(client: TestClient, tmp_path: Path) -> None:
    """A cassette pushed without its trailer (as a live push sends its records: a header,
    then records) says nothing of its ending: the run's ending stays unknown, and the diff
    does not call it unfinished."""
    path = record_tools(tmp_path / "live.jsonl", ["9"])
    lines = path.read_bytes().splitlines(keepends=True)
    assert b'"ended"' in lines[-1]
    params = {"source": "live", "run": "live"}
    assert client.post("/v1/lines", content=b"".join(lines[:-1]), params=params).status_code == 200
    again = {"source": "again", "run": "again"}
    assert client.post("/v1/lines", content=path.read_bytes(), params=again).status_code == 200
    api = client.get("/v1/diff", params={"a": "again", "b": "live"}).json()
    assert api["summary"]["ending"] == ["completed", None]
    assert api["origin"] is None
