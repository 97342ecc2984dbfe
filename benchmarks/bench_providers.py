"""Replay per call of every provider's path against the OpenAI path's, in fresh processes
(issue 33).

``provider_agent.py`` runs the same tool-using conversation through each provider's official
SDK: openai (chat completions, the baseline), anthropic (messages), gemini (``google-genai``
``generate_content``), bedrock (``boto3`` ``converse``), mistral (chat), cohere (v2 chat),
ollama (chat) and groq (chat completions). ``--steps`` model calls (default 50), the
conversation growing each step by the model's turn, the tool's result and a ``--size``-
character observation (default 150). Each provider records once under ``tracetape run
--mode record`` against its local fake (``tests/integrations/providers/fake_*.py``;
``tests/integrations/fakeserver.py`` for openai and anthropic), which is then stopped.

Each repetition replays every provider in a fresh process, as users and CI run replay:
``python -m tracetape run --tape T -- python provider_agent.py`` (replay, network blocked),
the providers interleaved and their order rotated from one repetition to the next so that
each sees the same machine load. The program times every SDK call itself; the figures are
the first call, the mean of the others (steady), the mean over all calls and the whole
process (wall clock, ``tracetape run``'s own process included), each the median over
``--repeat`` repetitions. Every recording must hold ``--steps`` model calls named by its
provider (``bedrock.converse``...), and every run, recorded or replayed, must return the
answers the fakes' plan gives, so a broken replay cannot look fast.

``tracetape/call`` is tracetape's own part of a call, timed in the same replays around the
seams it hooks (the httpx and httpx2 clients' ``send``, botocore's event handlers); for a
provider with an SDK fast path (openai, anthropic, groq) the whole call is tracetape's. Where a
provider is taped at a transport, the rest of a call is the SDK's own request building and
answer parsing, which a live call does too.

For scale, ``live/call`` is the same program with no tape against the running fake (the
SDK's own work, a local HTTP round trip and the fake's), the mean over all calls, median of
``--live-repeat`` runs made before recording (not interleaved with the replays).

Target: each provider's mean over all calls <= 1.5x the OpenAI path's, measured in the same
run (these machines are shared and noisy: compare ratios, not absolute times);
``tracetape / openai`` is tracetape's own part against the same baseline.

Run: ``python benchmarks/bench_providers.py [--steps 50] [--size 150] [--repeat 9]
[--live-repeat 3] [--only anthropic,gemini] [--format text|json]``. Startup with every
provider's hooks is measured by ``bench_startup.py``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import tracetape
from _fresh import installed_env
from provider_agent import AGENTS, asked

ROOT = Path(__file__).resolve().parent.parent
AGENT = Path(__file__).with_name("provider_agent.py")
BASELINE = "openai"
TARGET = 1.5
# Each provider's SDK (the module its program imports), checked before anything runs.
SDKS = {
    "openai": "openai",
    "anthropic": "anthropic",
    "gemini": "google.genai",
    "bedrock": "boto3",
    "mistral": "mistralai",
    "cohere": "cohere",
    "ollama": "ollama",
    "groq": "groq",
}
# Each provider's fake: (module, class), found with the repository's test folders on the path.
FAKES = {
    "openai": ("fakeserver", "FakeServer"),
    "anthropic": ("fakeserver", "FakeServer"),
    "gemini": ("tests.integrations.providers.fake_gemini", "FakeGemini"),
    "bedrock": ("tests.integrations.providers.fake_bedrock", "FakeBedrock"),
    "mistral": ("tests.integrations.providers.fake_mistral", "FakeMistral"),
    "cohere": ("tests.integrations.providers.fake_cohere", "FakeCohere"),
    "ollama": ("tests.integrations.providers.fake_ollama", "FakeOllama"),
    "groq": ("tests.integrations.providers.fake_groq", "FakeGroq"),
}


@contextlib.contextmanager
def fake_server(name: str) -> Iterator[str]:
    """The fake of provider ``name`` on 127.0.0.1, serving; its base URL."""
    for folder in (ROOT, ROOT / "tests" / "integrations"):  # the fakes import `fakeserver`
        if str(folder) not in sys.path:
            sys.path.insert(0, str(folder))
    module, cls = FAKES[name]
    server = getattr(importlib.import_module(module), cls)().start()
    try:
        yield server.base_url
    finally:
        server.stop()


def expected_answers(steps: int) -> list[str]:
    """What every fake answers the task "sum 1 to ``steps - 1``": an ``add`` call per number,
    each adding the next number to the sum so far, then the total."""
    calls = [asked(k * (k + 1) // 2, k + 1) for k in range(steps - 1)]
    return [*calls, f"The total is {(steps - 1) * steps // 2}."]


def run_agent(argv: list[str], env: dict[str, str], out: Path) -> dict[str, Any]:
    """Run the agent program once; its answers, per-call times and the process's wall time."""
    out.unlink(missing_ok=True)
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {done.returncode}:\n{done.stderr}")
    data: dict[str, Any] = json.loads(out.read_text())
    data["wall"] = wall
    return data


