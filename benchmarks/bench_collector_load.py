"""Benchmark the collector under a crowd: ``/healthz`` and diff and page requests during ingest.

``tracetape serve`` on SQLite in a temporary folder (a fresh process, loopback only) holds
``--runs`` seed runs of ``--calls`` tool calls each. Then, for ``--seconds``, at once:

* **requests**: waves of ``--clients`` concurrent requests (each wave sent together, the next
  when every answer of it came), each a random one of ``GET /v1/diff?a=X&b=Y``,
  ``GET /diff?a=X&b=Y``, ``GET /v1/runs/X/check`` and ``GET /runs/X`` over random runs: each
  answered (200) or refused (503 with ``Retry-After``), timed from sending to the answer;
* **ingest**: one client POSTs 200-line batches of new runs without pause (each batch queues
  its runs' summaries);
* **health**: another process asks ``GET /healthz`` every 20 ms and times each answer.

It prints the p50 / p99 / max of ``/healthz`` and of the requests (all, answered, refused),
how many requests were answered and refused (and anything else: another status, a 503
without ``Retry-After``, a connection error), and the batches stored. The requests are sent
over plain asyncio streams (kept alive, as a browser's), so the client's own work per
request stays far below the server's on the same machine. Goals: ``/healthz`` p99 under
100 ms; a refusal at once; no answer later than its wait for a slot (at most
``analysis_wait``, 10 s) and its analysis.

    python benchmarks/bench_collector_load.py
    python benchmarks/bench_collector_load.py --clients 200 --seconds 20 --max-analyses 2
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx

from bench_collector import free_port

HEADERS = {"Content-Type": "application/x-ndjson"}


def run_lines(name: str, n: int, seed: int) -> list[bytes]:
    """``n`` seed-JSONL tool calls of run ``name``: two tools over a few thousand files, with
    outputs that differ from run to run (every diff finds something)."""
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        line = {"run_id": name, "step": i // 3 + 1, "tool": rnd.choice(["read_file", "search"]),
                "args": {"path": f"src/f{rnd.randrange(3000)}.py"},
                "output_sha": f"{rnd.getrandbits(16):04x}", "tokens": rnd.randrange(10, 500),
                "ms": rnd.randrange(1, 90)}  # fmt: skip
        out.append(json.dumps(line).encode())
    return out


@contextmanager
def serving(db: Path, max_analyses: int | None) -> Iterator[str]:
    port = free_port()
    extra = ["--max-analyses", str(max_analyses)] if max_analyses else []
    proc = subprocess.Popen(
        [sys.executable, "-m", "tracetape", "serve", "--db", f"sqlite:///{db}",
         "--port", str(port), *extra],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={k: v for k, v in os.environ.items() if k != "TRACETAPE_TOKEN"},
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        proc.wait(30)


def push(url: str, lines: list[bytes], source: str, batch: int = 1000) -> None:
    with httpx.Client(timeout=300, headers=HEADERS) as client:
        for k in range(0, len(lines), batch):
            body = b"\n".join(lines[k : k + batch]) + b"\n"
            answer = client.post(f"{url}/v1/lines", content=body,
                                 params={"source": source, "offset": str(k)})  # fmt: skip
            answer.raise_for_status()


def _pick(rnd: random.Random, runs: list[str]) -> tuple[str, dict[str, str]]:
    a, b = rnd.sample(runs, 2)
    return rnd.choice([
        ("/v1/diff", {"a": a, "b": b}),
        ("/diff", {"a": a, "b": b}),
        (f"/v1/runs/{a}/check", {}),
        (f"/runs/{a}", {}),
    ])  # fmt: skip


async def _get(conn: list[Any], host: str, target: str) -> tuple[int, dict[bytes, bytes]]:
    """GET ``target`` over a kept-alive connection (opened on first use, and again when the
    server closed it while idle, as clients do): the status and the headers, the body read
    and dropped. Plain asyncio streams: the client's own cost per request stays far below
    the server's, on the same machine."""
    request = f"GET {target} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode()
    for attempt in (1, 2):
        fresh = conn[0] is None
        if fresh:
            conn[0], conn[1] = await asyncio.open_connection(*host.split(":"))
        reader, writer = conn
        try:
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            break
        except (OSError, asyncio.IncompleteReadError) as exc:
            conn[0] = conn[1] = None
            nothing = not isinstance(exc, asyncio.IncompleteReadError) or not exc.partial
            if fresh or attempt == 2 or not nothing:  # not a kept connection closed idle
                raise
    lines = head.split(b"\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        headers[name.strip().lower()] = value.strip()
    await reader.readexactly(int(headers.get(b"content-length", b"0")))
    if headers.get(b"connection") == b"close":
        writer.close()
        conn[0] = conn[1] = None
    return status, headers


async def crowd(url: str, runs: list[str], clients: int, seconds: float) -> dict[str, object]:
    """Waves of ``clients`` concurrent requests for ``seconds``: latencies and outcomes."""
    rnd = random.Random(11)
    host = url.removeprefix("http://")
    times: dict[str, list[float]] = {"answered": [], "refused": []}
    outcomes: Counter[str] = Counter()
    conns: list[list[Any]] = [[None, None] for _ in range(clients)]

    async def one(k: int, path: str, params: dict[str, str]) -> None:
        target = f"{path}?{urlencode(params)}" if params else path
        start = time.perf_counter()
        try:
            status, headers = await _get(conns[k], host, target)
        except (OSError, asyncio.IncompleteReadError) as exc:
            outcomes[f"error {type(exc).__name__}"] += 1
            conns[k] = [None, None]
            return
        took = time.perf_counter() - start
        if status == 503:
            outcomes["refused 503" if b"retry-after" in headers else "503 bare"] += 1
            times["refused"].append(took)
        else:
            outcomes["answered" if status == 200 else str(status)] += 1
            times["answered"].append(took)

    end, waves = time.perf_counter() + seconds, 0
    while time.perf_counter() < end:
        await asyncio.gather(*(one(k, *_pick(rnd, runs)) for k in range(clients)))
        waves += 1
    for _, writer in conns:
        if writer is not None:
            writer.close()
    return {"times": times, "outcomes": dict(outcomes), "waves": waves}


def ingest(url: str, stop: threading.Event) -> int:
    """POST 200-line batches of new runs until ``stop``; the batches stored."""
    stored, k = 0, 0
    with httpx.Client(timeout=300, headers=HEADERS) as client:
        while not stop.is_set():
            lines = run_lines(f"live{k}", 200, seed=1000 + k)
            body = b"\n".join(lines) + b"\n"
            answer = client.post(f"{url}/v1/lines", content=body, params={"source": f"live{k}"})
            stored += answer.status_code == 200
            k += 1
    return stored


def probe(url: str, seconds: float, every: float = 0.02) -> list[float]:
    """``/healthz`` every ``every`` seconds for ``seconds``: each answer's latency."""
    times = []
    end = time.perf_counter() + seconds
    with httpx.Client(timeout=60) as client:
        while time.perf_counter() < end:
            start = time.perf_counter()
            client.get(f"{url}/healthz").raise_for_status()
            times.append(time.perf_counter() - start)
            time.sleep(every)
    return times


def _ms(values: list[float]) -> str:
    if not values:
        return "none"
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return (f"p50 {statistics.median(ordered) * 1000:,.0f} ms, p99 {p99 * 1000:,.0f} ms, "
            f"max {ordered[-1] * 1000:,.0f} ms ({len(ordered)})")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--max-analyses", type=int, default=None)
    parser.add_argument("--probe", metavar="URL", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.probe:  # the health process
        print(json.dumps(probe(args.probe, args.seconds)))
        return
    with (
        tempfile.TemporaryDirectory() as tmp,
        serving(Path(tmp) / "c.db", args.max_analyses) as url,
    ):
        runs = [f"r{i}" for i in range(args.runs)]
        for i, run in enumerate(runs):
            push(url, run_lines(run, args.calls, seed=i), source=run)
        idle = probe(url, 1.0)
        stop = threading.Event()
        pushed: list[int] = []
        pusher = threading.Thread(target=lambda: pushed.append(ingest(url, stop)))
        probing = [sys.executable, __file__, "--probe", url, "--seconds", str(args.seconds)]
        health = subprocess.Popen(probing, stdout=subprocess.PIPE)
        pusher.start()
        found = asyncio.run(crowd(url, runs, args.clients, args.seconds))
        stop.set()
        pusher.join()
        busy = json.loads(health.communicate()[0])
    print(f"/healthz idle: {_ms(idle)}")
    print(f"/healthz under {args.clients} concurrent requests and ingest: {_ms(busy)}")
    times: dict[str, list[float]] = found["times"]  # type: ignore[assignment]
    waves = f"{found['waves']} waves of {args.clients}"
    print(f"requests ({waves}): {_ms(times['answered'] + times['refused'])}")
    print(f"  answered: {_ms(times['answered'])}")
    print(f"  refused: {_ms(times['refused'])}")
    print(f"outcomes: {json.dumps(found['outcomes'], sort_keys=True)}; batches stored meanwhile: "
          f"{pushed[0] if pushed else 0}")  # fmt: skip


if __name__ == "__main__":
    main()
