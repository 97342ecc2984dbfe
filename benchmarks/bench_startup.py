"""Startup cost as users pay it: a fresh ``tracetape run`` process, and a pytest ``tape`` test.

1. ``tracetape run -- python trivial.py`` (recording with ``rewrite``, then replaying)
   against ``python trivial.py`` run bare, fresh processes, interleaved; the figure is the
   median over ``--repeat`` pairs of the difference. Target: at most 0.25 s added. The
   program imports no SDK, so the default SDK hooks must cost next to nothing.
2. A pytest session of one test using the ``tape`` fixture (no SDK) against the same test
   without the fixture, each session a fresh ``python -m pytest`` process, interleaved,
   the median of paired differences. Target: at most 20 ms added.

Processes start as an installed tracetape's do: bytecode compiled (``_fresh.py``).
Figures are printed as seconds added over the bare run measured in the same script (these
machines are shared and noisy: compare the differences, not the absolute times).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _fresh import installed_env

TRIVIAL = "print(sum(range(1000)))\n"

TEST_WITH = """
def test_it(tape):
    assert tape.call("tool", {"name": "add", "args": [1, 2], "step": 1}, lambda: 3) == 3
"""
TEST_WITHOUT = """
def test_it():
    assert (lambda: 3)() == 3
"""


ENV = installed_env()


def timed(argv: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run(argv, cwd=cwd, check=True, capture_output=True, env=ENV)
    return time.perf_counter() - start


def bench_run(folder: Path, repeat: int) -> dict[str, float]:
    script = folder / "trivial.py"
    script.write_text(TRIVIAL)
    tt = [sys.executable, "-m", "tracetape", "run", "--tape", "t.jsonl"]
    timed([*tt, "--mode", "record", "--", sys.executable, str(script)], folder)  # the cassette
    bare, record, replay = [], [], []
    for _ in range(repeat):
        bare.append(timed([sys.executable, str(script)], folder))
        # rewrite: record over the cassette each time (record never overwrites one)
        record.append(timed([*tt, "--mode", "rewrite", "--", sys.executable, str(script)], folder))
        replay.append(timed([*tt, "--mode", "replay", "--", sys.executable, str(script)], folder))
    return {
        "bare_s": statistics.median(bare),
        "record_added_s": added(record, bare),
        "replay_added_s": added(replay, bare),
    }


def added(taped: list[float], bare: list[float]) -> float:
    """The median over repetitions of what the taped run took more than the bare run next to
    it: paired, so a slow patch of the shared machine weighs on both sides of a pair."""
    return statistics.median(t - b for t, b in zip(taped, bare, strict=True))


def bench_pytest(folder: Path, repeat: int) -> dict[str, float]:
    with_tape, without = folder / "with_tape", folder / "without"
    for path, text in ((with_tape, TEST_WITH), (without, TEST_WITHOUT)):
        path.mkdir()
        (path / "test_one.py").write_text(text)
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_one.py"]
    # The cassette is recorded once; the timed sessions replay it, as a test suite does.
    subprocess.run(
        [*argv, "--tape-mode", "record"], cwd=with_tape, check=True, capture_output=True, env=ENV
    )
    a, b = [], []
    for _ in range(repeat):
        a.append(timed(argv, without))
        b.append(timed(argv, with_tape))
    return {"pytest_bare_s": statistics.median(a), "pytest_tape_added_s": added(b, a)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=9)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        run = bench_run(folder, args.repeat)
        tests = bench_pytest(folder, args.repeat)
    print(f"tracetape run, trivial program (bare {run['bare_s'] * 1000:.0f} ms):")
    for mode in ("record", "replay"):
        added = run[f"{mode}_added_s"]
        verdict = "ok" if added <= 0.25 else "MISSED"
        print(f"  {mode}: +{added * 1000:.0f} ms over bare (target <= 250 ms) {verdict}")
    added = tests["pytest_tape_added_s"]
    verdict = "ok" if added <= 0.020 else "MISSED"
    print(
        f"pytest, one test (bare session {tests['pytest_bare_s'] * 1000:.0f} ms): the tape "
        f"fixture adds {added * 1000:.0f} ms (target <= 20 ms) {verdict}"
    )


if __name__ == "__main__":
    main()
