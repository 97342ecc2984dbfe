"""Startup cost as users pay it: a fresh ``tracetape run`` process, and a pytest ``tape`` test.

1. ``tracetape run -- python trivial.py`` (recording with ``rewrite``, then replaying)
   against ``python trivial.py`` run bare, fresh processes, interleaved; the figure is the
   median over ``--repeat`` pairs of the difference. Target: at most 0.2 s added (issue 51).
   The default hook installs every provider's hooks (an import watcher each, issue 33); the
   program imports no SDK, so they must cost next to nothing.
2. The same for ``sdks.py``, which imports two of the SDKs whose hooks are patched in when
   they are imported, ``boto3`` and ``google-genai``, and builds a client of each (no
   request): the watchers fire, botocore's ``create_client`` and the httpx, httpx2 and
   aiohttp clients are patched, the client gets its event handlers. Target: at most 0.2 s
   added over the same program run bare. Skipped where either SDK is not installed.
3. Opening a tape and patching, as a program that tapes itself does it:
   ``with tracetape.Tape(path, mode="replay") as tape, tracetape.patch_sdks(tape):``
   (imports included), replaying an empty cassette, against the same program without those
   lines, fresh processes, interleaved, the median of paired differences. Twice: in a
   program that imports ``openai`` first (an agent's; the SDK's fast path is patched at
   once; skipped where ``openai`` is not installed), the figure the target is for (at most
   25 ms added, issue 51), and in one that imports nothing else (tracetape's imports are
   then all of Python's it needs too: reported).
4. A pytest session of one test using the ``tape`` fixture (no SDK) against the same test
   without the fixture, each session a fresh ``python -m pytest`` process, interleaved,
   the median of paired differences. Target: at most 20 ms added.

Processes start as an installed tracetape's do: bytecode compiled (``_fresh.py``).
Figures are printed as seconds added over the bare run measured in the same script (these
machines are shared and noisy: compare the differences, not the absolute times).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _fresh import installed_env

TRIVIAL = "print(sum(range(1000)))\n"
SDK_PROGRAM = """\
import boto3
from google import genai

boto3.client(
    "bedrock-runtime",
    region_name="us-east-1",
    aws_access_key_id="AKIABENCH0NOTAKEY000",
    aws_secret_access_key="bench/NotASecretAccessKey0123456789abcdef",
)
genai.Client(api_key="bench-not-a-key")
print("clients built")
"""

OPEN_AND_PATCH = """\
import sys
{imports}import tracetape

with tracetape.Tape(sys.argv[1], mode="replay") as tape, tracetape.patch_sdks(tape):
    pass
"""
OPEN_BARE = """\
import sys
{imports}"""

TEST_WITH = """
def test_it(tape):
    assert tape.call("tool", {"name": "add", "args": [1, 2], "step": 1}, lambda: 3) == 3
"""
TEST_WITHOUT = """
def test_it():
    assert (lambda: 3)() == 3
"""


# boto3 reads no configuration of this machine and never asks the EC2 metadata service
ENV = {k: v for k, v in installed_env().items() if not k.startswith("AWS_")} | {
    "AWS_CONFIG_FILE": os.devnull,
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    "AWS_EC2_METADATA_DISABLED": "true",
}


def timed(argv: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run(argv, cwd=cwd, check=True, capture_output=True, env=ENV)
    return time.perf_counter() - start


def bench_run(
    folder: Path, repeat: int, name: str = "trivial", text: str = TRIVIAL
) -> dict[str, float]:
    script = folder / f"{name}.py"
    script.write_text(text)
    tt = [sys.executable, "-m", "tracetape", "run", "--tape", f"{name}.jsonl"]
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


def sdks_installed() -> bool:
    try:
        return all(importlib.util.find_spec(m) is not None for m in ("boto3", "google.genai"))
    except ModuleNotFoundError:  # no ``google`` package at all
        return False


def report_run(label: str, run: dict[str, float]) -> None:
    print(f"{label} (bare {run['bare_s'] * 1000:.0f} ms):")
    for mode in ("record", "replay"):
        added = run[f"{mode}_added_s"]
        verdict = "ok" if added <= 0.2 else "MISSED"
        print(f"  {mode}: +{added * 1000:.0f} ms over bare (target <= 200 ms) {verdict}")


def bench_open(folder: Path, repeat: int, sdk: str | None) -> dict[str, float]:
    """Opening a tape and patching the SDKs in a fresh process, against the same program
    without them; ``sdk``: a module both import first."""
    name = f"open_{sdk or 'bare'}"
    imports = f"import {sdk}\n" if sdk else ""
    taped, bare = folder / f"{name}.py", folder / f"{name}_bare.py"
    taped.write_text(OPEN_AND_PATCH.format(imports=imports))
    bare.write_text(OPEN_BARE.format(imports=imports))
    cassette = folder / f"{name}.jsonl"
    subprocess.run(  # the empty cassette both replay
        [sys.executable, "-c", f"import tracetape; tracetape.Tape({str(cassette)!r}).close()"],
        check=True,
        env=ENV,
    )
    a, b = [], []
    for _ in range(repeat):
        a.append(timed([sys.executable, str(bare), str(cassette)], folder))
        b.append(timed([sys.executable, str(taped), str(cassette)], folder))
    return {"bare_s": statistics.median(a), "added_s": added(b, a)}


def report_open(label: str, run: dict[str, float], target: float | None) -> None:
    added = run["added_s"]
    verdict = "reported" if target is None else "ok" if added <= target else "MISSED"
    goal = "" if target is None else f" (target <= {target * 1000:.0f} ms)"
    print(
        f"opening a tape and patching, {label} (bare {run['bare_s'] * 1000:.0f} ms): "
        f"+{added * 1000:.0f} ms{goal} {verdict}"
    )


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
        sdks = bench_run(folder, args.repeat, "sdks", SDK_PROGRAM) if sdks_installed() else None
        has_openai = importlib.util.find_spec("openai") is not None
        opened_sdk = bench_open(folder, args.repeat, "openai") if has_openai else None
        opened = bench_open(folder, args.repeat, None)
        tests = bench_pytest(folder, args.repeat)
    report_run("tracetape run, trivial program", run)
    if sdks is None:
        print("tracetape run, boto3 and google-genai clients: skipped: an SDK is not installed")
    else:
        report_run("tracetape run, boto3 and google-genai clients", sdks)
    if opened_sdk is None:
        print("opening a tape and patching, after import openai: skipped: openai is not installed")
    else:
        report_open("after import openai", opened_sdk, 0.025)
    report_open("no SDK", opened, None)
    added = tests["pytest_tape_added_s"]
    verdict = "ok" if added <= 0.020 else "MISSED"
    print(
        f"pytest, one test (bare session {tests['pytest_bare_s'] * 1000:.0f} ms): the tape "
        f"fixture adds {added * 1000:.0f} ms (target <= 20 ms) {verdict}"
    )


if __name__ == "__main__":
    main()
