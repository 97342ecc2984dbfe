"""The bundled example agent and the demo, run as a user runs them (real subprocesses)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TASK = "Find why the parser drops the last row of CSV exports"


def agent(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "examples.agent", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )


def test_record_replay_and_miss(tmp_path: Path) -> None:
    """Recording answers with 4 model calls, replay gives the same answer with none, and a
    one-word edit exits 3 with the miss naming messages[0].content."""
    tape = str(tmp_path / "412.jsonl")
    recorded = agent("--task", TASK, "--tape", tape, "--mode", "record")
    assert recorded.returncode == 0 and "4 model calls" in recorded.stderr
    replayed = agent("--task", TASK, "--tape", tape, "--mode", "replay")
    assert replayed.returncode == 0 and "0 model calls" in replayed.stderr
    assert replayed.stdout == recorded.stdout
    edited = agent("--task", TASK.replace("drops", "loses"), "--tape", tape, "--mode", "replay")
    assert edited.returncode == 3
    assert "was never recorded — the run diverged here" in edited.stderr
    assert "changed: messages[0].content" in edited.stderr
    assert "sk-proj-DemoLeakedKey" not in Path(tape).read_text()


def test_the_demo_runs_end_to_end(tmp_path: Path) -> None:
    """`make demo`'s script records, replays, shows a miss and explains it, exiting 0 (into a
    cassette of its own: two test sessions, or a session and a `make demo`, may run at once)."""
    done = subprocess.run(
        [sys.executable, "-m", "examples.demo"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        env={
            **os.environ,
            "TRACETAPE_DEMO_TAPE": str(tmp_path / "412.jsonl"),
            "TRACETAPE_DEMO_STOP_COLLECTOR": "1",
        },
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 model calls" in done.stdout and "ReplayMiss" in done.stdout
    assert "redacted" in done.stdout
    assert "Verdict: decision layer" in done.stdout
    assert "The diff page (served): http://127.0.0.1:" in done.stdout
    assert "The collector was stopped." in done.stdout
