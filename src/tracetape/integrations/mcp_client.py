"""MCP on the tape: what an agent asks of MCP servers through the official ``mcp`` SDK's client.

Every request a ``ClientSession`` sends (``Client`` sends through one too) is a decision:

* a tool call (``tools/call``, ``call_tool``) is a ``tool`` decision keyed like
  ``tracetape.tool``'s, plus the server: ``{"name": <tool>, "args": <arguments>, "step": <step
  of the model answer that asked for it>, "server": <the server's name>}``;
* every other request (``tools/list``, the handshake, resources, prompts) is an ``env``
  decision, an environment read: ``{"name": <method>, "args": <params>, "step", "server"}``.

The server's name is the one the session received (``ClientSession.server_info``: the
``initialize`` result, or the ``server/discover`` result's stamp); the handshake itself is keyed
before it is known (``server`` is ``None``). The output stored is the result's JSON, which the
SDK validates again in replay into its own type (``CallToolResult``, ``ListToolsResult``...); a
JSON-RPC error (``MCPError``: the server's, a timeout, a closed connection) is a decision too
and replay raises it again. An ``isError: true`` result is a result like any other.

A tool's effect is what the server declared in the ``tools/list`` results the session saw
(``tool_effect``): ``readOnlyHint: true`` is ``read``, an explicit ``destructiveHint: true`` is
``irreversible`` (refused while recording unless ``Tape(..., allow_irreversible=True)``), any
other tool, or one never listed, ``write``.

Replay sends nothing to the server, so it runs with the server gone:

* the session's requests, its one-way notifications and ``server/discover`` never reach the
  transport; over streamable HTTP nothing connects at all (the SDK's HTTP client only connects
  to send), so the server can be stopped;
* ``stdio_client`` does not start the server's process: the session talks to a stand-in that
  answers a request the tape cannot (one sent past the session, e.g. ``subscriptions/listen``)
  with an error saying so. A program that built its transport from a ``stdio_client``
  imported before the hooks were installed starts the server, which then receives nothing.

What the server asks of the client during a tool call (sampling, elicitation, progress) is part
of the tool call: replay returns the call's result without asking again.

While recording, the session's own HTTP traffic (streamable HTTP's POSTs, its event stream and
closing ``DELETE``) is sent untaped even inside ``patch_http``: it is taped here, once, as the
session's decisions, never a second time as ``http`` decisions.

Seams, tested on ``mcp`` 2.3.0: the public ``ClientSession.send_request`` (every request the
session sends; ``call_tool``, ``list_tools`` and the rest each make one), ``send_discover`` and
``send_notification``; ``StreamableHTTPTransport.terminate_session``; and the public function
``stdio_client``, replaced where the SDK binds it (``mcp.client.stdio``, ``mcp.client.client``,
``mcp``), the one patch that is not a class attribute.
"""

from __future__ import annotations

import contextlib
import functools
import sys
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from types import ModuleType
from typing import Any, TextIO

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import StreamableHTTPTransport
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp_types import (
    INTERNAL_ERROR,
    ErrorData,
    JSONRPCError,
    JSONRPCRequest,
    ListToolsResult,
    ToolAnnotations,
)
from pydantic import TypeAdapter

from ..errors import IrreversibleEffectError
from ..record import RAISED, reraise
from ..tape import Effect, Tape
from .capture import passing
from .install import patch_attr
from .state import current_step, http_tape, resolve_tape, state_of

__all__ = ["patch_module", "tool_effect"]

# What each session learned of its tools' effects from the listings it saw (record or replay).
_effects: weakref.WeakKeyDictionary[ClientSession, dict[str, Effect]] = weakref.WeakKeyDictionary()


def tool_effect(annotations: ToolAnnotations | None) -> Effect:
    """The tape's effect of an MCP tool with these declared annotations.

    ``readOnlyHint: true`` is ``read``; otherwise an explicit ``destructiveHint: true`` is
    ``irreversible`` (the MCP default of ``destructiveHint`` is true, but a tool that declares
    nothing is not refused for it); anything else is ``write``.

        >>> tool_effect(ToolAnnotations(read_only_hint=True))
        <Effect.READ: 'read'>
        >>> tool_effect(ToolAnnotations(destructive_hint=True))
        <Effect.IRREVERSIBLE: 'irreversible'>
        >>> tool_effect(None)
        <Effect.WRITE: 'write'>
    """
    if annotations is None:
        return Effect.WRITE
    if annotations.read_only_hint is True:
        return Effect.READ
    if annotations.destructive_hint is True:
        return Effect.IRREVERSIBLE
    return Effect.WRITE


