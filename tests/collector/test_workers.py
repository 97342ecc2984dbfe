"""Where the collector's analyses run: the gate admits ``slots`` at once and ``queue`` more,
first come first served, and refuses the rest at once; the worker processes run the jobs,
are started again after one died, stop with the server and without it. The last tests run a
real collector in a process of its own (``tests.collector.loaded``) whose analyses of
``slow*`` runs keep their worker's CPU busy."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.collector.conftest import HEADERS
from tests.collector.test_app import jsonl, seed_line
from tests.collector.test_server import START_S, _Printed
from tracetape.collector.jobs import Failed
from tracetape.collector.workers import Busy, Gate, WorkerDied, Workers
from tracetape.errors import TraceError

# -- the gate --------------------------------------------------------------------------------


def test_slots_then_the_queue_then_a_refusal_at_once() -> None:
    """Two slots and a queue of one: two enter, a third waits, a fourth is refused at once
    saying why; a slot given back goes to the one waiting."""

    async def story() -> list[str]:
        gate, said = Gate(slots=2, queue=1, wait=5.0), []
        first, second = gate.slot(), gate.slot()
        await first.__aenter__()
        await second.__aenter__()

        async def third() -> None:
            async with gate.slot():
                said.append("third ran")

        waiting = asyncio.create_task(third())
        await asyncio.sleep(0.01)
        said.append(f"counts {gate.counts()}")
        try:
            async with gate.slot():
                said.append("fourth ran")
        except Busy as exc:
            said.append(f"fourth refused: {exc} ({exc.retry_after} s)")
        await first.__aexit__(None, None, None)
        await waiting
        await second.__aexit__(None, None, None)
        said.append(f"counts {gate.counts()}")
        return said

    assert asyncio.run(story()) == [
        "counts (2, 1)",
        "fourth refused: 2 analyses are running and 1 waiting; retry in a moment (1 s)",
        "third ran",
        "counts (0, 0)",
    ]


def test_waiters_are_served_in_turn_and_the_background_worker_is_never_refused() -> None:
    """With one slot held: a request waits, then the background worker (a thread), then
    another request; the worker takes no place in the queue of one, and each is served in
    the order it came."""

    async def story() -> list[str]:
        gate, order = Gate(slots=1, queue=1, wait=5.0), []
        held = gate.slot()
        await held.__aenter__()

        async def request(name: str) -> None:
            async with gate.slot():
                order.append(name)
                await asyncio.sleep(0.01)

        def background() -> None:
            with gate.held():
                order.append("background")

        one = asyncio.create_task(request("one"))
        await asyncio.sleep(0.01)
        worker = threading.Thread(target=background)
        worker.start()
        while gate.counts() != (1, 1):  # the worker waits, uncounted
            await asyncio.sleep(0.001)
        refused = []
        try:
            async with gate.slot():
                pass
        except Busy:
            refused.append("a second request")
        await held.__aexit__(None, None, None)
        await one
        await asyncio.to_thread(worker.join, 5)
        two = asyncio.create_task(request("two"))
        await two
        return [*refused, *order]

    assert asyncio.run(story()) == ["a second request", "one", "background", "two"]


def test_a_request_gone_from_the_queue_frees_its_place_and_takes_no_slot() -> None:
    async def story() -> tuple[int, int]:
        gate = Gate(slots=1, queue=1, wait=5.0)
        async with gate.slot():

            async def wait() -> None:
                async with gate.slot():
                    raise AssertionError("a cancelled request ran")

            task = asyncio.create_task(wait())
            await asyncio.sleep(0.01)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        return gate.counts()

    assert asyncio.run(story()) == (0, 0)


def test_a_queued_request_is_refused_once_it_waited_the_wait() -> None:
    async def story() -> str:
        gate = Gate(slots=1, queue=4, wait=0.05)
        async with gate.slot():
            try:
                async with gate.slot():
                    return "ran"
            except Busy as exc:
                return str(exc)

    assert (
        asyncio.run(story())
        == "no analysis slot came free within 0.05 s (1 running); retry in a moment"
    )


# -- the worker processes --------------------------------------------------------------------


@pytest.fixture
def pool() -> Iterator[Workers]:
    """One worker process (the machine has few cores)."""
    workers = Workers(1)
    try:
        yield workers
    finally:
        workers.close()


def _unreadable() -> None:
    raise TraceError("the trace holds no calls to check", path="r1")


def test_a_job_runs_in_another_process_and_what_it_raises_comes_back_as_failed(
    pool: Workers,
) -> None:
    assert pool.call(os.getpid) != os.getpid()
    with pytest.raises(Failed) as raised:
        pool.call(_unreadable)
    assert (raised.value.name, raised.value.tape) == ("TraceError", True)
    assert "the trace holds no calls to check" in str(raised.value)
    with pytest.raises(Failed) as other:
        pool.call(int, "x")
    assert (other.value.name, other.value.tape) == ("ValueError", False)


def test_a_worker_that_dies_is_told_and_the_next_job_runs_in_a_new_one(pool: Workers) -> None:
    """A worker gone mid-job (here it exits; a kill or the OOM killer alike) fails that job
    with ``WorkerDied``, not a hang, and the next job gets a new worker."""
    first = pool.call(os.getpid)
    with pytest.raises(WorkerDied, match="a worker process died while analysing"):
        pool.call(os._exit, 1)
    assert pool.call(os.getpid) not in (first, os.getpid())


def test_close_stops_a_busy_worker_without_waiting_for_its_job(pool: Workers) -> None:
    pid = pool.call(os.getpid)
    outcome: list[BaseException] = []

    def busy() -> None:
        try:
            pool.call(time.sleep, 120)
        except BaseException as exc:
            outcome.append(exc)

    job = threading.Thread(target=busy)
    job.start()
    time.sleep(0.5)  # the job has reached the worker
    start = time.monotonic()
    pool.close()
    job.join(START_S)
    assert time.monotonic() - start < 10
    assert [type(e) for e in outcome] == [WorkerDied] and not _alive(pid)
    with pytest.raises(WorkerDied, match="stopping"):
        pool.call(os.getpid)


# -- a real collector, its analyses slow --------------------------------------------------------

linux_only = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")


def _stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/PID/stat`` after the command's name (state first)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()


def _alive(pid: int) -> bool:
    fields = _stat(pid)
    return fields is not None and fields[0] not in ("Z", "X")


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        fields = _stat(int(entry.name)) if entry.name.isdigit() else None
        if fields is not None and int(fields[1]) == pid and fields[0] not in ("Z", "X"):
            found.append(int(entry.name))
    return found


def _workers(server: int) -> list[int]:
    """The server's worker processes: the children of its fork server."""
    return sorted(w for child in _children(server) for w in _children(child))


