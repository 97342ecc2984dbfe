"""The replay guard on its own: while armed, a connection, an address lookup, a request on a
kept-alive ``http.client`` connection and an httpx request of a refusing context are refused
before they reach the network; local IPC, other contexts and a disarmed guard go through."""

from __future__ import annotations

import ast
import http.client
import http.server
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tracetape import guard

GUARD = Path(guard.__file__)


class Refused(Exception):
    """What ``Refusing`` raises."""


class Refusing:
    """A refuser as a tape is one: it raises, saying what was asked."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, object]] = []

    def refuse(self, what: str, address: object) -> None:
        self.asked.append((what, address))
        raise Refused(what)


@contextmanager
def armed(find: Callable[[], guard.Refuser | None]) -> Iterator[None]:
    guard.arm(1, find)
    try:
        yield
    finally:
        guard.arm(-1, find)


class _Ok(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[int]:
    """An HTTP server on 127.0.0.1 answering every POST with ``ok``; its port."""
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Ok)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield httpd.server_address[1]
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_a_connection_is_refused_before_it_is_made(refused_port: int) -> None:
    """The refuser is asked with the address; the connection is never tried (a refused port
    would say ``ConnectionRefusedError``)."""
    refusing = Refusing()
    with socket.socket() as sock, armed(lambda: refusing), pytest.raises(Refused):
        sock.connect(("127.0.0.1", refused_port))
    assert refusing.asked == [
        (f"a connection to 127.0.0.1:{refused_port}", ("127.0.0.1", refused_port))
    ]


def test_an_address_lookup_is_refused() -> None:
    """A host name is refused at its lookup, before any DNS query."""
    refusing = Refusing()
    with (
        armed(lambda: refusing),
        pytest.raises(Refused, match=r"example.invalid:443 \(its address lookup\)"),
    ):
        socket.getaddrinfo("example.invalid", 443)
    assert refusing.asked[0][1] == "example.invalid"


def test_local_ipc_goes_through(tmp_path: Path) -> None:
    """A Unix socket is not the network."""
    path = str(tmp_path / "s")
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(path)
        listener.listen()
        with armed(Refusing), socket.socket(socket.AF_UNIX) as client:
            client.connect(path)


def test_a_context_that_no_tape_refuses_and_a_disarmed_guard_go_through(refused_port: int) -> None:
    """``find`` naming no refuser (another thread's tape), or nothing armed any more: the
    connection is made (here: refused by the port itself)."""
    with armed(lambda: None), pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", refused_port), timeout=5)
    refusing = Refusing()
    with armed(lambda: refusing):
        pass
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", refused_port), timeout=5)
    assert refusing.asked == []


def test_a_kept_alive_http_client_connection_is_refused(server: int) -> None:
    """``http.client`` (urllib3, requests, botocore) sends on a connection made before the
    guard was armed: the send is refused."""
    connection = http.client.HTTPConnection("127.0.0.1", server, timeout=5)
    connection.request("POST", "/", body=b"{}")
    assert connection.getresponse().read() == b"ok"
    refusing = Refusing()
    with armed(lambda: refusing), pytest.raises(Refused, match=f"a request to 127.0.0.1:{server}"):
        connection.request("POST", "/", body=b"{}")
    connection.close()


def test_an_httpx_request_is_refused_without_its_query(server: int) -> None:
    """An httpx client sends on a kept-alive connection without connecting: its transport is
    guarded, and the refusal names method, URL and path but not the query (it may hold a
    key)."""
    with httpx.Client() as client:
        assert client.post(f"http://127.0.0.1:{server}/v1/chat", json={}).text == "ok"
        refusing = Refusing()
        with armed(lambda: refusing), pytest.raises(Refused) as raised:
            client.post(f"http://127.0.0.1:{server}/v1/chat?key=sk-secret", json={})
        assert str(raised.value) == f"a request POST http://127.0.0.1:{server}/v1/chat"
        assert client.post(f"http://127.0.0.1:{server}/v1/chat", json={}).text == "ok"


def test_the_guard_imports_nothing_of_tracetape() -> None:
    """The tape arms the guard, never the other way round."""
    tree = ast.parse(GUARD.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            assert not node.level and not (node.module or "").startswith("tracetape")
        elif isinstance(node, ast.Import):
            assert not any(alias.name.startswith("tracetape") for alias in node.names)
