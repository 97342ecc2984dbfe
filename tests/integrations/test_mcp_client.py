"""MCP tool calls on the tape: the official ``mcp`` SDK's client against a FastMCP server (stdio,
streamable HTTP on 127.0.0.1) that logs every tool call it executes, recorded, then replayed
with the server gone."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp
import mcp.client.client
import mcp.client.stdio
import pytest
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.session import ClientSession
from mcp_types import CallToolResult

import tracetape
from tests.integrations.frameworks.conftest import tracetape_run
from tests.integrations.mcp_servers.notes import build
from tests.sockets import UvicornThread
from tracetape import IrreversibleEffectError, ReplayMiss, Tape, read_cassette
from tracetape.integrations import unpatch_all
from tracetape.integrations.network import block_network
from tracetape.integrations.runner import EXIT_REPLAY_MISS
from tracetape.integrations.state import state_of
from tracetape.record import RAISED

SERVERS = Path(__file__).parent / "mcp_servers"


@pytest.fixture(autouse=True)
def _no_leftover_patch() -> Iterator[None]:
    yield
    unpatch_all()


class Server:
    """The ``notes`` server over one transport: ``target`` is what ``Client`` connects to,
    ``stop()`` takes the server away (stdio: its command no longer exists)."""

    def __init__(self, transport: str, log: Path):
        self.transport, self.log = transport, log
        self.command = sys.executable
        self._http: UvicornThread | None = None
        if transport == "http":
            self._http = UvicornThread(build(log).streamable_http_app()).start()
            self.url = f"{self._http.url}/mcp"

    @property
    def target(self) -> StdioServerParameters | str:
        """What ``Client(...)`` is given to reach the server."""
        if self.transport == "http":
            return self.url
        return StdioServerParameters(
            command=self.command, args=[str(SERVERS / "stdio_server.py"), str(self.log)]
        )

    def stop(self) -> None:
        """Take the server away: nothing listens any more, nothing could be started."""
        if self._http is not None:
            self._http.stop()
            self._http = None
        self.command = str(self.log.with_name("no-such-mcp-server"))

    def calls(self) -> list[dict[str, Any]]:
        """The tool calls the server executed."""
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines()]


@pytest.fixture(params=[pytest.param("stdio", id="stdio"), pytest.param("http", id="http")])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Server]:
    srv = Server(request.param, tmp_path / "calls.jsonl")
    try:
        yield srv
    finally:
        srv.stop()


async def agent(client: Client, b: int = 2) -> list[Any]:
    """An agent's MCP session: list the tools, call three (one failing as a tool), one more
    failing as a protocol error, read a resource; everything it got back, in order."""
    got: list[Any] = [await client.list_tools()]
    for name, args in (
        ("add", {"a": 1, "b": b}),
        ("save_note", {"text": "buy milk"}),
        ("lookup", {"city": "Oslo"}),
    ):
        got.append(await client.call_tool(name, args))
    try:
        await client.call_tool("quota", {"user": "bob"})
    except MCPError as exc:
        got.append((type(exc), exc.code, exc.message, exc.data))
    got.append(await client.read_resource("notes://all"))
    return got


def run(path: Path, mode: str, server: Server, *, connect: str = "auto", b: int = 2) -> list[Any]:
    """The agent under ``tracetape run --hook auto``'s hooks (SDK and HTTP levels); a replay
    runs with the network blocked, loopback included, and tries no connection."""

    async def session() -> list[Any]:
        async with Client(server.target, mode=connect) as client:
            return await agent(client, b)

    with Tape(path, mode=mode) as tape, tracetape.patch_sdks(tape), tracetape.patch_http(tape):
        if not tape.replaying:
            return asyncio.run(session())
        with block_network() as guard:
            got = asyncio.run(session())
        assert guard.attempts == []  # nothing even tried to connect
        return got


@pytest.mark.parametrize("connect", [pytest.param("auto", id="discover"), "legacy"])
def test_replay_returns_the_results_without_the_server(
    tmp_path: Path, server: Server, connect: str
) -> None:
    """Replay returns the SDK's own results, tool errors and protocol errors as recorded, with
    the server stopped and the network blocked; the server executed each call only once."""
    path = tmp_path / "run.jsonl"
    recorded = run(path, "record", server, connect=connect)
    assert [call["tool"] for call in server.calls()] == ["add", "save_note", "lookup", "quota"]
    assert recorded[1].content[0].text == "3"
    assert recorded[3].is_error is True
    assert recorded[4] == (MCPError, -32602, "unknown user bob", {"user": "bob"})
    server.stop()
    replayed = run(path, "replay", server, connect=connect)
    assert replayed == recorded
    assert all(type(a) is type(b) for a, b in zip(replayed, recorded, strict=True))
    assert isinstance(replayed[1], CallToolResult)
    assert len(server.calls()) == 4


@pytest.mark.parametrize("connect", [pytest.param("auto", id="discover"), "legacy"])
def test_cassette_holds_the_sessions_decisions_only(
    tmp_path: Path, server: Server, connect: str
) -> None:
    """Tool calls are ``tool`` decisions keyed ``{name, args, step, server}`` with the effect
    the listing declared; the handshake, the listing and the resource read are ``env``
    decisions; none of the session's HTTP traffic is taped a second time as ``http``."""
    path = tmp_path / "run.jsonl"
    run(path, "record", server, connect=connect)
    records = read_cassette(path).records
    handshake = "initialize" if connect == "legacy" else "server/discover"
    assert [(r.kind, r.input.get("name")) for r in records] == [
        ("env", handshake),
        ("env", "tools/list"),
        ("tool", "add"),
        ("tool", "save_note"),
        ("tool", "lookup"),
        ("tool", "quota"),
        ("env", "resources/read"),
    ]
    assert records[0].input["server"] is None
    assert records[2].input == {
        "name": "add",
        "args": {"a": 1, "b": 2},
        "step": 0,
        "server": "notes",
    }
    assert [r.effect for r in records[2:6]] == ["read", "write", "read", "read"]
    assert records[4].out["isError"] is True
    assert records[5].out[RAISED]["args"] == [
        -32602,
        "unknown user bob",
        {"user": "bob"},
    ]
    assert records[6].input["args"] == {"uri": "notes://all"}


