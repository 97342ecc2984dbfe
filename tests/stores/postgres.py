"""A private PostgreSQL server for the tests: initdb + pg_ctl in a temporary folder, as the
``postgres`` user when the tests run as root. It listens on a Unix socket in that folder
only, no TCP port: servers of tests run in parallel never compete for a port.

``.ci/run`` installs Debian's ``postgresql`` package; ``TRACETAPE_TEST_POSTGRES`` (a server
URL without a database, ``postgresql+psycopg://USER@HOST:PORT``) uses a running server
instead. Where neither works, the tests that need it skip and say why (fail, under CI:
``tests/services.py``).
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class Unavailable(Exception):
    """No PostgreSQL server can be started here; the message says why."""


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
    run = lambda *args: subprocess.run(  # noqa: E731
        [*prefix, *args], capture_output=True, text=True, check=False, timeout=120
    )
    done = run(initdb, "-D", str(data), "-A", "trust", "-U", "postgres", "-E", "UTF8")
    if done.returncode != 0:
        raise Unavailable(f"initdb failed: {done.stderr.strip()[-300:]}")
    options = f"-k {folder} -c listen_addresses='' -c fsync=off"
    done = run(pg_ctl, "-D", str(data), "-o", options, "-l", str(folder / "log"), "-w", "start")
    if done.returncode != 0:
        log = (folder / "log").read_text() if (folder / "log").exists() else ""
        raise Unavailable(f"PostgreSQL did not start: {(done.stderr + log).strip()[-300:]}")
    try:
        yield f"postgresql+psycopg://postgres@/?host={folder}"
    finally:
        run(pg_ctl, "-D", str(data), "-m", "immediate", "stop")
        shutil.rmtree(folder, ignore_errors=True)


def new_database(server: str) -> str:
    """Create an empty database on ``server``; return its URL."""
    import psycopg
    from sqlalchemy.engine import make_url

    name = f"t_{uuid.uuid4().hex[:12]}"
    url = make_url(server)
    # libpq reads the same URL form, ``?host=/folder`` for a Unix socket included
    admin = url.set(drivername="postgresql", database="postgres")
    with psycopg.connect(admin.render_as_string(hide_password=False), autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return url.set(database=name).render_as_string(hide_password=False)
