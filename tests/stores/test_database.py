"""The database store: the schema's versions and their migrations (a database the 0001
collector wrote, upgraded), and ``DatabaseStore`` under a tape."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient

from tests.collector.conftest import HEADERS
from tracetape import ConfigError, Record, Tape
from tracetape.collector import create_app
from tracetape.stores.database import Database, DatabaseStore
from tracetape.stores.migrations import HEAD

FIXTURES = Path(__file__).parent.parent / "fixtures"


def test_the_schema_is_versioned(db_url: str) -> None:
    """Opening twice is idempotent; a database from a newer tracetape is refused."""
    Database.open(db_url).close()
    db = Database.open(db_url)
    with db.engine.begin() as conn:
        assert conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalar() == HEAD
        conn.execute(sa.text("UPDATE alembic_version SET version_num = '9999'"))
    db.close()
    with pytest.raises(ConfigError, match="revision '9999', newer than this tracetape"):
        Database.open(db_url)


def test_a_tape_records_into_and_replays_from_the_database(db: Database) -> None:
    """DatabaseStore is a RecordStore: record, replay, re-record (a crashed run's recording is
    kept, as a file store keeps it); an aborted recording leaves the old run."""
    store = DatabaseStore(db, "agent-1")
    with Tape(store, mode="record") as tape:
        assert tape.call("tool", {"name": "ls", "args": {}, "step": 1}, lambda: ["a"]) == ["a"]
    with Tape(DatabaseStore(db, "agent-1"), mode="replay") as tape:
        assert tape.call("tool", {"name": "ls", "args": {}, "step": 1}, lambda: ["b"]) == ["a"]
    with pytest.raises(RuntimeError), Tape(DatabaseStore(db, "agent-1"), mode="rewrite") as tape:
        tape.call("tool", {"name": "ls", "args": {}, "step": 1}, lambda: ["c"])
        raise RuntimeError("the agent crashed")
    assert [r.out for r in db.records("agent-1")] == [["c"]]
    assert not db.run_exists("agent-1~pending")
    store = DatabaseStore(db, "agent-1")
    store.begin({})
    store.append(Record(kind="tool", name="ls", step=1, out=["d"]))
    store.abort()
    assert [r.out for r in db.records("agent-1")] == [["c"]]
    assert not db.run_exists("agent-1~pending")
    with pytest.raises(ValueError, match="is not a run id"):
        DatabaseStore(db, "a b")


def test_a_database_of_schema_0001_upgrades_and_stops_doubling(tmp_path: Path) -> None:
    """A database the collector wrote at schema 0001 (tests/fixtures/collector_schema_0001.db:
    six seed lines pushed twice in other batches, stored twice as that collector did, and a
    cassette): it upgrades on open, keeps every row readable, keys the first of each doubled
    line, and the same lines pushed again are recognised."""
    path = tmp_path / "c.db"
    shutil.copy(FIXTURES / "collector_schema_0001.db", path)
    db = Database.open(f"sqlite:///{path}")
    try:
        with db.engine.connect() as conn:
            assert conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalar() == HEAD
            keyed = conn.execute(
                sa.text("SELECT count(*) FROM events WHERE line_key IS NOT NULL")
            ).scalar()
        assert [len(db.records(run)) for run in ("r1", "agent")] == [12, 3]
        assert keyed == 6 + 3
        client = TestClient(create_app(db), base_url="http://127.0.0.1", headers=HEADERS)
        lines = [json.loads(line) for line in _fixture_lines()]
        again = client.post("/v1/lines", json=lines, params={"source": "runs/r1.jsonl"})
        assert again.json()["stored"] == 0 and again.json()["known"] == 6
        cassette = (FIXTURES / "recorded_before_trust_round_two.jsonl").read_bytes()
        answer = client.post(
            "/v1/lines", content=cassette, params={"source": "cassettes/agent.jsonl"}
        )
        assert answer.json()["stored"] == 0 and answer.json()["known"] == 3
    finally:
        db.close()


def _fixture_lines() -> list[str]:
    """The seed lines in the 0001 fixture, as tests/fixtures' generator wrote them."""
    return [
        json.dumps({"run_id": "r1", "step": i, "tool": "search", "args": {"q": str(i)},
                    "output_sha": f"o{i}", "tokens": 10})
        for i in range(1, 7)
    ]  # fmt: skip


