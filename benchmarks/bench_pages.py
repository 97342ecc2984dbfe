"""Benchmark the collector's pages: a 200-step run's page and a diff of two, against the
JSON endpoint of the same run, in one process (the app served through Starlette's test
client: server time, no network).

Shapes (each two runs of 200 steps: a model call on a conversation that grows, then a tool
call, priced model, usage on every answer):

* ``friendly``: the second run changes one word at step 100 (the diff folds the rest);
* ``adversarial``: every prompt, answer and result differs between the runs, and each answer
  is about 2 KB of prose, so nothing folds and every text is diffed word by word.

Each page is timed as a first view (the collector's kept analyses forgotten before each GET),
the diff page and the run list also as views again (their analysis kept) and as the first
GET of a collector in a new process (DuckDB not yet opened). The run list is also timed with
``RUNS`` runs stored (each 5 steps of a model call and a tool call), as the first GET of a new
process: it reads the numbers and findings computed when the lines were stored.

Goals (issue 52): the run list's first view in a new process under 150 ms with 200 runs; the
diff page's under 400 ms on the friendly shape and 1.2 s on the adversarial one. Run:
``python benchmarks/bench_pages.py``.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fastapi.testclient import TestClient

from tracetape import Tape
from tracetape.collector import Settings, create_app
from tracetape.stores.database import Database

STEPS = 200
RUNS = 200
API = "openai.chat.completions"
TOKEN = "bench-token-0123456789"
WORDS = ["the", "weather", "report", "says", "wind", "from", "the", "west", "with", "showers"]


def _prose(seed: int, size: int) -> str:
    words = [WORDS[(seed * 7 + i * 3) % len(WORDS)] for i in range(size // 6)]
    return " ".join(words)


def record_run(path: Path, variant: str, shape: str) -> None:
    """A 200-step run recorded as the SDK hooks record it (an OpenAI chat envelope)."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Plan the trip, city by city."}]
    with Tape(path, mode="record", harness_sha="bench") as tape:
        for step in range(1, STEPS + 1):
            changed = shape == "adversarial" or (variant == "b" and step == 100)
            mark = f"{variant}{step}" if changed else f"{step}"
            text = f"Step {mark}: " + _prose(
                step + (variant == "b" and changed), 300 if shape == "friendly" else 2000
            )
            payload = {
                "messages": list(messages),
                "tools": [],
                "params": {"model": "gpt-4o-mini"},
                "step": step,
            }
            out = {"status": 200, "body": {"choices": [{"message": {"content": text, "tool_calls": [
                {"id": f"c{step}", "type": "function",
                 "function": {"name": "lookup", "arguments": f'{{"city": "c{mark}"}}'}}]}}],
                "usage": {"prompt_tokens": 10 * step, "completion_tokens": 40}}}  # fmt: skip
            decision = tape.prepare("llm", payload)
            tape.record(decision, out, ms=120.0 + step, usage={"input": 10 * step, "output": 40},
                        api="openai.chat.completions")  # fmt: skip
            result = f"city c{mark}: " + _prose(step, 200)
            tape.call("tool", {"name": "lookup", "args": {"city": f"c{mark}"}, "step": step},
                      lambda result=result: result)  # fmt: skip
            said = {"role": "tool", "tool_call_id": f"c{step}", "content": result}
            messages += [{"role": "assistant", "content": text}, said]


def timed(client: TestClient, url: str, repeat: int, *, first: bool = True) -> float:
    """The median milliseconds of ``GET url``: a ``first`` view (the collector's kept
    analyses forgotten before each), else a view again (the page's analysis kept)."""
    times = []
    client.get(url)
    for _ in range(repeat):
        if first:
            client.app.state.analyses.clear()  # type: ignore[attr-defined]
            client.app.state.db.forget_pages(["a", "b"])  # type: ignore[attr-defined]
        start = time.perf_counter()
        answer = client.get(url)
        times.append((time.perf_counter() - start) * 1000)
        assert answer.status_code == 200, (url, answer.text[:300])
    return statistics.median(times)


# A first view as a freshly started collector serves it: the app made in a new process (its
# imports done), then the page's first GET timed, which opens DuckDB and analyses.
_COLD = """
import sys, time
from fastapi.testclient import TestClient
from tracetape.collector import Settings, create_app
from tracetape.stores.database import Database
url, token, page, forget = sys.argv[1:]
db = Database.open(url)
if forget == "forget":
    db.forget_pages(["a", "b"])
app = create_app(db, Settings(token=token))
client = TestClient(app, base_url="http://127.0.0.1", headers={"Authorization": "Bearer " + token})
start = time.perf_counter()
assert client.get(page).status_code == 200
print((time.perf_counter() - start) * 1000)
"""


