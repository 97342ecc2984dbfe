"""`GET /healthz`: the collector and its database answer, with no token."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tracetape.stores.migrations import HEAD


def test_healthz_needs_no_token(client: TestClient) -> None:
    answer = client.get("/healthz", headers={"Authorization": ""})
    assert answer.status_code == 200
    assert answer.json()["ok"] is True and answer.json()["schema"] == HEAD