def test_schema_0001_upgrades_on_both_databases(db_url: str) -> None:
    """A database at 0001 (built by its own migration) with a line stored twice: the upgrade
    widens steps to 64 bits on PostgreSQL, keys the rows (the doubled one left unkeyed), and
    a step past 32 bits is stored after it."""
    from alembic import command
    from alembic.config import Config

    from tracetape.stores import migrations

    engine = sa.create_engine(sa.engine.make_url(db_url))
    config = Config()
    config.set_main_option("script_location", str(Path(migrations.__file__).parent))
    record = json.dumps({"kind": "tool", "run": "r1", "name": "ls", "step": 1, "seq": 1,
                         "source": "t.jsonl", "line": 1, "key": "tool:ab"})  # fmt: skip
    with engine.begin() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, "0001")
        conn.execute(sa.text("INSERT INTO runs VALUES ('r1', 't.jsonl', 1, 1, 2, 1, 0)"))
        for _ in range(2):
            conn.execute(
                sa.text("INSERT INTO events (run_id, received, kind, name, step, record) "
                        "VALUES ('r1', 1, 'tool', 'ls', 1, :r)"), {"r": record},
            )  # fmt: skip
    engine.dispose()
    db = Database.open(db_url)
    try:
        with db.engine.connect() as conn:
            keys = [k for (k,) in conn.execute(sa.text("SELECT line_key FROM events ORDER BY id"))]
        assert keys[0] is not None and keys[1] is None
        assert len(db.records("r1")) == 2
        db.store([Record(kind="tool", run="r2", step=2**31, name="ls")], digest="d", keys=[7])
        assert db.runs_by_id(["r2"])[0]["steps"] == 2**31
    finally:
        db.close()


def _rec(run: str, step: int, **fields: object) -> Record:
    return Record(kind="tool", run=run, name="ls", step=step, **fields)  # type: ignore[arg-type]


def test_a_line_key_is_stored_once_per_table(db: Database) -> None:
    """The same keys in another batch are known, not stored; a batch sent again whole is a
    duplicate; lines without keys (a tape's own store) are always stored."""
    first = db.store([_rec("r1", 1), _rec("r1", 2)], digest="a", keys=[11, 12], source="f")
    assert (first.events, first.known, first.duplicate) == (2, 0, False)
    again = db.store([_rec("r1", 2), _rec("r1", 3)], digest="b", keys=[12, 13], source="f")
    assert (again.events, again.known) == (1, 1)
    whole = db.store([_rec("r1", 2), _rec("r1", 3)], digest="b", keys=[12, 13], source="f")
    assert whole.duplicate and whole.events == 0
    bare = db.store([_rec("r1", 4)], digest="c", source="f")
    assert bare.events == 1
    assert [r.step for r in db.records("r1")] == [1, 2, 3, 4]
    assert db.runs_by_id(["r1"])[0]["events"] == 4


def test_a_run_refuses_another_source_unless_appended(db: Database) -> None:
    from tracetape.stores.database import RunConflict

    db.store([_rec("r1", 1)], digest="a", keys=[1], source="runs/run.jsonl")
    with pytest.raises(RunConflict, match=r"runs/run\.jsonl.*other/run\.jsonl"):
        db.store([_rec("r1", 2)], digest="b", keys=[2], source="other/run.jsonl")
    assert len(db.records("r1")) == 1  # nothing of the refused batch
    db.store([_rec("r1", 2)], digest="c", keys=[2], source="other/run.jsonl", append=True)
    assert len(db.records("r1")) == 2


def test_a_runs_tokens_saturate_at_64_bits(db: Database) -> None:
    top = (1 << 63) - 1
    db.store([_rec("r1", 1, tokens=1 << 62) for _ in range(3)], digest="a")
    db.store([_rec("r1", 2, tokens=top)], digest="b")
    assert db.runs_by_id(["r1"])[0]["tokens"] == top


def test_rewrite_changes_only_the_rows_that_quote_the_text(db: Database) -> None:
    db.store([_rec("r1", 1, out="said 100%_sure"), _rec("r1", 2, out="other")], digest="a")
    db.store([_rec("r2", 1, out="said 100%_sure")], digest="b")
    seen: list[bytes] = []

    def fix(text: bytes) -> bytes:
        seen.append(text)
        return text.replace(b"100%_sure", b"[gone]")

    # LIKE's wildcards in the text are literal: "100%_sure" does not match "other"
    assert db.rewrite("r1", fix, ["100%_sure"]) == 1
    assert len(seen) == 1
    assert [r.out for r in db.records("r1")] == ["said [gone]", "other"]
    assert [r.out for r in db.records("r2")] == ["said 100%_sure"]  # another run is untouched
