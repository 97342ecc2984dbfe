"""strands-agents, whose default model is Amazon Bedrock through boto3, in its own environment:
it pins an ``mcp`` the dev extra excludes. ``make test`` builds ``.venv-strands`` (tracetape
with its ``strands`` extra) and these tests run ``strands_agent.py`` there, in real
subprocesses, against the fake Bedrock Runtime started here (its event streams binary, with
their CRCs). botocore is taped at its public events, never through httpx.

strands runs ``agent(task)`` in a thread of its own (``asyncio.run`` in a pool thread, on a
copy of the caller's context), each model call in another (``asyncio.to_thread``) and the
tools in the loop's tasks: a step is read from the conversation each request carries, so a
run's model calls are steps 1..n whatever thread they come from.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.integrations.frameworks.conftest import agent_steps
from tests.integrations.providers.fake_bedrock import FakeBedrock
from tracetape import read_cassette
from tracetape.integrations.providers import provider
from tracetape.integrations.runner import EXIT_REPLAY_MISS

VENV = Path(__file__).parents[3] / ".venv-strands"
PYTHON = VENV / "bin" / "python"
PROGRAM = Path(__file__).with_name("strands_agent.py")

pytestmark = pytest.mark.skipif(
    not PYTHON.exists(),
    reason=f"{VENV} is missing: `make test` builds it (strands-agents needs its own mcp)",
)

TASK = "sum 1 to 3, carefully"
ANSWER = "The total is 6."
# where the task sits in a Converse request strands sends
TASK_FIELD = "messages[0].content[0].text"
# fake AWS credentials, sent signed to the fake; none may reach a cassette
KEY_ID = "AKIATRACETAPESTRANDS"
SECRET = "sTr4nds/Tr4c3t4p3S3cr3tK3yF0rT3st1ngOnly0"
TOKEN = "IQoJb3JpZ2luX2VjEHStrandsTracetapeSessionToken0123456789abcdefghijkl"
WAYS = [
    pytest.param([], "converse-stream", id="call-stream"),
    pytest.param(["--no-streaming"], "converse", id="call-converse"),
    pytest.param(["--async"], "converse-stream", id="invoke_async-stream"),
    pytest.param(["--async", "--no-streaming"], "converse", id="invoke_async-converse"),
]
STREAMS = [pytest.param([], id="stream"), pytest.param(["--no-streaming"], id="converse")]


def _env(tmp_path: Path, bedrock: FakeBedrock, *, keys: bool) -> dict[str, str]:
    """The environment of a run: the fake as Bedrock Runtime's endpoint, a region, no AWS
    configuration of this machine, no metadata service, and the fake keys if ``keys``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.pop("PYTHONPATH", None)
    env.update(
        AWS_ENDPOINT_URL_BEDROCK_RUNTIME=bedrock.base_url,
        AWS_REGION="us-east-1",
        AWS_EC2_METADATA_DISABLED="true",
        AWS_CONFIG_FILE=str(tmp_path / "no-config"),
        AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "no-credentials"),
    )
    if keys:
        env.update(AWS_ACCESS_KEY_ID=KEY_ID, AWS_SECRET_ACCESS_KEY=SECRET, AWS_SESSION_TOKEN=TOKEN)
    return env


