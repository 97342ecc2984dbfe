"""``tracetape run --proxy``: a program's clients pointed at a proxy for its lifetime, the
run judged as ``tracetape run`` judges one (exit 3 on a miss the proxy answered)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from fakeserver import FakeServer

from tracetape import read_cassette
from tracetape.integrations.proxied import program_env
from tracetape.integrations.proxy import client_env, parse_upstreams

KEY = "sk-proj-proxy0123456789abcdefghijklmnopqr"


def test_the_environment_points_each_client_at_the_proxy() -> None:
    env = client_env("http://127.0.0.1:4321")
    assert env["OPENAI_BASE_URL"] == "http://127.0.0.1:4321/v1"
    assert env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:4321"
    kept = program_env("http://127.0.0.1:4321", {"OPENAI_BASE_URL": "http://mine"}, "keep")
    assert kept["OPENAI_BASE_URL"] == "http://mine"
    forced = program_env("http://127.0.0.1:4321", {"OPENAI_BASE_URL": "http://mine"}, "force")
    assert forced["OPENAI_BASE_URL"] == "http://127.0.0.1:4321/v1"
    with pytest.raises(ValueError, match="use PROVIDER=URL"):
        parse_upstreams(["nobody=http://x"])


AGENT = """
import os, sys, openai
sys.path.insert(0, {here!r})
from sdk_agents import openai_agent
client = openai.OpenAI(max_retries=0, api_key=os.environ.get("OPENAI_API_KEY", "none"))
try:
    print(openai_agent(client, sys.argv[1], stream=True))
except openai.BadRequestError as exc:
    print("the agent got:", exc.message)
    sys.exit(1)
"""


def _run(tmp_path: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    tracetape_cli = Path(sys.executable).with_name("tracetape")
    return subprocess.run(
        [str(tracetape_cli), "run", "--proxy", "--tape", "run.jsonl", *args],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_tracetape_run_proxy_records_replays_and_exits_3_on_a_miss(
    tmp_path: Path, server: FakeServer
) -> None:
    script = tmp_path / "agent.py"
    script.write_text(AGENT.format(here=str(Path(__file__).parent)))
    base = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    recorded = _run(tmp_path, "--mode", "record", "--upstream", f"openai={server.base_url}",
                    "--", sys.executable, str(script), "sum 1 to 2",
                    env={**base, "OPENAI_API_KEY": KEY})  # fmt: skip
    assert recorded.returncode == 0, recorded.stderr
    assert "recorded 3 decision(s)" in recorded.stderr
    assert [r.step for r in read_cassette(tmp_path / "run.jsonl").records] == [1, 2, 3]
    server.stop()
    replayed = _run(tmp_path, "--", sys.executable, str(script), "sum 1 to 2", env=base)
    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stdout == recorded.stdout
    assert "replayed 3 of 3 recorded decision(s)" in replayed.stderr
    missed = _run(tmp_path, "--", sys.executable, str(script), "sum 1 to 2 now", env=base)
    assert missed.returncode == 3, missed.stderr
    assert missed.stdout.startswith("the agent got: Error code: 400 - tracetape replay miss")
    assert "re-record: tracetape run --tape run.jsonl --mode rewrite --proxy -- " in missed.stdout
    assert "the proxy answered the miss with a 400 error" in missed.stderr
    assert "messages[0].content" in missed.stderr
