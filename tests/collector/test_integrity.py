"""The collector's data integrity under hostile and careless input: every line typed at
ingest (no 500, no run poisoned), run identity (two files of one name stay two runs), and a
line stored once whatever the batching."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given
from hypothesis import strategies as st

from tests.collector.conftest import HEADERS, TOKEN
from tests.collector.test_app import jsonl, seed_line
from tests.collector.test_server import serving
from tests.span.test_model import record_agent
from tests.suite import bounded
from tracetape.collector import Settings, create_app
from tracetape.formats.cassette import read_cassette, run_id_of
from tracetape.stores.client import PushError, push
from tracetape.stores.database import Database

# One valid line of every format the collector reads (a cassette is its header and a record).
SEED = {"run_id": "r", "step": 1, "tool": "t", "args": {"q": "x"}, "output_sha": "ab",
        "tokens": 3, "ms": 1.5, "ts": "2026-12-01T00:00:00Z", "span_id": "s1",
        "parent_id": "s0", "effect": "read"}  # fmt: skip
SPAN = {"span_id": "7f", "tool_call": {"argv": ["ls"]}, "tool_result": "ok", "run_id": "r",
        "step": 1, "ts": "2026-12-01T00:00:00Z", "ms": 2.0, "parent_id": "p", "tokens": 4,
        "model_decision": {"tool_name": "ls", "args": {}}}  # fmt: skip
HEADER = {"tracetape": 2, "version": "0.1.0", "run_id": "r"}
RECORD = {"seq": 1, "key": "tool:0123456789abcdef", "kind": "tool", "step": 1, "ms": 1.0,
          "effect": "read", "out": ["a"], "tokens": 5, "usage": {"input_tokens": 5},
          "input": {"name": "ls", "args": {}, "step": 1}, "digests": {"args": "ab"}}  # fmt: skip
ATTR = [
    {"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}},
    {"key": "gen_ai.request.model", "value": {"stringValue": "m"}},
    {"key": "gen_ai.usage.input_tokens", "value": {"intValue": "7"}},
    {"key": "gen_ai.input.messages", "value": {"stringValue": "[]"}},
]
OTLP = {"resourceSpans": [{"scopeSpans": [{"spans": [{
    "traceId": "t1", "spanId": "s1", "startTimeUnixNano": "1764780000000000000",
    "endTimeUnixNano": "1764780001000000000", "attributes": ATTR}]}]}]}  # fmt: skip
VALID: dict[str, list[Any]] = {
    "seed": [SEED],
    "span": [SPAN],
    "cassette": [HEADER, RECORD],
    "otlp": [OTLP],
}

# Values of every JSON type and of the edges the columns have.
HOSTILE = st.sampled_from(
    [None, True, 0, -1, 7, 2**31, 2**62, 2**63 - 1, 2**63, -(2**63) - 1, 10**25, -(10**25),
     1.5, -0.0, 1e308, "", "x", "fast", "k" * 40, "1" * 30, "-" + "1" * 25, [], [1], {},
     {"id": 1}, {"stringValue": "chat"}, {"arrayValue": {"values": []}},
     {"kvlistValue": {"values": []}}, {"intValue": "1" * 25}, "\x00", "é\u2028"]
)  # fmt: skip


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value inside ``value`` (object keys and list indexes)."""
    out = [prefix] if prefix else []
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, (*prefix, i))
    return out


def _mutated(doc: Any, path: tuple[Any, ...], value: Any, delete: bool) -> Any:
    doc = copy.deepcopy(doc)
    parent = doc
    for part in path[:-1]:
        parent = parent[part]
    if delete and isinstance(parent, dict):
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return doc


@st.composite
def mutations(draw: st.DrawFn) -> tuple[str, bytes]:
    """A valid body of one format with one field of one line set to a hostile value (or
    removed)."""
    fmt = draw(st.sampled_from(sorted(VALID)))
    lines = copy.deepcopy(VALID[fmt])
    which = draw(st.integers(0, len(lines) - 1))
    path = draw(st.sampled_from(_paths(lines[which])))
    lines[which] = _mutated(lines[which], path, draw(HOSTILE), draw(st.booleans()))
    return fmt, b"".join(json.dumps(line).encode() + b"\n" for line in lines)


@pytest.fixture
def quiet_client(db: Database) -> TestClient:
    """The app without raising the server's exceptions: a 500 is an answer to look at."""
    app = create_app(db, Settings(token=TOKEN))
    return TestClient(
        app, base_url="http://127.0.0.1", headers=HEADERS, raise_server_exceptions=False
    )