def test_changed_argument_is_a_replay_miss_naming_it(tmp_path: Path, server: Server) -> None:
    """A tool called with one argument changed misses, naming ``args.b`` before and after; the
    server is not reached."""
    path = tmp_path / "run.jsonl"
    run(path, "record", server)
    server.stop()
    with pytest.raises(ReplayMiss) as caught:
        run(path, "replay", server, b=3)
    miss = caught.value
    assert miss.kind == "tool"
    assert miss.changes == ["args.b"]
    assert "args.b: 2 -> 3" in str(miss)
    assert len(server.calls()) == 4


def test_destructive_tool_is_refused_while_recording(tmp_path: Path, server: Server) -> None:
    """A listed tool declaring ``destructiveHint: true`` is refused while recording, naming the
    server, the tool and the hint, and never reaches the server; ``allow_irreversible``
    runs it and records it ``irreversible``."""

    async def wipe(tape: Tape) -> None:
        async with Client(server.target) as client:
            await client.list_tools()
            with pytest.raises(IrreversibleEffectError) as refused:
                await client.call_tool("wipe", {"folder": "/srv"})
            message = str(refused.value)
            assert "'wipe'" in message and "'notes'" in message
            assert "destructiveHint: true" in message and "allow_irreversible=True" in message

    with Tape(tmp_path / "refused.jsonl", mode="record") as tape, tracetape.patch_sdks(tape):
        asyncio.run(wipe(tape))
    assert server.calls() == []

    async def allowed() -> None:
        async with Client(server.target) as client:
            await client.list_tools()
            await client.call_tool("wipe", {"folder": "/srv"})

    path = tmp_path / "allowed.jsonl"
    with Tape(path, mode="record", allow_irreversible=True) as tape, tracetape.patch_sdks(tape):
        asyncio.run(allowed())
    assert server.calls() == [{"tool": "wipe", "args": {"folder": "/srv"}}]
    assert read_cassette(path).records[-1].effect == "irreversible"


@pytest.mark.parametrize(
    ("listed", "effect"),
    [
        pytest.param(True, "read", id="listed-read-only"),
        pytest.param(False, "write", id="never-listed"),
    ],
)
def test_effect_comes_from_the_listing_the_session_saw(
    tmp_path: Path, listed: bool, effect: str
) -> None:
    """A tool's effect is what the session's listing declared; a tool it never listed is a
    ``write``."""
    srv = Server("stdio", tmp_path / "calls.jsonl")

    async def session() -> None:
        async with Client(srv.target) as client:
            if listed:
                await client.list_tools()
            await client.session.call_tool("add", {"a": 1, "b": 2})

    path = tmp_path / "run.jsonl"
    with Tape(path, mode="record") as tape, tracetape.patch_sdks(tape):
        asyncio.run(session())
    assert [r.effect for r in read_cassette(path).records if r.kind == "tool"] == [effect]


def test_tool_call_takes_the_step_of_the_latest_model_call(tmp_path: Path) -> None:
    """With no model answer waiting for it, a tool call (and a listing) takes the step of the
    latest model call, in record and in replay alike."""
    srv = Server("stdio", tmp_path / "calls.jsonl")

    async def session() -> CallToolResult:
        async with Client(srv.target) as client:
            await client.list_tools()
            return await client.call_tool("add", {"a": 1, "b": 2})

    path = tmp_path / "run.jsonl"
    for mode in ("record", "replay"):
        with Tape(path, mode=mode) as tape, tracetape.patch_sdks(tape):
            state_of(tape).steps.saw(3)  # a model call of step 3 was made
            assert asyncio.run(session()).content[0].text == "3"  # type: ignore[union-attr]
    assert [r.step for r in read_cassette(path).records] == [3, 3, 3]


