"""Benchmark ``tracetape diff`` and ``tracetape check`` on friendly and adversarial traces.

Every trace is generated here (seed JSONL schema, two halves A and B: ``diff A B``, ``check``
of both) at each size (300,000 and 3,000,000 lines by default), in shapes chosen not to
flatter:

* ``friendly``: many runs of one agent over a shared pool of a few thousand calls, 10% with a
  fresh request UUID (normalized away), writes tagged, 3% of outputs drifting;
* ``drift``: outputs unrelated to arguments (nearly every signature drifts), about 5 lines
  per signature, one call per step;
* ``unique``: nothing repeats: every call has arguments of its own;
* ``many-runs``: 3-call runs (very many runs);
* ``long-runs``: runs of 100,000 calls;
* ``interleaved``: each side is 4 files whose runs interleave line by line across the files
  (``diff 'a-*.jsonl' 'b-*.jsonl'``; the seed reads the concatenation);
* ``key-orders``: ``unique`` with side B writing every object's keys in the other order
  (each value in two key orders: no text is alone, see ``Calls._to_sign`` in the engine);
* ``named-keys``: ``unique`` with keys that name values (``{"q17": "item 17", ...}``:
  nearly every text a shape of its own).

Each is timed in fresh interpreters against baselines measured in the same run:

* ``seed``: the seed's reference ``replay_diffs.py`` logic (``json.loads`` every line,
  ``json.dumps(sort_keys)`` + SHA-256 signature, group by signature, print drift);
* ``bare``: a bare line-by-line ``msgspec.json.decode`` of the files;
* ``read_json``: DuckDB's own ``read_json`` of the files into a table (the floor of this
  engine: the moonshot goal is within 2x of it; of ``named-keys``, with its fields named:
  a struct of a field a key runs out of memory).

Figures are ratios (``seed / ours``: how many times faster) and peak RSS (VmHWM) of each
process. Each time is the best of ``--repeat`` runs, taken in rounds of one run of each
(``best_of``): on a shared machine whose speed moves by 1.5x within minutes, runs of one
contender after another would give one a quiet moment and the next a busy one.

    python benchmarks/bench_diff.py                    # every shape, 300k and 3M lines
    python benchmarks/bench_diff.py --sizes 300000 --shapes drift unique
    python benchmarks/bench_diff.py --vs ../baseline/src    # a refactor against its baseline
"""

from __future__ import annotations

import argparse
import compileall
import hashlib
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson

from _fresh import installed_env

TOOLS = ("search_issues", "read_file", "write_file", "list_dir", "run_tests", "fetch_url")
Record = dict[str, Any]


def generate(path: Path, lines: int, seed: int, prefix: str) -> None:
    """Write ``lines`` records of the friendly shape to ``path`` (check_reports.py uses it
    too: the same bytes every run)."""
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


def _args(k: int) -> Record:
    return {"q": f"item {k}", "page": k % 7, "opts": {"deep": k % 3 == 0}}


def _reversed_args(k: int) -> Record:
    return {"opts": {"deep": k % 3 == 0}, "page": k % 7, "q": f"item {k}"}


def _named_args(k: int) -> Record:
    return {f"q{k}": f"item {k}", "page": k % 7, "opts": {"deep": k % 3 == 0}}


def _calls(
    rnd: random.Random,
    prefix: str,
    run_len: Callable[[], int],
    pool: int | None,
    args_of: Callable[[int], Record] = _args,
) -> Iterator[Record]:
    """One call per step, outputs unrelated to arguments; arguments drawn from ``pool``
    signatures (None: every call its own), written by ``args_of``."""
    run = n = 0
    while True:
        run += 1
        for step in range(1, run_len() + 1):
            n += 1
            k = rnd.randrange(pool) if pool else n
            tool = TOOLS[k % len(TOOLS)]
            args = args_of(k)
            yield {
                "run_id": f"{prefix}_{run:07d}",
                "step": step,
                "tool": tool,
                "args": args,
                "output_sha": f"{rnd.getrandbits(64):016x}",
                "tokens": rnd.randint(100, 900),
                "effect": "write" if tool == "write_file" else "read",
            }


