"""An HTTP/2 front over TLS for a fake provider (the ``h2`` library, which httpx's HTTP/2
uses): it speaks only HTTP/2 (ALPN ``h2``), and relays each request to the fake behind it
over HTTP/1.1 and its answer back chunk for chunk, so a recording through it can be compared
with one made straight against the fake.

``H2Front(behind, cert, key)`` serves on 127.0.0.1 from ``start()`` to ``stop()`` (``url`` is
``https://127.0.0.1:PORT``); ``protocols`` lists what each connection negotiated, and
``self_signed(folder)`` makes the certificate (the ``openssl`` binary) a client must trust.
"""

from __future__ import annotations

import asyncio
import shutil
import ssl
import subprocess
import threading
from pathlib import Path
from typing import Self

import h2.config
import h2.connection
import h2.events
import httpx
import pytest


def self_signed(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key, made with ``openssl``."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("no openssl binary to make a test certificate with")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


class H2Front:
    """See the module doc."""

    def __init__(self, behind: str, cert: Path, key: Path) -> None:
        self.behind = behind
        self.protocols: list[str | None] = []
        self._context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self._context.load_cert_chain(cert, key)
        self._context.set_alpn_protocols(["h2"])
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.url = ""

    def start(self) -> Self:
        self._thread.start()
        self._ready.wait(10)
        return self

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(
            asyncio.start_server(self._connection, "127.0.0.1", 0, ssl=self._context)
        )
        self.url = f"https://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        self._ready.set()
        self._loop.run_forever()
        server.close()
        # every connection and relay ends here, in its loop: none is left pending for the
        # garbage collector to report in whatever test runs next
        tasks = asyncio.all_tasks(self._loop)
        for task in tasks:
            task.cancel()
        self._loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
        self._loop.run_until_complete(self._loop.shutdown_asyncgens())
        self._loop.close()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        tls = writer.get_extra_info("ssl_object")
        self.protocols.append(tls.selected_alpn_protocol())
        if tls.selected_alpn_protocol() != "h2":
            writer.close()
            return
        conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
        conn.initiate_connection()
        writer.write(conn.data_to_send())
        try:
            await self._serve(conn, reader, writer)
        finally:
            writer.close()

    async def _serve(
        self,
        conn: h2.connection.H2Connection,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        requests: dict[int, tuple[list[tuple[str, str]], bytearray]] = {}
        lock = asyncio.Lock()
        relays: set[asyncio.Future[None]] = set()
        async with httpx.AsyncClient(base_url=self.behind, timeout=30) as client:
            while data := await reader.read(65536):
                for event in conn.receive_data(data):
                    if isinstance(event, h2.events.RequestReceived):
                        headers = [(k.decode(), v.decode()) for k, v in event.headers]
                        requests[event.stream_id] = (headers, bytearray())
                    elif isinstance(event, h2.events.DataReceived):
                        requests[event.stream_id][1].extend(event.data)
                        conn.acknowledge_received_data(len(event.data), event.stream_id)
                    elif isinstance(event, h2.events.StreamEnded):
                        headers, body = requests.pop(event.stream_id)
                        relay = self._relay(
                            client,
                            conn,
                            writer,
                            lock,
                            event.stream_id,
                            headers=headers,
                            body=bytes(body),
                        )
                        relays.add(task := asyncio.ensure_future(relay))
                        task.add_done_callback(relays.discard)
                async with lock:
                    writer.write(conn.data_to_send())
                await writer.drain()
            for relay in list(relays):
                relay.cancel()

    async def _relay(
        self,
        client: httpx.AsyncClient,
        conn: h2.connection.H2Connection,
        writer: asyncio.StreamWriter,
        lock: asyncio.Lock,
        stream: int,
        *,
        headers: list[tuple[str, str]],
        body: bytes,
    ) -> None:
        """One request relayed to the fake behind, its answer sent back as it arrives."""
        fields = dict(headers)
        sent = {k: v for k, v in headers if not k.startswith(":") and k != "host"}
        request = client.build_request(
            fields[":method"], fields[":path"], headers=sent, content=body
        )
        response = await client.send(request, stream=True)
        answer = [(":status", str(response.status_code))]
        answer.append(("content-type", response.headers.get("content-type", "")))
        async with lock:
            conn.send_headers(stream, answer)
            writer.write(conn.data_to_send())
        async for chunk in response.aiter_raw():
            async with lock:
                conn.send_data(stream, chunk)
                writer.write(conn.data_to_send())
            await writer.drain()
        async with lock:
            conn.end_stream(stream)
            writer.write(conn.data_to_send())
        await response.aclose()
