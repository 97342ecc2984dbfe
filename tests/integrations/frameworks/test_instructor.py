"""instructor, in its own environment: it pins ``jiter<0.15``, hence openai 3.3.0, which the dev
extra's openai excludes. ``make test`` builds ``.venv-instructor`` (tracetape with its
``instructor`` extra) and these tests run the agent there, in real subprocesses, against the fake
model server started here.

The case of the issue: a client built by ``instructor.from_openai`` *before* the tape became
active keeps the SDK's bound ``create``, so the patched SDK method is never reached; the HTTP
safety net at ``send`` tapes it all the same.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.integrations.frameworks.conftest import FAKE_KEYS, FakeServer
from tracetape import read_cassette

VENV = Path(__file__).parents[3] / ".venv-instructor"
PYTHON = VENV / "bin" / "python"

pytestmark = pytest.mark.skipif(
    not PYTHON.exists(),
    reason=f"{VENV} is missing: `make test` builds it (instructor needs its own openai)",
)

# argv: base_url cassette mode task variant. The client is built before the tape.
AGENT = """
import asyncio, json, sys
import instructor, openai
from pydantic import BaseModel
import tracetape
from tracetape import ReplayMiss, Tape

class Answer(BaseModel):
    answer: int
    note: str

base, path, mode, task, variant = sys.argv[1:6]
messages = [{"role": "user", "content": task}]
kw = dict(base_url=base + "/v1", api_key="sk-test", max_retries=2)

def run_sync():
    client = instructor.from_openai(openai.OpenAI(**kw))
    with Tape(path, mode=mode) as tape, tracetape.patch_sdks(tape):
        if variant == "partial":
            *_, last = client.chat.completions.create_partial(
                model="m", response_model=Answer, messages=messages)
            return last
        return client.chat.completions.create(model="m", response_model=Answer, messages=messages)

async def run_async():
    client = instructor.from_openai(openai.AsyncOpenAI(**kw))
    async with Tape(path, mode=mode) as tape:
        with tracetape.patch_sdks(tape):
            return await client.chat.completions.create(
                model="m", response_model=Answer, messages=messages)

async def run_two():
    # two extractions at once under one tape, each with its own task text
    client = instructor.from_openai(openai.AsyncOpenAI(**kw))

    async def one(text):
        return await client.chat.completions.create(
            model="m", response_model=Answer, messages=[{"role": "user", "content": text}])

    async with Tape(path, mode=mode) as tape:
        with tracetape.patch_sdks(tape):
            first, second = await asyncio.gather(one(task), one(task + ", twice"))
    assert first.model_dump() == second.model_dump()
    return first

if variant == "none":
    Tape(path, mode=mode).close()
    sys.exit(0)
try:
    runs = {"async": run_async, "gather": run_two}
    answer = asyncio.run(runs[variant]()) if variant in runs else run_sync()
except ReplayMiss as miss:
    print(json.dumps({"miss": str(miss), "step": miss.step, "type": type(miss).__name__}))
    sys.exit(3)
print(json.dumps({"answer": answer.answer, "note": answer.note}))
"""

UNMODIFIED = """
import sys
import instructor, openai
from pydantic import BaseModel

class Answer(BaseModel):
    answer: int

client = instructor.from_openai(openai.OpenAI(base_url=sys.argv[1] + "/v1", max_retries=2))
reply = client.chat.completions.create(
    model="m", response_model=Answer, messages=[{"role": "user", "content": sys.argv[2]}])
print(reply.answer)
"""


def _agent(
    tmp_path: Path, server: FakeServer, mode: str, task: str, variant: str
) -> dict[str, Any]:
    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    done = subprocess.run(
        [str(PYTHON), str(script), server.base_url, str(tmp_path / "t.jsonl"), mode, task, variant],
        env={**os.environ, **FAKE_KEYS},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode in (0, 3), done.stderr
    if variant == "none":
        return {}
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["sync", "async", "partial", "gather"])
def test_a_client_built_before_the_tape_records_and_replays(
    tmp_path: Path, server: FakeServer, variant: str
) -> None:
    task = "extract the answer, carefully"
    recorded = _agent(tmp_path, server, "record", task, variant)
    assert recorded == {"answer": 42, "note": "ok"}
    records = read_cassette(tmp_path / "t.jsonl").records
    calls = 2 if variant == "gather" else 1
    assert [(r.kind, r.step) for r in records] == [("llm", 1)] * calls
    assert {"role": "user", "content": task} in [r.input["messages"][0] for r in records]
    live = len(server.requests)
    server.stop()
    assert _agent(tmp_path, server, "replay", task, variant) == recorded
    missed = _agent(tmp_path, server, "replay", task.replace("carefully", "quickly"), variant)
    assert missed["type"] == "ReplayMiss" and missed["step"] == 1
    assert "carefully" in missed["miss"] and "quickly" in missed["miss"]
    assert "messages[0].content" in missed["miss"]
    assert len(server.requests) == live


def test_an_empty_cassette_never_goes_live(tmp_path: Path, server: FakeServer) -> None:
    """Replaying a cassette that holds nothing misses at the first call, with the server up."""
    (tmp_path / "t.jsonl").unlink(missing_ok=True)
    _agent(tmp_path, server, "record", "nothing", "none")  # no call: an empty cassette
    before = len(server.requests)
    missed = _agent(tmp_path, server, "replay", "extract the answer", "sync")
    assert missed["type"] == "ReplayMiss"
    assert len(server.requests) == before


@pytest.mark.slow
def test_tracetape_run_tapes_an_unmodified_instructor_program(
    tmp_path: Path, server: FakeServer
) -> None:
    script = tmp_path / "agent.py"
    script.write_text(UNMODIFIED)
    env = {**os.environ, **FAKE_KEYS}
    env.pop("PYTHONPATH", None)

    def run(mode: str, task: str) -> subprocess.CompletedProcess[str]:
        command = [str(VENV / "bin" / "tracetape"), "run", "--tape", "t.jsonl", "--mode", mode]
        return subprocess.run(
            [*command, "--", str(PYTHON), str(script), server.base_url, task],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip

    recorded = run("record", "extract the answer, carefully")
    assert recorded.returncode == 0, recorded.stderr
    assert recorded.stdout == "42\n"
    assert [r.kind for r in read_cassette(tmp_path / "t.jsonl").records] == ["llm"]
    server.stop()
    replayed = run("replay", "extract the answer, carefully")
    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stdout == "42\n"
    missed = run("replay", "extract the answer, quickly")
    assert missed.returncode == 3, missed.stderr
    assert "carefully" in missed.stderr and "quickly" in missed.stderr
