"""The agent program ``bench_sdk_replay.py`` runs in fresh processes: a growing conversation of
``BENCH_STEPS`` OpenAI-SDK calls whose observations are ``BENCH_SIZE`` characters long.

It times each ``client.chat.completions.create(...)`` from outside (attribute access included,
as an agent's line of code pays it) and writes the times as JSON to ``BENCH_OUT``. How it runs:

* ``BENCH_MODE=live``: against the server at ``BENCH_URL`` (also how ``tracetape run`` records
  and replays it: the tape comes from the runner, the program is unchanged);
* ``BENCH_MODE=backspin-record``: recorded by backspin into ``BENCH_DIR`` (path written to
  ``BENCH_DIR/run``);
* ``BENCH_MODE=backspin``: replayed by backspin's ``patch_openai`` from ``BENCH_RUN``.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

MODEL = "gpt-4o-mini"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": f"{name} tool",
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
        },
    }
    for name in ("search", "read_file")
]
PARAMS = {"temperature": 0, "top_p": 1, "max_tokens": 256, "seed": 7}


def observation(i: int, size: int) -> str:
    return (f"observation {i}: " + "log line " * (size // 9 + 1))[:size]


def agent(client: Any, steps: int, size: int) -> tuple[str, list[float]]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a careful agent. Use tools when needed."},
        {"role": "user", "content": "Fix the failing CI job in repo acme/api."},
    ]
    content, times = "", []
    for i in range(steps):
        start = time.perf_counter()
        response = client.chat.completions.create(
            model=MODEL, messages=messages, tools=TOOLS, **PARAMS
        )
        content = response.choices[0].message.content
        times.append(time.perf_counter() - start)
        messages.append({"role": "assistant", "content": content})
        messages.append({"role": "user", "content": observation(i, size)})
    return content, times


def main() -> None:
    steps, size = int(os.environ["BENCH_STEPS"]), int(os.environ["BENCH_SIZE"])
    mode, url = os.environ.get("BENCH_MODE", "live"), os.environ["BENCH_URL"]

    import openai  # here: importing this module for its constants costs no SDK import

    def client() -> Any:
        return openai.OpenAI(base_url=url, api_key="sk-bench-not-a-key", max_retries=0)

    if mode == "backspin":
        from backspin import Cassette, load_run, patch_openai

        with patch_openai(Cassette.from_run(load_run(os.environ["BENCH_RUN"]))):
            content, times = agent(client(), steps, size)
    elif mode == "backspin-record":
        from backspin import Recorder

        recorder = Recorder(os.environ["BENCH_DIR"], agent="bench")
        with recorder:
            content, times = agent(recorder.capture_openai(client()), steps, size)
        Path(os.environ["BENCH_DIR"], "run").write_text(str(recorder.path))
    else:
        content, times = agent(client(), steps, size)
    Path(os.environ["BENCH_OUT"]).write_text(json.dumps({"content": content, "times": times}))


if __name__ == "__main__":
    main()