def _server(session: ClientSession) -> str | None:
    info = session.server_info
    return info.name if info is not None else None


def _raised(exc: MCPError) -> dict[str, Any]:
    """The output recorded in place of a result when the server answered with an error: the
    error's code, message and JSON data, rebuilt as the same ``MCPError`` by ``reraise``."""
    error = exc.error.model_dump(mode="json", by_alias=True)
    return {
        RAISED: {
            "type": f"{MCPError.__module__}.{MCPError.__qualname__}",
            "args": [error["code"], error["message"], error.get("data")],
            "message": exc.message,
        }
    }


async def _taped(
    tape: Tape,
    kind: str,
    payload: dict[str, Any],
    effect: Effect,
    *,
    send: Callable[[], Awaitable[Any]],
    dump: Callable[[Any], Any],
) -> tuple[bool, Any]:
    """Record ``send()`` (its result as ``dump`` stores it, or its ``MCPError``) or replay it.

    Returns ``(True, the SDK's own result)`` when it ran, ``(False, the recorded output)`` in
    replay (an error recorded in its place is raised)."""
    live: list[Any] = []

    async def do() -> Any:
        token = http_tape.set(None)  # taped here: the transports let it through
        try:
            with passing(""):
                result = await send()
        except MCPError as exc:
            live.append(exc)
            return _raised(exc)
        finally:
            http_tape.reset(token)
        live.append(result)
        return dump(result)

    out = await tape.acall(kind, payload, do, effect=effect)
    if not live:
        return False, reraise(out)
    if isinstance(live[0], MCPError):
        raise live[0]
    return True, live[0]


def _refuse(server: str | None, name: str) -> IrreversibleEffectError:
    return IrreversibleEffectError(
        f"MCP tool {name!r} of server {server or '(unnamed)'!r} declares destructiveHint: true "
        "and would run for real while recording; record it against a server where running it "
        "is safe, with Tape(..., allow_irreversible=True)"
    )