def test_legacy_session_replays_its_handshake_without_a_server(tmp_path: Path) -> None:
    """A bare ``ClientSession`` over ``stdio_client`` replays ``initialize`` and its tool calls
    with no server process: the replayed session knows the server's name and version."""
    srv = Server("stdio", tmp_path / "calls.jsonl")

    async def session() -> tuple[str, str, bool]:
        target = srv.target
        assert isinstance(target, StdioServerParameters)
        async with mcp.stdio_client(target) as (read, write), ClientSession(read, write) as s:
            init = await s.initialize()
            result = await s.call_tool("save_note", {"text": "hi"})
            return init.server_info.name, init.server_info.version, result.is_error

    path = tmp_path / "run.jsonl"
    with Tape(path, mode="record") as tape, tracetape.patch_sdks(tape):
        recorded = asyncio.run(session())
    srv.stop()
    with Tape(path, mode="replay") as tape, tracetape.patch_sdks(tape):
        assert asyncio.run(session()) == recorded == ("notes", "1.0.0", False)
    assert len(srv.calls()) == 1


def test_request_past_the_session_is_answered_without_a_server(tmp_path: Path) -> None:
    """In a replay with no server process, a request sent past the session (a subscription
    stream) gets an error saying nothing can answer it, instead of hanging."""
    srv = Server("stdio", tmp_path / "calls.jsonl")

    async def session(listen: bool) -> None:
        async with Client(srv.target) as client:
            if listen:
                with pytest.raises(MCPError, match="nothing can answer subscriptions/listen"):
                    async with client.listen(tools_list_changed=True):
                        pass

    path = tmp_path / "run.jsonl"
    with Tape(path, mode="record") as tape, tracetape.patch_sdks(tape):
        asyncio.run(session(False))
    srv.stop()
    with Tape(path, mode="replay") as tape, tracetape.patch_sdks(tape):
        asyncio.run(session(True))


def test_hooks_come_off_and_leave_the_sdk_as_it_was(tmp_path: Path) -> None:
    """Removing the hooks restores ``ClientSession``'s methods and every binding of
    ``stdio_client`` (one held from before starts the server again); without a tape the hooked
    session runs untouched."""
    originals = (ClientSession.send_request, mcp.stdio_client, mcp.client.client.stdio_client)
    srv = Server("stdio", tmp_path / "calls.jsonl")

    async def session() -> None:
        async with Client(srv.target) as client:
            await client.call_tool("save_note", {"text": "untaped"})

    path = tmp_path / "run.jsonl"
    with Tape(path, mode="record") as tape, tracetape.patch_sdks(tape):
        assert mcp.client.stdio.stdio_client is not originals[1]
        assert mcp.client.client.stdio_client is mcp.stdio_client is mcp.client.stdio.stdio_client
        # a new thread starts with an empty context: no tape there
        untaped = threading.Thread(target=asyncio.run, args=(session(),))
        untaped.start()
        untaped.join()
        held = mcp.stdio_client  # bound while hooked, as by a module imported then
    assert srv.calls() == [{"tool": "save_note", "args": {"text": "untaped"}}]
    assert read_cassette(path).records == []
    assert (
        ClientSession.send_request,
        mcp.stdio_client,
        mcp.client.client.stdio_client,
    ) == originals
    assert mcp.client.stdio.stdio_client is originals[1]

    async def held_session() -> None:
        target = srv.target
        assert isinstance(target, StdioServerParameters)
        async with held(target) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            await s.call_tool("save_note", {"text": "unhooked"})

    with Tape(path, mode="replay"):  # a replaying tape, but no hooks: the server runs
        asyncio.run(held_session())
    assert len(srv.calls()) == 2


@pytest.mark.slow
def test_tracetape_run_records_replays_and_misses(tmp_path: Path) -> None:
    """An unmodified MCP client script under ``tracetape run`` (``--hook auto``) records its
    session, replays it to the same output without starting the server, and exits 3 naming
    the changed argument when one changes."""
    log = tmp_path / "calls.jsonl"
    argv = [str(SERVERS / "agent.py"), str(log)]
    recorded = tracetape_run(tmp_path, "run.jsonl", "record", [*argv, "2"], timeout=60)
    assert recorded.returncode == 0, recorded.stderr
    assert recorded.stdout.splitlines()[1:] == [
        "add False 3",
        "lookup True Error executing tool lookup: no weather station in Oslo",
        "quota -32602 unknown user bob",
    ]
    calls = log.read_text()
    replayed = tracetape_run(tmp_path, "run.jsonl", "replay", [*argv, "2"], timeout=60)
    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stdout == recorded.stdout
    missed = tracetape_run(tmp_path, "run.jsonl", "replay", [*argv, "3"], timeout=60)
    assert missed.returncode == EXIT_REPLAY_MISS, missed.stderr
    assert "args.b: 2 -> 3" in missed.stderr
    assert log.read_text() == calls
