"""Shared helpers for the agent-framework tests: real frameworks, unmodified, against the fake
model server of ``tests/integrations/fakeserver.py`` on 127.0.0.1, recorded, then replayed with
the server stopped.

``taped(path, mode)`` is the in-process way a user tapes an agent (the SDK hooks, with the HTTP
level as their safety net); ``tracetape_run(...)`` runs a program under ``tracetape run`` in a
real subprocess, the way a user runs an unmodified agent script.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

import anthropic
import openai

import tracetape
from tracetape import ReplayMiss, Tape, read_cassette
from tracetape.integrations.runner import EXIT_REPLAY_MISS

# strands_agent.py is a program run with .venv-strands' Python (test_strands.py), whose
# strands-agents this environment does not have: not a test module, nor doctests to collect
collect_ignore = ["strands_agent.py"]


class FakeServer(Protocol):
    """What the tests use of ``tests/integrations/fakeserver.py``'s server (the ``server``
    fixture); a protocol, so that mypy checks the tests without that module."""

    requests: list[dict[str, Any]]

    @property
    def base_url(self) -> str: ...

    def stop(self) -> None: ...


TRACETAPE = str(Path(sys.executable).with_name("tracetape"))

# Keys no framework may need: the fake server takes any key, and none reaches a cassette.
FAKE_KEYS = {
    "OPENAI_API_KEY": "sk-test-frameworks",
    "ANTHROPIC_API_KEY": "sk-ant-test-frameworks",
    # offline: openai-agents exports its traces to OpenAI, litellm fetches a price list
    "OPENAI_AGENTS_DISABLE_TRACING": "1",
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
}


@contextlib.contextmanager
def taped(path: Path, mode: str) -> Iterator[Tape]:
    """Record or replay the block's model calls into ``path`` through the SDK hooks."""
    with Tape(path, mode=mode) as tape, tracetape.patch_sdks(tape):
        yield tape


def tracetape_run(
    cwd: Path,
    tape: str,
    mode: str,
    argv: Sequence[str],
    *,
    env: dict[str, str] | None = None,
    hook: str | None = None,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """``tracetape run --tape TAPE --mode MODE [--hook HOOK] -- python ARGV...`` in ``cwd``."""
    full_env = {**os.environ, **FAKE_KEYS, **(env or {})}
    full_env.pop("PYTHONPATH", None)
    command = [TRACETAPE, "run", "--tape", tape, "--mode", mode]
    if hook is not None:
        command += ["--hook", hook]
    return subprocess.run(
        [*command, "--", sys.executable, *argv],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def record_replay_miss(
    cwd: Path,
    server: FakeServer,
    argv: Callable[[str], list[str]],
    answer: str,
    *,
    env: dict[str, str] | None = None,
    miss: bool = True,
) -> tuple[subprocess.CompletedProcess[str], subprocess.CompletedProcess[str]]:
    """Under ``tracetape run`` (the default hook): ``argv(task)`` records, printing ``answer``;
    replays with the server stopped to the same output; and (``miss``), with one word of the
    task changed, exits 3 with the diagnosis naming both words and printing nothing. Returns
    the recording and the replay."""
    task = "sum 1 to 3, carefully"
    recorded = tracetape_run(cwd, "run.jsonl", "record", argv(task), env=env)
    assert recorded.returncode == 0, recorded.stderr
    assert recorded.stdout == answer
    server.stop()
    replayed = tracetape_run(cwd, "run.jsonl", "replay", argv(task), env=env)
    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stdout == answer
    missed = tracetape_run(
        cwd, "run.jsonl", "replay", argv(task.replace("carefully", "quickly")), env=env
    )
    assert missed.returncode == EXIT_REPLAY_MISS, missed.stderr
    assert "was never recorded" in missed.stderr
    assert "carefully" in missed.stderr and "quickly" in missed.stderr
    assert missed.stdout == ""
    return recorded, replayed


def assert_task_miss(miss: ReplayMiss, field: str) -> None:
    """The miss of a replay whose task's "carefully" became "quickly": the ``ReplayMiss``
    itself (where it is typed as the SDKs' base errors, a subclass of the same name), never a
    concrete API error, at step 1 with nothing matched, naming the task's field and both
    words, and not the step (the same request, edited; not a retry numbered anew)."""
    assert type(miss).__name__ == "ReplayMiss"
    assert not isinstance(miss, openai.APIError | anthropic.APIError)
    assert (miss.step, miss.matched, miss.changes) == (1, 0, [field])
    text = str(miss)
    assert f"changed: {field}" in text and "changed: step" not in text
    assert "carefully" in text and "quickly" in text


def agent_steps(path: Path) -> dict[str, list[int]]:
    """The steps of each agent's model calls in a cassette, in recorded order, by the task
    ("sum 1 to N") its conversation carries: a sequential agent's are 1..n, and two agents run
    at once each count their own."""
    import json
    import re

    found: dict[str, list[int]] = {}
    for rec in read_cassette(path).records:
        if rec.kind != "llm":
            continue
        task = re.search(r"sum 1 to \d+", json.dumps(rec.input))
        assert task is not None and rec.step is not None, rec.input
        found.setdefault(task.group(), []).append(rec.step)
    return found
