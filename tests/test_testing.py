"""``tracetape.testing``: the helpers under the pytest plugin, used without pytest's fixtures."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tracetape import CassetteError, CassetteNotFoundError, ReplayMiss, read_cassette
from tracetape.errors import NetworkBlockedError
from tracetape.testing import TapeCase, TapeUsage, block_network, default_cassette_path


@pytest.fixture
def server() -> Iterator[tuple[str, int]]:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    yield srv.getsockname()
    srv.close()


def test_block_network_blocks_loopback_unless_allowed(server: tuple[str, int]) -> None:
    """Loopback is blocked by default, passes with ``allow_loopback``, and is free again after."""
    with block_network() as guard, pytest.raises(NetworkBlockedError) as info:
        socket.create_connection(server, timeout=2)
    assert info.value.address == server
    assert len(guard.attempts) == 1
    with block_network(allow_loopback=True):
        socket.create_connection(server, timeout=2).close()
    socket.create_connection(server, timeout=2).close()


def test_connect_ex_and_asyncio_are_blocked(server: tuple[str, int]) -> None:
    """``connect_ex`` and asyncio connections hit the guard too."""
    sock = socket.socket()
    with block_network(), pytest.raises(NetworkBlockedError):
        sock.connect_ex(server)
    sock.close()

    async def open_it() -> None:
        await asyncio.open_connection(*server)

    with block_network(), pytest.raises(NetworkBlockedError):
        asyncio.run(open_it())


def test_allow_hosts_and_unix_sockets_pass(server: tuple[str, int], tmp_path: Path) -> None:
    """Named hosts and Unix sockets go through the guard."""
    with block_network(allow_hosts=["127.0.0.1"]):
        socket.create_connection(server, timeout=2).close()
    path = str(tmp_path / "s")
    unix = socket.socket(socket.AF_UNIX)
    unix.bind(path)
    unix.listen()
    client = socket.socket(socket.AF_UNIX)
    with block_network():
        client.connect(path)
    client.close()
    unix.close()


def test_guard_survives_another_plugin_restoring_connect(server: tuple[str, int]) -> None:
    """Restoring ``socket.socket.connect`` (as pytest-recording does) does not lift the guard."""
    original = socket.socket.connect
    with block_network():
        socket.socket.connect = original  # type: ignore[method-assign]
        with pytest.raises(NetworkBlockedError):
            socket.create_connection(server, timeout=2)


@given(
    stem=st.from_regex(r"test_[a-z0-9_]{1,12}", fullmatch=True),
    name=st.text(min_size=1, max_size=30),
    cls=st.none() | st.from_regex(r"Test[A-Za-z]{1,8}", fullmatch=True),
)
def test_default_cassette_path_is_one_safe_file_beside_the_test(
    stem: str, name: str, cls: str | None
) -> None:
    """Any test name maps to exactly one ``.jsonl`` file in ``cassettes/<module>/``."""
    path = default_cassette_path(Path("tests") / f"{stem}.py", name, cls)
    assert path.parent == Path("tests") / "cassettes" / stem
    assert path.suffix == ".jsonl"
    assert "/" not in path.name
    assert "\x00" not in path.name


def test_default_cassette_path_keeps_distinct_names_distinct() -> None:
    """Class tests are prefixed with their class, parameter ids kept readable."""
    base = Path("tests/test_agent.py")
    assert default_cassette_path(base, "test_a[x-1]").name == "test_a[x-1].jsonl"
    assert default_cassette_path(base, "test_a", "TestK").name == "TestK.test_a.jsonl"


@pytest.mark.parametrize(
    ("mode", "exists", "error", "message"),
    [
        pytest.param(
            "replay", False, CassetteNotFoundError, "record it first", id="replay-missing"
        ),
        pytest.param("record", True, CassetteError, "never overwrites", id="record-existing"),
        pytest.param("bogus", False, ValueError, "'replay', 'record', 'auto', 'rewrite'", id="bad"),
    ],
)
def test_tape_case_refusals(
    tmp_path: Path, mode: str, exists: bool, error: type[Exception], message: str
) -> None:
    """Each test mode refuses the cassette state it must not touch, saying what to do."""
    path = tmp_path / "c.jsonl"
    if exists:
        path.write_text('{"tracetape": 1}\n')
    with pytest.raises(error, match=message), TapeCase(path, mode, sdk=False):
        pass


def test_tape_case_fails_a_clean_exit_that_swallowed_a_miss(tmp_path: Path) -> None:
    """A caught ReplayMiss is raised again when the case closes cleanly."""
    path = tmp_path / "c.jsonl"
    with TapeCase(path, "record", sdk=False) as tape:
        tape.call("tool", {"name": "a"}, lambda: 1)
    with (
        pytest.raises(ReplayMiss) as info,
        TapeCase(path, "replay", sdk=False) as tape,
        contextlib.suppress(ReplayMiss),
    ):
        tape.call("tool", {"name": "b"}, lambda: 1)
    assert "caught this ReplayMiss" in "".join(info.value.__notes__)


def test_rewrite_overwrites_and_usage_tracks_unplayed(tmp_path: Path) -> None:
    """``rewrite`` replaces a cassette; ``TapeUsage`` notes opened cassettes and unplayed ones."""
    usage = TapeUsage()
    path = tmp_path / "c.jsonl"
    for outs in ([1, 2], [3, 4]):
        with TapeCase(path, "rewrite", sdk=False, on_close=usage.note) as tape:
            for i, out in enumerate(outs):
                tape.call("tool", {"name": "t", "i": i}, lambda out=out: out)
    assert [r.out for r in read_cassette(path).records] == [3, 4]
    with (
        pytest.warns(UserWarning, match="never played"),
        TapeCase(path, "replay", sdk=False, on_close=usage.note) as tape,
    ):
        tape.call("tool", {"name": "t", "i": 0}, lambda: 0)
    orphan = tmp_path / "orphan.jsonl"
    orphan.write_text("")
    report = usage.report([tmp_path])
    assert report["unused_cassettes"] == [str(orphan.resolve())]
    assert [d["seq"] for d in report["unplayed_decisions"]] == [2]


def test_block_network_has_no_effect_outside_its_block() -> None:
    """A guard in one ``with`` leaves name resolution of later code alone."""
    with tempfile.TemporaryDirectory(), block_network(), pytest.raises(NetworkBlockedError):
        socket.getaddrinfo("example.invalid", 80)
    with pytest.raises(socket.gaierror):
        socket.getaddrinfo("example.invalid", 80)
