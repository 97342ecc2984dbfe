"""Ports of the tests, safe when tests run in parallel (pytest-xdist) beside other programs.

A port is never found by binding a socket, reading its number and closing it, then handing
the number on: between the close and the use any other process may take the port. A server
is given port 0 and asked which port it got, or is handed the bound socket itself
(``UvicornThread``); a port where connections must be refused stays bound, never listening,
for as long as it is used (``refused_port``).
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Self

import uvicorn

# What a server thread is given to start: long enough for a loaded machine, short enough
# that a server that never starts fails its test instead of hanging it.
START_S = 30.0


@contextmanager
def refused_port(host: str = "127.0.0.1") -> Iterator[int]:
    """A port on ``host`` where a connection is refused, for as long as the block runs.

    Its socket is bound and never listens: on Linux a connection to it is refused
    (``ECONNREFUSED``), and, as it stays bound, no other process can listen there meanwhile.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        yield port


class _Server(uvicorn.Server):
    """A uvicorn server that says when its start is over (``ready``), started or not."""

    def __init__(self, config: uvicorn.Config):
        super().__init__(config)
        self.ready = threading.Event()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        try:
            await super().startup(sockets=sockets)
        finally:
            self.ready.set()


class UvicornThread:
    """An ASGI ``app`` served by uvicorn in a thread, on ``sock`` (a bound socket handed
    over: a port a test chose before the server starts) or on a port the system picks,
    from ``start()`` (which returns once it accepts connections) to ``stop()``."""

    def __init__(self, app: Any, sock: socket.socket | None = None):
        if sock is None:
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
        self.sock = sock
        self.port: int = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._server = _Server(uvicorn.Config(app, log_level="warning"))
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, daemon=True
        )

    def start(self) -> Self:
        """Serve; return once the server accepts connections (AssertionError if it cannot)."""
        self._thread.start()
        if not self._server.ready.wait(START_S) or not self._server.started:
            self.stop()
            raise AssertionError(f"uvicorn did not start on {self.url} within {START_S:.0f} s")
        return self

    def stop(self) -> None:
        """Stop serving and close the socket: nothing listens on the port any more."""
        self._server.should_exit = True
        if self._thread.is_alive():
            self._thread.join(START_S)
        self.sock.close()
