"""Shipping a trace file to a collector: retried with backoff while it cannot be reached (and
through one that comes back), a 4xx never retried, no database library needed."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import pytest

from tests.cli.test_collector import cli_without
from tests.collector.conftest import TOKEN
from tests.collector.test_app import seed_line
from tests.collector.test_server import PY, serving
from tests.sockets import UvicornThread
from tracetape.collector import Settings, create_app
from tracetape.stores.client import PushError, push
from tracetape.stores.database import Database


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


def test_push_needs_no_database_library(tmp_path: Path) -> None:
    """A client without SQLAlchemy, FastAPI or uvicorn pushes (the `push` extra is httpx)."""
    trace = tmp_path / "t.jsonl"
    trace.write_text(seed_line("r1", 1) + "\n")
    with serving(f"sqlite:///{tmp_path / 'c.db'}") as url:
        done = cli_without(
            ["sqlalchemy", "fastapi", "uvicorn", "alembic"],
            "push", str(trace), "--url", url, "--token", TOKEN,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "1 new, 0 already stored" in done.stdout


def test_the_client_is_where_it_was_too() -> None:
    """0.1 imported the client from ``tracetape.collector.push``: the same names, still."""
    from tracetape import errors
    from tracetape.collector import push as old
    from tracetape.stores import client

    assert (old.push, old.Pushed, old.DEFAULT_URL) == (
        client.push,
        client.Pushed,
        client.DEFAULT_URL,
    )
    assert old.PushError is client.PushError is errors.PushError
