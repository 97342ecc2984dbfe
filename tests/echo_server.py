"""A minimal OpenAI chat-completions endpoint on 127.0.0.1 that echoes the last message.

The integration tests' ``fakeserver`` plays a whole tool-using agent; the ``tracetape run`` and
pytest-plugin tests only need a reply that shows which prompt was sent.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FakeOpenAI(BaseHTTPRequestHandler):
    """A chat-completions endpoint that echoes the last message."""

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        reply = {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1,
            "model": body["model"],
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {
                        "role": "assistant",
                        "content": "echo: " + body["messages"][-1]["content"],
                    },
                }
            ],
        }
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextlib.contextmanager
def fake_openai() -> Iterator[str]:
    """Serve ``FakeOpenAI`` on 127.0.0.1 and yield its base URL; stopped on exit."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeOpenAI)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
