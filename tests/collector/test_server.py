"""`tracetape serve` and `tracetape push` as real processes on 127.0.0.1: concurrent pushers,
two collectors over one PostgreSQL database, retries, refusals; the database store under a
tape; the schema's versions."""

from __future__ import annotations

import json
import os
import queue
import re
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from tests.collector.conftest import HEADERS, TOKEN
from tests.collector.test_app import jsonl, seed_line
from tests.sockets import UvicornThread
from tests.span.test_model import record_agent
from tracetape.collector import Settings, create_app
from tracetape.collector.push import PushError, push
from tracetape.formats.cassette import run_id_of
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


def _count(db_url: str) -> tuple[int, int]:
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
    assert _count(db_url) == (8 * 5 * 50, 8)


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
    assert _count(db_url) == (8 * 4 * 50 + 1, 9)


def test_push_ships_a_file_in_batches_and_again_stores_nothing_twice(
    tmp_path: Path,
) -> None:
    """The CLI: batches, a summary, --format json; pushing again finds every batch stored."""
    db_url = f"sqlite:///{tmp_path / 'c.db'}"
    trace = tmp_path / "trace.jsonl"
    trace.write_text("\n".join(seed_line("r1", i, q=str(i % 5)) for i in range(1, 251)) + "\n")
    cassette = record_agent(tmp_path / "agent.jsonl")
    with serving(db_url) as url:
        env = {**os.environ, "TRACETAPE_TOKEN": TOKEN, "TRACETAPE_URL": url}
        cmd = [PY, "-m", "tracetape", "push", str(trace), str(cassette), "--batch", "100"]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr
        assert f"{trace}: 250 new, 0 already stored, from 250 line(s) in 3 batch(es)" in done.stdout
        assert f"{cassette}: 7 new, 0 already stored, from 9 line(s) in 1 batch(es)" in done.stdout
        assert f"runs: {run_id_of(cassette)} " in done.stdout
        again = subprocess.run(
            [*cmd, "--format", "json"], env=env, capture_output=True, text=True, check=False
        )
        data = json.loads(again.stdout)
        assert [(d["stored"], d["known"], d["duplicate_batches"]) for d in data] == [
            (0, 250, 3), (0, 7, 1)
        ]  # fmt: skip
        wrong = subprocess.run(cmd, env={**env, "TRACETAPE_TOKEN": "nope"}, capture_output=True,
                               text=True, check=False)  # fmt: skip
        assert wrong.returncode == 2 and "HTTP 401" in wrong.stderr
    assert _count(db_url) == (257, 2)


