"""The suite's own rules: a missing service skips a test, or fails it under CI; a refused port
stays refused, and taken, while a test uses it."""

from __future__ import annotations

import socket
from typing import Any

import httpx
import pytest
from _pytest.outcomes import Failed, Skipped

from tests.services import in_ci, skip_or_fail
from tests.sockets import UvicornThread, refused_port

REASON = "no PostgreSQL server here: initdb failed"


@pytest.mark.parametrize("value", ["true", "TRUE", "True", "1", " true "])
def test_under_ci_a_missing_service_fails_the_test(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    """CI=true or CI=1, in any case: the test fails, saying the same reason."""
    monkeypatch.setenv("CI", value)
    assert in_ci()
    with pytest.raises(Failed, match=REASON):
        skip_or_fail(REASON)


@pytest.mark.parametrize("value", [None, "", "false", "0", "no"])
def test_elsewhere_a_missing_service_skips_the_test(
    monkeypatch: pytest.MonkeyPatch, value: str | None
) -> None:
    """Without CI (or CI=false, 0, ...): the test skips with the reason as it is."""
    if value is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", value)
    assert not in_ci()
    with pytest.raises(Skipped) as skipped:
        skip_or_fail(REASON)
    assert skipped.value.msg == REASON


def test_a_refused_port_refuses_and_cannot_be_taken_while_held() -> None:
    """A connection is refused; nobody can bind the port meanwhile; after, it is free again."""
    with refused_port() as port:
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=5)
        with socket.socket() as other, pytest.raises(OSError, match="in use"):
            other.bind(("127.0.0.1", port))
    with socket.socket() as other:
        other.bind(("127.0.0.1", port))


def test_a_uvicorn_thread_serves_on_the_socket_it_is_handed() -> None:
    """A socket bound before the server starts is the one it serves on, as soon as
    ``start()`` returns; ``stop()`` closes it."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            await send({"type": "http.response.start", "status": 204, "headers": []})
            await send({"type": "http.response.body", "body": b""})

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = UvicornThread(app, sock).start()
    try:
        assert server.port == sock.getsockname()[1]
        assert httpx.get(server.url, timeout=30).status_code == 204
    finally:
        server.stop()
    assert sock.fileno() == -1
