"""The network guard of replay: any connection to the network raises ``NetworkBlockedError``.

Shared by ``tracetape run`` and the pytest plugin (through ``testing.TapeCase``).

The network guard is an audit hook (``sys.addaudithook``, events ``socket.connect`` and
``socket.getaddrinfo``) rather than a patched ``socket.socket.connect``: it sees every
connection, ``connect_ex`` and asyncio's included, and it cannot be undone by another plugin
(pytest-recording) restoring *its* saved ``connect``. The hook is installed on first use, is
never removed (Python cannot), and returns at once while no guard is active.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import sys
import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import NetworkBlockedError

__all__ = ["NetworkGuard", "block_network", "watch_network"]


@dataclass
class NetworkGuard:
    """An active guard: what it allows and the connection attempts it blocked."""

    allow_loopback: bool = False
    allow_hosts: frozenset[str] = frozenset()
    hint: str = ""
    attempts: list[NetworkBlockedError] = field(default_factory=list)
    # A watching guard (``watch_network``) blocks nothing: it notes what was reached.
    watch: bool = False
    seen: list[str] = field(default_factory=list)

    def allows(self, host: str) -> bool:
        """True when a connection to ``host`` may go through this guard."""
        if host in self.allow_hosts:
            return True
        return self.allow_loopback and _is_loopback(host)

    def block(self, what: str, address: object) -> None:
        """Note the attempt and raise ``NetworkBlockedError`` (a watching guard only notes)."""
        __tracebackhide__ = True
        if self.watch:
            if what not in self.seen and len(self.seen) < 100:
                self.seen.append(what)
            return
        message = (
            f"tracetape: network access blocked in replay: {what}; a replayed test must not "
            "reach the network"
        )
        if self.hint:
            message += f" ({self.hint})"
        error = NetworkBlockedError(message, address)
        self.attempts.append(error)
        raise error


def _is_loopback(host: str) -> bool:
    if host.lower() in ("localhost", "localhost.localdomain", "ip6-localhost"):
        return True
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    return True


_guards: list[NetworkGuard] = []
_guards_lock = threading.Lock()
_hook_installed = False


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if not _guards:
        return
    __tracebackhide__ = True
    if event == "socket.connect":
        sock, address = args[0], args[1]
        if sock.family not in (socket.AF_INET, socket.AF_INET6):
            return  # AF_UNIX and friends are local IPC, not the network
        host, port = str(address[0]), address[1]
        guard = _guards[-1]
        if not guard.allows(host):
            guard.block(f"connect to {host}:{port}", (host, port))
    elif event == "socket.getaddrinfo":
        raw = args[0]
        if raw is None:
            return
        host = raw.decode() if isinstance(raw, bytes | bytearray) else str(raw)
        if _is_ip(host):
            return  # no lookup happens; the connect that follows is checked
        guard = _guards[-1]
        if not (guard.allows(host) or _is_loopback(host)):
            guard.block(f"resolve host {host!r}", host)


def block_network(
    *, allow_loopback: bool = False, allow_hosts: Iterable[str] = (), hint: str = ""
) -> contextlib.AbstractContextManager[NetworkGuard]:
    """Make every network connection in this process raise ``NetworkBlockedError``.

    Loopback (``127.0.0.0/8``, ``::1``, ``localhost``) is blocked too unless
    ``allow_loopback``; ``allow_hosts`` lets named hosts through. Unix sockets always pass.
    The guard covers every thread; ``guard.attempts`` lists what it blocked, so a caller can
    fail even when the code under test caught the error. ``hint`` ends each error message.

        >>> import socket
        >>> with block_network() as guard:
        ...     socket.create_connection(("192.0.2.1", 80))
        Traceback (most recent call last):
        ...
        tracetape.errors.NetworkBlockedError: tracetape: network access blocked in replay: \
connect to 192.0.2.1:80; a replayed test must not reach the network
    """
    return _guarding(NetworkGuard(allow_loopback, frozenset(allow_hosts), hint))


def watch_network() -> contextlib.AbstractContextManager[NetworkGuard]:
    """Note every network connection and host lookup in this process without blocking any
    (``guard.seen``): a recording that taped nothing can say what the program reached.

        >>> import socket
        >>> with watch_network() as guard:
        ...     _ = socket.getaddrinfo("localhost", 80)
        >>> guard.seen
        []
    """
    return _guarding(NetworkGuard(watch=True))


@contextlib.contextmanager
def _guarding(guard: NetworkGuard) -> Iterator[NetworkGuard]:
    global _hook_installed  # noqa: PLW0603 - one process-wide audit hook, installed lazily
    with _guards_lock:
        if not _hook_installed:
            sys.addaudithook(_audit)
            _hook_installed = True
        _guards.append(guard)
    try:
        yield guard
    finally:
        with _guards_lock:
            _guards.remove(guard)


def untaped_traffic(seen: Sequence[str], fix: str) -> str:
    """The warning of a recording that taped nothing while the program used the network."""
    shown = ", ".join(seen[:5]) + (f" and {len(seen) - 5} more" if len(seen) > 5 else "")
    return (
        f"recorded 0 decisions, but the program reached the network ({shown}): no hook taped "
        f"those requests, so a replay would miss them; {fix}"
    )
