"""The collector's limits at their edges: a body of exactly ``max_body`` bytes (declared,
streamed or decompressed), a batch of exactly ``max_lines`` lines, and ``max_analyses``
analyses at once with ``analysis_queue`` waiting are served; one byte, one line or one
analysis more is refused, and so is one that waited ``analysis_wait`` seconds."""

from __future__ import annotations

import asyncio
import gzip
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from tests.collector.conftest import HEADERS, TOKEN
from tests.collector.test_app import jsonl, seed_line
from tests.sockets import START_S, UvicornThread
from tracetape.collector import Settings, create_app
from tracetape.collector.deps import workers
from tracetape.collector.workers import Workers
from tracetape.stores.database import Database

BODY = jsonl(*(seed_line("r1", i) for i in range(1, 6)))  # 5 lines


@pytest.fixture
def database(tmp_path: Path) -> Iterator[Database]:
    db = Database.open(f"sqlite:///{tmp_path / 'c.db'}")
    try:
        yield db
    finally:
        db.close()


def _post(db: Database, content: Any, *, max_body: int, max_lines: int = 100, **kw: Any) -> int:
    app = create_app(db, Settings(token=TOKEN, max_body=max_body, max_lines=max_lines))
    with TestClient(app, base_url="http://127.0.0.1", headers=HEADERS) as client:
        return client.post("/v1/lines", content=content, **kw).status_code


def _streamed() -> Iterator[bytes]:
    """The body in two pieces, sent without a Content-Length."""
    yield BODY[:100]
    yield BODY[100:]


@pytest.mark.parametrize(
    ("content", "headers"),
    [
        pytest.param(BODY, {}, id="declared"),
        pytest.param(_streamed, {}, id="streamed"),
        pytest.param(gzip.compress(BODY), {"Content-Encoding": "gzip"}, id="decompressed"),
    ],
)
def test_a_body_of_max_body_bytes_is_stored_and_one_byte_more_is_413(
    database: Database, content: Any, headers: dict[str, str]
) -> None:
    def sent() -> Any:
        return content() if callable(content) else content

    assert _post(database, sent(), max_body=len(BODY), headers=headers) == 200
    assert _post(database, sent(), max_body=len(BODY) - 1, headers=headers) == 413


def test_a_batch_of_max_lines_lines_is_stored_and_one_line_more_is_413(database: Database) -> None:
    assert _post(database, BODY, max_body=1 << 20, max_lines=5) == 200
    assert _post(database, BODY, max_body=1 << 20, max_lines=4) == 413


class _Held:
    """Worker processes whose analyses wait until the test lets them go (``release``); each
    says when it started waiting (``started``)."""

    def __init__(self, workers: Workers):
        self.workers = workers
        self.started = threading.Semaphore(0)
        self.release = threading.Event()

    async def run(self, job: Callable[..., Any], *args: Any) -> Any:
        self.started.release()
        assert await asyncio.to_thread(self.release.wait, START_S), "never released"
        return await self.workers.run(job, *args)


def _held_server(db: Database, **settings: Any) -> tuple[UvicornThread, _Held]:
    """A collector over ``db`` holding ``BODY`` (its summary computed: the background
    worker takes a slot too), its analyses ``_Held``."""
    app = create_app(db, Settings(token=TOKEN, **settings))
    held = _Held(app.state.collector.workers)
    app.dependency_overrides[workers] = lambda: held
    server = UvicornThread(app).start()
    assert httpx.post(f"{server.url}/v1/lines", content=BODY, headers=HEADERS).status_code == 200
    assert app.state.collector.summaries.wait(["r1"], START_S)
    return server, held


def _waiting(url: str, n: int) -> None:
    """Return once ``n`` requests wait for a slot (``/healthz`` says)."""
    deadline = time.monotonic() + START_S
    while httpx.get(f"{url}/healthz").json()["analyses"]["waiting"] != n:
        assert time.monotonic() < deadline, f"{n} requests never waited"
        time.sleep(0.01)


def test_max_analyses_run_a_full_queue_waits_and_one_more_is_told_to_retry_at_once(
    database: Database,
) -> None:
    """With max_analyses 2 and analysis_queue 1: two checks held running and one waiting
    (the queue exactly full) are all answered once let go; one more, meanwhile, is a 503
    with Retry-After at once, saying why (a page opened in a browser, as a page); once they
    are done, a check runs again."""
    server, held = _held_server(database, max_analyses=2, analysis_queue=1)
    codes: list[int] = []

    def check() -> None:
        with httpx.Client(headers=HEADERS, timeout=START_S) as client:
            codes.append(client.get(f"{server.url}/v1/runs/r1/check").status_code)

    try:
        with httpx.Client(headers=HEADERS, timeout=START_S) as client:
            admitted = [threading.Thread(target=check) for _ in range(3)]
            for thread in admitted:
                thread.start()
            for _ in range(2):  # two analyses hold both slots
                assert held.started.acquire(timeout=START_S)
            _waiting(server.url, 1)  # and the third waits: the queue is full
            start = time.monotonic()
            busy = client.get(f"{server.url}/v1/runs/r1/check")
            refused_in = time.monotonic() - start
            page = client.get(f"{server.url}/runs/r1", headers={"Accept": "text/html"})
            held.release.set()
            for thread in admitted:
                thread.join(START_S)
            again = client.get(f"{server.url}/v1/runs/r1/check")
    finally:
        held.release.set()
        server.stop()
    assert codes == [200, 200, 200]
    assert (busy.status_code, busy.headers.get("retry-after")) == (503, "1")
    assert busy.json() == {"error": "2 analyses are running and 1 waiting; retry in a moment"}
    assert refused_in < START_S / 3  # at once: not after the held analyses
    assert (page.status_code, page.headers.get("retry-after")) == (503, "1")
    assert page.headers["content-type"].startswith("text/html")  # a browser's: a page
    assert "2 analyses are running and 1 waiting" in page.text
    assert again.status_code == 200


def test_a_request_waits_for_a_slot_at_most_analysis_wait_seconds(database: Database) -> None:
    """With one slot held, a request in the queue is refused (503, Retry-After) once
    ``analysis_wait`` seconds passed without a slot, not later."""
    server, held = _held_server(database, max_analyses=1, analysis_queue=4, analysis_wait=0.5)
    first: list[int] = []

    def check() -> None:
        with httpx.Client(headers=HEADERS, timeout=START_S) as client:
            first.append(client.get(f"{server.url}/v1/runs/r1/check").status_code)

    try:
        with httpx.Client(headers=HEADERS, timeout=START_S) as client:
            running = threading.Thread(target=check)
            running.start()
            assert held.started.acquire(timeout=START_S)
            start = time.monotonic()
            waited = client.get(f"{server.url}/v1/runs/r1/check")
            took = time.monotonic() - start
            held.release.set()
            running.join(START_S)
    finally:
        held.release.set()
        server.stop()
    assert first == [200]
    assert (waited.status_code, waited.headers.get("retry-after")) == (503, "1")
    assert waited.json()["error"] == (
        "no analysis slot came free within 0.5 s (1 running); retry in a moment"
    )
    assert 0.5 <= took < START_S / 3