def check_answers(name: str, what: str, answers: list[str], expected: list[str]) -> None:
    """Raise unless ``answers`` are the plan's, naming the first that differs."""
    if answers != expected:
        pairs = zip(answers, expected, strict=False)
        first = next((i for i, (a, e) in enumerate(pairs) if a != e), len(answers))
        raise AssertionError(
            f"{name} {what}: {len(answers)} answers, #{first + 1} is not the plan's "
            f"({answers[first : first + 1]} against {expected[first : first + 1]})"
        )


def record(name: str, folder: Path, env: dict[str, str], steps: int, live: int) -> dict[str, Any]:
    """Against provider ``name``'s fake: run the program ``live`` times with no tape, then
    record it into ``folder/tape.jsonl``; check every run's answers, and that the tape holds
    ``steps`` model calls of that provider. Returns the api the records name and the live
    runs."""
    tape, out = folder / "tape.jsonl", folder / "out.json"
    program = [sys.executable, str(AGENT)]
    argv = [sys.executable, "-m", "tracetape", "run", "--tape", str(tape), "--mode", "record"]
    expected = expected_answers(steps)
    with fake_server(name) as url:
        env["BENCH_URL"] = url
        runs = [run_agent(program, env, out) for _ in range(live)]
        runs.append(run_agent([*argv, "--", *program], env, out))
    for i, run in enumerate(runs):
        check_answers(name, "recorded" if i == live else "live", run["answers"], expected)
    calls = [r for r in tracetape.read_cassette(tape).records if r.kind == "llm"]
    apis = sorted({str(r.api) for r in calls})
    if len(calls) != steps or len(apis) != 1 or not apis[0].startswith(f"{name}."):
        raise AssertionError(f"{name}: the tape holds {len(calls)} model calls named {apis}")
    return {"api": apis[0], "live": runs[:live]}


def summarize(runs: list[dict[str, Any]]) -> dict[str, float]:
    """Medians over runs of: the first call, the mean of the others, the mean of all, the wall."""
    return {
        "first_s": statistics.median(r["times"][0] for r in runs),
        "steady_s": statistics.median(statistics.mean(r["times"][1:] or r["times"]) for r in runs),
        "mean_s": statistics.median(statistics.mean(r["times"]) for r in runs),
        "wall_s": statistics.median(r["wall"] for r in runs),
        "tape_s": statistics.median(
            r["tape_s"] / len(r["times"]) if "tape_s" in r else statistics.mean(r["times"])
            for r in runs
        ),
    }


