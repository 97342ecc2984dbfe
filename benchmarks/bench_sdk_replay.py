"""SDK-level and HTTP-level replay of an OpenAI-SDK agent, against vcrpy and backspin.

**Fresh processes, as users and CI run replay** (the headline figures). ``sdk_agent.py`` runs
a growing conversation in a new interpreter per repetition, replayed by ``tracetape run``
(the default SDK hook, program unchanged) and by backspin's ``patch_openai``, interleaved. The
program times every ``chat.completions.create`` call itself; the figures are the first call,
the mean of the others (steady state), the mean over all calls, and the whole process (wall
clock, interpreter start to exit: ``tracetape run`` also starts its own process), each the
median over ``--fresh-repeat`` runs. Conversations: 50 steps with 150-character and with
2 KB observations (target: mean over all calls <= 0.5x backspin's) and 10 steps with
150-character ones (target <= 1.0x).

**In one process** (the figures below the headline), the issue-3 loop:

The agent loop (the issue's): 50 ``chat.completions.create`` calls with two tool schemas and
fixed decoding params; each step appends the reply and a ~300-byte observation, so the message
list grows. A fake OpenAI server on 127.0.0.1 answers while recording and is stopped before
any replay. Every replay figure is per call *including* loading the cassette and building the
client, the median of several repetitions, and printed as a ratio against a baseline measured
in the same run (the machine is shared and noisy):

* tracetape SDK-level replay vs vcrpy replay with body matching (target <= 1/100);
* tracetape SDK-level replay vs backspin replay (target <= 1.0x; backspin keys on model and
  messages only and falls back to call order, tracetape keys strictly);
* tracetape HTTP-level replay vs the SDK on an in-memory transport (target <= 1.2x);
* tracetape SDK-level record vs a live call to the local server (overhead, reported).

The tracetape hooks come from ``tracetape.integrations.sdk`` (``patch_sdks``) and
``tracetape.http_transport(tape)``; a figure whose hook is missing from this install is
printed as skipped with the reason. Needs the ``bench`` extra: ``pip install -e '.[bench]'``.

Run: ``python benchmarks/bench_sdk_replay.py [--steps 50] [--repeat 7] [--fresh-repeat 7]``
(``--fresh-repeat 0`` skips the fresh-process part, ``--only-fresh`` skips the rest).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import tracetape
from _fresh import installed_env
from sdk_agent import MODEL, PARAMS, TOOLS  # the one agent of both parts


def reply_for(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The fake server's answer: it depends on the request, so a wrong replay shows."""
    return {
        "id": f"chatcmpl-{len(messages)}",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": MODEL,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": f"thought at {len(messages)}"},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


class Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        data = json.dumps(reply_for(body["messages"])).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def fake_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def agent(client: Any, steps: int) -> str:
    """The agent loop: returns its final answer."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a careful agent. Use tools when needed."},
        {"role": "user", "content": "Fix the failing CI job in repo acme/api."},
    ]
    content = ""
    for i in range(steps):
        response = client.chat.completions.create(
            model=MODEL, messages=messages, tools=TOOLS, **PARAMS
        )
        content = response.choices[0].message.content
        messages.append({"role": "assistant", "content": content})
        messages.append({"role": "user", "content": f"observation {i}: " + "log line " * 30})
    return content


def client(base_url: str, http_client: Any = None) -> Any:
    import openai

    return openai.OpenAI(
        base_url=base_url, api_key="sk-bench-not-a-key", max_retries=0, http_client=http_client
    )


def median_per_call(run: Callable[[], str], expected: str, steps: int, repeat: int) -> float:
    """Median seconds per call of ``run`` (a whole replay), checking its answer each time."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        answer = run()
        times.append((time.perf_counter() - start) / steps)
        if answer != expected:
            raise AssertionError(f"replay returned {answer!r}, expected {expected!r}")
    return statistics.median(times)


# -- fresh processes ------------------------------------------------------------------------

AGENT = Path(__file__).with_name("sdk_agent.py")
CONVERSATIONS = ((50, 150, 0.5), (50, 2048, 0.5), (10, 150, 1.0))  # steps, size, target


def run_agent(argv: list[str], env: dict[str, str], out: Path) -> dict[str, Any]:
    """Run the agent program once; its per-call times and the process's wall time."""
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {done.returncode}:\n{done.stderr}")
    data: dict[str, Any] = json.loads(out.read_text())
    data["wall"] = wall
    return data


def summarize(runs: list[dict[str, Any]]) -> dict[str, float]:
    """Medians over runs of: the first call, the mean of the others, the mean of all, the wall."""
    return {
        "first": statistics.median(r["times"][0] for r in runs),
        "steady": statistics.median(statistics.mean(r["times"][1:]) for r in runs),
        "mean": statistics.median(statistics.mean(r["times"]) for r in runs),
        "wall": statistics.median(r["wall"] for r in runs),
    }


