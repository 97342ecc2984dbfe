"""Real clients through ``tracetape run --proxy``: the agents of ``tests/node/agents`` (the
official ``openai`` and ``@anthropic-ai/sdk`` packages, the Vercel AI SDK over
``@ai-sdk/openai`` and ``@ai-sdk/anthropic``, ``@google/genai``,
``@aws-sdk/client-bedrock-runtime``) and the coding-agent CLIs
(Claude Code, Codex, Gemini CLI) find the proxy by the variables it sets, record against
the local fakes, replay with the fakes stopped and no key in their environment, and miss on a
one-word edit of the prompt: the diagnosis reaches the program as its client's error, and the
run exits 3.

They need Node.js 20 or later and ``npm ci`` in tests/node (``make test`` runs it); without
them they skip, saying why, except under CI, where they fail. ``make test`` runs the openai
agent's case; the others are ``slow`` (tests/suite.py), run by ``make test-deep``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fakeserver import FakeServer

from tests.integrations.providers.fake_bedrock import FakeBedrock
from tests.integrations.providers.fake_gemini import FakeGemini
from tests.services import skip_or_fail
from tracetape import Tape, read_cassette
from tracetape.integrations.proxy import ProxyApp

NODE_DIR = Path(__file__).parents[1] / "node"
AGENTS = NODE_DIR / "agents"
TRACETAPE = str(Path(sys.executable).with_name("tracetape"))
KEYS = {
    "OPENAI_API_KEY": "sk-proj-node0123456789abcdefghijklmnopqrstu",
    "ANTHROPIC_API_KEY": "sk-ant-api03-node0123456789abcdefghijklmnop",
    "GEMINI_API_KEY": "AIzaSyD-node0123456789abcdefghijklmnopqrs",
}
TASK, EDITED = "Please sum 1 to 3.", "Kindly sum 1 to 3."
# what the agent did: the add calls of "sum 1 to 3", then the answer (fakeserver's model)
CALLS = [{"a": 0, "b": 1}, {"a": 1, "b": 2}, {"a": 3, "b": 3}]


@pytest.fixture(scope="module")
def node() -> str:
    """The node binary, with tests/node's pinned packages installed."""
    found = shutil.which("node")
    if found is None:
        skip_or_fail("no node on PATH: the Node client tests need Node.js 20 or later")
    version = subprocess.run(
        [found, "--version"], capture_output=True, text=True, check=True
    ).stdout.strip()
    if int(version.lstrip("v").split(".")[0]) < 20:
        skip_or_fail(f"node {version}: the Node client tests need Node.js 20 or later")
    pinned = json.loads((NODE_DIR / "package.json").read_text())["dependencies"]
    for name, want in pinned.items():
        installed = NODE_DIR / "node_modules" / name / "package.json"
        have = json.loads(installed.read_text())["version"] if installed.exists() else None
        if have != want:
            skip_or_fail(
                f"tests/node/node_modules has {name} {have or 'missing'}, not {want}: "
                "run npm ci in tests/node (make test does)"
            )
    return found


@pytest.fixture
def fakes() -> Iterator[tuple[FakeServer, FakeGemini]]:
    """The fake OpenAI + Anthropic provider and the fake Gemini API, the proxy's upstreams."""
    server, gemini = FakeServer().start(), FakeGemini().start()
    try:
        yield server, gemini
    finally:
        server.stop()
        gemini.stop()


def _env(**extra: str) -> dict[str, str]:
    """This environment without a provider's key or base URL, and with ``extra``."""
    prefixes = ("OPENAI_", "ANTHROPIC_", "GEMINI_", "GOOGLE_")
    return {**{k: v for k, v in os.environ.items() if not k.startswith(prefixes)}, **extra}