def shape(name: str, lines: int, seed: int, prefix: str) -> Iterator[Record]:
    """The records of one side of a generated trace."""
    rnd = random.Random(seed)
    if name == "drift":
        return _calls(rnd, prefix, lambda: rnd.randint(50, 200), max(1, lines // 5))
    if name == "unique":
        return _calls(rnd, prefix, lambda: rnd.randint(50, 200), None)
    if name == "many-runs":
        return _calls(rnd, prefix, lambda: 3, max(1, lines // 5))
    if name == "long-runs":
        return _calls(rnd, prefix, lambda: 100_000, max(1, lines // 5))
    if name == "interleaved":
        return _calls(rnd, prefix, lambda: rnd.randint(50, 200), max(1, lines // 5))
    if name == "key-orders":
        args_of = _reversed_args if prefix == "b" else _args
        return _calls(rnd, prefix, lambda: rnd.randint(50, 200), None, args_of)
    if name == "named-keys":
        return _calls(rnd, prefix, lambda: rnd.randint(50, 200), None, _named_args)
    raise ValueError(name)


SHAPES = (
    "friendly",
    "drift",
    "unique",
    "many-runs",
    "long-runs",
    "interleaved",
    "key-orders",
    "named-keys",
)
PARTS = 4  # files a side of the interleaved shape


def write_shape(folder: Path, name: str, lines: int) -> tuple[list[Path], list[Path]]:
    """Write one shape's two sides; return the files of each side."""
    sides = []
    for seed, prefix in ((1, "a"), (2, "b")):
        if name == "friendly":
            path = folder / f"{name}-{lines}-{prefix}.jsonl"
            generate(path, lines // 2, seed, prefix)
            sides.append([path])
            continue
        records = shape(name, lines // 2, seed, prefix)
        if name != "interleaved":
            path = folder / f"{name}-{lines}-{prefix}.jsonl"
            with path.open("wb") as fh:
                for _, rec in zip(range(lines // 2), records, strict=False):
                    fh.write(orjson.dumps(rec) + b"\n")
            sides.append([path])
            continue
        # Runs spread over PARTS files: each run's calls go round the files in turn, and
        # PARTS * 8 runs are open at once, their lines interleaved.
        paths = [folder / f"{name}-{lines}-{prefix}-{i}.jsonl" for i in range(PARTS)]
        handles = [p.open("wb") for p in paths]
        open_runs: dict[str, list[bytes]] = {}
        order: list[str] = []
        for _, rec in zip(range(lines // 2), records, strict=False):
            run = rec["run_id"]
            if run not in open_runs:
                open_runs[run] = []
                order.append(run)
            open_runs[run].append(orjson.dumps(rec) + b"\n")
            if len(order) > PARTS * 8:
                _flush(handles, open_runs, order)
        _flush(handles, open_runs, order, everything=True)
        for fh in handles:
            fh.close()
        sides.append(paths)
    return sides[0], sides[1]


def _flush(
    handles: list[Any], runs: dict[str, list[bytes]], order: list[str], everything: bool = False
) -> None:
    """Write the buffered runs' lines interleaved, round-robin over the files."""
    queues = [runs.pop(r) for r in (order if everything else order[: len(order) // 2])]
    del order[: len(queues)]
    i = 0
    while any(queues):
        for q in queues:
            if q:
                handles[i % len(handles)].write(q.pop(0))
                i += 1


BARE = """
import msgspec, sys
decode = msgspec.json.decode
for name in sys.argv[1:]:
    with open(name, "rb") as fh:
        for line in fh:
            decode(line)
"""

READ_JSON = """
import duckdb, sys
con = duckdb.connect(config={"memory_limit": "640MB"})  # the analysis default
con.execute("SET enable_progress_bar = false")
con.execute("CREATE TABLE t AS SELECT * FROM read_json(?, format='newline_delimited')",
            [sys.argv[1:]])
"""
# Keys that name values would make a struct of a field a call (out of memory): the fields
# are named, and the arguments read as JSON.
_FIELDS = "run_id: 'VARCHAR', step: 'BIGINT', tool: 'VARCHAR', args: 'JSON', "
_FIELDS += "output_sha: 'VARCHAR', tokens: 'BIGINT', effect: 'VARCHAR'"
READ_JSON_TYPED = READ_JSON.replace(
    "'newline_delimited'", f"'newline_delimited', columns = {{{_FIELDS}}}"
)

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

# As a user runs them: the console script's code path, in a fresh interpreter.
OURS_DIFF = """
import sys
import json
from tracetape.analysis import diff_traces
half = sys.argv.index("--")
report = diff_traces(sys.argv[1:half], sys.argv[half + 1:])
print(json.dumps(report.to_dict(), sort_keys=True))
"""

OURS_CHECK = """
import sys
import json
from tracetape.analysis import check_trace
report = check_trace(sys.argv[1:])
print(json.dumps(report.to_dict(), sort_keys=True))
"""

MEASURE = """
import sys, time
start = time.perf_counter()
code = sys.argv[1]
sys.argv = ["x", *sys.argv[2:]]
exec(compile(code, "<bench>", "exec"), {"__name__": "__main__"})
elapsed = time.perf_counter() - start
# VmHWM, unlike ru_maxrss, starts afresh at exec: it is this interpreter's own peak.
with open("/proc/self/status") as fh:
    hwm = int(next(line.split()[1] for line in fh if line.startswith("VmHWM:")))
sys.__stdout__.write(f"{elapsed} {hwm}\\n")
"""


def measure(code: str, args: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """Run ``code`` once in a fresh interpreter (``env``: as an installed tracetape's starts,
    its bytecode compiled, ``_fresh``); return (wall seconds, peak RSS in MiB, what it
    printed before the figures: a report's JSON)."""
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, code, *args],
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )
    # Wall time of the whole process: interpreter start and imports are part of the cost.
    wall = time.perf_counter() - start
    if done.returncode:
        raise RuntimeError(done.stderr)
    *printed, figures = done.stdout.splitlines()
    _, rss_kib = figures.split()
    return wall, int(rss_kib) / 1024, "\n".join(printed)


def best_of(
    runs: dict[str, tuple[str, list[str]]],
    repeat: int,
    base: Path | None = None,
    printed: dict[str, set[str]] | None = None,
) -> dict[str, tuple[float, float]]:
    """Time each of ``runs`` (name: code and arguments) in ``repeat`` rounds of one run of
    each, so that each gets the same chance of a quiet moment on a shared machine (noise only
    slows); the seed, the slowest, sits out the last round of two or more. A name ending in
    ``@base`` runs the tracetape at ``base`` (its ``src``). Return each one's best seconds and
    peak RSS in MiB; ``printed`` gets what each printed."""
    best = {name: (float("inf"), 0.0) for name in runs}
    env = installed_env()
    if base is not None:
        compileall.compile_dir(base / "tracetape", quiet=1)
        base_env = env | {"PYTHONPATH": str(base)}
    for round_ in range(repeat):
        for name, (code, args) in runs.items():
            if name == "seed" and 0 < round_ == repeat - 1:
                continue
            seconds, rss, out = measure(code, args, base_env if name.endswith("@base") else env)
            best[name] = (min(best[name][0], seconds), max(best[name][1], rss))
            if printed is not None:
                printed.setdefault(name, set()).add(out)
    return best


def paired(folder: Path, name: str, lines: int, repeat: int, base: Path) -> dict[str, Any]:
    """Time ``diff`` and ``check`` of this checkout against the tracetape at ``base`` on one
    shape, in the same rounds; return the ratios (this / base: below 1 is faster) and whether
    each printed the same report, byte for byte."""
    a, b = write_shape(folder, name, lines)
    diff_args = [*map(str, a), "--", *map(str, b)]
    files = [str(p) for p in (*a, *b)]
    printed: dict[str, set[str]] = {}
    runs = {
        "diff": (OURS_DIFF, diff_args),
        "diff@base": (OURS_DIFF, diff_args),
        "check": (OURS_CHECK, files),
        "check@base": (OURS_CHECK, files),
    }
    timed = best_of(runs, repeat, base, printed)
    for path in folder.iterdir():
        path.unlink()
    return {
        "diff_s": timed["diff"][0],
        "diff_base_s": timed["diff@base"][0],
        "check_s": timed["check"][0],
        "check_base_s": timed["check@base"][0],
        "diff_ratio": timed["diff"][0] / timed["diff@base"][0],
        "check_ratio": timed["check"][0] / timed["check@base"][0],
        "identical": all(len(printed[k] | printed[f"{k}@base"]) == 1 for k in ("diff", "check")),
    }


def run_shape(folder: Path, name: str, lines: int, repeat: int) -> dict[str, float]:
    """Generate one shape at one size and time everything on it."""
    a, b = write_shape(folder, name, lines)
    files = [str(p) for p in (*a, *b)]
    seed_files = []
    for side, paths in (("a", a), ("b", b)):
        whole = folder / f"{name}-{lines}-{side}-all.jsonl"
        if len(paths) > 1:
            with whole.open("wb") as dst:
                for p in paths:
                    with p.open("rb") as src:
                        shutil.copyfileobj(src, dst)
            seed_files.append(str(whole))
        else:
            seed_files.append(str(paths[0]))
    typed = name == "named-keys"
    timed = best_of(
        {
            "seed": (SEED, seed_files),
            "bare": (BARE, files),
            "read_json": (READ_JSON_TYPED if typed else READ_JSON, files),
            "diff": (OURS_DIFF, [*map(str, a), "--", *map(str, b)]),
            "check": (OURS_CHECK, files),
        },
        repeat,
    )
    seed, seed_rss = timed["seed"]
    bare, _ = timed["bare"]
    floor, floor_rss = timed["read_json"]
    diff, diff_rss = timed["diff"]
    check, check_rss = timed["check"]
    for path in folder.iterdir():
        path.unlink()
    return {
        "seed_s": seed,
        "bare_s": bare,
        "read_json_s": floor,
        "diff_s": diff,
        "check_s": check,
        "diff_vs_seed": seed / diff,
        "check_vs_seed": seed / check,
        "diff_vs_bare": bare / diff,
        "check_vs_bare": bare / check,
        "check_vs_read_json": check / floor,
        "diff_rss_mib": diff_rss,
        "check_rss_mib": check_rss,
        "seed_rss_mib": seed_rss,
        "read_json_rss_mib": floor_rss,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", nargs="+", type=int, default=[300_000, 3_000_000])
    parser.add_argument("--shapes", nargs="+", choices=SHAPES, default=list(SHAPES))
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument(
        "--vs",
        type=Path,
        metavar="SRC",
        help="time diff and check against the tracetape in SRC (a baseline checkout's src) "
        "instead of the seed, and compare their reports byte for byte",
    )
    options = parser.parse_args()
    if options.vs is not None:
        main_vs(options)
        return
    results: dict[str, dict[str, float]] = {}
    head = f"{'trace':24} {'seed':>7} {'diff':>6} {'check':>6} {'vs seed':>15} "
    head += f"{'vs bare':>11} {'check/read_json':>15} {'RSS diff/check/seed':>20}"
    print(head)
    with tempfile.TemporaryDirectory() as tmp:
        for lines in options.sizes:
            for name in options.shapes:
                r = run_shape(Path(tmp), name, lines, options.repeat)
                label = f"{name} {lines:,}"
                results[label] = r
                print(
                    f"{label:24} {r['seed_s']:7.2f} {r['diff_s']:6.2f} {r['check_s']:6.2f} "
                    f"{r['diff_vs_seed']:6.2f}x/{r['check_vs_seed']:5.2f}x "
                    f"{r['diff_vs_bare']:4.0%}/{r['check_vs_bare']:4.0%} "
                    f"{r['check_vs_read_json']:14.2f}x "
                    f"{r['diff_rss_mib']:6.0f}/{r['check_rss_mib']:4.0f}/"
                    f"{r['seed_rss_mib']:5.0f} MiB",
                    flush=True,
                )
    print(json.dumps({k: {m: round(v, 3) for m, v in r.items()} for k, r in results.items()}))


def main_vs(options: argparse.Namespace) -> None:
    """``--vs SRC``: this checkout against a baseline, shape by shape."""
    print(f"{'trace':24} {'diff':>6} {'base':>6} {'ratio':>6}  {'check':>6} {'base':>6} "
          f"{'ratio':>6}  reports")  # fmt: skip
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for lines in options.sizes:
            for name in options.shapes:
                r = paired(Path(tmp), name, lines, options.repeat, options.vs.resolve())
                label = f"{name} {lines:,}"
                results[label] = r
                print(
                    f"{label:24} {r['diff_s']:6.2f} {r['diff_base_s']:6.2f} "
                    f"{r['diff_ratio']:6.3f}  {r['check_s']:6.2f} {r['check_base_s']:6.2f} "
                    f"{r['check_ratio']:6.3f}  {'identical' if r['identical'] else 'DIFFER'}",
                    flush=True,
                )
    worst = max(max(r["diff_ratio"], r["check_ratio"]) for r in results.values())
    same = all(r["identical"] for r in results.values())
    print(f"slowest ratio {worst:.3f}; reports {'all identical' if same else 'DIFFER'}")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
