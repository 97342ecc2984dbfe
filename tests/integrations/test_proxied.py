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
from tracetape.integrations.runner import EXIT_REPLAY_MISS

from .providers.fake_bedrock import FakeBedrock
from .providers.test_bedrock import KEY_ID, MODEL, SECRET, TASK, TOKEN

KEY = "sk-proj-proxy0123456789abcdefghijklmnopqr"


def test_the_environment_points_each_client_at_the_proxy() -> None:
    env = client_env("http://127.0.0.1:4321")
    assert env["OPENAI_BASE_URL"] == "http://127.0.0.1:4321/v1"
    assert env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:4321"
    assert env["AWS_ENDPOINT_URL_BEDROCK_RUNTIME"] == "http://127.0.0.1:4321/bedrock"
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


BOTO3_AGENT = """
import sys, boto3, botocore.exceptions
client = boto3.client("bedrock-runtime")  # its endpoint: AWS_ENDPOINT_URL_BEDROCK_RUNTIME
TOOLS = {"tools": [{"toolSpec": {"name": "add", "inputSchema": {"json": {"type": "object"}}}}]}
messages = [{"role": "user", "content": [{"text": sys.argv[1]}]}]
try:
    while True:
        stream = client.converse_stream(modelId=sys.argv[2], messages=messages, toolConfig=TOOLS)
        text, use, args = "", None, ""
        for event in stream["stream"]:
            start = event.get("contentBlockStart", {}).get("start", {})
            use = start.get("toolUse", use)
            delta = event.get("contentBlockDelta", {}).get("delta", {})
            text += delta.get("text", "")
            args += delta.get("toolUse", {}).get("input", "")
        if use is None:
            break
        numbers = __import__("json").loads(args)
        messages += [
            {"role": "assistant", "content": [{"toolUse": {**use, "input": numbers}}]},
            {"role": "user", "content": [{"toolResult": {"toolUseId": use["toolUseId"],
                "content": [{"text": str(numbers["a"] + numbers["b"])}]}}]},
        ]
except botocore.exceptions.ClientError as exc:
    print("the agent got:", exc)
    sys.exit(1)
print(text)
"""


def test_tracetape_run_proxy_tapes_an_unmodified_boto3_bedrock_agent(
    tmp_path: Path, bedrock: FakeBedrock
) -> None:
    """A boto3 ConverseStream agent that names no endpoint, under ``tracetape run --proxy``:
    recorded against a fake Bedrock with the environment's credentials (none stored, none
    printed), replayed with the fake stopped and placeholder credentials, and a one-word edit
    exits 3 with the diagnosis in the agent's own ``ClientError``."""
    script = tmp_path / "agent.py"
    script.write_text(BOTO3_AGENT)
    base = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    base |= {
        "AWS_CONFIG_FILE": str(tmp_path / "no-config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "no-credentials"),
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    keys = {
        "AWS_ACCESS_KEY_ID": KEY_ID,
        "AWS_SECRET_ACCESS_KEY": SECRET,
        "AWS_SESSION_TOKEN": TOKEN,
    }
    placeholder = {"AWS_ACCESS_KEY_ID": "placeholder", "AWS_SECRET_ACCESS_KEY": "placeholder"}
    agent = [sys.executable, str(script)]
    recorded = _run(tmp_path, "--mode", "record", "--upstream", f"bedrock={bedrock.base_url}",
                    "--", *agent, TASK, MODEL, env={**base, **keys})  # fmt: skip
    assert recorded.returncode == 0, recorded.stderr
    assert recorded.stdout == "The total is 6.\n"
    records = read_cassette(tmp_path / "run.jsonl").records
    assert [(r.api, r.step) for r in records] == [
        ("bedrock.converse-stream", n) for n in (1, 2, 3, 4)
    ]
    bedrock.stop()
    replayed = _run(tmp_path, "--", *agent, TASK, MODEL, env={**base, **placeholder})
    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stdout == recorded.stdout
    edited = TASK.replace("carefully", "quickly")
    missed = _run(tmp_path, "--", *agent, edited, MODEL, env={**base, **placeholder})
    assert missed.returncode == EXIT_REPLAY_MISS, missed.stderr
    assert missed.stdout.startswith(
        "the agent got: An error occurred (ValidationException) when calling the "
        "ConverseStream operation: tracetape replay miss"
    )
    assert "carefully" in missed.stdout and "quickly" in missed.stdout
    assert "messages[0].content[0].text" in missed.stderr
    said = recorded.stderr + replayed.stderr + missed.stderr + missed.stdout
    for secret in (KEY_ID, SECRET, TOKEN):
        assert secret not in said and secret not in (tmp_path / "run.jsonl").read_text()
