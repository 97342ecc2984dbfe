"""Which tape a hooked call goes through: a thread's or a task's own, or the process-wide one of
patch(tape)."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest
from fakeserver import FakeServer
from sdk_agents import openai_agent, openai_agent_async
from sdk_clients import openai_client

import tracetape
from tracetape import Tape, read_cassette

pytestmark = pytest.mark.usefixtures("no_leftover_patch")


def test_threads_with_their_own_tapes_never_mix(tmp_path: Path, server: FakeServer) -> None:
    """Two threads, each with its own tape, record only their own calls."""
    barrier = threading.Barrier(2)
    results: dict[str, str] = {}

    def worker(name: str, task: str) -> None:
        client = openai_client(server.base_url)
        with Tape(tmp_path / f"{name}.jsonl", mode="record") as tape, tracetape.patch_sdks(tape):
            barrier.wait()
            results[name] = openai_agent(client, task)

    threads = [
        threading.Thread(target=worker, args=("a", "sum 1 to 4")),
        threading.Thread(target=worker, args=("b", "sum 1 to 6")),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {"a": "The total is 10.", "b": "The total is 21."}
    for name, task, steps in (("a", "sum 1 to 4", 5), ("b", "sum 1 to 6", 7)):
        records = read_cassette(tmp_path / f"{name}.jsonl").records
        assert [r.step for r in records] == list(range(1, steps + 1))
        assert all(r.input["messages"][0]["content"] == task for r in records)


def test_asyncio_tasks_with_their_own_tapes_never_mix(tmp_path: Path, server: FakeServer) -> None:
    """Concurrent asyncio tasks, each with its own tape, record only their own calls."""

    async def worker(name: str, task: str) -> str:
        client = openai_client(server.base_url, aio=True)
        async with Tape(tmp_path / f"{name}.jsonl", mode="record") as tape:
            with tracetape.patch_sdks(tape):
                return await openai_agent_async(client, task)

    async def main() -> list[str]:
        return list(await asyncio.gather(worker("a", "sum 1 to 3"), worker("b", "sum 1 to 5")))

    assert asyncio.run(main()) == ["The total is 6.", "The total is 15."]
    for name, task, steps in (("a", "sum 1 to 3", 4), ("b", "sum 1 to 5", 6)):
        records = read_cassette(tmp_path / f"{name}.jsonl").records
        assert [r.step for r in records] == list(range(1, steps + 1))
        assert {r.input["messages"][0]["content"] for r in records} == {task}


def test_process_wide_patch_reaches_other_threads(tmp_path: Path, server: FakeServer) -> None:
    """tracetape.patch(tape) tapes calls from threads that bound no tape of their own."""
    path = tmp_path / "run.jsonl"
    tape = Tape(path, mode="record")
    handle = tracetape.patch(tape)
    try:
        thread = threading.Thread(
            target=openai_agent, args=(openai_client(server.base_url), "sum 1 to 2")
        )
        thread.start()
        thread.join()
    finally:
        handle.stop()
        tape.close()
    assert [r.step for r in read_cassette(path).records] == [1, 2, 3]
