"""SDK-level and HTTP-level hooks (issue 3): replay and record cost, as ratios in one run.

The same 50-step OpenAI-SDK agent loop (a growing message list, ~300 bytes a step, two tool
schemas) runs against the real ``openai`` SDK:

1. **SDK-level replay** (``tracetape.patch_sdks(tape)``, cassette load included) against the
   SDK talking to an in-memory transport that answers with the same bodies: the SDK's own
   floor, which replay at the HTTP layer can never beat. Replay skips the SDK's request
   building.
2. **HTTP-level replay** (``tracetape.http_transport(tape)``) against the same in-memory floor.
   Target: at most 1.2x.
3. **Record overhead**: recording at each level against the same live calls to a local fake
   server (127.0.0.1) with no tape.

Run: ``python benchmarks/bench_hooks.py``. Figures are medians of interleaved runs.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx2
import openai

import tracetape

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "integrations"))

from fakeserver import FakeServer

from tracetape import Tape, read_cassette

STEPS = 50
TOOLS = [
    {"type": "function", "function": {"name": n, "parameters": {"type": "object"}}}
    for n in ("noop", "add")
]
PAD = "Keep a careful running total of every number you are given. " * 3  # ~300 bytes a step


def agent(client: Any) -> str:
    """Tool-using loop: one model call a step, the conversation kept as plain dicts."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": f"sum 1 to {STEPS - 1}"}]
    while True:
        message = (
            client.chat.completions.create(
                model="gpt-test", messages=messages, tools=TOOLS, temperature=0
            )
            .choices[0]
            .message
        )
        if not message.tool_calls:
            return str(message.content)
        messages.append(
            {
                "role": "assistant",
                "content": PAD,
                "tool_calls": [tc.to_dict() for tc in message.tool_calls],
            }
        )
        for call in message.tool_calls:
            args = json.loads(call.function.arguments)
            messages.append(
                {"role": "tool", "tool_call_id": call.id, "content": str(args["a"] + args["b"])}
            )


def median_per_call(runs: dict[str, Callable[[], Any]], repeats: int) -> dict[str, float]:
    """Median microseconds per model call of each run, the runs interleaved."""
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeats):
        for name, fn in runs.items():
            start = time.perf_counter()
            fn()
            times[name].append((time.perf_counter() - start) / STEPS * 1e6)
    return {name: statistics.median(ts) for name, ts in times.items()}


def main() -> None:
    warnings.simplefilter("ignore")
    tmp = Path(tempfile.mkdtemp())
    sdk_path, http_path = tmp / "sdk.jsonl", tmp / "http.jsonl"
    server = FakeServer().start()
    live_client = openai.OpenAI(base_url=server.base_url + "/v1", api_key="sk-x", max_retries=0)

    def live() -> str:
        return agent(live_client)

    def record_sdk() -> str:
        with (
            Tape(sdk_path, mode="rewrite", harness_sha="bench") as tape,
            tracetape.patch_sdks(tape),
        ):
            return agent(live_client)

    def record_http() -> str:
        with Tape(http_path, mode="rewrite", harness_sha="bench") as tape:
            client = live_client.with_options(
                http_client=httpx2.Client(transport=tracetape.http_transport(tape))
            )
            return agent(client)

    answer = live()
    recorded = median_per_call({"live": live, "sdk": record_sdk, "http": record_http}, 5)
    server.stop()

    bodies = [r.out["body"] for r in read_cassette(sdk_path).records]
    offline = openai.OpenAI(base_url="http://127.0.0.1:9/v1", api_key="sk-x", max_retries=0)

    def floor() -> str:
        answers = iter(bodies)
        transport = httpx2.MockTransport(lambda request: httpx2.Response(200, json=next(answers)))
        return agent(offline.with_options(http_client=httpx2.Client(transport=transport)))

    def replay_sdk() -> str:
        with Tape(sdk_path, mode="replay", harness_sha="bench") as tape, tracetape.patch_sdks(tape):
            return agent(offline)

    def replay_http() -> str:
        with Tape(http_path, mode="replay", harness_sha="bench") as tape:
            transport = tracetape.http_transport(tape)
            return agent(offline.with_options(http_client=httpx2.Client(transport=transport)))

    for fn in (floor, replay_sdk, replay_http):
        assert fn() == answer
    replayed = median_per_call({"floor": floor, "sdk": replay_sdk, "http": replay_http}, 9)

    print(f"{STEPS}-step OpenAI-SDK agent loop, per model call (medians, interleaved runs)")
    print(
        f"SDK-level replay / SDK on in-memory transport: {replayed['sdk'] / replayed['floor']:.3f}x"
        f"  ({replayed['sdk']:.0f} vs {replayed['floor']:.0f} us, cassette load included)"
    )
    print(
        f"HTTP-level replay / SDK on in-memory transport: "
        f"{replayed['http'] / replayed['floor']:.2f}x (target <= 1.2x)"
        f"  ({replayed['http']:.0f} vs {replayed['floor']:.0f} us)"
    )
    print(
        f"SDK-level record / live call: {recorded['sdk'] / recorded['live']:.2f}x"
        f"  ({recorded['sdk']:.0f} vs {recorded['live']:.0f} us)"
    )
    print(
        f"HTTP-level record / live call: {recorded['http'] / recorded['live']:.2f}x"
        f"  ({recorded['http']:.0f} vs {recorded['live']:.0f} us)"
    )


if __name__ == "__main__":
    main()
