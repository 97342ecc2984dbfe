"""The replay network guard: every connection to the network, IPv4 or IPv6, is blocked before
it is made; loopback only when allowed; Unix sockets always pass."""

from __future__ import annotations

import asyncio
import socket
import tempfile
from pathlib import Path

import pytest

from tests.sockets import refused_port
from tracetape.errors import NetworkBlockedError
from tracetape.integrations.network import block_network, watch_network


def _ipv6() -> bool:
    """Whether this machine can make an IPv6 socket (the guard is tested on one)."""
    if not socket.has_ipv6:
        return False
    try:
        socket.socket(socket.AF_INET6).close()
    except OSError:
        return False
    return True


needs_ipv6 = pytest.mark.skipif(not _ipv6(), reason="this machine cannot make an IPv6 socket")


def _connect(family: socket.AddressFamily, address: tuple[str, int]) -> None:
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        sock.connect(address)


@needs_ipv6
@pytest.mark.parametrize(
    "address",
    [
        pytest.param(("2001:db8::1", 443), id="documentation-v6"),
        pytest.param(("::ffff:192.0.2.1", 80), id="v4-mapped"),
        pytest.param(("fe80::1%1", 80), id="link-local-scoped"),
        pytest.param(("::1", 9), id="v6-loopback"),
    ],
)
def test_ipv6_connections_are_blocked(address: tuple[str, int]) -> None:
    """An IPv6 connection, loopback ``::1`` included, raises before any packet leaves, and the
    guard lists the attempt (a program that swallows the error is still caught)."""
    with block_network() as guard, pytest.raises(NetworkBlockedError, match="network access"):
        _connect(socket.AF_INET6, address)
    assert len(guard.attempts) == 1
    assert f"connect to {address[0]}:{address[1]}" in str(guard.attempts[0])


@needs_ipv6
def test_ipv6_loopback_passes_only_when_allowed() -> None:
    """With loopback allowed, ``::1`` is reached (nothing listens: refused, not blocked), while
    another IPv6 address is still blocked."""
    with refused_port("::1") as port, block_network(allow_loopback=True) as guard:
        with pytest.raises(ConnectionRefusedError):
            _connect(socket.AF_INET6, ("::1", port))
        with pytest.raises(NetworkBlockedError):
            _connect(socket.AF_INET6, ("2001:db8::1", 443))
    assert len(guard.attempts) == 1


@needs_ipv6
def test_asyncio_ipv6_connections_are_blocked() -> None:
    """asyncio's connections (a non-blocking ``connect``) go through the same guard."""

    async def reach() -> None:
        await asyncio.open_connection("2001:db8::1", 443)

    with block_network(), pytest.raises(NetworkBlockedError):
        asyncio.run(reach())


def test_ipv4_and_name_lookups_are_blocked() -> None:
    """An IPv4 connection and a host name lookup are blocked; ``localhost`` is loopback and
    resolves, its connection then checked."""
    with block_network() as guard:
        with pytest.raises(NetworkBlockedError):
            _connect(socket.AF_INET, ("192.0.2.1", 80))
        with pytest.raises(NetworkBlockedError, match=r"resolve host 'example\.invalid'"):
            socket.getaddrinfo("example.invalid", 443)
        assert socket.getaddrinfo("localhost", 80)
    assert len(guard.attempts) == 2


def test_allowed_hosts_pass_by_name() -> None:
    """A host named in ``allow_hosts`` passes the guard (its lookup then fails as DNS says:
    ``.invalid`` never resolves); a host not named is blocked."""
    with block_network(allow_hosts=["example.invalid"]) as guard:
        with pytest.raises(socket.gaierror):
            socket.getaddrinfo("example.invalid", 443)
        with pytest.raises(NetworkBlockedError):
            socket.getaddrinfo("other.invalid", 443)
    assert len(guard.attempts) == 1


def test_unix_sockets_always_pass() -> None:
    """A Unix socket is local IPC, not the network: never blocked."""
    with tempfile.TemporaryDirectory() as folder, block_network():
        path = str(Path(folder) / "s")
        with socket.socket(socket.AF_UNIX) as server, socket.socket(socket.AF_UNIX) as client:
            server.bind(path)
            server.listen(1)
            client.connect(path)


@needs_ipv6
def test_a_watching_guard_notes_ipv6_without_blocking() -> None:
    """``watch_network`` notes an IPv6 connection and lets it go on (refused by the machine)."""
    with (
        refused_port("::1") as port,
        watch_network() as guard,
        pytest.raises(ConnectionRefusedError),
    ):
        _connect(socket.AF_INET6, ("::1", port))
    assert guard.seen == [f"connect to ::1:{port}"]