def _read_every_run(client: TestClient, runs: list[str] | None = None) -> None:
    """Read ``runs`` (default: every run) back through the API and the pages."""
    if runs is None:
        listed = client.get("/v1/runs", params={"limit": 1000}).json()["runs"]
        runs = [r["run_id"] for r in listed]
    for run in runs:
        for url in (f"/v1/runs/{run}", f"/v1/runs/{run}/check", f"/runs/{run}"):
            answer = client.get(url)
            assert answer.status_code == 200, (url, answer.text)
    if len(runs) >= 2:
        answer = client.get("/v1/diff", params={"a": runs[0], "b": runs[-1]})
        assert answer.status_code in (200, 400), answer.text


@bounded(deep=60, ci=6, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(mutations(), min_size=1, max_size=4))
def test_random_mutations_never_answer_500_and_every_run_reads_back(
    quiet_client: TestClient, db: Database, bodies: list[tuple[str, bytes]]
) -> None:
    """Valid lines of every format with one field set to any type or edge value: each batch
    is stored (200) or refused naming a line (400, 409), never a 500; and afterwards every
    stored run reads back, on the API and the pages."""
    with db.engine.begin() as conn:  # each example on an empty database
        for table in ("events", "runs", "batches"):
            conn.execute(sa.text(f"DELETE FROM {table}"))
    touched: set[str] = set()
    for fmt, body in bodies:
        answer = quiet_client.post("/v1/lines", content=body, params={"source": fmt})
        assert answer.status_code in (200, 400, 409), (fmt, body, answer.text)
        if answer.status_code == 400 and "lines" in answer.json():
            assert all(isinstance(e["line"], int) for e in answer.json()["lines"])
        if answer.status_code == 200:
            touched.update(answer.json()["runs"])
    _read_every_run(quiet_client, sorted(touched))


@pytest.mark.parametrize(
    ("line", "field"),
    [
        (seed_line("p1", 1)[:-1] + ', "ts": 1764780000}', "ts"),
        (seed_line("p2", 1)[:-1] + ', "ms": "fast"}', "ms"),
        (seed_line("p3", 1)[:-1] + ', "span_id": 7}', "span_id"),
        (seed_line("p4", 1)[:-1] + ', "parent_id": {"id": 1}}', "parent_id"),
        (seed_line("p5", 2**63), "step"),
        (seed_line("p6", 1)[:-1] + f', "tokens": {2**63}}}', "tokens"),
        (json.dumps({**SPAN, "ts": 5}), "ts"),
        (json.dumps(HEADER) + "\n" + json.dumps({**RECORD, "digests": [1]}), "digests"),
        (json.dumps(HEADER) + "\n" + json.dumps({**RECORD, "kind": "k" * 40}), "kind"),
    ],
)
def test_a_mistyped_field_is_a_400_naming_it_and_the_run_stays_readable(
    quiet_client: TestClient, line: str, field: str
) -> None:
    """The poisoning lines of the issue: refused, naming line and field and the type, never
    the value; a healthy run they name stays readable."""
    assert quiet_client.post("/v1/lines", content=jsonl(seed_line("p1", 1))).status_code == 200
    answer = quiet_client.post("/v1/lines", content=(line + "\n").encode())
    assert answer.status_code == 400, answer.text
    bad = answer.json()["lines"][0]
    assert bad["field"] == field and bad["line"] >= 1
    assert "fast" not in bad["message"] and "1764780000" not in bad["message"]
    assert "--skip-bad-lines" not in answer.text  # a flag of the CLI, not of HTTP
    _read_every_run(quiet_client)