def _cpu_s(pid: int) -> float:
    fields = _stat(pid)
    assert fields is not None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextmanager
def loaded(db_url: str, *args: str, spin: float) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """``tests.collector.loaded`` on a port it picks: its URL once ``/healthz`` answers, and
    its process."""
    env = {k: v for k, v in os.environ.items() if k != "TRACETAPE_TOKEN"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.collector.loaded", "--db", db_url, "--spin", str(spin),
         *args],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        url = _Printed(proc).address()
        assert httpx.get(f"{url}/healthz", timeout=START_S).status_code == 200
        yield url, proc
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _stored(url: str, *runs: str) -> None:
    """Store a run of three lines each, and wait until their summaries are computed (the
    background worker is done with its slot)."""
    for run in runs:
        body = jsonl(*(seed_line(run, i) for i in range(1, 4)))
        answer = httpx.post(
            f"{url}/v1/lines", content=body, headers=HEADERS, params={"source": run}
        )
        assert answer.status_code == 200
    _until(url, lambda a: a["running"] == 0 and a["waiting"] == 0)
    deadline = time.monotonic() + START_S
    while any(r["summary"] is None for r in httpx.get(f"{url}/v1/runs").json()["runs"]):
        assert time.monotonic() < deadline, "the summaries were never computed"
        time.sleep(0.05)


def _until(url: str, ok: Any) -> dict[str, int]:
    """Poll ``/healthz`` until its ``analyses`` satisfy ``ok``."""
    deadline = time.monotonic() + START_S
    while True:
        analyses: dict[str, int] = httpx.get(f"{url}/healthz", timeout=START_S).json()["analyses"]
        if ok(analyses):
            return analyses
        assert time.monotonic() < deadline, f"/healthz never showed it: {analyses}"
        time.sleep(0.02)


