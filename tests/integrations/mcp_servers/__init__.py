"""MCP servers for the MCP client tests, written with the SDK's FastMCP (``MCPServer`` in mcp 2)."""
