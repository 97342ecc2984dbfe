"""Benchmark ``tracetape check`` / ``tracetape diff`` on a generated 1,000,000-line trace.

Prints, from one run on this machine, throughput ratios against two baselines measured in the
same run, and peak RSS of each (each measured in its own subprocess):

* ``bare``: a bare line-by-line parse of the file with the fastest JSON library installed:
  ``orjson.loads`` and ``msgspec.json.decode`` (generic, to dicts) are both timed and the
  faster of the two is the baseline;
* ``seed``: the seed's reference ``replay_diffs.py`` logic (load every line with ``json``,
  ``json.dumps(sort_keys)`` + SHA-256 signature, group by signature, print drift).

``tracetape diff`` / ``check`` are timed as they run by default (a seed-JSONL file over
8 MiB is decoded in a second process while the first does the findings: two cores) and with
``jobs=1`` (one process). Their peak RSS adds the worker's own peak (an upper bound: pages
the forked worker shares with its parent count twice).

Each figure is the best of 2 or 3 runs (noise on a shared machine only ever slows a run).

The trace is in the seed's JSONL schema: many runs of one agent (20-80 calls each) over a
shared pool of tools and arguments (a few thousand distinct calls), 10% of calls carrying a
fresh request UUID (normalized away, so every one of them takes the slow path that normalizes
args), writes tagged ``effect: write``, 3% of outputs drifting. Peak memory is shown at
250,000 and 1,000,000 lines of the same pool of calls: it follows the distinct signatures,
not the lines.

    python benchmarks/bench_diff.py          # about a minute on 2 shared cores
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import orjson

LINES = 1_000_000
TOOLS = ("search_issues", "read_file", "write_file", "list_dir", "run_tests", "fetch_url")


def generate(path: Path, lines: int, seed: int, prefix: str) -> None:
    """Write ``lines`` seed-schema records of many runs to ``path``."""
    rnd = random.Random(seed)
    uuids = random.Random(seed + 1)
    with path.open("wb") as fh:
        written = run = 0
        while written < lines:
            run += 1
            step = 1
            for _ in range(rnd.randint(20, 80)):
                if rnd.random() < 0.35:
                    step += 1
                tool = rnd.choice(TOOLS)
                if tool in ("search_issues", "fetch_url"):
                    args: dict[str, object] = {
                        "q": f"label:bug area:{rnd.randint(0, 400)}",
                        "page": rnd.randint(1, 3),
                    }
                else:
                    args = {"path": f"src/pkg/module_{rnd.randint(0, 300)}.py"}
                if tool == "write_file":
                    args["content"] = f"patch-{rnd.randint(0, 5)}"
                if rnd.random() < 0.10:
                    args["request_id"] = str(uuid.UUID(int=uuids.getrandbits(128)))
                # A stable digest (not the salted hash()) keeps the data the same every run.
                what = f"{tool}|{args.get('q')}|{args.get('path')}|{args.get('content')}"
                base = int.from_bytes(hashlib.blake2b(what.encode(), digest_size=8).digest())
                drifted = rnd.random() < 0.03
                out = f"{base ^ (rnd.getrandbits(64) if drifted else 0):064x}"
                record = {
                    "run_id": f"{prefix}_{run:06d}",
                    "step": step,
                    "tool": tool,
                    "args": args,
                    "output_sha": out,
                    "tokens": rnd.randint(200, 1500),
                    "ts": f"2026-08-31T09:{written // 60 % 60:02d}:{written % 60:02d}Z",
                    "effect": "write" if tool == "write_file" else "read",
                }
                fh.write(orjson.dumps(record) + b"\n")
                written += 1
                if written >= lines:
                    break


BARE_ORJSON = """
import orjson, sys
for name in sys.argv[1:]:
    with open(name, "rb") as fh:
        for line in fh:
            orjson.loads(line)
"""

BARE_MSGSPEC = """
import msgspec, sys
decode = msgspec.json.decode
for name in sys.argv[1:]:
    with open(name, "rb") as fh:
        for line in fh:
            decode(line)
"""

# The seed's replay_diffs.py, verbatim in logic (output to /dev/null).
SEED = """
import hashlib, json, sys
from collections import defaultdict
def sig(call):
    return hashlib.sha256(json.dumps(call["args"], sort_keys=True).encode()).hexdigest()
def load_trace(path):
    with open(path) as fh:
        return [json.loads(line) for line in fh if line.strip()]
def diff_runs(run_a, run_b):
    a = load_trace(run_a)
    b = load_trace(run_b)
    by_sig = defaultdict(list)
    for call in a + b:
        by_sig[sig(call)].append(call)
    for key, calls in by_sig.items():
        hashes = {c["output_sha"] for c in calls}
        if len(hashes) > 1:
            print(f"drift: {calls[0]['tool']} -> {len(hashes)} distinct outputs")