def _get_each(url: str, paths: list[str]) -> tuple[list[threading.Thread], list[Any]]:
    """GET each path in a thread of its own: the threads, and the answers as they come (an
    error where the server went away)."""
    answers: list[Any] = []

    def get(path: str) -> None:
        try:
            answers.append(httpx.get(f"{url}{path}", headers=HEADERS, timeout=120))
        except httpx.HTTPError as exc:
            answers.append(exc)

    threads = [threading.Thread(target=get, args=(p,)) for p in paths]
    for thread in threads:
        thread.start()
    return threads, answers


@linux_only
def test_healthz_answers_while_every_slot_runs_python_in_a_worker_process(
    tmp_path: Path,
) -> None:
    """Two slots, each running an analysis that spins Python for 6 s: meanwhile /healthz
    answers each time (well within a second; the 100 ms goal under load is the benchmark's,
    bench_collector_load.py), the analyses run in two worker processes of the server, and the
    server's own process spends a fraction of their CPU time."""
    with loaded(f"sqlite:///{tmp_path / 'c.db'}", "--max-analyses", "2", spin=6.0) as (url, proc):
        _stored(url, "slow1", "slow2")
        cpu = _cpu_s(proc.pid)
        threads, answers = _get_each(url, ["/v1/runs/slow1/check", "/v1/runs/slow2/check"])
        _until(url, lambda a: a["running"] == 2)
        times = []
        for _ in range(10):
            start = time.perf_counter()
            assert httpx.get(f"{url}/healthz", timeout=START_S).status_code == 200
            times.append(time.perf_counter() - start)
            time.sleep(0.1)
        busy = _until(url, lambda a: True)
        for thread in threads:
            thread.join(START_S)
        spent = _cpu_s(proc.pid) - cpu
        workers = _workers(proc.pid)
    assert busy["running"] == 2  # both still spinning after the ten answers
    assert [a.status_code for a in answers] == [200, 200]
    assert max(times) < 1.0, times
    assert len(workers) == 2 and proc.pid not in workers
    assert spent < 1.5, f"the server's process spent {spent:.1f} s of CPU"  # the spins: 12 s


@linux_only
def test_a_worker_killed_mid_analysis_is_a_503_and_the_next_request_is_answered(
    tmp_path: Path,
) -> None:
    """The worker running a slow check is killed (as the OOM killer would): that request is
    answered 503 with Retry-After saying what happened, not held; the next check is answered
    by a new worker."""
    with loaded(f"sqlite:///{tmp_path / 'c.db'}", "--max-analyses", "1", spin=60.0) as (url, proc):
        _stored(url, "slow1", "r2")
        threads, answers = _get_each(url, ["/v1/runs/slow1/check"])
        _until(url, lambda a: a["running"] == 1)
        (worker,) = _workers(proc.pid)
        os.kill(worker, signal.SIGKILL)
        threads[0].join(START_S)
        after = httpx.get(f"{url}/v1/runs/r2/check", headers=HEADERS, timeout=START_S)
        now = _workers(proc.pid)
    (died,) = answers
    assert (died.status_code, died.headers.get("retry-after")) == (503, "1")
    assert died.json()["error"] == (
        "a worker process died while analysing (killed, or out of memory); the collector "
        "started new ones: retry in a moment"
    )
    assert after.status_code == 200 and "findings" in after.json()
    assert now and worker not in now


@linux_only
@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGKILL], ids=["stopped", "killed"])
def test_the_workers_end_with_the_server_however_it_ends(tmp_path: Path, stop: int) -> None:
    """Stopped (SIGTERM: uvicorn shuts the app down, which stops its workers) or killed
    outright in the middle of an analysis (SIGKILL: nothing of it runs), a server leaves no
    process behind: no worker, no fork server."""
    with loaded(f"sqlite:///{tmp_path / 'c.db'}", "--max-analyses", "1", spin=60.0) as (url, proc):
        _stored(url, "slow1")
        if stop == signal.SIGKILL:
            _get_each(url, ["/v1/runs/slow1/check"])
            _until(url, lambda a: a["running"] == 1)
        workers = _workers(proc.pid)
        family = workers + _children(proc.pid)
        os.kill(proc.pid, stop)
        proc.wait(START_S)
        deadline = time.monotonic() + 10
        while any(map(_alive, family)) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = [p for p in family if _alive(p)]
    assert len(workers) == 1
    assert left == []
