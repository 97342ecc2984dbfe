"""Run the ``notes`` MCP server over stdio: ``python stdio_server.py LOG``."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from notes import build

if __name__ == "__main__":
    build(Path(sys.argv[1])).run("stdio")
