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
from collections.abc import Callable, Iterable, Iterator, Sequence
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
    # A watching guard (``watch_network``) blocks nothing: it notes what was reached, unless
    # ``hearing()`` says a tape hears it (``""``); ``through`` names the hooked library that
    # sent what it noted, where one did (a request no tape took).
    watch: bool = False
    seen: list[str] = field(default_factory=list)
    hearing: Callable[[], str | None] | None = None
    through: dict[str, str] = field(default_factory=dict)

    def allows(self, host: str) -> bool:
        """True when a connection to ``host`` may go through this guard."""
        if host in self.allow_hosts:
            return True
        return self.allow_loopback and _is_loopback(host)

    def block(self, what: str, address: object) -> None:
        """Note the attempt and raise ``NetworkBlockedError`` (a watching guard only notes)."""
        __tracebackhide__ = True
        if self.watch:
            heard = self.hearing() if self.hearing is not None else None
            if heard == "" or what in self.seen or len(self.seen) >= 100:
                return
            self.seen.append(what)
            if heard:
                self.through[what] = heard
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


def watch_network(
    hearing: Callable[[], str | None] | None = None,
) -> contextlib.AbstractContextManager[NetworkGuard]:
    """Note every network connection and host lookup in this process without blocking any
    (``guard.seen``), but those ``hearing()`` says a tape hears (``""``; a library's name
    says which hooked client sent one no tape took): a recording can say what the program
    reached that its replay will not find.

        >>> import socket
        >>> with watch_network() as guard:
        ...     _ = socket.getaddrinfo("localhost", 80)
        >>> guard.seen
        []
    """
    return _guarding(NetworkGuard(watch=True, hearing=hearing))


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


def _listed(items: Sequence[str]) -> str:
    return ", ".join(items[:5]) + (f" and {len(items) - 5} more" if len(items) > 5 else "")


def untaped_traffic(guard: NetworkGuard, hook_fix: str, unhooked_fix: str) -> str:
    """The warning of a recording whose program reached the network where no tape heard it:
    what it reached, and the fix that fits each: ``hook_fix`` for requests a hooked client
    sent that no tape took, ``unhooked_fix`` for those no hook hears (raw sockets, a client
    tracetape does not patch)."""
    hooked = [what for what in guard.seen if what in guard.through]
    unheard = [what for what in guard.seen if what not in guard.through]
    parts = [
        "the program reached the network where no tape heard it, so its replay will miss "
        "(or be blocked at) those requests:"
    ]
    if hooked:
        libraries = ", ".join(sorted({guard.through[what] for what in hooked}))
        parts.append(
            f"{_listed(hooked)}, sent by {libraries} and taken by no tape (not a model "
            f"request): {hook_fix};"
        )
    if unheard:
        parts.append(f"{_listed(unheard)}, sent where no hook hears: {unhooked_fix}")
    return " ".join(parts).rstrip(";")
