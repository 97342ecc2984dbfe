"""Fixtures of the collector tests: the app over a database of each kind (``db``, from
``tests/conftest.py``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from tracetape.collector import Settings, create_app
from tracetape.stores.database import Database

TOKEN = "test-token-0123456789"
# What a client of the API sends: the token, and JSONL declared as such.
HEADERS = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/x-ndjson"}


@pytest.fixture
def client(db: Database) -> Iterator[TestClient]:
    """The collector app over ``db``, with a token and small limits."""
    app = create_app(db, Settings(token=TOKEN, max_body=1 << 20, max_lines=2000))
    with TestClient(app, base_url="http://127.0.0.1", headers=HEADERS) as c:
        yield c