def _run(
    tmp_path: Path, bedrock: FakeBedrock, mode: str, *args: str
) -> subprocess.CompletedProcess[str]:
    """``strands_agent.py ARGS`` taping itself into ``t.jsonl`` in ``mode``; a recording has
    the keys, a replay none."""
    return subprocess.run(
        [str(PYTHON), str(PROGRAM), "--tape", str(tmp_path / "t.jsonl"), "--mode", mode, *args],
        env=_env(tmp_path, bedrock, keys=mode == "record"),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _agent(tmp_path: Path, bedrock: FakeBedrock, mode: str, *args: str) -> Any:
    """What the program printed last: its answers, or the miss it met (exit 3)."""
    done = _run(tmp_path, bedrock, mode, *args)
    assert done.returncode in (0, 3), done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def _assert_tool_steps(path: Path) -> None:
    """A sequential run on the tape: model calls 1..4, each followed by the tool call its answer
    asked for (the recorded arguments), at its step."""
    records = read_cassette(path).records
    assert [(r.kind, r.step) for r in records] == [
        ("llm", 1), ("tool", 1), ("llm", 2), ("tool", 2), ("llm", 3), ("tool", 3), ("llm", 4)
    ]  # fmt: skip
    bedrock = provider("bedrock")
    for asked, done in zip(records[0::2], records[1::2], strict=False):
        assert [(a.name, a.args) for a in bedrock.asks(asked.out)] == [
            (done.input["name"], done.input["args"])
        ]


def _assert_no_credentials(path: Path) -> None:
    raw = path.read_bytes()
    for secret in (KEY_ID, SECRET, TOKEN):
        assert secret.encode() not in raw


@pytest.mark.parametrize(("args", "route"), WAYS)
def test_an_agent_records_and_replays_offline(
    tmp_path: Path, bedrock: FakeBedrock, args: list[str], route: str
) -> None:
    """A strands agent on its default Bedrock model (``converse_stream``), or with
    ``streaming=False`` (``converse``), run with ``agent(task)`` or ``invoke_async``, records
    its four model calls as steps 1..4 and its ``@tool`` calls at the step of the call that
    asked, and replays to the same answer with the server stopped and no AWS credentials."""
    assert _agent(tmp_path, bedrock, "record", *args, TASK) == [ANSWER]
    assert len(bedrock.requests) == 4
    assert {r["path"].rsplit("/", 1)[1] for r in bedrock.requests} == {route}
    path = tmp_path / "t.jsonl"
    _assert_tool_steps(path)
    models = [r for r in read_cassette(path).records if r.kind == "llm"]
    assert {r.api for r in models} == {f"bedrock.{route}"}
    assert [r.usage for r in models] == [{"input": n, "output": 1} for n in (1, 3, 5, 7)]
    _assert_no_credentials(path)
    bedrock.stop()
    assert _agent(tmp_path, bedrock, "replay", *args, TASK) == [ANSWER]
    assert len(bedrock.requests) == 4


@pytest.mark.parametrize("args", STREAMS)
def test_a_one_word_edit_misses_naming_the_field(
    tmp_path: Path, bedrock: FakeBedrock, args: list[str]
) -> None:
    """Replaying with one word of the prompt changed ends in the ``ReplayMiss`` itself (strands
    neither wraps nor swallows it) at step 1, naming the prompt's field with both words."""
    _agent(tmp_path, bedrock, "record", *args, TASK)
    bedrock.stop()
    miss = _agent(tmp_path, bedrock, "replay", *args, TASK.replace("carefully", "quickly"))
    assert miss["type"] == "ReplayMiss"
    assert (miss["step"], miss["matched"], miss["changes"]) == (1, 0, [TASK_FIELD])
    assert f"changed: {TASK_FIELD}" in miss["miss"]
    assert "carefully" in miss["miss"] and "quickly" in miss["miss"]
    assert len(bedrock.requests) == 4


@pytest.mark.parametrize("args", STREAMS)
def test_two_agents_at_once_count_their_own_steps(
    tmp_path: Path, bedrock: FakeBedrock, args: list[str]
) -> None:
    """Two agents run at once (``asyncio.gather`` of ``invoke_async``) under one tape each
    number their model calls 1..n, and the pair replays with the server stopped."""
    tasks = [TASK, "sum 1 to 2, carefully"]
    answers = [ANSWER, "The total is 3."]
    assert _agent(tmp_path, bedrock, "record", *args, *tasks) == answers
    path = tmp_path / "t.jsonl"
    assert agent_steps(path) == {"sum 1 to 3": [1, 2, 3, 4], "sum 1 to 2": [1, 2, 3]}
    tools = sorted(r.step or 0 for r in read_cassette(path).records if r.kind == "tool")
    assert tools == [1, 1, 2, 2, 3]
    sent = len(bedrock.requests)
    assert sent == 7
    bedrock.stop()
    assert _agent(tmp_path, bedrock, "replay", *args, *tasks) == answers
    assert len(bedrock.requests) == sent


@pytest.mark.slow
def test_tracetape_run_tapes_the_unmodified_program(tmp_path: Path, bedrock: FakeBedrock) -> None:
    """Under ``tracetape run`` the program, opening no tape itself, records its model and tool
    calls at steps 1..n; replays with the server stopped and the network blocked; and exits 3
    on a one-word edit, the diagnosis naming both words."""

    def run(mode: str, task: str) -> subprocess.CompletedProcess[str]:
        command = [str(VENV / "bin" / "tracetape"), "run", "--tape", "t.jsonl", "--mode", mode]
        return subprocess.run(
            [*command, "--", str(PYTHON), str(PROGRAM), task],
            cwd=tmp_path, env=_env(tmp_path, bedrock, keys=mode == "record"),
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip

    recorded = run("record", TASK)
    assert recorded.returncode == 0, recorded.stderr
    assert json.loads(recorded.stdout) == [ANSWER]
    _assert_tool_steps(tmp_path / "t.jsonl")
    _assert_no_credentials(tmp_path / "t.jsonl")
    sent = len(bedrock.requests)
    bedrock.stop()
    replayed = run("replay", TASK)
    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stdout == recorded.stdout
    missed = run("replay", TASK.replace("carefully", "quickly"))
    assert missed.returncode == EXIT_REPLAY_MISS, missed.stderr
    assert "was never recorded" in missed.stderr
    assert "carefully" in missed.stderr and "quickly" in missed.stderr
    assert len(bedrock.requests) == sent


def test_no_credential_reaches_the_cassette(tmp_path: Path, bedrock: FakeBedrock) -> None:
    """The recorded requests went out SigV4-signed with the key id and the session token, and
    neither they nor the secret key are anywhere in the cassette's bytes."""
    assert _agent(tmp_path, bedrock, "record", TASK) == [ANSWER]
    for request in bedrock.requests:
        headers = {k.lower(): v for k, v in request["headers"].items()}
        assert headers["authorization"].startswith(f"AWS4-HMAC-SHA256 Credential={KEY_ID}/")
        assert headers["x-amz-security-token"] == TOKEN
    _assert_no_credentials(tmp_path / "t.jsonl")