def cold(url: str, page: str, repeat: int = 3, *, kept: bool = False) -> float:
    """The median milliseconds of the first ``GET page`` of a collector in a new process
    (``kept``: a diff page kept when its run was stored is read; else none is)."""
    times = []
    for _ in range(repeat):
        command = [sys.executable, "-c", _COLD, url, TOKEN, page, "keep" if kept else "forget"]
        done = subprocess.run(command, capture_output=True, text=True, check=True)
        times.append(float(done.stdout))
    return statistics.median(times)


def many_runs(folder: Path, client: TestClient) -> str:
    """``RUNS`` short runs stored, their summaries computed; the database's URL."""
    for i in range(RUNS):
        path = folder / f"r{i}.jsonl"
        with Tape(path, mode="record", harness_sha="bench") as tape:
            for step in range(1, 6):
                payload = {"messages": [{"role": "user", "content": f"task {i} step {step}"}],
                           "params": {"model": "gpt-4o-mini"}, "step": step}  # fmt: skip
                body = {"choices": [{"message": {"content": f"answer {i}.{step}"}}],
                        "usage": {"prompt_tokens": 100, "completion_tokens": 20}}  # fmt: skip
                decision = tape.prepare("llm", payload)
                usage = {"input": 100, "output": 20}
                answer = {"status": 200, "body": body}
                tape.record(decision, answer, ms=50.0, usage=usage, api=API)
                tape.call("tool", {"name": "lookup", "args": {"i": i, "s": step}, "step": step},
                          lambda: "found")  # fmt: skip
        params = {"source": f"agent-{i % 20}.jsonl", "run": f"r{i}"}
        assert client.post("/v1/lines", content=path.read_bytes(), params=params).status_code == 200
    assert client.app.state.collector.summaries.wait([f"r{i}" for i in range(RUNS)], 300)  # type: ignore[attr-defined]
    return f"sqlite:///{folder / 'c.db'}"


def main(repeat: int = 7) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        db = Database.open(f"sqlite:///{folder / 'c.db'}")
        client = TestClient(
            create_app(db, Settings(token=TOKEN)),
            base_url="http://127.0.0.1",
            headers={"Authorization": f"Bearer {TOKEN}", "content-type": "application/x-ndjson"},
        )
        url = many_runs(folder, client)
        listed = cold(url, "/", repeat=5)
        print(f"{RUNS} runs: the run list as the first page of a new process {listed:.0f} ms "
              "(goal: under 150 ms)")  # fmt: skip
    for shape in ("friendly", "adversarial"):
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            url = f"sqlite:///{folder / 'c.db'}"
            db = Database.open(url)
            client = TestClient(
                create_app(db, Settings(token=TOKEN)),
                base_url="http://127.0.0.1",
                headers={
                    "Authorization": f"Bearer {TOKEN}",
                    "content-type": "application/x-ndjson",
                },
            )
            for variant in ("a", "b"):
                path = folder / f"{variant}.jsonl"
                record_run(path, variant, shape)
                # one agent's two runs: b's diff against a is drawn when b is stored
                params = {"source": "agent.jsonl", "run": variant}
                stored = client.post("/v1/lines", content=path.read_bytes(), params=params)
                assert stored.status_code == 200, stored.text
            client.app.state.collector.summaries.wait(["a", "b"], 300)  # type: ignore[attr-defined]
            kept_cold = cold(url, "/diff?a=a&b=b", repeat=5, kept=True)
            client.cookies.set("tracetape_session", "")
            page_client = TestClient(client.app, base_url="http://127.0.0.1")
            page_client.get(f"/?token={TOKEN}")  # the session cookie
            json_ms = timed(client, "/v1/runs/a?limit=1000", repeat)
            run_ms = timed(page_client, "/runs/a", repeat)
            diff_ms = timed(page_client, "/diff?a=a&b=b", repeat)
            list_ms = timed(page_client, "/", repeat)
            diff_json_ms = timed(client, "/v1/diff?a=a&b=b", repeat)
            diff_again = timed(page_client, "/diff?a=a&b=b", repeat, first=False)
            list_again = timed(page_client, "/", repeat, first=False)
            diff_cold, list_cold = cold(url, "/diff?a=a&b=b", repeat=5), cold(url, "/")
            print(
                f"{shape}: 200-step run page {run_ms:.0f} ms ({run_ms / json_ms:.1f}x the run's "
                f"JSON, {json_ms:.0f} ms); diff page {diff_ms:.0f} ms "
                f"({diff_ms / diff_json_ms:.2f}x the diff's JSON, {diff_json_ms:.0f} ms); "
                f"run list {list_ms:.0f} ms; viewed again: diff page {diff_again:.0f} ms, "
                f"run list {list_again:.0f} ms; the first of a new process: diff page "
                f"{kept_cold:.0f} ms drawn when b was stored, {diff_cold:.0f} ms drawn on view, "
                f"run list {list_cold:.0f} ms (goals: the diff page "
                f"{'400 ms' if shape == 'friendly' else '1.2 s'}, the run list 150 ms)"
            )


if __name__ == "__main__":
    main()
