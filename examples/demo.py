"""The end-to-end demo behind ``make demo``: record, replay for free, edit, read the miss.

Everything runs offline on bundled data: the example agent's model is a deterministic script.
Each step prints the command a user would type, then what it printed.
"""

from __future__ import annotations

import os
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

from tracetape.formats.cassette import run_id_of

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

    serve_and_push(edited)
    print(f"\nDemo finished in {time.perf_counter() - start:.1f} s.")


def _free_port(first: int = 8750) -> int:
    for port in range(first, first + 50):
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) != 0:
                return port
    raise SystemExit("demo: no free port from 8750 to 8799 for the collector")


def serve_and_push(edited: Path) -> None:
    """Start the collector on SQLite, push both runs, and print their diff page's address."""
    print(
        "\n5. Start the collector (SQLite, embedded), push both runs, and open their diff in a"
        "\n   browser."
    )
    db = TAPE.parent / "collector.db"  # as given: relative to the repository root
    for leftover in (ROOT / db.parent).glob(db.name + "*"):
        leftover.unlink()
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    command = ["-m", "tracetape", "serve", "--db", f"sqlite:///{db}", "--port", str(port)]
    print(f"\n$ {shlex.join([typed('tracetape'), *command[2:]])} &", flush=True)
    server = subprocess.Popen(
        [sys.executable, *command],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # it outlives the demo, so the page can be opened
    )
    for _ in range(200):
        try:
            with urllib.request.urlopen(f"{url}/healthz", timeout=1):
                break
        except OSError:
            time.sleep(0.05)
    else:
        server.kill()
        sys.exit("demo: the collector did not start")
    sh("-m", "tracetape", "push", str(TAPE), str(edited), "--url", url)
    # each recording is its own run: the cassette's name and a unique suffix
    runs = {"a": run_id_of(ROOT / TAPE), "b": run_id_of(ROOT / edited)}
    page = f"{url}/diff?{urllib.parse.urlencode(runs)}"
    with urllib.request.urlopen(page, timeout=30) as answer:
        found = "first-divergence" in answer.read().decode()
    print(f"\nThe diff page ({'served' if found else 'NOT served (bug!)'}): {page}")
    if os.environ.get("TRACETAPE_DEMO_STOP_COLLECTOR"):
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(10)
        print("The collector was stopped.")
    else:
        print(f"The collector runs on in the background (pid {server.pid}): kill {server.pid}")


if __name__ == "__main__":
    main()
