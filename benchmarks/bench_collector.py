"""Benchmark the collector: ingest over HTTP, the diff endpoint, and latency under load.

Everything runs on this machine, loopback only, against ``tracetape serve`` on SQLite in a
temporary folder (a fresh process), with baselines measured in the same run:

* **ingest**: ``--lines`` seed JSONL lines POSTed to ``/v1/lines`` in batches of 1,000 by one
  client, in three shapes (``friendly``: 50-call runs over a few tools; ``unique``: every
  call's arguments its own; ``secrets``: 1% of lines hold an API key, so those batches are
  redacted record by record). Baseline: a bare ``sqlite3`` ``executemany`` of the same rows
  (the stored record JSON, run, kind, name, step) into the same tables and indexes, one
  commit per 1,000 rows, WAL and ``synchronous=FULL`` as the collector runs: the floor of the
  storage. Goals: 50,000 lines/s, and 40% of the bare insert.
* **diff**: two 10,000-call runs pushed, ``GET /v1/diff`` against ``tracetape diff A B
  --format json`` on the same runs from files in a fresh process, best of at least 7 each
  (``--repeat`` when higher). Goal: under 0.5x.
* **load**: 8 concurrent clients, each POSTing 25 batches of 100 lines (a fixed count):
  p50 and p99 latency of ``POST /v1/lines``.
* **health**: ``GET /healthz`` latency while 40 clients each ask ``GET /v1/diff`` of two
  3,000-call runs over and over, against ``/healthz`` on the idle collector in the same run.
  Goal: under 100 ms.

    python benchmarks/bench_collector.py
    python benchmarks/bench_collector.py --lines 50000 --repeat 1
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

SECRET = "sk-proj-BenchLeak0123456789abcdefXYZ"


def lines_of(shape: str, n: int, seed: int = 7, run_prefix: str = "r") -> list[bytes]:
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        run = f"{run_prefix}{i // 50}"
        if shape == "unique":
            args: dict[str, object] = {"path": f"src/m{i}/f{rnd.getrandbits(40):x}.py", "n": i}
        else:
            args = {"path": f"src/f{rnd.randrange(200)}.py", "q": rnd.choice(["a", "bb", "ccc"])}
        if shape == "secrets" and rnd.random() < 0.01:
            args["note"] = f"token {SECRET}"
        line = {
            "run_id": run,
            "step": i % 50 // 2 + 1,
            "tool": rnd.choice(["read_file", "search", "write_file"]),
            "args": args,
            "output_sha": f"{rnd.getrandbits(64):016x}",
            "tokens": rnd.randrange(10, 500),
        }
        out.append(json.dumps(line).encode())
    return out


def free_port() -> int:
    """A free TCP port on 127.0.0.1 (the collector under test listens there)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextmanager
def serving(db: Path) -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tracetape",
            "serve",
            "--db",
            f"sqlite:///{db}",
            "--port",
            str(port),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={k: v for k, v in os.environ.items() if k != "TRACETAPE_TOKEN"},
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(400):
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


HEADERS = {"Content-Type": "application/x-ndjson"}


def ingest(url: str, lines: list[bytes], batch: int = 1000, source: str = "bench") -> float:
    """Seconds to POST ``lines`` in batches."""
    bodies = [b"\n".join(lines[i : i + batch]) + b"\n" for i in range(0, len(lines), batch)]
    with httpx.Client(timeout=120, headers=HEADERS) as client:
        start = time.perf_counter()
        for k, body in enumerate(bodies):
            answer = client.post(f"{url}/v1/lines", content=body,
                                 params={"source": source, "offset": str(k * batch)})  # fmt: skip
            answer.raise_for_status()
        return time.perf_counter() - start


SCHEMA = """
CREATE TABLE batches (digest TEXT PRIMARY KEY, received REAL NOT NULL, lines INTEGER NOT NULL);
CREATE TABLE events (id INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL,
  received REAL NOT NULL, kind TEXT NOT NULL, name TEXT, step INTEGER, batch TEXT,
  record TEXT NOT NULL);
CREATE INDEX events_run ON events (run_id, id);
CREATE INDEX events_name ON events (name, run_id);
"""


