"""A private PostgreSQL server for the tests: initdb + pg_ctl in a temporary folder, on a
free loopback port, as the ``postgres`` user when the tests run as root.

``.ci/run`` installs Debian's ``postgresql`` package; ``TRACETAPE_TEST_POSTGRES`` (a server
URL without a database, ``postgresql+psycopg://USER@HOST:PORT``) uses a running server
instead. Where neither works, the tests that need it skip and say why.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class Unavailable(Exception):
    """No PostgreSQL server can be started here; the message says why."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _bin(name: str) -> str:
    found = sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"))
    if found:
        return str(found[-1])
    path = shutil.which(name)
    if path is None:
        raise Unavailable(f"PostgreSQL's {name} is not installed (apt-get install postgresql)")
    return path


@contextmanager
def postgres_server() -> Iterator[str]:
    """Yield the URL (no database) of a running PostgreSQL server."""
    given = os.environ.get("TRACETAPE_TEST_POSTGRES")
    if given:
        yield given.rstrip("/")
        return
    initdb, pg_ctl = _bin("initdb"), _bin("pg_ctl")
    folder = Path(tempfile.mkdtemp(prefix="tracetape-pg-"))
    data = folder / "data"
    prefix: list[str] = []
    if os.geteuid() == 0:  # initdb refuses root: run it as postgres
        try:
            user = pwd.getpwnam("postgres")
        except KeyError:
            raise Unavailable("running as root and there is no postgres user") from None
        os.chown(folder, user.pw_uid, user.pw_gid)
        prefix = ["runuser", "-u", "postgres", "--"]
    port = _free_port()
    run = lambda *args: subprocess.run(  # noqa: E731
        [*prefix, *args], capture_output=True, text=True, check=False, timeout=120
    )
    done = run(initdb, "-D", str(data), "-A", "trust", "-U", "postgres", "-E", "UTF8")
    if done.returncode != 0:
        raise Unavailable(f"initdb failed: {done.stderr.strip()[-300:]}")
    options = f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off"
    done = run(pg_ctl, "-D", str(data), "-o", options, "-l", str(folder / "log"), "-w", "start")
    if done.returncode != 0:
        log = (folder / "log").read_text() if (folder / "log").exists() else ""
        raise Unavailable(f"PostgreSQL did not start: {(done.stderr + log).strip()[-300:]}")
    try:
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}"
    finally:
        run(pg_ctl, "-D", str(data), "-m", "immediate", "stop")
        shutil.rmtree(folder, ignore_errors=True)


def new_database(server: str) -> str:
    """Create an empty database on ``server``; return its URL."""
    import psycopg

    name = f"t_{uuid.uuid4().hex[:12]}"
    plain = server.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(f"{plain}/postgres", autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return f"{server}/{name}"
