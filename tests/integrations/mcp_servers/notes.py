"""A small MCP server whose every executed tool call is appended to a log file, one JSON line
per call: a replay that reaches the server shows up there.

``build(log)`` makes the server (FastMCP, named ``MCPServer`` since mcp 2); ``stdio_server.py``
runs it over stdio, the HTTP tests serve ``build(log).streamable_http_app()`` with uvicorn.
"""

from __future__ import annotations

import json
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, ToolAnnotations

NAME = "notes"


def build(log: Path) -> MCPServer:
    """The ``notes`` server, logging each tool call it executes to ``log``."""
    server = MCPServer(NAME, version="1.0.0", log_level="WARNING")
    notes: list[str] = []

    def executed(tool: str, **args: object) -> None:
        with log.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps({"tool": tool, "args": args}) + "\n")

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        executed("add", a=a, b=b)
        return a + b

    @server.tool()
    def save_note(text: str) -> str:
        """Keep a note; no annotations, so a client cannot tell what it changes."""
        executed("save_note", text=text)
        notes.append(text)
        return f"saved note {len(notes)}"

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def lookup(city: str) -> str:
        """Fail as a tool: the answer is an ``isError`` result."""
        executed("lookup", city=city)
        raise ToolError(f"no weather station in {city}")

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def quota(user: str) -> str:
        """Fail as a protocol error: the answer is a JSON-RPC error (``MCPError``)."""
        executed("quota", user=user)
        raise MCPError(code=INVALID_PARAMS, message=f"unknown user {user}", data={"user": user})

    @server.tool(annotations=ToolAnnotations(destructive_hint=True))
    def wipe(folder: str) -> str:
        """Delete a folder: declared destructive."""
        executed("wipe", folder=folder)
        return f"wiped {folder}"

    @server.resource("notes://all")
    def all_notes() -> str:
        """Every note kept so far."""
        return "\n".join(notes)

    return server