def bare_insert(db: Path, lines: list[bytes], batch: int = 1000) -> float:
    """Seconds for a bare executemany of the same rows (prepared beforehand)."""
    rows = []
    for raw in lines:
        d = json.loads(raw)
        rows.append((d["run_id"], time.time(), "tool", d["tool"], d["step"], "b", raw.decode()))
    con = sqlite3.connect(db, isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=FULL")
    con.executescript(SCHEMA)
    start = time.perf_counter()
    for k in range(0, len(rows), batch):
        con.execute("BEGIN")
        con.execute("INSERT INTO batches VALUES (?, ?, ?)", (f"d{k}", time.time(), batch))
        con.executemany(
            "INSERT INTO events (run_id, received, kind, name, step, batch, record) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            rows[k : k + batch],
        )
        con.execute("COMMIT")
    took = time.perf_counter() - start
    con.close()
    return took


def bench_ingest(n: int, repeat: int) -> list[dict[str, object]]:
    figures = []
    for shape in ("friendly", "unique", "secrets"):
        lines = lines_of(shape, n)
        http, bare = [], []
        for r in range(repeat):
            with tempfile.TemporaryDirectory() as tmp:
                with serving(Path(tmp) / "c.db") as url:
                    http.append(ingest(url, lines))
                bare.append(bare_insert(Path(tmp) / "bare.db", lines))
            del r
        rate, floor = n / min(http), n / min(bare)
        figures.append(
            {"shape": shape, "lines": n, "http_lines_per_s": round(rate),
             "bare_lines_per_s": round(floor), "share_of_bare": round(rate / floor, 3)}
        )  # fmt: skip
        print(
            f"ingest {shape:9} {n:>7} lines: {rate:>8,.0f} lines/s over HTTP, bare insert "
            f"{floor:>9,.0f} lines/s: {rate / floor:.0%} of bare (goals: 50,000/s, 40%)",
            flush=True,
        )
    return figures


def bench_diff(repeat: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        a, b = Path(tmp) / "a.jsonl", Path(tmp) / "b.jsonl"
        la = [ln.replace(b'"run_id": "a0"', b'"run_id": "A"') for ln in _one_run("a", 10_000, 1)]
        lb = [ln for ln in _one_run("b", 10_000, 2)]
        a.write_bytes(b"\n".join(la) + b"\n")
        b.write_bytes(b"\n".join(lb) + b"\n")
        cli = []
        for _ in range(repeat):
            start = time.perf_counter()
            command = ["diff", str(a), str(b), "--format", "json", "--fail-on", "never"]
            subprocess.run([sys.executable, "-m", "tracetape", *command], check=True,
                           capture_output=True)  # fmt: skip
            cli.append(time.perf_counter() - start)
        with serving(Path(tmp) / "c.db") as url:
            ingest(url, la, source=str(a))
            ingest(url, lb, source=str(b))
            api = []
            with httpx.Client(timeout=300) as client:
                for _ in range(repeat):
                    start = time.perf_counter()
                    client.get(f"{url}/v1/diff", params={"a": "a", "b": "b"}).raise_for_status()
                    api.append(time.perf_counter() - start)
        ratio = min(api) / min(cli)
        print(
            f"diff of two 10,000-call runs: GET /v1/diff {min(api):.2f} s, tracetape diff "
            f"(fresh process, files) {min(cli):.2f} s: {ratio:.2f}x (goal: under 0.5x)",
            flush=True,
        )
        return {"api_s": round(min(api), 3), "cli_s": round(min(cli), 3), "ratio": round(ratio, 3)}


def _one_run(name: str, n: int, seed: int) -> list[bytes]:
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        line = {"run_id": name, "step": i // 3 + 1, "tool": rnd.choice(["read_file", "search"]),
                "args": {"path": f"src/f{rnd.randrange(3000)}.py"},
                "output_sha": f"{rnd.getrandbits(16):04x}"}  # fmt: skip
        out.append(json.dumps(line).encode())
    return out


def bench_load(clients: int = 8, requests: int = 25, size: int = 100) -> dict[str, object]:
    latencies: list[float] = []
    lock = threading.Lock()
    with tempfile.TemporaryDirectory() as tmp, serving(Path(tmp) / "c.db") as url:

        def client(k: int) -> None:
            lines = lines_of("friendly", requests * size, seed=k, run_prefix=f"c{k}-")
            with httpx.Client(timeout=120, headers=HEADERS) as c:
                for j in range(requests):
                    body = b"\n".join(lines[j * size : (j + 1) * size]) + b"\n"
                    start = time.perf_counter()
                    params = {"source": f"c{k}", "offset": str(j * size)}
                    c.post(f"{url}/v1/lines", content=body, params=params).raise_for_status()
                    with lock:
                        latencies.append(time.perf_counter() - start)

        threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
        start = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - start
    latencies.sort()
    p50 = statistics.median(latencies)
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    total = clients * requests * size
    print(
        f"load: {clients} clients x {requests} POSTs of {size} lines: p50 {p50 * 1000:.0f} ms, "
        f"p99 {p99 * 1000:.0f} ms, {total / wall:,.0f} lines/s in all",
        flush=True,
    )
    return {"p50_ms": round(p50 * 1000, 1), "p99_ms": round(p99 * 1000, 1),
            "lines_per_s": round(total / wall)}  # fmt: skip


def bench_health(clients: int = 40, seconds: float = 8.0) -> dict[str, object]:
    """/healthz while ``clients`` threads ask for diffs without pause."""
    with tempfile.TemporaryDirectory() as tmp, serving(Path(tmp) / "c.db") as url:
        ingest(url, _one_run("a", 3000, 1), source="a")
        ingest(url, _one_run("b", 3000, 2), source="b")
        idle = _health_times(url, 20)
        stop = threading.Event()
        answers: list[int] = []

        def hammer() -> None:
            with httpx.Client(timeout=300) as c:
                while not stop.is_set():
                    answer = c.get(f"{url}/v1/diff", params={"a": "a", "b": "b"})
                    answers.append(answer.status_code)

        threads = [threading.Thread(target=hammer) for _ in range(clients)]
        for t in threads:
            t.start()
        time.sleep(1.0)
        busy = _health_times(url, 40, pause=(seconds - 1.0) / 40)
        stop.set()
        for t in threads:
            t.join()
    p50, worst = statistics.median(busy), max(busy)
    print(
        f"health under {clients} clients asking for diffs: p50 {p50 * 1000:.1f} ms, max "
        f"{worst * 1000:.1f} ms (idle p50 {statistics.median(idle) * 1000:.1f} ms; goal: under "
        f"100 ms); diffs answered {answers.count(200)}, busy (503) {answers.count(503)}",
        flush=True,
    )
    return {"p50_ms": round(p50 * 1000, 1), "max_ms": round(worst * 1000, 1),
            "idle_p50_ms": round(statistics.median(idle) * 1000, 1),
            "diffs_200": answers.count(200), "diffs_503": answers.count(503)}  # fmt: skip


def _health_times(url: str, n: int, pause: float = 0.0) -> list[float]:
    times = []
    with httpx.Client(timeout=300) as c:
        for _ in range(n):
            start = time.perf_counter()
            c.get(f"{url}/healthz").raise_for_status()
            times.append(time.perf_counter() - start)
            time.sleep(pause)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lines", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--json", type=Path, help="Also write the figures here.")
    parser.add_argument("--only", choices=["ingest", "diff", "load", "health"], nargs="*")
    args = parser.parse_args()
    # a diff takes a fraction of a second: best of at least 7 on each side, as the machine's
    # noise is larger than the figure's margin
    runs = {
        "ingest": lambda: bench_ingest(args.lines, args.repeat),
        "diff": lambda: bench_diff(max(args.repeat, 7)),
        "load": bench_load,
        "health": bench_health,
    }
    figures = {name: run() for name, run in runs.items() if not args.only or name in args.only}
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
