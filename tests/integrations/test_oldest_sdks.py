"""The oldest SDK releases the hooks support, in a venv of their own (``.venv-oldest-sdks``,
built by ``make test`` from the ``oldest-sdks`` extra): openai 1.x and anthropic 0.40, built on
``httpx``, which retry *any* exception their HTTP client raises.

The agent runs there, in a real subprocess, against the fake model server started here: record
at the SDK level, replay with the server stopped, and a miss at the HTTP level that the SDK
retries: the miss leaves the call as it is, not retried, not wrapped.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from fakeserver import FakeServer

VENV = Path(__file__).parents[2] / ".venv-oldest-sdks"
PYTHON = VENV / "bin" / "python"

pytestmark = pytest.mark.skipif(
    not PYTHON.exists(), reason=f"{VENV} is missing: `make test` builds it"
)

# argv: base_url cassette-dir mode. Prints one JSON line.
AGENT = """
import asyncio, json, sys, time
import anthropic, openai
import tracetape
from tracetape import ReplayMiss, Tape

base, folder, mode = sys.argv[1:4]
slept = []
real_sleep = time.sleep
time.sleep = lambda s: (slept.append(s), real_sleep(s))
msgs = [{"role": "user", "content": "sum 1 to 0"}]
out = {"versions": [openai.__version__, anthropic.__version__]}

def ask(sdk, client, messages, stream=False):
    if sdk == "openai":
        if stream:
            return "".join(c.choices[0].delta.content or "" for c in client.chat.completions.create(
                model="m", messages=messages, stream=True) if c.choices)
        reply = client.chat.completions.create(model="m", messages=messages)
        return reply.choices[0].message.content
    if stream:
        with client.messages.stream(model="m", max_tokens=5, messages=messages) as s:
            return s.get_final_message().content[0].text
    return client.messages.create(model="m", max_tokens=5, messages=messages).content[0].text

async def aask(sdk, client, messages):
    if sdk == "openai":
        reply = await client.chat.completions.create(model="m", messages=messages)
        return reply.choices[0].message.content
    reply = await client.messages.create(model="m", max_tokens=5, messages=messages)
    return reply.content[0].text

for sdk in ("openai", "anthropic"):
    if sdk == "openai":
        make = lambda aio=False: (openai.AsyncOpenAI if aio else openai.OpenAI)(
            base_url=base + "/v1", api_key="k", max_retries=2)
    else:
        make = lambda aio=False: (anthropic.AsyncAnthropic if aio else anthropic.Anthropic)(
            base_url=base, api_key="k", max_retries=2)
    with Tape(f"{folder}/{sdk}.jsonl", mode=mode) as tape, tracetape.patch_sdks(tape):
        answers = [ask(sdk, make(), msgs), ask(sdk, make(), msgs, stream=True)]
        answers.append(asyncio.run(aask(sdk, make(aio=True), msgs)))
    out[sdk] = answers
    if mode == "replay":
        try:
            with Tape(f"{folder}/{sdk}.jsonl", mode="replay") as tape, tracetape.patch_http(tape):
                try:
                    ask(sdk, make(), [{"role": "user", "content": "sum 1 to 1"}])
                except Exception as exc:  # what the call itself raised
                    raised = type(exc).__name__
        except ReplayMiss as miss:
            out[sdk + "_miss"] = {"type": type(miss).__name__, "step": miss.step,
                                  "changes": miss.changes, "calls": len(tape.misses),
                                  "raised": raised}
out["slept"] = slept
print(json.dumps(out))
"""


def _run(tmp_path: Path, server: FakeServer, mode: str) -> dict[str, Any]:
    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    done = subprocess.run(
        [str(PYTHON), str(script), server.base_url, str(tmp_path), mode],
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


def test_the_oldest_sdks_record_replay_and_never_wait_on_a_miss(
    tmp_path: Path, server: FakeServer
) -> None:
    recorded = _run(tmp_path, server, "record")
    openai_version, anthropic_version = recorded["versions"]
    assert openai_version.startswith("1.") and anthropic_version.startswith("0.")
    answers = ["The total is 0."] * 3
    assert recorded["openai"] == recorded["anthropic"] == answers
    server.stop()
    replayed = _run(tmp_path, server, "replay")
    assert replayed["openai"] == replayed["anthropic"] == answers
    for sdk in ("openai", "anthropic"):
        # the call raised the miss itself: not retried, not wrapped, no back-off
        miss = replayed[sdk + "_miss"]
        assert miss["type"] == miss["raised"] == "ReplayMiss"
        assert miss["step"] == 1 and miss["calls"] == 1
        assert miss["changes"] == ["messages[0].content"]
    # no retry back-off (the SDKs wait 0.5 s and more, with jitter, before a retry)
    assert all(seconds < 0.1 for seconds in replayed["slept"]), replayed["slept"]