def fresh_processes(tmp: Path, repeat: int) -> list[tuple[int, int, float, dict[str, Any]]]:
    python = sys.executable
    tracetape_run = [python, "-m", "tracetape", "run"]
    results = []
    for steps, size, target in CONVERSATIONS:
        folder = tmp / f"fresh-{steps}-{size}"
        folder.mkdir()
        out = folder / "out.json"
        env = {
            **installed_env(),
            "BENCH_STEPS": str(steps),
            "BENCH_SIZE": str(size),
            "BENCH_OUT": str(out),
            "BENCH_DIR": str(folder),
        }
        tape = str(folder / "tape.jsonl")
        agent_argv = [python, str(AGENT)]
        with fake_server() as url:
            env["BENCH_URL"] = url
            expected = run_agent(agent_argv, env, out)["content"]
            run_agent(agent_argv, {**env, "BENCH_MODE": "backspin-record"}, out)
            record = [*tracetape_run, "--tape", tape, "--mode", "record", "--", *agent_argv]
            run_agent(record, env, out)
        backspin_env = {**env, "BENCH_MODE": "backspin", "BENCH_RUN": (folder / "run").read_text()}
        runs: dict[str, list[dict[str, Any]]] = {"backspin": [], "tracetape": []}
        for _ in range(repeat):  # interleaved: both see the same machine load
            runs["backspin"].append(run_agent(agent_argv, backspin_env, out))
            runs["tracetape"].append(
                run_agent([*tracetape_run, "--tape", tape, "--", *agent_argv], env, out)
            )
        for name, rs in runs.items():
            for r in rs:
                if r["content"] != expected:
                    raise AssertionError(f"{name} replayed {r['content']!r}, not {expected!r}")
        results.append((steps, size, target, {name: summarize(rs) for name, rs in runs.items()}))
    return results


def report_fresh(results: list[tuple[int, int, float, dict[str, Any]]], repeat: int) -> None:
    print(f"Replay in fresh processes (medians of {repeat} runs each, interleaved):")
    print(
        f"  {'conversation':28} {'replayer':10} {'first call':>11} {'steady':>9} "
        f"{'mean/call':>10} {'process':>9}"
    )
    for steps, size, target, figures in results:
        label = f"{steps} steps, {size}-char messages"
        for name in ("backspin", "tracetape"):
            f = figures[name]
            print(
                f"  {label:28} {name:10} {f['first'] * 1e6:8.0f} us {f['steady'] * 1e6:6.1f} us"
                f" {f['mean'] * 1e6:7.1f} us {f['wall'] * 1e3:6.0f} ms"
            )
            label = ""
        ratio = figures["tracetape"]["mean"] / figures["backspin"]["mean"]
        verdict = "ok" if ratio <= target else "MISSED"
        first = figures["tracetape"]["first"] / figures["backspin"]["first"]
        steady = figures["tracetape"]["steady"] / figures["backspin"]["steady"]
        wall = figures["tracetape"]["wall"] / figures["backspin"]["wall"]
        print(
            f"  {'':28} tracetape / backspin: mean per call {ratio:.2f}x [<= {target}] {verdict};"
            f" first {first:.2f}x, steady {steady:.2f}x, process {wall:.2f}x"
        )