def _otlp(attrs: list[dict[str, Any]], start: str = "1") -> bytes:
    span = {"traceId": "t1", "spanId": "s1", "startTimeUnixNano": start,
            "endTimeUnixNano": start, "attributes": attrs}  # fmt: skip
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}).encode()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (_otlp(ATTR, "1" * 30), "startTimeUnixNano"),
        (_otlp(ATTR, "-" + "1" * 25), "startTimeUnixNano"),
        (_otlp([{"key": "gen_ai.operation.name", "value": {"arrayValue": {"values": []}}}]),
         "attributes.gen_ai.operation.name"),
        (_otlp([{"key": "gen_ai.operation.name", "value": {"kvlistValue": {"values": []}}}]),
         "attributes.gen_ai.operation.name"),
        (_otlp([*ATTR[:2], {"key": "gen_ai.usage.input_tokens",
                            "value": {"intValue": "1" * 25}}]),
         "attributes.gen_ai.usage.input_tokens"),
    ],
)  # fmt: skip
def test_hostile_otlp_is_a_400_on_both_routes(
    quiet_client: TestClient, body: bytes, field: str
) -> None:
    for route in ("/v1/lines", "/v1/otlp/v1/traces"):
        answer = quiet_client.post(
            route, content=body, headers={"Content-Type": "application/json"}
        )
        assert answer.status_code == 400, (route, answer.text)
        assert answer.json()["lines"][0]["field"].endswith(field)


def test_numbers_at_the_edges_of_the_columns_are_stored_and_read(quiet_client: TestClient) -> None:
    """A step past 32 bits, tokens summing past 2**63 (saturated, not overflowing) on both
    databases; an event id past 64 bits is a 400."""
    body = jsonl(*(json.dumps({**json.loads(seed_line("big", 2**31 + i)), "tokens": 2**62})
                   for i in range(3)))  # fmt: skip
    assert quiet_client.post("/v1/lines", content=body).status_code == 200
    again = jsonl(json.dumps({**json.loads(seed_line("big", 5)), "tokens": 2**63 - 1}))
    assert quiet_client.post("/v1/lines", content=again).status_code == 200
    run = quiet_client.get("/v1/runs/big").json()["run"]
    assert run["steps"] == 2**31 + 2 and run["tokens"] == 2**63 - 1
    assert quiet_client.get("/v1/runs/big", params={"after": 2**63}).status_code == 400


# -- run identity ---------------------------------------------------------------------------


def test_two_cassettes_of_one_name_are_two_runs(client: TestClient, tmp_path: Path) -> None:
    """runs/run.jsonl and other/run.jsonl (pytest's cassettes/<module>/<test>.jsonl when two
    modules share a test name): each recording has its own run id."""
    one = record_agent(tmp_path / "runs" / "run.jsonl")
    two = record_agent(tmp_path / "other" / "run.jsonl", "Another task")
    ids = {run_id_of(one), run_id_of(two)}
    assert len(ids) == 2 and all(i.startswith("run@") for i in ids)
    for path in (one, two):
        params = {"source": str(path), "run": run_id_of(path)}
        assert client.post("/v1/lines", content=path.read_bytes(), params=params).status_code == 200
    listed = {r["run_id"]: r["events"] for r in client.get("/v1/runs").json()["runs"]}
    assert listed == {run_id_of(p): len(read_cassette(p).records) for p in (one, two)}


def test_an_old_cassette_gets_a_run_id_from_its_chain(tmp_path: Path) -> None:
    """A cassette recorded before run ids: the same id every time, from its last chain
    digest; two such cassettes of one name still differ."""
    one = record_agent(tmp_path / "a" / "run.jsonl")
    two = record_agent(tmp_path / "b" / "run.jsonl", "Another task")
    for path in (one, two):
        lines = path.read_text().splitlines()
        header = json.loads(lines[0])
        del header["run_id"]
        path.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    chain = json.loads(one.read_text().splitlines()[-1])["chain"]
    assert run_id_of(one) == run_id_of(one) == f"run@{chain[:12]}"
    assert run_id_of(one) != run_id_of(two)


def test_lines_of_another_source_are_refused_unless_appended(client: TestClient) -> None:
    """Two span files with no run ids and one name: the second is a 409 naming both sources;
    --append adds it on purpose; --run-id files it apart."""
    body = jsonl(json.dumps({k: v for k, v in SPAN.items() if k != "run_id"}))
    first = client.post("/v1/lines", content=body, params={"source": "runs/run.jsonl"})
    assert first.status_code == 200 and first.json()["runs"] == ["run"]
    second = client.post("/v1/lines", content=body, params={"source": "other/run.jsonl"})
    assert second.status_code == 409
    assert (
        "runs/run.jsonl" in second.json()["error"] and "other/run.jsonl" in second.json()["error"]
    )
    assert "--append" in second.json()["error"] and "--run-id" in second.json()["error"]
    apart = client.post("/v1/lines", content=body,
                        params={"source": "other/run.jsonl", "run": "other-run"})  # fmt: skip
    assert apart.status_code == 200 and apart.json()["runs"] == ["other-run"]
    joined = client.post("/v1/lines", content=body,
                         params={"source": "other/run.jsonl", "append": "true"})  # fmt: skip
    assert joined.status_code == 200 and joined.json()["stored"] == 1
    assert client.get("/v1/runs/run").json()["run"]["events"] == 2