def test_push_retries_then_reports_an_unreachable_collector(
    tmp_path: Path, refused_port: int
) -> None:
    """Connection refused: retried with backoff, then PushError (exit 3 on the CLI)."""
    trace = tmp_path / "t.jsonl"
    trace.write_text(seed_line("r1", 1) + "\n")
    waits: list[float] = []
    url = f"http://127.0.0.1:{refused_port}"
    with pytest.raises(PushError, match="after 4 attempts") as caught:
        push(trace, url, retries=3, sleep=waits.append)
    assert caught.value.unreachable
    assert len(waits) == 3 and waits[0] < waits[1] < waits[2]
    done = subprocess.run(
        [PY, "-m", "tracetape", "push", str(trace), "--url", url, "--retries", "0"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 3 and "cannot reach" in done.stderr


def test_push_retries_through_a_collector_that_comes_back(tmp_path: Path) -> None:
    """A collector that starts while the push waits to retry gets every line, once: the
    attempt before it is refused, the one after it is stored."""
    db = Database.open(f"sqlite:///{tmp_path / 'c.db'}")
    trace = tmp_path / "t.jsonl"
    trace.write_text("\n".join(seed_line("r1", i) for i in range(1, 6)) + "\n")
    # bound, not listening: refused until the collector is handed the socket and listens
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = UvicornThread(create_app(db, Settings(token=TOKEN)), sock)
    waits: list[float] = []

    def start_then_wait(seconds: float) -> None:
        if not waits:
            server.start()
        waits.append(seconds)

    try:
        done = push(trace, server.url, token=TOKEN, retries=3, sleep=start_then_wait)
    finally:
        server.stop()
        db.close()
    assert done.stored == 5
    assert len(waits) == 1


def test_serve_refuses_to_listen_beyond_loopback_without_a_token(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "TRACETAPE_TOKEN"}
    done = subprocess.run(
        [PY, "-m", "tracetape", "serve", "--db", f"sqlite:///{tmp_path / 'c.db'}",
         "--host", "0.0.0.0", "--port", "0"],
        env=env, capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert "refusing to listen on 0.0.0.0 without a token" in done.stderr


@pytest.mark.parametrize(
    ("url", "message"),
    [
        pytest.param("not a url", "is not a database URL", id="garbage"),
        pytest.param("mysql://x/y", "tracetape stores in SQLite or PostgreSQL", id="mysql"),
        pytest.param(
            "postgresql+psycopg://nobody@127.0.0.1:{refused}/x", "cannot reach the database",
            id="down",
        ),
    ],
)  # fmt: skip
def test_serve_names_a_bad_database(url: str, message: str, refused_port: int) -> None:
    done = subprocess.run(
        [PY, "-m", "tracetape", "serve", "--db", url.format(refused=refused_port),
         "--port", "0"],
        capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2 and message in done.stderr, done.stderr


def test_several_workers_serve_one_database(tmp_path: Path) -> None:
    """--workers 2: uvicorn forks two processes over one SQLite file; 8 pushers lose nothing."""
    db_url = f"sqlite:///{tmp_path / 'c.db'}"
    with serving(db_url, "--workers", "2") as url:
        codes = _pushers([url], 8, 3)
    assert codes == [200] * 24
    assert _count(db_url) == (8 * 3 * 50, 8)


# -- the first hour: extras, ports, 4xx ----------------------------------------------------------

# Run tracetape's command line with these modules made unimportable, as on an install without
# the extra that brings them.
_WITHOUT = """
import sys
for name in {blocked!r}:
    sys.modules[name] = None
from tracetape.cli import main
main()
"""


def _cli_without(blocked: list[str], *args: str) -> subprocess.CompletedProcess[str]:
    code = _WITHOUT.format(blocked=blocked)
    return subprocess.run([PY, "-c", code, *args], capture_output=True, text=True, check=False)


def test_push_needs_no_database_library(tmp_path: Path) -> None:
    """A client without SQLAlchemy, FastAPI or uvicorn pushes (the `push` extra is httpx)."""
    trace = tmp_path / "t.jsonl"
    trace.write_text(seed_line("r1", 1) + "\n")
    with serving(f"sqlite:///{tmp_path / 'c.db'}") as url:
        done = _cli_without(
            ["sqlalchemy", "fastapi", "uvicorn", "alembic"],
            "push", str(trace), "--url", url, "--token", TOKEN,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "1 new, 0 already stored" in done.stdout


@pytest.mark.parametrize(
    ("blocked", "command", "extra"),
    [(["fastapi"], "serve", "server"), (["sqlalchemy"], "serve", "server"),
     (["httpx"], "push", "push")],
)  # fmt: skip
def test_a_missing_extra_is_one_line_with_an_install_command_that_works(
    tmp_path: Path, blocked: list[str], command: str, extra: str
) -> None:
    args = [command] if command == "serve" else [command, str(tmp_path / "t.jsonl")]
    done = _cli_without(blocked, *args)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr
    found = re.search(r"pip install '([^']+)\[(\w+)\]'", lines[0])
    assert found and found[2] == extra
    # the path it names is this checkout, which pip can install with that extra
    assert (Path(found[1]) / "pyproject.toml").is_file()
    assert f"{extra} = [" in (Path(found[1]) / "pyproject.toml").read_text()


def test_serve_on_a_busy_port_says_so_before_it_claims_to_run(tmp_path: Path) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        done = subprocess.run(
            [PY, "-m", "tracetape", "serve", "--db", f"sqlite:///{tmp_path / 'c.db'}",
             "--port", str(port)], env=_no_token(), capture_output=True, text=True,
            check=False, timeout=60,
        )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert f"cannot listen on 127.0.0.1:{port}" in done.stderr and "--port" in done.stderr
    assert "tracetape collector on" not in done.stderr


def _no_token() -> dict[str, str]:
    env = {**os.environ}
    env.pop("TRACETAPE_TOKEN", None)
    return env


def test_a_4xx_is_not_retried(tmp_path: Path) -> None:
    """A refused batch stops the push at once (no backoff, not 'unreachable'), naming the
    lines it covered; a wrong token is said to be wrong."""
    trace = tmp_path / "t.jsonl"
    trace.write_text(seed_line("r1", 1) + "\n" + '{"run_id": "r1"}\n')
    waits: list[float] = []
    with serving(f"sqlite:///{tmp_path / 'c.db'}") as url:
        with pytest.raises(PushError, match=r"the batch of lines 1-2: .*HTTP 400") as refused:
            push(trace, url, token=TOKEN, sleep=waits.append)
        wrong = pytest.raises(PushError, match="not this collector's")
        with wrong:
            push(trace, url, token="not-the-token-0123456789", sleep=waits.append)
    assert not refused.value.unreachable and waits == []
