"""Where the collector's analyses run: worker processes, admitted through a bounded queue.

An analysis (a diff, a check, a page) is mostly Python: run on the server's own process it
holds the interpreter's lock and the event loop, which reads every request and answers
``/healthz``, waits behind it. So analyses run in ``Workers``, a pool of ``max_analyses``
processes (``concurrent.futures.ProcessPoolExecutor``), and the event loop only awaits
them. The processes start from a fork server where the platform has one (else they are
spawned): a fresh interpreter that imported the analysis once, never a fork of a server
whose threads may hold locks; the fork server starts with the app (``prepare``). They
start on the first analysis, are started again after
one of them died (an analysis killed or out of memory: the requests it was answering get a
503 saying so, ``WorkerDied``), stop with the server (``close``), and exit by themselves if
the server is killed outright (``jobs.started``).

The ``Gate`` admits analyses: ``slots`` (= ``max_analyses``) run at once and ``queue`` more
wait, first come first served; past that a request is refused at once, and one that waited
``wait`` seconds without a slot is refused then (``Busy``: a 503 with ``Retry-After``). So
no request waits for a slot longer than ``wait`` seconds, nor behind more than ``queue``
others and the background worker's one run (``summaries``, which waits its turn and is never
refused).

>>> import asyncio
>>> gate = Gate(slots=1, queue=0, wait=1.0)
>>> async def two() -> str:
...     async with gate.slot():
...         try:
...             async with gate.slot():
...                 return "both"
...         except Busy as exc:
...             return f"{exc} (retry after {exc.retry_after} s)"
>>> print(asyncio.run(two()))
1 analysis is running and none may wait; retry in a moment (retry after 1 s)
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import asynccontextmanager, contextmanager, suppress
from dataclasses import dataclass
from multiprocessing import forkserver
from multiprocessing.connection import Connection
from typing import TypeVar

from fastapi.concurrency import run_in_threadpool

from . import jobs

__all__ = ["Busy", "Gate", "WorkerDied", "Workers", "default_size"]

T = TypeVar("T")

# How long stopping waits for a worker to finish before it is killed.
_STOP_S = 2.0


def default_size() -> int:
    """The worker processes of a collector by default: the CPUs it may use, at least 2 (a
    slow analysis leaves room for another), at most 8 (each keeps its own DuckDB)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 2
    return min(8, max(2, cpus))


class Busy(Exception):
    """Raised when an analysis is refused (every slot busy and the queue full, or no slot
    freed within the wait); answered with a 503 and ``Retry-After: retry_after``."""

    def __init__(self, message: str, retry_after: int = 1):
        super().__init__(message)
        self.retry_after = retry_after


class WorkerDied(Exception):
    """Raised when the worker process running an analysis died (killed, out of memory);
    the workers are started again. Answered with a 503 and ``Retry-After``."""


@dataclass
class _Waiter:
    wake: Callable[[], None]
    counted: bool  # a request's (the queue bounds them), not the background worker's
    granted: bool = False


