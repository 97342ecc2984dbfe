"""The collector's limits at their edges: a body of exactly ``max_body`` bytes (declared,
streamed or decompressed), a batch of exactly ``max_lines`` lines and ``max_analyses``
analyses at once are served; one byte, one line or one analysis more is refused."""

from __future__ import annotations

import gzip
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from tests.collector.conftest import HEADERS, TOKEN
from tests.collector.test_app import jsonl, seed_line
from tests.sockets import START_S, UvicornThread
from tracetape.collector import Settings, create_app
from tracetape.collector.routers import query as query_routes
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


def test_max_analyses_at_once_run_and_one_more_is_told_to_retry(
    database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With max_analyses 2: two checks held running at once are both answered; a third,
    meanwhile, is a 503 with Retry-After; once they are done, a check runs again."""
    entered = threading.Semaphore(0)
    release = threading.Event()
    check_records = query_routes.check_records

    def held(*args: Any, **kwargs: Any) -> Any:
        entered.release()
        assert release.wait(START_S), "the test never released the analysis"
        return check_records(*args, **kwargs)

    monkeypatch.setattr(query_routes, "check_records", held)
    app = create_app(database, Settings(token=TOKEN, max_analyses=2))
    server = UvicornThread(app).start()
    codes: list[int] = []

    def check() -> None:
        with httpx.Client(headers=HEADERS, timeout=START_S) as client:
            codes.append(client.get(f"{server.url}/v1/runs/r1/check").status_code)

    try:
        with httpx.Client(headers=HEADERS, timeout=START_S) as client:
            assert client.post(f"{server.url}/v1/lines", content=BODY).status_code == 200
            running = [threading.Thread(target=check) for _ in range(2)]
            for thread in running:
                thread.start()
            for _ in running:  # both analyses hold a slot
                assert entered.acquire(timeout=START_S)
            busy = client.get(f"{server.url}/v1/runs/r1/check")
            release.set()
            for thread in running:
                thread.join(START_S)
            again = client.get(f"{server.url}/v1/runs/r1/check")
    finally:
        release.set()
        server.stop()
    assert codes == [200, 200]
    assert (busy.status_code, busy.headers.get("retry-after")) == (503, "1")
    assert again.status_code == 200
