"""Fixtures shared by the whole suite."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.services import skip_or_fail
from tests.sockets import refused_port as _refused_port
from tests.span.helpers import Decider
from tests.stores.postgres import Unavailable, new_database, postgres_server

if TYPE_CHECKING:
    from tracetape.stores.database import Database

# Hypothesis profiles, the marker ``deep`` and the progress line per module (tests/suite.py).
pytest_plugins = ["tests.suite"]


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB tmpfs (skipped where this test may not mount one)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs to fill (needs root): {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=False)


@pytest.fixture
def refused_port() -> Iterator[int]:
    """A port on 127.0.0.1 where every connection is refused during the test (bound, never
    listening: no other test can take it meanwhile)."""
    with _refused_port() as port:
        yield port


@pytest.fixture
def decider() -> Iterator[Decider]:
    """A second model (an OpenAI-compatible chat endpoint) on 127.0.0.1; set its ``reply``."""
    server = Decider()
    server._thread.start()
    try:
        yield server
    finally:
        server.answering.set()  # a request a test held is answered, and its thread ends
        server._server.shutdown()
        server._server.server_close()


# -- databases: a SQLite file and a private PostgreSQL (tests/stores/postgres.py) ------------


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    """A PostgreSQL server for the session (skipped, saying why, where none can start;
    failed under CI)."""
    try:
        with postgres_server() as url:
            yield url
    except Unavailable as exc:
        skip_or_fail(f"no PostgreSQL server here: {exc}")


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh, empty database: a SQLite file, and a PostgreSQL database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'collector.db'}"
    server: str = request.getfixturevalue("pg_server")
    return new_database(server)


@pytest.fixture
def db(db_url: str) -> Iterator[Database]:
    """The database at ``db_url``, its schema created."""
    from tracetape.stores.database import Database

    database = Database.open(db_url)
    try:
        yield database
    finally:
        database.close()
