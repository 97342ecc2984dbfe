"""The routes' dependencies: each can be overridden (``app.dependency_overrides``), a page's
session cookie is set only when it was opened with the token, cursors are checked."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import pytest
from fastapi import HTTPException
from fastapi.responses import Response
from fastapi.testclient import TestClient

from tracetape.collector import deps


def test_the_token_check_is_a_dependency_a_test_can_override(client: TestClient) -> None:
    """Without the token the API is a 401; with ``authorized`` overridden it answers."""
    bare = {"Authorization": ""}
    assert client.get("/v1/runs", headers=bare).status_code == 401
    client.app.dependency_overrides[deps.authorized] = lambda: None  # type: ignore[attr-defined]
    try:
        assert client.get("/v1/runs", headers=bare).status_code == 200
    finally:
        client.app.dependency_overrides.clear()  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "dependency",
    [deps.collector, deps.authorized, deps.workers, deps.analysis_slot, deps.page_access],
    ids=lambda f: f.__name__,
)
def test_every_dependency_runs_on_the_event_loop(dependency: Callable[..., Any]) -> None:
    """A plain function would run in a thread, a hop for each request of hundreds at once
    that the event loop (and ``/healthz``) waits behind: each is a coroutine."""
    assert inspect.iscoroutinefunction(dependency) or inspect.isasyncgenfunction(dependency)


def test_a_session_cookie_is_set_only_for_a_page_opened_with_the_token() -> None:
    """``Page.cookie`` signs a session (HTTP-only, SameSite strict) when fresh, else
    leaves the answer alone; no token, no cookie."""
    fresh = deps.Page("t0ken-0123456789", True).cookie(Response())
    cookie = fresh.headers["set-cookie"]
    assert cookie.startswith(f"{deps.COOKIE}=") and "HttpOnly" in cookie
    assert "SameSite=strict" in cookie and "t0ken-0123456789" not in cookie
    assert "set-cookie" not in deps.Page("t0ken-0123456789", False).cookie(Response()).headers
    assert "set-cookie" not in deps.Page(None, True).cookie(Response()).headers


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("nan~r1", id="nan"),
        pytest.param("12.5", id="no-separator"),
        pytest.param("12.5~", id="no-run"),
        pytest.param("x~r1", id="not-a-number"),
        pytest.param("1~r1;DROP", id="bad-run"),
    ],
)
def test_a_cursor_not_given_by_the_collector_is_a_400(text: str) -> None:
    """A cursor is ``last_seen~run`` as the collector gave it; anything else is refused."""
    with pytest.raises(HTTPException) as refused:
        deps.cursor(text)
    assert refused.value.status_code == 400
    assert deps.cursor("12.5~r1") == (12.5, "r1")
