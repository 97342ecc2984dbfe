"""The collector as real processes on 127.0.0.1 (``tracetape serve``, built from the environment
by ``app_from_env``): concurrent pushers, two collectors over one PostgreSQL database, several
workers over one SQLite file, no listening beyond loopback without a token. ``serving`` starts
one for the other collector tests."""

from __future__ import annotations

import os
import queue
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import sqlalchemy as sa

from tests.collector.conftest import HEADERS, TOKEN
from tests.collector.test_app import jsonl, seed_line
from tracetape.stores.database import Database

PY = sys.executable


# What a collector process is given to start: long enough for a loaded machine, short enough
# that one that never starts fails its test instead of hanging it.
START_S = 60.0


class _Printed:
    """What a process prints, read to its end in a thread (a full pipe never blocks it), and
    the collector's address once its line says it listens."""

    def __init__(self, proc: subprocess.Popen[str]):
        self.proc = proc
        self.lines: list[str] = []
        self._address: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)
            found = re.match(r"tracetape collector on (http://\S+) ", line)
            if found:
                self._address.put(found[1])
        self._address.put(None)

    def address(self) -> str:
        """The URL the collector printed (it listens once it prints it)."""
        try:
            url = self._address.get(timeout=START_S)
        except queue.Empty:
            url = None
        if url is None:
            raise AssertionError(f"serve printed no address: {''.join(self.lines)}")
        return url


@contextmanager
def serving(db_url: str, *args: str, token: str | None = TOKEN) -> Iterator[str]:
    """`tracetape serve` on a port it picks (``--port 0``) in a subprocess; yields the URL
    its first line names, once /healthz answers there."""
    env = {**os.environ}
    env.pop("TRACETAPE_TOKEN", None)
    if token:
        env["TRACETAPE_TOKEN"] = token
    proc = subprocess.Popen(
        [PY, "-m", "tracetape", "serve", "--db", db_url, "--port", "0", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        url = _Printed(proc).address()
        # it listens already: the request waits in its backlog until the app is ready
        assert httpx.get(f"{url}/healthz", timeout=START_S).status_code == 200
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def stored_counts(db_url: str) -> tuple[int, int]:
    """The events and the runs stored in the database at ``db_url``."""
    db = Database.open(db_url, migrate=False)
    try:
        with db.engine.connect() as conn:
            events = conn.execute(sa.text("SELECT count(*) FROM events")).scalar()
            runs = conn.execute(sa.text("SELECT count(*) FROM runs")).scalar()
        return int(events or 0), int(runs or 0)
    finally:
        db.close()


def _pushers(urls: list[str], n: int, per: int) -> list[int]:
    """``n`` threads, each posting ``per`` batches of 50 lines to the urls in turn."""
    codes: list[int] = []
    lock = threading.Lock()

    def pusher(k: int) -> None:
        with httpx.Client(headers=HEADERS, timeout=60) as c:
            for b in range(per):
                body = jsonl(*(seed_line(f"p{k}", b * 50 + i, q=str(i)) for i in range(50)))
                answer = c.post(f"{urls[(k + b) % len(urls)]}/v1/lines", content=body,
                                params={"source": f"p{k}", "offset": str(b * 50)})  # fmt: skip
                with lock:
                    codes.append(answer.status_code)

    threads = [threading.Thread(target=pusher, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return codes


def test_eight_concurrent_pushers_lose_nothing(db_url: str) -> None:
    """8 clients at once, 5 batches each: every line stored once, every answer a 2xx."""
    with serving(db_url) as url:
        codes = _pushers([url], 8, 5)
    assert codes == [200] * 40
    assert stored_counts(db_url) == (8 * 5 * 50, 8)


def test_two_collectors_share_one_postgresql_database(pg_server: str) -> None:
    """Two server processes, 8 pushers spread over both, and a batch re-sent to the other
    collector: nothing lost, nothing doubled."""
    from tests.stores.postgres import new_database

    db_url = new_database(pg_server)
    with serving(db_url) as one, serving(db_url) as two:
        codes = _pushers([one, two], 8, 4)
        body = jsonl(seed_line("q0", 0, q="0"))
        headers = HEADERS
        first = httpx.post(f"{one}/v1/lines", content=body, headers=headers, params={"source": "x"})
        again = httpx.post(f"{two}/v1/lines", content=body, headers=headers, params={"source": "x"})
    assert codes == [200] * 32
    assert first.json()["duplicate"] is False and again.json()["duplicate"] is True
    assert stored_counts(db_url) == (8 * 4 * 50 + 1, 9)


def test_serve_refuses_to_listen_beyond_loopback_without_a_token(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "TRACETAPE_TOKEN"}
    done = subprocess.run(
        [PY, "-m", "tracetape", "serve", "--db", f"sqlite:///{tmp_path / 'c.db'}",
         "--host", "0.0.0.0", "--port", "0"],
        env=env, capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert "refusing to listen on 0.0.0.0 without a token" in done.stderr


def test_several_workers_serve_one_database(tmp_path: Path) -> None:
    """--workers 2: uvicorn forks two processes over one SQLite file; 8 pushers lose nothing."""
    db_url = f"sqlite:///{tmp_path / 'c.db'}"
    with serving(db_url, "--workers", "2") as url:
        codes = _pushers([url], 8, 3)
    assert codes == [200] * 24
    assert stored_counts(db_url) == (8 * 3 * 50, 8)
