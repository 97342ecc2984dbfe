"""A strands-agents program, run by ``test_strands.py`` with the Python of ``.venv-strands``
(strands pins an ``mcp`` the dev extra excludes, so it has a venv of its own).

    python strands_agent.py [--tape PATH --mode MODE] [--async] [--no-streaming] TASK...

strands' default model is Amazon Bedrock through boto3: the agent sums with its ``add`` tool on
the Bedrock Runtime that ``AWS_ENDPOINT_URL_BEDROCK_RUNTIME`` names (the test's fake), with the
credentials and region of the environment. ``--no-streaming`` calls ``converse`` instead of
the default ``converse_stream``.

With ``--tape`` the program tapes itself with ``Tape`` and ``patch_sdks``, and builds its agents
inside the tape: a boto3 client created before the hooks are installed is not taped. Without it
the program opens no tape (``tracetape run`` tapes it). One task runs with ``agent(task)``, or
``invoke_async`` with ``--async``; several run at once, one agent each, under
``asyncio.gather``. The answers are printed as a JSON list; a ``ReplayMiss`` is printed as a
JSON object, and the program exits 3.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
from collections.abc import Iterator

from strands import Agent, tool
from strands.models import BedrockModel

import tracetape
from tracetape import ReplayMiss, Tape


@tool
@tracetape.tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first integer.
        b: The second integer.
    """
    return a + b


def build(streaming: bool) -> Agent:
    """A fresh agent on strands' default model, or that model with ``converse`` only."""
    model = None if streaming else BedrockModel(streaming=False)
    return Agent(model=model, tools=[add], callback_handler=None)


@contextlib.contextmanager
def taped(path: str | None, mode: str) -> Iterator[None]:
    """The block under a tape at ``path`` in ``mode``; with no path, untouched."""
    if path is None:
        yield
        return
    with Tape(path, mode=mode) as tape, tracetape.patch_sdks(tape):
        yield


async def run_async(tasks: list[str], streaming: bool, path: str | None, mode: str) -> list[str]:
    """Each task on its own agent, all at once, under a tape entered in this task."""
    with taped(path, mode):
        runs = [build(streaming).invoke_async(task) for task in tasks]
        results = await asyncio.gather(*runs)
    return [str(r).strip() for r in results]


def run_sync(task: str, streaming: bool, path: str | None, mode: str) -> list[str]:
    """The task with ``agent(task)``, which strands runs in a thread of its own."""
    with taped(path, mode):
        return [str(build(streaming)(task)).strip()]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tape")
    parser.add_argument("--mode", default="replay")
    parser.add_argument("--async", dest="aio", action="store_true")
    parser.add_argument("--no-streaming", dest="streaming", action="store_false")
    parser.add_argument("tasks", nargs="+")
    args = parser.parse_args()
    try:
        if args.aio or len(args.tasks) > 1:
            answers = asyncio.run(run_async(args.tasks, args.streaming, args.tape, args.mode))
        else:
            answers = run_sync(args.tasks[0], args.streaming, args.tape, args.mode)
    except ReplayMiss as miss:
        found = {"miss": str(miss), "step": miss.step, "matched": miss.matched}
        print(json.dumps({**found, "changes": miss.changes, "type": type(miss).__name__}))
        return 3
    print(json.dumps(answers))
    return 0


if __name__ == "__main__":
    sys.exit(main())
