"""A collector whose analyses of some runs are slow on purpose, served by uvicorn in a process
of its own, as ``tracetape serve`` serves one:

    python -m tests.collector.loaded --db URL [--max-analyses N] [--analysis-queue N] [--spin S]

An analysis of a run whose id starts with ``slow`` first keeps its worker's CPU busy for
``--spin`` seconds of pure Python (``spin``), so a test can hold every slot with the kind of
work that starves an event loop sharing its process, and see what the server does meanwhile.
The worker processes are the collector's own (the app's ``deps.workers`` is overridden with
``Slowed``, which hands them the slowed job). It prints ``tracetape collector on URL`` once it
listens, as ``tracetape serve`` does.
"""

from __future__ import annotations

import argparse
import os
import socket
import time
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

import uvicorn
from fastapi import FastAPI

from tracetape.collector.deps import workers
from tracetape.collector.server import app_from_env
from tracetape.collector.workers import Workers
from tracetape.stores.database import Database

T = TypeVar("T")


def spin(seconds: float, job: Callable[..., T], *args: Any) -> T:
    """``job(*args)`` after ``seconds`` of busy Python."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        sum(range(1000))
    return job(*args)


class Slowed:
    """The app's workers, with the analyses of ``slow*`` runs made slow (``spin``)."""

    def __init__(self, pool: Workers, seconds: float):
        self.pool, self.seconds = pool, seconds

    async def run(self, job: Callable[..., T], *args: Any) -> T:
        slow = any(isinstance(a, str) and a.startswith("slow") for a in args)
        return await self.pool.run(partial(spin, self.seconds, job) if slow else job, *args)


def app() -> FastAPI:
    """The collector as ``tracetape serve`` builds it, slowed (uvicorn's app factory)."""
    made = app_from_env()
    slowed = Slowed(made.state.collector.workers, float(os.environ["TRACETAPE_TEST_SPIN_S"]))

    async def slowed_workers() -> Slowed:  # a coroutine, as the dependency it stands for
        return slowed

    made.dependency_overrides[workers] = slowed_workers
    return made


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", required=True)
    parser.add_argument("--max-analyses")
    parser.add_argument("--analysis-queue")
    parser.add_argument("--spin", type=float, default=30.0)
    args = parser.parse_args()
    Database.open(args.db).close()
    os.environ.update(TRACETAPE_DB=args.db, TRACETAPE_TEST_SPIN_S=str(args.spin))
    if args.max_analyses:
        os.environ["TRACETAPE_MAX_ANALYSES"] = args.max_analyses
    if args.analysis_queue:
        os.environ["TRACETAPE_ANALYSIS_QUEUE"] = args.analysis_queue
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(2048)
    print(f"tracetape collector on http://127.0.0.1:{sock.getsockname()[1]} (loaded)", flush=True)
    uvicorn.run("tests.collector.loaded:app", factory=True, fd=sock.fileno(), log_level="warning")


if __name__ == "__main__":
    main()