sys.stdout = open("/dev/null", "w")
diff_runs(sys.argv[1], sys.argv[2])
"""

# JOBS is replaced by None (the default: a second process decodes files over 8 MiB) or 1.
OURS_CHECK = """
import sys
from tracetape.analysis import check_trace
report = check_trace(sys.argv[1], jobs=JOBS)
print(report.events, report.signatures, sum(report.counts.values()), file=sys.stderr)
"""

OURS_DIFF = """
import sys
from tracetape.analysis import diff_traces
report = diff_traces(sys.argv[1], sys.argv[2], jobs=JOBS)
print(report.events, sum(report.counts.values()), file=sys.stderr)
"""

MEASURE = """
import sys, time
code = sys.argv[1]
sys.argv = ["x", *sys.argv[2:]]
start = time.perf_counter()
exec(compile(code, "<bench>", "exec"), {"__name__": "__main__"})
elapsed = time.perf_counter() - start
# VmHWM, unlike ru_maxrss, starts afresh at exec: it is this interpreter's own peak. A
# worker process, if any, adds its own peak (ru_maxrss of the children: the largest one).
import resource
with open("/proc/self/status") as fh:
    hwm = int(next(line.split()[1] for line in fh if line.startswith("VmHWM:")))
hwm += resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
sys.__stdout__.write(f"{elapsed} {hwm}\\n")
"""


def measure(code: str, *paths: Path, repeat: int = 1) -> tuple[float, float]:
    """Run ``code`` in fresh interpreters; return (best seconds, peak RSS in MiB)."""
    best, rss = float("inf"), 0.0
    for _ in range(repeat):
        done = subprocess.run(
            [sys.executable, "-c", MEASURE, code, *map(str, paths)],
            capture_output=True,
            text=True,
            check=True,
        )
        seconds, rss_kib = done.stdout.split()
        best, rss = min(best, float(seconds)), max(rss, int(rss_kib) / 1024)
    return best, rss


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        a, b, whole, quarter = (
            folder / n for n in ("a.jsonl", "b.jsonl", "all.jsonl", "quarter.jsonl")
        )
        start = time.perf_counter()
        generate(a, LINES // 2, seed=1, prefix="a")
        generate(b, LINES // 2, seed=2, prefix="b")
        with whole.open("wb") as dst:
            for part in (a, b):
                with part.open("rb") as src:
                    shutil.copyfileobj(src, dst)
        with whole.open("rb") as src, quarter.open("wb") as dst:
            for i, line in enumerate(src):
                if i >= LINES // 4:
                    break
                dst.write(line)
        size = whole.stat().st_size / 2**20
        print(f"generated {LINES:,} lines ({size:.0f} MiB) in {time.perf_counter() - start:.1f}s")

        # Best of several runs each: the machine is shared, and noise only ever slows a run.
        bare_orjson, bare_rss = measure(BARE_ORJSON, a, b, repeat=3)
        bare_msgspec, _ = measure(BARE_MSGSPEC, a, b, repeat=3)
        bare = min(bare_orjson, bare_msgspec)
        seed, seed_rss = measure(SEED, a, b, repeat=2)
        default, one = "None", "1"
        diff, diff_rss = measure(OURS_DIFF.replace("JOBS", default), a, b, repeat=3)
        check, check_rss = measure(OURS_CHECK.replace("JOBS", default), whole, repeat=3)
        diff1, diff1_rss = measure(OURS_DIFF.replace("JOBS", one), a, b, repeat=2)
        check1, check1_rss = measure(OURS_CHECK.replace("JOBS", one), whole, repeat=2)
        _, quarter_rss = measure(OURS_CHECK.replace("JOBS", default), quarter)

        rows = [
            ("bare orjson parse", bare_orjson, bare_rss),
            ("bare msgspec parse", bare_msgspec, bare_rss),
            ("seed replay_diffs.py", seed, seed_rss),
            ("tracetape diff A B", diff, diff_rss),
            ("tracetape check", check, check_rss),
            ("diff A B --jobs 1", diff1, diff1_rss),
            ("check --jobs 1", check1, check1_rss),
        ]
        print(f"{'':24} {'seconds':>8} {'lines/s':>10} {'peak RSS':>10}")
        for name, seconds, rss in rows:
            print(f"{name:24} {seconds:8.2f} {LINES / seconds:10,.0f} {rss:8.0f} MiB")
        figures = {
            "bare_msgspec_vs_orjson": bare_orjson / bare_msgspec,
            "diff_vs_seed": seed / diff,
            "check_vs_seed": seed / check,
            "diff_vs_bare": bare / diff,
            "check_vs_bare": bare / check,
            "diff_jobs1_vs_bare": bare / diff1,
            "check_jobs1_vs_bare": bare / check1,
            "check_rss_1m_mib": check_rss,
            "check_rss_250k_mib": quarter_rss,
            "seed_rss_mib": seed_rss,
        }
        f = figures
        print(
            f"throughput vs seed: diff {f['diff_vs_seed']:.2f}x, "
            f"check {f['check_vs_seed']:.2f}x (target >= 3x)"
        )
        print(
            f"throughput vs bare parse (fastest of orjson, msgspec): diff {f['diff_vs_bare']:.0%}, "
            f"check {f['check_vs_bare']:.0%} (target >= 40%); in one process (--jobs 1): "
            f"diff {f['diff_jobs1_vs_bare']:.0%}, check {f['check_jobs1_vs_bare']:.0%}"
        )
        print(
            f"peak RSS of check (with its worker): {quarter_rss:.0f} MiB at 250k lines, "
            f"{check_rss:.0f} MiB at 1M lines (seed: {seed_rss:.0f} MiB)"
        )
        print(json.dumps({k: round(v, 3) for k, v in figures.items()}))


if __name__ == "__main__":
    main()