class Gate:
    """At most ``slots`` analyses at once and ``queue`` requests waiting for one, each at
    most ``wait`` seconds (see the module docstring). Thread-safe: requests wait on the event
    loop (``slot``), the background worker in its thread (``held``)."""

    def __init__(self, slots: int, queue: int, wait: float):
        if slots < 1 or queue < 0 or wait < 0:
            raise ValueError(
                f"a gate needs slots >= 1, queue >= 0, wait >= 0: {slots, queue, wait}"
            )
        self.slots, self.queue, self.wait = slots, queue, wait
        self._free = slots
        self._waiting: deque[_Waiter] = deque()
        self._queued = 0  # requests among the waiting
        self._lock = threading.Lock()

    def refusal(self) -> Busy | None:
        """The refusal a request would get now, without waiting (every slot taken and the
        queue full), else None: a cheap check made before a request is even routed."""
        with self._lock:
            if self._free or self._queued < self.queue:
                return None
        return Busy(self._full())

    def counts(self) -> tuple[int, int]:
        """The analyses running and the requests waiting."""
        with self._lock:
            return self.slots - self._free, self._queued

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Hold a slot (at once, or after waiting in the queue), or raise ``Busy``."""
        await self._enter()
        try:
            yield
        finally:
            self.leave()

    @contextmanager
    def held(self) -> Iterator[None]:
        """Hold a slot, waiting as long as it takes (the background worker's: never refused,
        and first come first served with the requests)."""
        event = threading.Event()
        with self._lock:
            waiter = None if self._take() else self._wait(_Waiter(event.set, counted=False))
        if waiter is not None:
            event.wait()
        try:
            yield
        finally:
            self.leave()

    def leave(self) -> None:
        """Give a slot back: to the first waiting, else free."""
        with self._lock:
            if self._waiting:
                waiter = self._waiting.popleft()
                self._queued -= waiter.counted
                waiter.granted = True
                waiter.wake()
            else:
                self._free += 1

    def _take(self) -> bool:
        if self._free and not self._waiting:
            self._free -= 1
            return True
        return False

    def _wait(self, waiter: _Waiter) -> _Waiter:
        self._waiting.append(waiter)
        self._queued += waiter.counted
        return waiter

    async def _enter(self) -> None:
        loop = asyncio.get_running_loop()
        event = asyncio.Event()
        with self._lock:
            if self._take():
                return
            if self._queued >= self.queue:
                raise Busy(self._full())
            waiter = self._wait(_Waiter(_waker(loop, event), counted=True))
        try:
            await asyncio.wait_for(event.wait(), self.wait)
        except BaseException as exc:  # the wait ended, or the request was cancelled
            with self._lock:
                granted = waiter.granted
                if not granted:
                    self._waiting.remove(waiter)
                    self._queued -= 1
            if granted and isinstance(exc, TimeoutError):
                return  # given a slot as the wait ended
            if granted:
                self.leave()
            if isinstance(exc, TimeoutError):
                raise Busy(
                    f"no analysis slot came free within {self.wait:g} s "
                    f"({self.slots} running); retry in a moment"
                ) from None
            raise

    def _full(self) -> str:
        running = f"{self.slots} analys{'es are' if self.slots != 1 else 'is is'} running"
        if not self.queue:
            return f"{running} and none may wait; retry in a moment"
        return f"{running} and {self.queue} waiting; retry in a moment"


class Workers:
    """``size`` worker processes that run ``jobs`` (see the module docstring): ``run`` from
    the event loop, ``call`` from a thread; ``close`` stops them."""

    def __init__(self, size: int):
        self.size = size
        self._pool: ProcessPoolExecutor | None = None
        # a pipe the workers read and only this process writes (never): it ends with it
        self._alive: tuple[Connection, Connection] | None = None
        self._closed = False
        self._lock = threading.Lock()

    async def run(self, job: Callable[..., T], *args: object) -> T:
        """``job(*args)`` in a worker, awaited; raises ``jobs.Failed`` (what the job
        raised) or ``WorkerDied``."""
        # Submitting may start the pool (the fork server imports the analysis once): not
        # on the event loop.
        pool, future = await run_in_threadpool(self._submit, job, *args)
        try:
            return await asyncio.wrap_future(future)
        except BrokenProcessPool:
            raise self._died(pool) from None

    def call(self, job: Callable[..., T], *args: object) -> T:
        """``job(*args)`` in a worker, waited for in this thread (see ``run``)."""
        pool, future = self._submit(job, *args)
        try:
            return future.result()
        except BrokenProcessPool:
            raise self._died(pool) from None

    def prepare(self) -> None:
        """Start the fork server ahead of the first analysis (the app does when it starts):
        it imports the analysis once, which would otherwise hold up the first request."""
        context = _context()
        if context.get_start_method() == "forkserver":
            forkserver.ensure_running()

    def close(self) -> None:
        """Stop the workers: the idle at once, a busy one after at most ``_STOP_S`` seconds
        (its analysis is abandoned)."""
        with self._lock:
            pool, self._pool, self._closed = self._pool, None, True
            alive, self._alive = self._alive, None
        if pool is not None:
            _stop(pool)
        for end in alive or ():
            end.close()

    def _submit(
        self, job: Callable[..., T], *args: object
    ) -> tuple[ProcessPoolExecutor, Future[T]]:
        pool = self._current()
        try:
            return pool, pool.submit(jobs.perform, job, *args)
        except (BrokenProcessPool, RuntimeError):  # a worker died, or another thread saw it
            self._forget(pool)
            pool = self._current()
            return pool, pool.submit(jobs.perform, job, *args)

    def _current(self) -> ProcessPoolExecutor:
        with self._lock:
            if self._closed:
                raise WorkerDied("the collector is stopping; retry on its next start")
            if self._pool is None:
                context = _context()
                if self._alive is None:
                    self._alive = context.Pipe(duplex=False)
                self._pool = ProcessPoolExecutor(
                    self.size,
                    mp_context=context,
                    initializer=jobs.started,
                    initargs=(self._alive[0],),
                )
            return self._pool

    def _forget(self, pool: ProcessPoolExecutor) -> None:
        with self._lock:
            if self._pool is pool:
                self._pool = None
        pool.shutdown(wait=False, cancel_futures=True)

    def _died(self, pool: ProcessPoolExecutor) -> WorkerDied:
        self._forget(pool)
        return WorkerDied(
            "a worker process died while analysing (killed, or out of memory); the collector "
            "started new ones: retry in a moment"
        )


def _waker(loop: asyncio.AbstractEventLoop, event: asyncio.Event) -> Callable[[], None]:
    def wake() -> None:
        with suppress(RuntimeError):  # the loop is closed: nobody waits any more
            loop.call_soon_threadsafe(event.set)

    return wake


def _context() -> multiprocessing.context.BaseContext:
    """A fork server where there is one (each worker forked from a process that imported the
    analysis, and has no thread), else spawned processes."""
    if "forkserver" in multiprocessing.get_all_start_methods():
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload([jobs.__name__])
        return context
    return multiprocessing.get_context("spawn")


def _stop(pool: ProcessPoolExecutor) -> None:
    # ``shutdown`` alone waits for the running analyses before it stops a worker (Python
    # 3.14's ``terminate_workers`` does this)
    processes = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        process.terminate()
    for process in processes:
        process.join(_STOP_S)
        if process.is_alive():
            process.kill()
            process.join()
