"""The proxy under a Node client: what replaying (and recording) through ``tracetape proxy``
adds per call over calling a local fake provider directly, its throughput with 16 clients at
once, and its memory over 10,000 calls.

Everything runs here, on loopback: a fake OpenAI-compatible upstream (a tiny ASGI app on
uvicorn, the proxy's own server stack, so the difference is tracetape's work), the proxy in
this process, and ``proxy_client.mjs`` under Node (its built-in ``fetch``, one process a
measurement). Figures, each against the direct calls measured in the same run:

1. replay, 1,000 sequential calls: p50 and p99 added (targets: <= 1 ms, <= 3 ms);
2. record, 1,000 sequential calls: p50 added over the direct calls (the forwarding and the
   recording together; target for the recording alone: <= 2 ms);
3. replay with 16 concurrent clients: calls a second (target: >= 500 on 2 cores);
4. memory: the process's resident set after 1,000 and after 10,000 replayed calls (target:
   flat).

Run: ``.venv/bin/python benchmarks/bench_proxy.py [--calls 1000] [--memory-calls 10000]``.
Needs Node (``node`` on the PATH) and the server extra.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import uvicorn

from tracetape import Tape
from tracetape.integrations.proxied import address_of, listen, serving
from tracetape.integrations.proxy import ProxyApp, parse_upstreams

CLIENT = Path(__file__).with_name("proxy_client.mjs")


async def fake_openai(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """A chat-completions endpoint answering every request at once."""
    if scope["type"] != "http":
        return
    more = True
    while more:
        message = await receive()
        more = message.get("more_body", False)
    body = json.dumps(
        {
            "id": "chatcmpl-bench",
            "object": "chat.completion",
            "created": 1,
            "model": "gpt-4o-mini",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": "ok"},
                }
            ],
            "usage": {"prompt_tokens": 9, "completion_tokens": 1, "total_tokens": 10},
        }
    ).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


@contextmanager
def fake_upstream() -> Iterator[str]:
    sock = listen("127.0.0.1", 0)
    server = uvicorn.Server(uvicorn.Config(fake_openai, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        threading.Event().wait(0.005)
    try:
        yield address_of(sock)
    finally:
        server.should_exit = True
        thread.join(10)


def node(base: str, calls: int, workers: int = 1, distinct: int | None = None) -> dict[str, Any]:
    args = ["node", str(CLIENT), base, str(calls), str(workers)]
    if distinct is not None:
        args.append(str(distinct))
    done = subprocess.run(args, capture_output=True, text=True, check=False, timeout=600)
    if done.returncode:
        sys.exit(f"the Node client failed: {done.stderr.strip()[-2000:]}")
    return dict(json.loads(done.stdout))


def percentiles(latencies: list[int]) -> tuple[float, float]:
    ordered = sorted(latencies)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return statistics.median(ordered) / 1000, p99 / 1000


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


@contextmanager
def proxy(tape: Tape, upstream: str) -> Iterator[str]:
    app = ProxyApp(tape, upstreams=parse_upstreams([f"openai={upstream}"]), say=lambda _: None)
    with serving(app, listen("127.0.0.1", 0)) as address:
        yield f"{address}/v1"
    tape.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--memory-calls", type=int, default=10000)
    args = parser.parse_args()
    if shutil.which("node") is None:
        sys.exit("bench_proxy.py needs Node (node on the PATH)")
    folder = Path(tempfile.mkdtemp())
    calls = args.calls
    with fake_upstream() as upstream:
        node(f"{upstream}/v1", 50)  # warm the fake up
        direct = percentiles(node(f"{upstream}/v1", calls)["latencies"])
        with proxy(Tape(folder / "run.jsonl", mode="record"), upstream) as url:
            recorded = percentiles(node(url, calls)["latencies"])
        with proxy(Tape(folder / "memory.jsonl", mode="record"), upstream) as url:
            node(url, args.memory_calls, 16, distinct=100)
    with proxy(Tape(folder / "run.jsonl", mode="replay"), "http://127.0.0.1:9") as url:
        replayed = percentiles(node(url, calls)["latencies"])
    with proxy(Tape(folder / "run.jsonl", mode="replay"), "http://127.0.0.1:9") as url:
        concurrent = node(url, calls, 16)
    with proxy(Tape(folder / "memory.jsonl", mode="replay"), "http://127.0.0.1:9") as url:
        first = min(1000, args.memory_calls)
        node(url, first, 16, distinct=100)
        after_first = rss_mb()
        node(url, args.memory_calls - first, 16, distinct=100)
        after_all = rss_mb()
    shutil.rmtree(folder)

    print(f"{calls} sequential calls from Node, p50 / p99 in ms:")
    print(f"  direct to the fake      {direct[0]:6.2f} / {direct[1]:6.2f}")
    added = (replayed[0] - direct[0], replayed[1] - direct[1])
    print(
        f"  replay through proxy    {replayed[0]:6.2f} / {replayed[1]:6.2f}   added "
        f"{added[0]:+.2f} / {added[1]:+.2f} [<= 1 / <= 3] "
        f"{'ok' if added[0] <= 1 and added[1] <= 3 else 'MISSED'}"
    )
    print(
        f"  record through proxy    {recorded[0]:6.2f} / {recorded[1]:6.2f}   added "
        f"{recorded[0] - direct[0]:+.2f} / {recorded[1] - direct[1]:+.2f} (forwarding and "
        "recording)"
    )
    rate = calls / concurrent["seconds"]
    print(
        f"replay, 16 clients at once: {rate:.0f} calls/s [>= 500] "
        f"{'ok' if rate >= 500 else 'MISSED'}"
    )
    print(
        f"memory (resident), replaying {args.memory_calls} calls: {after_first:.1f} MB after "
        f"{first}, {after_all:.1f} MB after all ({after_all - after_first:+.1f} MB)"
    )


if __name__ == "__main__":
    main()
