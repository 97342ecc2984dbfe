"""The collector's client: one way to send a batch of lines, with one backoff, used by
``tracetape push`` (``push``, a trace file) and by ``Tape(push=...)`` (``PushingStore``,
live).

``Client.send`` POSTs one batch to ``/v1/lines``. A connection error, a timeout, a 429 or a
5xx is retried with exponential backoff and jitter (``retries`` times); a 4xx is the batch's
or the request's fault, not the network's, and stops at once with the collector's words.
Either way a ``PushError`` says what happened (``unreachable`` when the collector could not
be reached or kept failing).

``push`` ships a file: a seed JSONL, span or OTLP file in batches of ``batch`` lines, each
with the file's name (``source``) and its first line's place (``offset``), so the collector
numbers lines as the file does and a line sent again, in any batching, is recognised and not
stored twice. A cassette goes whole (its records build on the ones before them), filed under
its header's run id (``run_id_of``); ``run_id`` files any trace under one run instead, and
``append`` lets lines of this file into a run another file filled (the collector refuses
that with 409 otherwise). A push that stopped can be run again: the lines already stored
are recognised.

``httpx`` (the ``[push]`` extra) is imported only when a client is made: a client needs no
database library.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import PushError
from ..formats import TraceFormat, detect_format
from ..formats.cassette import run_id_of

__all__ = ["DEFAULT_URL", "Client", "PushError", "Pushed", "push"]

DEFAULT_URL = "http://127.0.0.1:8750"


class Client:
    """A collector at ``url``, with its ``token``: ``send`` a batch, retried ``retries``
    times with backoff (``sleep`` waits; a test passes its own), ``close`` when done."""

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        retries: int = 6,
        timeout: float = 30.0,
        sleep: Callable[[float], None] = time.sleep,
    ):
        import httpx

        self.url = url.rstrip("/")
        self.retries, self.sleep = retries, sleep
        headers = {"Content-Type": "application/x-ndjson"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self._http = httpx.Client(timeout=timeout, headers=headers)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connections."""
        self._http.close()

    def send(self, body: bytes, params: Mapping[str, str], where: str) -> dict[str, Any]:
        """POST ``body`` to ``/v1/lines`` with ``params``; the collector's answer. ``where``
        names the batch in an error (``lines 1-1000``)."""
        import httpx

        url = f"{self.url}/v1/lines"
        problem = ""
        for attempt in range(self.retries + 1):
            try:
                response = self._http.post(url, content=body, params=dict(params))
            except httpx.HTTPError as exc:
                problem = f"cannot reach {url}: {exc}"
            else:
                if response.status_code < 300:
                    data: dict[str, Any] = response.json()
                    return data
                problem = f"{url} answered HTTP {response.status_code}: {_error(response)}"
                if response.status_code == 401:
                    problem += (
                        " (the collector needs its token: the token is missing or not this "
                        "collector's: --token, or TRACETAPE_TOKEN, which Tape(push=...) reads)"
                    )
                # A 4xx is the batch's or the request's fault: sending it again changes nothing.
                if response.status_code != 429 and response.status_code < 500:
                    raise PushError(f"the collector refused the batch of {where}: {problem}")
            if attempt < self.retries:
                self.sleep(min(30.0, 0.25 * 2**attempt) * (0.5 + random.random() / 2))
        raise PushError(
            f"{problem} (after {self.retries + 1} attempts); what was sent before is stored, "
            "and pushing again stores only what is missing",
            unreachable=True,
        )


def _error(response: Any) -> str:
    try:
        data = response.json()
    except ValueError:
        return str(response.text)[:300]
    if isinstance(data, dict):
        lines = data.get("lines") or []
        detail = "; ".join(f"line {e.get('line')}: {e.get('message')}" for e in lines[:5])
        return f"{data.get('error')}" + (f" ({detail})" if detail else "")
    return str(data)[:300]


@dataclass
class Pushed:
    """What a push did: lines and batches sent, records stored new, records the collector
    had already (``known``), batches it had whole."""

    url: str
    lines: int = 0
    batches: int = 0
    stored: int = 0
    known: int = 0
    duplicates: int = 0
    redacted: int = 0
    runs: set[str] = field(default_factory=set)

    def to_dict(self) -> dict[str, Any]:
        """The summary as JSON data."""
        return {
            "url": self.url,
            "lines": self.lines,
            "batches": self.batches,
            "stored": self.stored,
            "known": self.known,
            "duplicate_batches": self.duplicates,
            "redacted": self.redacted,
            "runs": sorted(self.runs),
        }


def _batches(path: Path, size: int) -> Iterator[tuple[int, list[bytes]]]:
    """(offset, lines) of ``path``: one batch for a cassette, else ``size`` lines each."""
    whole = detect_format(path) is TraceFormat.CASSETTE
    with path.open("rb") as fh:
        batch: list[bytes] = []
        offset = 0
        for line in fh:
            batch.append(line)
            if not whole and len(batch) >= size:
                yield offset, batch
                offset += len(batch)
                batch = []
        if batch:
            yield offset, batch


def push(
    trace: str | os.PathLike[str],
    url: str = DEFAULT_URL,
    *,
    token: str | None = None,
    batch: int = 1000,
    retries: int = 6,
    timeout: float = 30.0,
    progress: Callable[[int], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    run_id: str | None = None,
    append: bool = False,
) -> Pushed:
    """Ship ``trace`` to the collector at ``url``; see the module docstring.

    Raises ``TraceError`` for a missing or unreadable trace and ``PushError`` when the
    collector refuses a batch or cannot be reached.
    """
    path = Path(trace)
    done = Pushed(url.rstrip("/"))
    run = run_id
    if run is None and detect_format(path) is TraceFormat.CASSETTE:
        run = run_id_of(path)
    with Client(url, token=token, retries=retries, timeout=timeout, sleep=sleep) as client:
        for offset, lines in _batches(path, batch):
            body = b"".join(line if line.endswith(b"\n") else line + b"\n" for line in lines)
            params = {"source": str(trace), "offset": str(offset)}
            if run is not None:
                params["run"] = run
            if append:
                params["append"] = "true"
            where = f"lines {offset + 1}-{offset + len(lines)}"
            answer = client.send(body, params, where)
            done.lines += len(lines)
            done.batches += 1
            done.stored += int(answer.get("stored", 0))
            done.known += int(answer.get("known", 0))
            done.duplicates += bool(answer.get("duplicate"))
            done.redacted += int(answer.get("redacted", 0))
            done.runs.update(answer.get("runs", []))
            if progress is not None:
                progress(len(lines))
    return done
