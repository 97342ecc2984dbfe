"""An MCP client program that knows nothing of tracetape: ``python agent.py LOG B`` starts the
``notes`` server over stdio (logging its calls to LOG), lists its tools, calls three of them
(``add(1, B)``, one failing as a tool, one as a protocol error) and prints what it got."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from mcp import Client, MCPError, StdioServerParameters


async def main(log: str, b: int) -> None:
    """Run the session and print one line per answer."""
    server = Path(__file__).with_name("stdio_server.py")
    params = StdioServerParameters(command=sys.executable, args=[str(server), log])
    async with Client(params) as client:
        listed = await client.list_tools()
        print(" ".join(sorted(tool.name for tool in listed.tools)))
        for name, args in (("add", {"a": 1, "b": b}), ("lookup", {"city": "Oslo"})):
            result = await client.call_tool(name, args)
            print(name, result.is_error, result.content[0].model_dump()["text"])
        try:
            await client.call_tool("quota", {"user": "bob"})
        except MCPError as exc:
            print("quota", exc.code, exc.message)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