def _run(
    node: str, tape: Path, agent: list[str], task: str, *args: str, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [TRACETAPE, "run", "--proxy", "--tape", str(tape), *args, "--",
         node, str(AGENTS / agent[0]), *agent[1:], task],
        cwd=tape.parent, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def _result(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The agent's result: the last line it printed, JSON."""
    lines = done.stdout.strip().splitlines()
    assert lines, f"the agent printed nothing; its run said:\n{done.stderr}"
    return dict(json.loads(lines[-1]))


# (agent and its arguments, the field a miss names, id); the first runs in make test, the
# others are slow (tests/suite.py: an SDK beyond OpenAI's in child processes)
AGENT_CASES = [
    (["openai-chat.mjs"], "messages[0].content", "openai-chat-tools"),
    (["openai-chat-stream.mjs"], "messages[0].content", "openai-chat-stream"),
    (["openai-responses.mjs"], "messages[0].content", "openai-responses"),
    (["anthropic-messages.mjs"], "messages[0].content", "anthropic-messages"),
    (["anthropic-stream.mjs"], "messages[0].content", "anthropic-stream-tools"),
    (["ai-generate.mjs", "openai"], "messages[0].content[0].text", "ai-generateText-openai"),
    (["ai-stream.mjs", "openai"], "messages[0].content[0].text", "ai-streamText-openai"),
    (["ai-generate.mjs", "anthropic"], "messages[0].content[0].text", "ai-generateText-anthropic"),
    (["ai-stream.mjs", "anthropic"], "messages[0].content[0].text", "ai-streamText-anthropic"),
    (["genai-generate.mjs"], "messages[0].parts[0].text", "genai-generateContent"),
    (["genai-generate.mjs", "stream"], "messages[0].parts[0].text", "genai-streamGenerateContent"),
]


@pytest.mark.parametrize(
    ("agent", "field"),
    [
        pytest.param(agent, field, id=name, marks=[pytest.mark.slow] if i else [])
        for i, (agent, field, name) in enumerate(AGENT_CASES)
    ],
)
def test_a_node_agent_records_replays_offline_and_misses_with_exit_3(
    tmp_path: Path,
    node: str,
    fakes: tuple[FakeServer, FakeGemini],
    agent: list[str],
    field: str,
) -> None:
    """Recorded through the proxy, the run replays with no upstream and no key; an edited
    prompt is a miss its client raises at once, with the changed field, and exit 3."""
    server, gemini = fakes
    tape = tmp_path / "run.jsonl"
    upstreams = [f"openai={server.base_url}", f"anthropic={server.base_url}"]
    upstreams.append(f"gemini={gemini.base_url}")
    recorded = _run(
        node, tape, agent, TASK, "--mode", "record",
        *(arg for pair in upstreams for arg in ("--upstream", pair)), env=_env(**KEYS),
    )  # fmt: skip
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    live = _result(recorded)
    assert live["calls"] == CALLS and live["text"] == "The total is 6."
    assert "recorded 4 decision(s)" in recorded.stderr
    assert [r.step for r in read_cassette(tape).records] == [1, 2, 3, 4]
    text = tape.read_text()
    assert not [name for name, key in KEYS.items() if key in text], "no key is stored"
    asked = len(server.requests) + len(gemini.requests)
    server.stop()
    gemini.stop()

    replayed = _run(node, tape, agent, TASK, env=_env())
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert _result(replayed) == live, "the same calls, text and stream pieces"
    assert "replayed 4 of 4 recorded decision(s)" in replayed.stderr
    assert len(server.requests) + len(gemini.requests) == asked

    missed = _run(node, tape, agent, EDITED, env=_env())
    assert missed.returncode == 3, missed.stdout + missed.stderr
    error = _result(missed)["error"]
    assert "tracetape replay miss" in error and field in error, error
    assert "Kindly" in error and "Please" in error, "the before and after text"
    assert "the proxy answered the miss with a 400 error" in missed.stderr
    assert missed.stderr.count("tracetape proxy: replay miss at POST") == 1, "no retry"


# A session's AWS credentials (the key id, secret and token of tests/.../test_bedrock.py's kind)
AWS_KEYS = {
    "AWS_ACCESS_KEY_ID": "AKIATRACETAPE0NODE01",
    "AWS_SECRET_ACCESS_KEY": "tR4c3t4p3/N0d3S3cr3tAcc3ssK3yF0rT3st1ng0",
    "AWS_SESSION_TOKEN": "IQoJb3JpZ2luX2VjEHTracetapeNodeSessionToken0123456789abcdefghij",
}


@pytest.mark.slow
@pytest.mark.parametrize("agent", [["bedrock-converse.mjs"], ["bedrock-converse.mjs", "stream"]],
                         ids=["converse", "converse-stream"])  # fmt: skip
def test_a_node_bedrock_agent_records_replays_with_placeholder_credentials_and_misses(
    tmp_path: Path, node: str, bedrock: FakeBedrock, agent: list[str]
) -> None:
    """@aws-sdk/client-bedrock-runtime, pointed at the proxy by
    ``AWS_ENDPOINT_URL_BEDROCK_RUNTIME``, records a Converse (ConverseStream) tool loop
    against a fake Bedrock with its session's credentials (none stored), replays it with the
    fake stopped and placeholder credentials, and an edited prompt is a ValidationException
    it raises at once with the diagnosis, and exit 3."""
    tape = tmp_path / "run.jsonl"
    env = {k: v for k, v in _env().items() if not k.startswith("AWS_")}
    env |= {
        "AWS_REGION": "us-east-1",
        "AWS_CONFIG_FILE": str(tmp_path / "no-config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "no-credentials"),
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    placeholder = {"AWS_ACCESS_KEY_ID": "placeholder", "AWS_SECRET_ACCESS_KEY": "placeholder"}
    recorded = _run(node, tape, agent, TASK, "--mode", "record",
                    "--upstream", f"bedrock={bedrock.base_url}", env=env | AWS_KEYS)  # fmt: skip
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    live = _result(recorded)
    assert live["calls"] == CALLS and live["text"] == "The total is 6."
    assert [r.step for r in read_cassette(tape).records] == [1, 2, 3, 4]
    assert all(r["path"].startswith("/model/us.anthropic.claude") for r in bedrock.requests)
    said = tape.read_text() + recorded.stdout + recorded.stderr
    assert not [name for name, key in AWS_KEYS.items() if key in said], "no credential is kept"
    asked = len(bedrock.requests)
    bedrock.stop()

    replayed = _run(node, tape, agent, TASK, env=env | placeholder)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert _result(replayed) == live
    missed = _run(node, tape, agent, EDITED, env=env | placeholder)
    assert missed.returncode == 3, missed.stdout + missed.stderr
    error = _result(missed)["error"]
    assert error.startswith("tracetape replay miss") and "messages[0].content[0].text" in error
    assert "Kindly" in error and "Please" in error
    assert missed.stderr.count("tracetape proxy: replay miss at POST") == 1, "no retry"
    assert len(bedrock.requests) == asked


def test_the_vercel_anthropic_path_without_its_version_is_anthropic_messages(
    tmp_path: Path,
) -> None:
    """@ai-sdk/anthropic wants ``/v1`` in ANTHROPIC_BASE_URL, the anthropic SDKs and Claude
    Code add it themselves: the proxy takes ``/messages`` as Anthropic's ``/v1/messages``."""
    with Tape(tmp_path / "run.jsonl", mode="record") as tape:
        app = ProxyApp(tape)
    assert app.route("/messages") == ("anthropic", "/v1/messages")
    assert app.route("/v1/messages") == ("anthropic", "/v1/messages")
    assert app.route("/v1/chat/completions") == ("openai", "/v1/chat/completions")
    assert app.route("/nowhere") is None


# Claude Code's documented switches that keep it to the model's API: no telemetry, error
# reports, auto-update or other non-essential traffic, no model calls beyond the session's.
CLAUDE_OFFLINE = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_NON_ESSENTIAL_MODEL_CALLS": "1",
}
# docs/proxy.md's rule for Claude Code: it sends today's date in its first message (the
# fresh session id it sends in metadata.user_id on every request is Anthropic's noise: unkeyed)
CLAUDE_RULES = """[tool.tracetape.match]
mask = ["re:Today's date is [0-9-]+"]
"""


def _runnable(name: str) -> str:
    """The path of tests/node's ``name`` command, which answers ``--version`` (else a skip, or
    a failure under CI, saying why)."""
    found = NODE_DIR / "node_modules" / ".bin" / name
    done = subprocess.run(
        [str(found), "--version"], capture_output=True, text=True, timeout=60, check=False
    )
    if done.returncode != 0:
        skip_or_fail(f"tests/node's {name} does not run here: {done.stdout}{done.stderr}".strip())
    return str(found)


@pytest.fixture(scope="module")
def claude(node: str) -> str:
    """Claude Code's ``claude`` (the native binary of @anthropic-ai/claude-code)."""
    return _runnable("claude")


def _claude(
    claude: str, tmp_path: Path, task: str, *args: str, key: str
) -> subprocess.CompletedProcess[str]:
    """``claude -p TASK`` under ``tracetape run --proxy`` in ``tmp_path`` (its home there:
    the session's system prompt names the working and configuration folders)."""
    home = tmp_path / "home"
    env = {k: v for k, v in _env().items() if not k.startswith("CLAUDE")}
    env.update(
        CLAUDE_OFFLINE,
        HOME=str(home),
        CLAUDE_CONFIG_DIR=str(home / ".claude"),
        ANTHROPIC_API_KEY=key,
    )
    return subprocess.run(
        [TRACETAPE, "run", "--proxy", "--tape", "run.jsonl", *args, "--",
         claude, "-p", task, "--output-format", "json", "--allowedTools", "Bash(echo:*)"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("rules", [None, CLAUDE_RULES], ids=["default-rules", "documented-rules"])
def test_claude_code_records_a_session_with_tool_use_replays_offline_and_misses(
    tmp_path: Path, claude: str, fakes: tuple[FakeServer, FakeGemini], rules: str | None
) -> None:
    """``claude -p`` runs its Bash tool for each addition through the proxy; the session
    replays with no upstream and a placeholder key, and an edited prompt is a miss whose
    diagnosis is Claude Code's result, with exit 3."""
    server = fakes[0]
    if rules is not None:
        (tmp_path / "pyproject.toml").write_text(rules)
    recorded = _claude(
        claude, tmp_path, "Please sum 1 to 2.", "--mode", "record",
        "--upstream", f"anthropic={server.base_url}", key=KEYS["ANTHROPIC_API_KEY"],
    )  # fmt: skip
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    live = _result(recorded)
    assert live["result"] == "The total is 3." and not live["is_error"]
    tools = [
        block
        for request in server.requests
        for message in request["body"]["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]
    assert len(tools) == 3 and tools[-1]["content"].strip() == "3", "the shell did the sums"
    assert [r.step for r in read_cassette(tmp_path / "run.jsonl").records] == [1, 2, 3]
    assert KEYS["ANTHROPIC_API_KEY"] not in (tmp_path / "run.jsonl").read_text()
    server.stop()

    missed = _claude(claude, tmp_path, "Kindly sum 1 to 2.", key="placeholder")
    assert missed.returncode == 3, missed.stdout + missed.stderr
    result = _result(missed)
    assert result["is_error"] and result["api_error_status"] == 400, "shown, not retried"
    assert "tracetape replay miss" in result["result"]
    assert "messages[0].content[1].text" in result["result"] and "Kindly" in result["result"]

    replayed = _claude(claude, tmp_path, "Please sum 1 to 2.", key="placeholder")
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert _result(replayed)["result"] == live["result"]
    assert "replayed 3 of 3 recorded decision(s)" in replayed.stderr


# Codex's documented switches that keep `codex exec` to the model's API: no analytics (it
# reached chatgpt.com), no plugin marketplace (api.github.com), no update check; and a model
# provider of its own, the Responses API over HTTP (the built-in one tries a Responses
# WebSocket first, which the proxy refuses, and falls back to HTTP after five retries).
CODEX_OFFLINE = [
    "-c", "analytics.enabled=false", "-c", "check_for_update_on_startup=false",
    "--disable", "plugins",
]  # fmt: skip
CODEX_PROVIDER = (
    '{name="tracetape", base_url="$OPENAI_BASE_URL", env_key="OPENAI_API_KEY", '
    'wire_api="responses", supports_websockets=false}'
)
CODEX_SH = (
    'exec "$0" exec -c model_provider=tracetape -c "model_providers.tracetape='
    + CODEX_PROVIDER.replace('"', '\\"')
    + '" "$@" </dev/null'
)
# docs/proxy.md's rules for Codex: per-run ids in every input item (those in client_metadata
# are OpenAI's noise: unkeyed), turn times beside each item, the date in its environment
# message, an id and a wall time in each command's output
CODEX_RULES = """[tool.tracetape.match]
ignore = ["messages[*].id", "messages[*].internal_chat_message_metadata_passthrough"]
mask = [
  "re:<current_date>[0-9-]+</current_date>", "re:Chunk ID: [0-9a-f]+",
  "re:Wall time: [0-9.]+ seconds",
]
"""


@pytest.fixture(scope="module")
def codex(node: str) -> str:
    """Codex's ``codex`` (the native binary of @openai/codex, through its Node launcher)."""
    return _runnable("codex")


def _codex(
    codex: str, tmp_path: Path, task: str, *args: str, key: str
) -> subprocess.CompletedProcess[str]:
    """``codex exec TASK`` under ``tracetape run --proxy`` in ``tmp_path``: a shell puts the
    proxy's address (``OPENAI_BASE_URL``, set by tracetape run) in Codex's provider."""
    home = tmp_path / "home"
    (home / ".codex").mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in _env().items() if not k.startswith("CODEX")}
    env.update(HOME=str(home), CODEX_HOME=str(home / ".codex"), OPENAI_API_KEY=key)
    return subprocess.run(
        [TRACETAPE, "run", "--proxy", "--tape", "run.jsonl", *args, "--", "sh", "-c", CODEX_SH,
         codex, "--skip-git-repo-check", "--ephemeral", "-m", "gpt-4.1-mini",
         "-s", "danger-full-access", *CODEX_OFFLINE, task],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip


@pytest.mark.slow
def test_codex_records_a_session_with_tool_use_replays_offline_and_misses(
    tmp_path: Path, codex: str, fakes: tuple[FakeServer, FakeGemini]
) -> None:
    """``codex exec`` runs a shell command for each addition through the proxy (the
    Responses API, streamed); the session replays with no upstream and a placeholder key
    under the documented rules, and an edited prompt is a miss Codex shows at once, with
    exit 3."""
    server = fakes[0]
    (tmp_path / "pyproject.toml").write_text(CODEX_RULES)
    recorded = _codex(
        codex, tmp_path, "Please sum 1 to 2.", "--mode", "record",
        "--upstream", f"openai={server.base_url}", key=KEYS["OPENAI_API_KEY"],
    )  # fmt: skip
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    assert recorded.stdout.strip().splitlines()[-1] == "The total is 3."
    outputs = [
        item["output"]
        for item in server.requests[-1]["body"]["input"]
        if item.get("type") == "function_call_output"
    ]
    assert len(outputs) == 2 and outputs[-1].rstrip().endswith("3"), "the shell did the sums"
    assert [r.step for r in read_cassette(tmp_path / "run.jsonl").records] == [1, 2, 3]
    assert KEYS["OPENAI_API_KEY"] not in (tmp_path / "run.jsonl").read_text()
    server.stop()

    replayed = _codex(codex, tmp_path, "Please sum 1 to 2.", key="placeholder")
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert replayed.stdout.strip().splitlines()[-1] == "The total is 3."
    assert "replayed 3 of 3 recorded decision(s)" in replayed.stderr

    missed = _codex(codex, tmp_path, "Kindly sum 1 to 2.", key="placeholder")
    assert missed.returncode == 3, missed.stdout + missed.stderr
    shown = 'ERROR: {"error": {"message": "tracetape replay miss'
    assert shown in missed.stderr, "Codex shows the diagnosis"
    assert "messages[3].content[0].text" in missed.stderr and "Kindly" in missed.stderr
    assert missed.stderr.count("tracetape proxy: replay miss at POST") == 1, "no retry"


# Gemini CLI's settings (a file in its home): the API-key auth, and no usage statistics,
# telemetry or auto-update; --skip-trust stands for trusting the folder interactively
GEMINI_SETTINGS = {
    "security": {"auth": {"selectedType": "gemini-api-key"}},
    "privacy": {"usageStatisticsEnabled": False},
    "telemetry": {"enabled": False},
    "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
}
# docs/proxy.md's rules for Gemini CLI: the ids it gives function calls hold the time in
# milliseconds, its first message the date, each command's output its process group
GEMINI_RULES = """[tool.tracetape.match]
mask = ["unix-time", "re:Today's date is [^(]+", "re:Process Group PGID: [0-9]+"]
"""


@pytest.fixture(scope="module")
def gemini_cli(node: str) -> str:
    """Gemini CLI's ``gemini`` (@google/gemini-cli, one bundled script)."""
    return _runnable("gemini")


def _gemini(
    gemini: str, tmp_path: Path, task: str, *args: str, key: str
) -> subprocess.CompletedProcess[str]:
    """``gemini -p TASK`` under ``tracetape run --proxy`` in a folder of its own (its first
    message lists the folder's files: the cassette and its home are kept out), its settings
    in its home."""
    home, work = tmp_path / "home", tmp_path / "work"
    (home / ".gemini").mkdir(parents=True, exist_ok=True)
    (home / ".gemini" / "settings.json").write_text(json.dumps(GEMINI_SETTINGS))
    work.mkdir(exist_ok=True)
    (work / "pyproject.toml").write_text(GEMINI_RULES)
    env = _env(HOME=str(home), GEMINI_API_KEY=key)
    return subprocess.run(
        [TRACETAPE, "run", "--proxy", "--tape", str(tmp_path / "run.jsonl"), *args, "--",
         gemini, "--skip-trust", "-p", task, "--output-format", "json",
         "-m", "gemini-2.5-flash", "--approval-mode", "yolo"],
        cwd=work, env=env, capture_output=True, text=True, timeout=180,
        check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def _gemini_result(printed: str) -> dict[str, Any]:
    """Gemini CLI's JSON result (``--output-format json``) among what it printed: on stdout,
    or on stderr when it ends in an error."""
    start = printed.find('{\n  "session_id"')
    assert start >= 0, f"gemini printed no result:\n{printed}"
    return dict(json.JSONDecoder().raw_decode(printed[start:])[0])


@pytest.mark.slow
def test_gemini_cli_records_a_session_with_tool_use_replays_offline_and_misses(
    tmp_path: Path, gemini_cli: str, fakes: tuple[FakeServer, FakeGemini]
) -> None:
    """``gemini -p`` runs its shell tool for each addition through the proxy
    (streamGenerateContent); the session replays with no upstream and a placeholder key under
    the documented rules, and an edited prompt is a miss whose diagnosis is its result's
    error, with exit 3."""
    gemini = fakes[1]
    recorded = _gemini(
        gemini_cli, tmp_path, "Please sum 1 to 2.", "--mode", "record",
        "--upstream", f"gemini={gemini.base_url}", key=KEYS["GEMINI_API_KEY"],
    )  # fmt: skip
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    assert _gemini_result(recorded.stdout)["response"] == "The total is 3."
    outputs = [
        part["functionResponse"]["response"]["output"]
        for content in gemini.requests[-1]["body"]["contents"]
        for part in content["parts"]
        if "functionResponse" in part
    ]
    assert len(outputs) == 2 and "Output: 3" in outputs[-1], "the shell did the sums"
    assert [r.step for r in read_cassette(tmp_path / "run.jsonl").records] == [1, 2, 3]
    assert KEYS["GEMINI_API_KEY"] not in (tmp_path / "run.jsonl").read_text()
    gemini.stop()

    replayed = _gemini(gemini_cli, tmp_path, "Please sum 1 to 2.", key="placeholder")
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert _gemini_result(replayed.stdout)["response"] == "The total is 3."
    assert "replayed 3 of 3 recorded decision(s)" in replayed.stderr

    missed = _gemini(gemini_cli, tmp_path, "Kindly sum 1 to 2.", key="placeholder")
    assert missed.returncode == 3, missed.stdout + missed.stderr
    error = _gemini_result(missed.stderr)["error"]
    assert error["code"] == 400 and "tracetape replay miss" in error["message"]
    assert "messages[0].parts[1].text" in error["message"] and "Kindly" in error["message"]
    assert missed.stderr.count("tracetape proxy: replay miss at POST") == 1, "no retry"