def _wrap_send_request(original: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    @functools.wraps(original)
    async def send_request(
        self: ClientSession, request: Any, result_type: Any, *args: Any, **kwargs: Any
    ) -> Any:
        tape = resolve_tape()
        if tape is None:
            return await original(self, request, result_type, *args, **kwargs)
        data = request.model_dump(by_alias=True, mode="json", exclude_none=True)
        method = str(data["method"])
        params = {k: v for k, v in (data.get("params") or {}).items() if k != "_meta"}
        server = _server(self)
        if method == "tools/call":
            name, arguments = str(params.get("name")), params.get("arguments") or {}
            step = state_of(tape).steps.tool_step(name, arguments)
            payload = {"name": name, "args": arguments, "step": step, "server": server}
            kind, effect = "tool", _effects.get(self, {}).get(name, Effect.WRITE)
            if effect is Effect.IRREVERSIBLE and not tape.replaying and not tape.allow_irreversible:
                raise _refuse(server, name)
        else:
            payload = {"name": method, "args": params, "step": current_step(tape), "server": server}
            kind, effect = "env", Effect.READ
        ran, out = await _taped(
            tape,
            kind,
            payload,
            effect,
            send=lambda: original(self, request, result_type, *args, **kwargs),
            dump=lambda result: result.model_dump(mode="json", by_alias=True, exclude_unset=True),
        )
        if ran:
            result = out
        elif isinstance(result_type, TypeAdapter):
            result = result_type.validate_python(out, by_name=False)
        else:
            result = result_type.model_validate(out, by_name=False)
        if isinstance(result, ListToolsResult):
            learned = _effects.setdefault(self, {})
            learned.update((tool.name, tool_effect(tool.annotations)) for tool in result.tools)
        return result

    return send_request


def _wrap_send_discover(original: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    @functools.wraps(original)
    async def send_discover(self: ClientSession, version: str) -> Any:
        tape = resolve_tape()
        if tape is None:
            return await original(self, version)
        payload = {
            "name": "server/discover",
            "args": {"version": version},
            "step": current_step(tape),
            "server": None,
        }
        _, out = await _taped(
            tape,
            "env",
            payload,
            Effect.READ,
            send=lambda: original(self, version),
            dump=lambda raw: raw,
        )
        return out

    return send_discover


def _wrap_send_notification(
    original: Callable[..., Awaitable[None]],
) -> Callable[..., Awaitable[None]]:
    @functools.wraps(original)
    async def send_notification(self: ClientSession, notification: Any) -> None:
        tape = resolve_tape()
        if tape is None:
            await original(self, notification)
        elif not tape.replaying:  # a replayed session has no server to tell anything
            token = http_tape.set(None)
            try:
                await original(self, notification)
            finally:
                http_tape.reset(token)

    return send_notification


def _wrap_terminate_session(
    original: Callable[..., Awaitable[None]],
) -> Callable[..., Awaitable[None]]:
    @functools.wraps(original)
    async def terminate_session(self: StreamableHTTPTransport, client: Any) -> None:
        token = http_tape.set(None)  # the session's own end, not a decision
        try:
            await original(self, client)
        finally:
            http_tape.reset(token)

    return terminate_session


@contextlib.asynccontextmanager
async def _without_server(
    server: StdioServerParameters,
) -> AsyncIterator[tuple[Any, Any]]:
    """The streams of a replayed stdio session, no process started: a request that reaches
    them (one the session did not send itself) is answered with an error saying why."""
    to_session, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, from_session = anyio.create_memory_object_stream[SessionMessage](0)
    command = " ".join([server.command, *server.args])

    async def answer() -> None:
        async with from_session, to_session:
            async for sent in from_session:
                message = sent.message
                if not isinstance(message, JSONRPCRequest):
                    continue
                error = ErrorData(
                    code=INTERNAL_ERROR,
                    message=(
                        f"tracetape replays this MCP session without starting its server "
                        f"({command}) and only the session's own requests are on the tape: "
                        f"nothing can answer {message.method}"
                    ),
                )
                reply = JSONRPCError(jsonrpc="2.0", id=message.id, error=error)
                await to_session.send(SessionMessage(reply))

    async with anyio.create_task_group() as group:
        group.start_soon(answer)
        try:
            yield read_stream, write_stream
        finally:
            group.cancel_scope.cancel()
    for stream in (read_stream, write_stream, to_session, from_session):
        await stream.aclose()


def _wrap_stdio_client(original: Callable[..., Any], home: ModuleType) -> Callable[..., Any]:
    @functools.wraps(original)
    @contextlib.asynccontextmanager
    async def stdio_client(
        server: StdioServerParameters, errlog: TextIO = sys.stderr
    ) -> AsyncIterator[tuple[Any, Any]]:
        # A module that bound this function while it was patched keeps it after the hooks
        # are removed: it is a hook only while ``home`` holds it.
        tape = resolve_tape() if home.__dict__.get("stdio_client") is stdio_client else None
        transport = (
            _without_server(server)
            if tape is not None and tape.replaying
            else original(server, errlog)
        )
        async with transport as streams:
            yield streams

    return stdio_client


def patch_module(module: ModuleType) -> None:
    """Patch the MCP client (the installer's watch of ``mcp.client.client``, imported with any
    part of ``mcp.client``): ``ClientSession``'s requests, notifications and discovery, the
    streamable-HTTP transport's closing request, and ``stdio_client`` where it is bound."""
    for name, wrap in (
        ("send_request", _wrap_send_request),
        ("send_discover", _wrap_send_discover),
        ("send_notification", _wrap_send_notification),
    ):
        patch_attr(ClientSession, name, wrap(ClientSession.__dict__[name]))
    patch_attr(
        StreamableHTTPTransport,
        "terminate_session",
        _wrap_terminate_session(StreamableHTTPTransport.__dict__["terminate_session"]),
    )
    home = sys.modules["mcp.client.stdio"]
    original = home.__dict__["stdio_client"]
    wrapper = _wrap_stdio_client(original, home)
    # ``mcp`` binds it only once its ``__init__`` is done (this runs while it imports
    # ``mcp.client``): then it binds the patched one from ``mcp.client.stdio``.
    for holder in (home, module, sys.modules.get("mcp")):
        if holder is not None and holder.__dict__.get("stdio_client") is original:
            # patch_attr reads the attribute from ``__dict__`` and sets it back: a module's
            # attribute is replaced, and restored, the same way as a class's.
            patch_attr(holder, "stdio_client", wrapper)