def sdk_hooks() -> tuple[Callable[..., AbstractContextManager[Any]] | None, str]:
    try:
        from tracetape.integrations.sdk import patch_sdks
    except ImportError as exc:
        return None, f"tracetape.integrations.sdk is not available ({exc})"
    return patch_sdks, ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--fresh-repeat", type=int, default=7)
    parser.add_argument("--only-fresh", action="store_true")
    args = parser.parse_args()
    steps, repeat = args.steps, args.repeat

    try:
        import httpx2
        import vcr
        from backspin import Cassette as BackspinCassette
        from backspin import Recorder, load_run
        from backspin import patch_openai as backspin_patch
    except ImportError as exc:
        print(f"bench_sdk_replay: skipped: {exc.name} is missing; pip install -e '.[bench]'")
        return

    from tracetape import Tape

    patch_sdks, why_no_sdk = sdk_hooks()
    tmp = Path(tempfile.mkdtemp(prefix="bench-sdk-"))
    if args.fresh_repeat > 0:
        report_fresh(fresh_processes(tmp, args.fresh_repeat), args.fresh_repeat)
        if args.only_fresh:
            return
        print()
    figures: dict[str, float] = {}
    skipped: dict[str, str] = {}
    vcr_config = vcr.VCR(
        match_on=["method", "scheme", "host", "port", "path", "query", "body"],
        filter_headers=["authorization"],
    )

    # -- record everything against the live fake server ----------------------------------------
    with fake_server() as base_url:
        url = base_url
        expected = agent(client(url), steps)
        live = []
        for _ in range(repeat):
            start = time.perf_counter()
            agent(client(url), steps)
            live.append((time.perf_counter() - start) / steps)
        figures["live"] = statistics.median(live)

        with vcr_config.use_cassette(str(tmp / "vcr.yaml"), record_mode="all"):
            agent(client(url), steps)

        recorder = Recorder(str(tmp / "backspin"), agent="bench")
        with recorder:
            agent(recorder.capture_openai(client(url)), steps)
        backspin_path = recorder.path

        if patch_sdks is not None:
            records = []
            for i in range(repeat):
                path = tmp / f"tt-{i}.jsonl"
                start = time.perf_counter()
                with Tape(path, mode="record") as tape, patch_sdks(tape):
                    agent(client(url), steps)
                records.append((time.perf_counter() - start) / steps)
            figures["tracetape_record"] = statistics.median(records)
            (tmp / "tt-0.jsonl").rename(tmp / "tt.jsonl")
        else:
            skipped["tracetape_record"] = why_no_sdk

    # -- replay with the server stopped --------------------------------------------------------
    def vcr_replay() -> str:
        with vcr_config.use_cassette(str(tmp / "vcr.yaml"), record_mode="none"):
            return agent(client(url), steps)

    def backspin_replay() -> str:
        with (
            warnings.catch_warnings(),
            backspin_patch(BackspinCassette.from_run(load_run(backspin_path))),
        ):
            warnings.simplefilter("error")  # a call-order fallback is a wrong replay here
            import openai

            return agent(openai.OpenAI(base_url=url, api_key="sk-bench-not-a-key"), steps)

    figures["vcrpy"] = median_per_call(vcr_replay, expected, steps, max(2, repeat // 3))
    figures["backspin"] = median_per_call(backspin_replay, expected, steps, repeat)

    def memory_floor() -> str:
        def handle(request: Any) -> Any:
            body = json.loads(request.content)
            return httpx2.Response(200, json=reply_for(body["messages"]))

        transport = httpx2.MockTransport(handle)
        return agent(client(url, http_client=httpx2.Client(transport=transport)), steps)

    figures["sdk_memory"] = median_per_call(memory_floor, expected, steps, repeat)

    if patch_sdks is not None:
        # An agent under test holds one client; building one costs ~20 ms of TLS setup that
        # backspin's replay never pays (it stubs the constructor), so build it outside the
        # timed region. The cassette load stays inside.
        held = client(url)

        def sdk_replay() -> str:
            with Tape(tmp / "tt.jsonl", mode="replay") as tape, patch_sdks(tape):
                return agent(held, steps)

        figures["tracetape_sdk"] = median_per_call(sdk_replay, expected, steps, repeat)
    else:
        skipped["tracetape_sdk"] = why_no_sdk

    if not hasattr(tracetape, "http_transport"):
        skipped["tracetape_http"] = "tracetape.http_transport is not available in this install"
    else:

        def http_replay() -> str:
            with Tape(tmp / "tt.jsonl", mode="replay") as tape:
                transport = tracetape.http_transport(tape)
                return agent(client(url, http_client=httpx2.Client(transport=transport)), steps)

        with Tape(tmp / "probe.jsonl", mode="record") as probe:
            kind = type(tracetape.http_transport(probe))
        if not issubclass(kind, httpx2.BaseTransport):
            skipped["tracetape_http"] = (
                f"tracetape.http_transport(tape) returned {kind.__name__}, not an httpx2 transport "
                "(the openai SDK runs on httpx2): adapt http_replay() to its signature"
            )
        elif "tracetape_record" in figures:
            figures["tracetape_http"] = median_per_call(http_replay, expected, steps, repeat)
        else:
            skipped["tracetape_http"] = "needs the SDK-level recording (one cassette serves both)"

    report(figures, skipped, steps)


def report(figures: dict[str, float], skipped: dict[str, str], steps: int) -> None:
    def us(name: str) -> str:
        return f"{figures[name] * 1e6:9.1f} µs/call" if name in figures else "      skipped"

    print(f"SDK replay benchmark: {steps}-step OpenAI-SDK agent, growing message list")
    for name in (
        "live",
        "tracetape_record",
        "vcrpy",
        "backspin",
        "sdk_memory",
        "tracetape_sdk",
        "tracetape_http",
    ):
        print(f"  {name:22} {us(name)}")
    print("ratios (lower is better; target in brackets):")
    for label, num, den, target in (
        ("tracetape SDK replay / vcrpy body-matching replay", "tracetape_sdk", "vcrpy", 0.01),
        ("tracetape SDK replay / backspin replay", "tracetape_sdk", "backspin", 1.0),
        ("tracetape HTTP replay / SDK on in-memory transport", "tracetape_http", "sdk_memory", 1.2),
        ("tracetape record / live call (overhead)", "tracetape_record", "live", None),
    ):
        if num in figures and den in figures:
            ratio = figures[num] / figures[den]
            verdict = "" if target is None else (" ok" if ratio <= target else " MISSED")
            goal = "" if target is None else f" [<= {target}]"
            print(f"  {label:52} {ratio:8.4f}{goal}{verdict}")
        else:
            reason = skipped.get(num) or skipped.get(den) or "missing figure"
            print(f"  {label:52}  skipped: {reason}")


if __name__ == "__main__":
    main()
