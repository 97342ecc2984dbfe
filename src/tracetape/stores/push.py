"""A store that also pushes every record to a collector, live, without ever holding the agent up.

``Tape(path, push="http://127.0.0.1:8750")`` wraps its store in ``PushingStore``: each record
is written to the local store first (the cassette stays complete whatever happens to the
network), then handed to a bounded queue that a background thread drains in batches to the
collector's ``/v1/lines`` (a small cassette a batch: a header naming the run, then the
records). Handing over never blocks: when the queue is full (the collector is slow or down),
the record is counted as not pushed and dropped from the queue only. A batch that fails is
retried a few times with backoff (``client.Client``), then counted as not pushed. On
``commit`` the thread gets a short, bounded time to flush; what could not be sent is
reported (``TapeWarning`` naming the count and the command that sends the cassette), never
raised.

Batches go through the collector's one client (``client.Client``: its backoff, its words
for a refusal); ``httpx`` is imported in the background thread only.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import queue
import threading
import time
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson

from ..errors import TapeWarning
from ..formats.cassette import Cassette, CassetteEncoder, dumps_record, new_header
from ..record import Record
from .client import Client

__all__ = ["PushingStore"]

_STOP = object()


class PushingStore:
    """A ``RecordStore`` that writes to ``inner`` and pushes each record to ``url``.

    ``queue_size`` bounds the records waiting to be sent, ``batch`` the records a request
    carries, ``flush_s`` how long ``commit`` waits for the last ones. ``pushed`` and
    ``unsent`` count records; ``problem`` is the last reason a batch was not sent.
    """

    def __init__(
        self,
        inner: Any,
        url: str,
        *,
        run: str | None = None,
        token: str | None = None,
        queue_size: int = 10_000,
        batch: int = 200,
        flush_s: float = 2.0,
        retries: int = 2,
    ):
        self.inner = inner
        self.url = url.rstrip("/")
        self.run = run or Path(inner.name).stem
        self._named = run is not None
        self.token = token if token is not None else os.environ.get("TRACETAPE_TOKEN")
        self.batch, self.flush_s, self.retries = batch, flush_s, retries
        self.pushed = 0
        self.unsent = 0
        self.problem: str | None = None
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=queue_size)
        self._thread: threading.Thread | None = None
        self._healthy = True  # the last batch reached the collector
        # Records the thread holds; once commit has counted them, late results are ignored.
        self._lock = threading.Lock()
        self._inflight = 0
        self._done = False

    # -- the RecordStore protocol: the local store first ------------------------------------

    @property
    def name(self) -> str:
        """The local store's name."""
        return str(self.inner.name)

    @property
    def path(self) -> Path | None:
        """The local cassette, for a file store."""
        return getattr(self.inner, "path", None)

    def exists(self) -> bool:
        """Whether the local store holds a recording."""
        return bool(self.inner.exists())

    def load(self) -> Cassette:
        """The local recording."""
        cassette: Cassette = self.inner.load()
        return cassette

    def begin(self, header: Mapping[str, Any]) -> None:
        """Start the local recording and the pushing thread (the run is the header's)."""
        self.inner.begin(header)
        if isinstance(header.get("run_id"), str) and not self._named:
            self.run = header["run_id"]
        # An empty context: the pusher's own requests are never taped by the hooks of the
        # program it runs in (``tracetape run`` lets threads inherit the tape).
        self._thread = threading.Thread(
            target=contextvars.Context().run,
            args=(self._drain,),
            name="tracetape-push",
            daemon=True,
        )
        self._thread.start()

    def append(self, record: Record) -> int:
        """Write ``record`` locally, then hand it to the pusher (never blocking)."""
        seq: int = self.inner.append(record)
        try:
            self._queue.put_nowait((seq, record))
        except queue.Full:
            self.unsent += 1
            self.problem = self.problem or "the push queue was full (the collector is slow or down)"
        return seq

    def commit(self, ended: str = "completed") -> None:
        """Commit locally, give the pusher ``flush_s`` to finish, and report what is unsent."""
        self.inner.commit(ended)
        self._finish()

    def abort(self) -> None:
        """Drop the local recording; stop pushing."""
        self.inner.abort()
        self._finish()

    # -- the pusher --------------------------------------------------------------------------

    def _finish(self) -> None:
        thread = self._thread
        if thread is None:
            return
        self._thread = None
        # A collector that answered gets flush_s to take the rest; one that did not, none.
        wait = self.flush_s if self._healthy else 0.0
        deadline = time.monotonic() + wait
        with contextlib.suppress(queue.Full):
            if wait:
                self._queue.put(_STOP, timeout=wait)
            else:
                self._queue.put_nowait(_STOP)
        thread.join(max(0.0, deadline - time.monotonic()))
        with self._lock:
            self._done = True
            self.unsent += self._inflight
        left = self._queue.qsize()
        while True:  # what the thread did not take is not sent
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is not _STOP:
                self.unsent += 1
        if thread.is_alive() and left:
            self.problem = (
                self.problem or f"the collector did not take them within {self.flush_s:g} s"
            )
        if self.unsent:
            where = (
                f"the cassette holds them: tracetape push {self.name} --url {self.url} "
                "(the records pushed already are recognised and not stored twice)"
            )
            warnings.warn(
                f"{self.name}: {self.unsent} record(s) were not pushed to {self.url} "
                f"({self.problem}); {where}",
                TapeWarning,
                stacklevel=5,  # _finish, commit, Tape.close, Tape.__exit__, the caller
            )

    def _drain(self) -> None:
        with Client(self.url, token=self.token, retries=self.retries, timeout=5.0) as client:
            stop = False
            while not stop:
                item = self._queue.get()
                if item is _STOP:
                    break
                items = [item]
                while len(items) < self.batch:
                    try:
                        more = self._queue.get_nowait()
                    except queue.Empty:
                        break
                    if more is _STOP:
                        stop = True
                        break
                    items.append(more)
                with self._lock:
                    self._inflight = len(items)
                self._send(client, items)

    def _send(self, client: Client, items: list[tuple[int, Record]]) -> None:
        lines = [orjson.dumps(new_header(run_id=self.run, pushed_from=self.name))]
        encoder = CassetteEncoder()
        for seq, rec in items:
            line = encoder.encode(rec)
            encoder.written(rec)
            lines.append(dumps_record({"seq": seq, **line}))
        body = b"\n".join(lines) + b"\n"
        # The cassette's name as the source, so pushing the cassette later (tracetape push)
        # recognises every record sent here.
        params = {"source": self.name, "offset": str(items[0][0] - 1), "run": self.run}
        where = f"records {items[0][0]}-{items[-1][0]}"
        try:
            client.send(body, params, where)
        except Exception as exc:  # the agent must never see the collector's failure
            self.problem = str(exc)
            self._settle(len(items), sent=False)
        else:
            self._settle(len(items), sent=True)

    def _settle(self, n: int, *, sent: bool) -> None:
        with self._lock:
            self._inflight = 0
            self._healthy = sent
            if self._done:
                return
            if sent:
                self.pushed += n
            else:
                self.unsent += n
