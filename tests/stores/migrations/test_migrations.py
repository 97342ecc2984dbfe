"""The schema's versions: a database is upgraded to the newest on open (one the 0001 collector
wrote, one built by the 0001 migration), by one process at a time, and a newer one is
refused."""

from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient

from tests.collector.conftest import HEADERS
from tracetape import ConfigError, Record
from tracetape.collector import create_app
from tracetape.stores.database import Database
from tracetape.stores.migrations import HEAD, upgrade

FIXTURES = Path(__file__).parents[2] / "fixtures"


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
        assert db.endings(["r1", "agent"]) == {}  # stored before endings were kept
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


def test_upgrades_at_once_migrate_once(tmp_path: Path) -> None:
    """Collectors starting together against one new SQLite file: each upgrade waits for the
    one before it (a lock file beside the database), so every one of them succeeds and the
    schema is created once, at ``HEAD``."""
    url = f"sqlite:///{tmp_path / 'c.db'}"
    engines = [sa.create_engine(url) for _ in range(4)]
    start = threading.Barrier(len(engines))
    failures: list[BaseException] = []

    def migrate(engine: sa.Engine) -> None:
        start.wait()
        try:
            upgrade(engine)
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=migrate, args=(e,)) for e in engines]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    with engines[0].connect() as conn:
        assert conn.execute(sa.text("SELECT version_num FROM alembic_version")).all() == [(HEAD,)]
    for engine in engines:
        engine.dispose()
    assert (tmp_path / "c.db.migrate-lock").exists()