def test_an_otlp_export_never_merges_into_a_pushed_run(client: TestClient) -> None:
    """A run filled by a pushed file refuses an OTLP export naming the same trace; exports
    of one trace in several requests (a batching exporter) add up."""
    client.post("/v1/lines", content=jsonl(seed_line("t1", 1)), params={"source": "f.jsonl"})
    refused = client.post("/v1/otlp/v1/traces", content=_otlp(ATTR, "1764780000000000000"),
                          headers={"Content-Type": "application/json"})  # fmt: skip
    assert refused.status_code == 409
    first = _otlp(ATTR, "1764780000000000000").replace(b'"t1"', b'"t2"')
    second = first.replace(b'"s1"', b'"s2"')
    for body in (first, second, first):  # the first sent twice: stored once
        answer = client.post("/v1/otlp/v1/traces", content=body,
                             headers={"Content-Type": "application/json"})  # fmt: skip
        assert answer.status_code == 200, answer.text
    assert client.get("/v1/runs/t2").json()["run"]["events"] == 2


# -- a line stored once ----------------------------------------------------------------------


def _events(db_url: str) -> int:
    db = Database.open(db_url)
    try:
        with db.engine.connect() as conn:
            return int(conn.execute(sa.text("SELECT count(*) FROM events")).scalar() or 0)
    finally:
        db.close()


def test_a_line_is_stored_once_whatever_the_batching(db_url: str, tmp_path: Path) -> None:
    """A push refused with 413 and run again with a smaller --batch, as the 413 says; then
    the same file in other batches; then the file grown: each line stored once, and push
    says how many were new."""
    trace = tmp_path / "trace.jsonl"
    trace.write_text("".join(seed_line("r1", i, q=str(i)) + "\n" for i in range(1, 2501)))
    with serving(db_url, "--max-lines", "2000") as url:
        with pytest.raises(PushError, match="HTTP 413") as refused:
            push(trace, url, token=TOKEN, batch=3000)
        assert not refused.value.unreachable
        done = push(trace, url, token=TOKEN, batch=1000)
        assert (done.stored, done.known) == (2500, 0)
        again = push(trace, url, token=TOKEN, batch=700)
        assert (again.stored, again.known) == (0, 2500)
        with trace.open("a") as fh:
            fh.write("".join(seed_line("r1", i, q=str(i)) + "\n" for i in range(2501, 2601)))
        grown = push(trace, url, token=TOKEN, batch=1000)
        assert (grown.stored, grown.known) == (100, 2500)
    assert _events(db_url) == 2600


def test_a_cassette_pushed_after_a_live_push_stores_nothing_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tape(push=) sent the records live; `tracetape push` of the cassette afterwards finds
    every one of them stored."""
    from examples.agent import ScriptedModel, run

    from tests.span.test_model import TASK
    from tracetape import Tape

    monkeypatch.setenv("TRACETAPE_TOKEN", TOKEN)
    db_url = f"sqlite:///{tmp_path / 'c.db'}"
    path = tmp_path / "live.jsonl"
    with serving(db_url) as url:
        with Tape(str(path), mode="record", push=url) as tape:
            run(TASK, tape, ScriptedModel(latency_s=0))
        done = push(str(path), url, token=TOKEN)
    assert (done.stored, done.known) == (0, 7)
    assert _events(db_url) == 7


def test_an_integer_beyond_64_bits_in_a_value_is_stored_and_read_back(
    quiet_client: TestClient,
) -> None:
    """Found by the property test: an OTLP attribute holding an integer beyond 64 bits (the
    messages of a span) is stored, not a 500, and the run's API and pages read it back."""
    span = {
        "traceId": "t1",
        "spanId": "s1",
        "startTimeUnixNano": "1764780000000000000",
        "endTimeUnixNano": "1764780001000000000",
        "attributes": [
            {"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}},
            {"key": "gen_ai.input.messages", "value": {"intValue": "1111111111111111111111111"}},
        ],
    }
    body = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}).encode()
    answer = quiet_client.post("/v1/lines", content=body + b"\n", params={"source": "otlp"})
    assert answer.status_code == 200, answer.text
    _read_every_run(quiet_client, ["t1"])