def measure(names: list[str], steps: int, size: int, repeat: int, live: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-providers-") as where:
        tmp = Path(where)
        base = {k: v for k, v in installed_env().items() if not k.startswith("AWS_")}
        base |= {
            "BENCH_STEPS": str(steps),
            "BENCH_SIZE": str(size),
            # boto3 finds no configuration or credentials of this machine, and never asks
            # the EC2 metadata service (the program passes its own keys)
            "AWS_CONFIG_FILE": str(tmp / "no-aws-config"),
            "AWS_SHARED_CREDENTIALS_FILE": str(tmp / "no-aws-credentials"),
            "AWS_EC2_METADATA_DISABLED": "true",
        }
        envs, recorded = {}, {}
        for name in names:
            folder = tmp / name
            folder.mkdir()
            envs[name] = {**base, "BENCH_PROVIDER": name, "BENCH_OUT": str(folder / "out.json")}
            recorded[name] = record(name, folder, envs[name], steps, live)
            envs[name]["BENCH_TIME_TAPE"] = "1"  # the replays time tracetape's part
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
        expected = expected_answers(steps)
        for i in range(repeat):
            for name in names[i % len(names) :] + names[: i % len(names)]:  # rotated
                tape, out = tmp / name / "tape.jsonl", tmp / name / "out.json"
                argv = [
                    sys.executable,
                    "-m",
                    "tracetape",
                    "run",
                    "--strict",
                    "--tape",
                    str(tape),
                    "--",
                ]
                run = run_agent([*argv, sys.executable, str(AGENT)], envs[name], out)
                check_answers(name, f"replay {i + 1}", run["answers"], expected)
                runs[name].append(run)
    figures: dict[str, dict[str, Any]] = {}
    for name, rs in runs.items():
        figures[name] = {"api": recorded[name]["api"], **summarize(rs)}
        if live:
            figures[name]["live_s"] = summarize(recorded[name]["live"])["mean_s"]
    baseline = figures[BASELINE]
    for f in figures.values():
        f["ratio"] = f["mean_s"] / baseline["mean_s"]
        f["first_ratio"] = f["first_s"] / baseline["first_s"]
        f["steady_ratio"] = f["steady_s"] / baseline["steady_s"]
        f["tape_ratio"] = f["tape_s"] / baseline["mean_s"]
        f["ok"] = f["ratio"] <= TARGET
    return {
        "steps": steps,
        "size": size,
        "repeat": repeat,
        "live_repeat": live,
        "target": TARGET,
        "providers": figures,
    }


def report(result: dict[str, Any]) -> None:
    print(
        f"Replay per SDK call in fresh `tracetape run` processes, {result['steps']} steps, "
        f"{result['size']}-char observations (medians of {result['repeat']} runs, interleaved):"
    )
    print(
        f"  {'provider':10} {'api':25} {'first call':>11} {'steady':>10} {'mean/call':>10}"
        f" {'process':>8} {'live/call':>10}   {'mean / openai':>13} {'first':>7} {'steady':>7}"
        f" {'tracetape/call':>14} {'tracetape / openai':>18}"
    )
    for name, f in result["providers"].items():
        ratio = "baseline" if name == BASELINE else f"{f['ratio']:.2f}x"
        verdict = "" if name == BASELINE else (" ok" if f["ok"] else " MISSED")
        live = f"{f['live_s'] * 1e6:7.0f} us" if "live_s" in f else "   skipped"
        print(
            f"  {name:10} {f['api']:25} {f['first_s'] * 1e6:8.0f} us {f['steady_s'] * 1e6:7.1f} us"
            f" {f['mean_s'] * 1e6:7.1f} us {f['wall_s'] * 1e3:5.0f} ms {live}   {ratio:>13}"
            f" {f['first_ratio']:6.2f}x {f['steady_ratio']:6.2f}x {f['tape_s'] * 1e6:11.1f} us"
            f" {f['tape_ratio']:17.2f}x{verdict}"
        )
    others = [f for name, f in result["providers"].items() if name != BASELINE]
    met = sum(f["ok"] for f in others)
    print(f"target: mean per call <= {result['target']}x openai's, met by {met} of {len(others)}")
    if result["live_repeat"]:
        print(
            "live/call: the same program with no tape against the running fake, median of "
            f"{result['live_repeat']} runs"
        )
    for name, why in result["skipped"].items():
        print(f"  {name}: skipped: {why}")


def installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # its parent package is missing (``google`` of google.genai)
        return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--size", type=int, default=150, help="observation length (chars)")
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument(
        "--live-repeat", type=int, default=3, help="runs with no tape against the fake (0: none)"
    )
    parser.add_argument("--only", default="", help="comma-separated providers (openai always)")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    args = parser.parse_args()
    if args.steps < 1 or args.repeat < 1:
        parser.error("--steps and --repeat must be at least 1")
    names = list(AGENTS)
    if args.only:
        wanted = {BASELINE, *args.only.split(",")}
        if unknown := wanted - set(names):
            parser.error(f"unknown providers {sorted(unknown)}; choose from {', '.join(names)}")
        names = [n for n in names if n in wanted]
    skipped = {n: SDKS[n] for n in names if not installed(SDKS[n])}
    if BASELINE in skipped:
        print(f"bench_providers: skipped: {SDKS[BASELINE]} is missing; pip install -e '.[dev]'")
        return
    kept = [n for n in names if n not in skipped]
    result = measure(kept, args.steps, args.size, args.repeat, args.live_repeat)
    result["skipped"] = {n: f"{sdk} is not installed" for n, sdk in skipped.items()}
    if args.format == "json":
        print(json.dumps(result, indent=2))
    else:
        report(result)


if __name__ == "__main__":
    main()
