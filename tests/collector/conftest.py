"""Fixtures of the collector tests: a database of each kind, and the app over it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from tests.collector.postgres import Unavailable, new_database, postgres_server
from tracetape.collector import Settings, create_app
from tracetape.stores.database import Database

TOKEN = "test-token-0123456789"
# What a client of the API sends: the token, and JSONL declared as such.
HEADERS = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/x-ndjson"}


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    """A PostgreSQL server for the session (skipped, saying why, where none can start)."""
    try:
        with postgres_server() as url:
            yield url
    except Unavailable as exc:
        pytest.skip(f"no PostgreSQL server here: {exc}")


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh, empty database: a SQLite file, and a PostgreSQL database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'collector.db'}"
    server: str = request.getfixturevalue("pg_server")
    return new_database(server)


@pytest.fixture
def db(db_url: str) -> Iterator[Database]:
    database = Database.open(db_url)
    try:
        yield database
    finally:
        database.close()


@pytest.fixture
def client(db: Database) -> Iterator[TestClient]:
    """The collector app over ``db``, with a token and small limits."""
    app = create_app(db, Settings(token=TOKEN, max_body=1 << 20, max_lines=2000))
    with TestClient(app, base_url="http://127.0.0.1", headers=HEADERS) as c:
        yield c
