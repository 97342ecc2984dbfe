"""The end-to-end demo behind ``make demo``: record, replay for free, edit, read the miss.

Everything runs offline on bundled data: the example agent's model is a deterministic script.
Each step prints the command a user would type, then what it printed.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Where the demo records (relative to the repository root); a test gives each run its own.
TAPE = Path(os.environ.get("TRACETAPE_DEMO_TAPE", "runs/demo/412.jsonl"))
TASK = "Find why the parser drops the last row of CSV exports"
EDITED = "Find why the parser loses the last row of CSV exports"


def typed(name: str) -> str:
    """How a user types ``name`` from the repository root to run what the demo runs: the
    virtualenv's own script (``.venv/bin/tracetape``) when the demo runs in one there."""
    folder = Path(sys.executable).parent
    if folder.is_relative_to(ROOT):
        return str(folder.relative_to(ROOT) / name)
    return name


def sh(*args: str, expect: int = 0) -> str:
    """Run one command from the repository root, echoing it and its output."""
    if args[:2] == ("-m", "tracetape"):
        shown = [typed("tracetape"), *args[2:]]
    else:
        shown = [typed("python"), *args]
    print(f"\n$ {shlex.join(shown)}", flush=True)
    done = subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "110"},
        check=False,
    )
    out = (done.stdout + done.stderr).rstrip()
    print(out)
    if done.returncode != expect:
        sys.exit(f"demo: expected exit code {expect}, got {done.returncode}")
    return out


def main() -> None:
    start = time.perf_counter()
    (ROOT / TAPE).parent.mkdir(parents=True, exist_ok=True)
    # The demo records its cassette anew each time: mode 'record' never overwrites one.
    (ROOT / TAPE).unlink(missing_ok=True)
    print("1. Record one real run of the agent (4 model calls, 3 tool calls).")
    sh("-m", "examples.agent", "--task", TASK, "--tape", str(TAPE), "--mode", "record")
    sh("-m", "tracetape", "show", str(TAPE))
    sh("-m", "tracetape", "verify", str(TAPE))
    leaked = "sk-proj-DemoLeakedKey0123456789abcdefXYZ"
    stored = (ROOT / TAPE).read_text()
    print(
        f"\nThe repository file the agent read holds a leaked key; in the cassette it is "
        f"{'PRESENT (bug!)' if leaked in stored else 'redacted'}: "
        f"{stored.count('[REDACTED:openai_key:')} placeholder(s)."
    )

    print("\n2. Replay it: same answer, zero model calls, nothing executed, no network.")
    sh("-m", "examples.agent", "--task", TASK, "--tape", str(TAPE), "--mode", "replay")

    print("\n3. Edit one word of the prompt and replay: the first decision that changed fails.")
    sh("-m", "examples.agent", "--task", EDITED, "--tape", str(TAPE), "--mode", "replay", expect=3)

    print(
        "\n4. Record the edited run too, and ask why it went another way: explain finds where the"
        "\n   runs parted, replays the tool span there live (twice, then against the recording)"
        "\n   and gives a verdict."
    )
    edited = TAPE.with_name(f"{TAPE.stem}-edited{TAPE.suffix}")
    (ROOT / edited).unlink(missing_ok=True)
    sh("-m", "examples.agent", "--task", EDITED, "--tape", str(edited), "--mode", "record")
    sh(
        "-m",
        "tracetape",
        "explain",
        str(TAPE),
        str(edited),
        "--call",
        "examples.agent:search_issues",
    )

    print(f"\nDemo finished in {time.perf_counter() - start:.1f} s.")


if __name__ == "__main__":
    main()
