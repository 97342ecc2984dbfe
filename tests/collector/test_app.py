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
from tracetape.analysis import diff_traces
from tracetape.analysis.report import redacted
from tracetape.stores.database import Database

SECRET = "sk-proj-CollectorLeak0123456789abcdefXYZ"


def seed_line(run: str, step: int, tool: str = "search", **args: Any) -> str:
    out = {"run_id": run, "step": step, "tool": tool, "args": args, "output_sha": f"o{step}"}
    return json.dumps(out)


def jsonl(*lines: str) -> bytes:
    return ("\n".join(lines) + "\n").encode()


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


def test_the_routes_refused_before_routing_are_exactly_those_that_analyse() -> None:
    """When the gate is full, the middleware refuses these paths before FastAPI routes them:
    the routes that hold a slot and the run list, and no other (health, the runs' JSON and
    ingest keep answering)."""
    from tracetape.collector.app import _analyses
    from tracetape.collector.routers import pages, query

    paths = [p.pattern for p in _analyses(query.router, pages.router)]
    assert sorted(paths) == sorted([
        "^/v1/runs/(?P<run_id>[^/]+)/check$",
        "^/v1/diff$",
        "^/$",
        "^/runs/(?P<run_id>[^/]+)$",
        "^/runs/(?P<run_id>[^/]+)/raw/(?P<n>[^/]+)$",
        "^/diff$",
    ])  # fmt: skip
