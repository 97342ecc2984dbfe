"""``tracetape run``'s runner: unmodified programs in real subprocesses under a tape, started
in their first Python (threads share it, Python subprocesses and a shell's second Python run
untaped), their exit code passed through or judged (a miss, unplayed decisions, the network, a
full disk), a cassette checked before the program runs, SIGTERM passed on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.echo_server import fake_openai
from tracetape import ReplayMiss, read_cassette
from tracetape.integrations.capture import sdk_compatible_miss
from tracetape.integrations.runner import _miss_report

TRACETAPE = str(Path(sys.executable).with_name("tracetape"))
PYTHON = sys.executable

# An agent that knows nothing of ``tracetape run``: its tools are decorated once at import and
# taped only when a tape is active. argv: <b> [<exit code>] [catch].
AGENT = """
import sys
from tracetape.integrations.tools import env, tool

@tool
def add(a, b):
    print("add ran", file=sys.stderr)
    return a + b

b = int(sys.argv[1])
if len(sys.argv) > 3 and sys.argv[3] == "catch":
    try:
        add(1, b)
    except Exception as exc:
        print("caught", type(exc).__name__)
else:
    print("sum", add(1, b), "region", env("AGENT_REGION"))
sys.exit(int(sys.argv[2]) if len(sys.argv) > 2 else 0)
"""


def run(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``tracetape run ARGS`` in ``tmp_path``, its environment plus ``env``."""
    full_env = {**os.environ, "AGENT_REGION": "eu", **(env or {})}
    full_env.pop("PYTHONPATH", None)
    return subprocess.run(
        [TRACETAPE, "run", *args],
        cwd=tmp_path,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.fixture
def agent(tmp_path: Path) -> Path:
    path = tmp_path / "agent.py"
    path.write_text(AGENT)
    return path


def record(tmp_path: Path, agent: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """``agent ARGV`` recorded into ``t.jsonl`` (no hooks but its tools)."""
    done = run(
        tmp_path,
        "--tape",
        "t.jsonl",
        "--mode",
        "record",
        "--hook",
        "none",
        "--",
        PYTHON,
        str(agent),
        *argv,
    )
    assert (tmp_path / "t.jsonl").exists(), done.stderr
    return done


@pytest.mark.parametrize("code", [pytest.param("0", id="exit-0"), pytest.param("5", id="exit-5")])
def test_record_then_replay_passes_the_exit_code_through(
    tmp_path: Path, agent: Path, code: str
) -> None:
    """The program's exit code passes through in both modes and replay runs no tool."""
    recorded = record(tmp_path, agent, "2", code)
    assert recorded.returncode == int(code)
    assert "add ran" in recorded.stderr
    replayed = run(
        tmp_path,
        "--tape",
        "t.jsonl",
        "--hook",
        "none",
        "--",
        PYTHON,
        str(agent),
        "2",
        code,
        env={"AGENT_REGION": "us"},
    )
    assert replayed.returncode == int(code), replayed.stderr
    assert replayed.stdout == recorded.stdout == "sum 3 region eu\n"
    assert "add ran" not in replayed.stderr
    kinds = [r.kind for r in read_cassette(tmp_path / "t.jsonl").records]
    assert kinds == ["tool", "env"]
    assert "tracetape run: recorded 2 decision(s) to t.jsonl" in recorded.stderr
    assert "tracetape run: replayed 2 of 2 recorded decision(s) from t.jsonl" in replayed.stderr


def test_replay_miss_exits_3_with_the_diagnosis(tmp_path: Path, agent: Path) -> None:
    """A run that diverges exits 3 and prints the changed field and the command that re-records."""
    record(tmp_path, agent, "2")
    done = run(tmp_path, "--tape", "t.jsonl", "--hook", "none", "--", PYTHON, str(agent), "3")
    assert done.returncode == 3
    assert "was never recorded — the run diverged here" in done.stderr
    assert "changed: args.b: 2 -> 3" in done.stderr
    assert f"--mode rewrite --hook none -- {PYTHON} {agent} 3" in done.stderr
    assert "Tape(" not in done.stderr
    assert "Traceback" not in done.stderr
    assert f"ReplayMiss at {agent}:" in done.stderr
    assert "tracetape/tape.py" not in done.stderr
    assert "the program stopped at the miss (it exited 1)" in done.stderr
    assert "caught" not in done.stderr


def test_a_caught_replay_miss_still_exits_3(tmp_path: Path, agent: Path) -> None:
    """A program that swallows the ReplayMiss and exits 0 still ends with exit 3."""
    record(tmp_path, agent, "2")
    done = run(
        tmp_path, "--tape", "t.jsonl", "--hook", "none", "--", PYTHON, str(agent), "3", "0", "catch"
    )
    assert done.stdout == "caught ReplayMiss\n"
    assert done.returncode == 3
    assert "caught the ReplayMiss and went on (it exited 0)" in done.stderr
    assert "changed: args.b" in done.stderr


def test_missing_cassette_exits_2_without_running(tmp_path: Path, agent: Path) -> None:
    """Replay of a missing cassette exits 2 before the program runs, naming the record command."""
    done = run(tmp_path, "--tape", "none.jsonl", "--", PYTHON, str(agent), "2")
    assert done.returncode == 2
    assert done.stdout == ""
    assert "no such cassette to replay; record it first" in done.stderr
    assert "tracetape run --tape none.jsonl --mode record -- " in done.stderr


def test_corrupt_cassette_exits_2_naming_the_line(tmp_path: Path, agent: Path) -> None:
    """A corrupt cassette is refused with its file and line."""
    record(tmp_path, agent, "2")
    cassette = tmp_path / "t.jsonl"
    lines = cassette.read_text().splitlines()
    cassette.write_text("\n".join([lines[0], "{not json", *lines[1:]]) + "\n")
    done = run(tmp_path, "--tape", "t.jsonl", "--", PYTHON, str(agent), "2")
    assert done.returncode == 2
    assert "t.jsonl:2:" in done.stderr


def test_secrets_on_the_command_line_are_not_echoed(tmp_path: Path, agent: Path) -> None:
    """The re-record hint and the JSON report redact an API key passed on the command line."""
    secret = "sk-proj-cmdlinesecret0123456789abcd"
    done = run(tmp_path, "--tape", "none.jsonl", "--", PYTHON, str(agent), "--key", secret)
    assert done.returncode == 2
    assert secret not in done.stderr
    assert "--key [REDACTED:openai_key:" in done.stderr


def test_strict_replay_with_unplayed_decisions_exits_4(tmp_path: Path) -> None:
    """``--strict`` turns recorded decisions the replay never played into exit 4."""
    script = tmp_path / "agent.py"
    script.write_text(
        textwrap.dedent("""
        import sys
        from tracetape.integrations.tools import tool
        @tool
        def step(n):
            return n
        for n in range(int(sys.argv[1])):
            step(n)
    """)
    )
    record(tmp_path, script, "3")
    lenient = run(tmp_path, "--tape", "t.jsonl", "--hook", "none", "--", PYTHON, str(script), "2")
    assert lenient.returncode == 0
    assert "1 recorded decision(s) were never played" in lenient.stderr
    strict = run(
        tmp_path, "--tape", "t.jsonl", "--strict", "--hook", "none", "--", PYTHON, str(script), "2"
    )
    assert strict.returncode == 4
    assert "were never played" in strict.stderr


def test_tape_is_active_in_threads_and_not_in_python_subprocesses(tmp_path: Path) -> None:
    """Threads the program starts share its tape; a Python subprocess it starts runs untaped."""
    script = tmp_path / "agent.py"
    script.write_text(
        textwrap.dedent(f"""
        import subprocess, sys
        from concurrent.futures import ThreadPoolExecutor
        from tracetape.integrations.tools import tool
        @tool
        def square(n):
            return n * n
        with ThreadPoolExecutor(2) as pool:
            print(sorted(pool.map(square, range(4))))
        child = "import tracetape; print(tracetape.current_tape())"
        print(subprocess.run([{PYTHON!r}, "-c", child], capture_output=True, text=True).stdout)
    """)
    )
    done = record(tmp_path, script)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["[0, 1, 4, 9]", "None"]
    assert len(read_cassette(tmp_path / "t.jsonl").records) == 4


def test_async_program_with_async_tools(tmp_path: Path) -> None:
    """An asyncio program's concurrent async tools record and replay under ``tracetape run``."""
    script = tmp_path / "agent.py"
    script.write_text(
        textwrap.dedent("""
        import asyncio, sys
        import tracetape

        @tracetape.tool
        async def fetch(n):
            print("fetch ran", file=sys.stderr)
            # the first started ends last: results come in gather's order, not the finish's
            await asyncio.sleep(0.01 * (3 - n))
            return n * 10

        async def main():
            print(await asyncio.gather(*(fetch(n) for n in range(3))))

        asyncio.run(main())
    """)
    )
    args = ["--hook", "none", "--", PYTHON, str(script)]
    recorded = run(tmp_path, "--tape", "t.jsonl", "--mode", "record", *args)
    replayed = run(tmp_path, "--tape", "t.jsonl", "--strict", *args)
    assert recorded.stdout == replayed.stdout == "[0, 10, 20]\n"
    assert replayed.returncode == 0, replayed.stderr
    assert "fetch ran" not in replayed.stderr


def test_only_the_first_python_of_a_shell_command_is_taped(tmp_path: Path, agent: Path) -> None:
    """Two Pythons started by one shell line: the first records, the second runs untaped."""
    line = f"{PYTHON} {agent} 2 && {PYTHON} {agent} 5"
    done = run(
        tmp_path, "--tape", "t.jsonl", "--mode", "record", "--hook", "none", "--", "sh", "-c", line
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "sum 3 region eu\nsum 6 region eu\n"
    assert "runs untaped" in done.stderr
    outs = [r.out for r in read_cassette(tmp_path / "t.jsonl").records]
    assert outs == [3, {"AGENT_REGION": "eu"}]


@pytest.mark.parametrize(
    ("mode", "code"),
    [pytest.param("replay", 2, id="replay-fails"), pytest.param("record", 7, id="record-passes")],
)
def test_command_without_python_is_reported(tmp_path: Path, mode: str, code: int) -> None:
    """A command that starts no Python is flagged; in replay it exits 2 as nothing was replayed."""
    if mode == "replay":
        (tmp_path / "t.jsonl").write_text('{"tracetape": 1}\n')
    done = run(tmp_path, "--tape", "t.jsonl", "--mode", mode, "--", "sh", "-c", "exit 7")
    assert done.returncode == code
    assert "the tape never started" in done.stderr


NETWORK_AGENT = """
import socket, sys
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen()
try:
    socket.create_connection(srv.getsockname(), timeout=2).close()
    print("connected")
except Exception as exc:
    print("caught", type(exc).__name__)
"""


@pytest.mark.parametrize(
    ("network", "code", "out"),
    [
        pytest.param("block", 5, "caught NetworkBlockedError\n", id="blocked"),
        pytest.param("loopback", 0, "connected\n", id="loopback-allowed"),
    ],
)
def test_replay_blocks_the_network(tmp_path: Path, network: str, code: int, out: str) -> None:
    """Replay blocks connections (exit 5 even if caught) unless ``--network`` lets them through."""
    script = tmp_path / "agent.py"
    script.write_text(NETWORK_AGENT)
    run(tmp_path, "--tape", "t.jsonl", "--mode", "record", "--", PYTHON, str(script))
    done = run(tmp_path, "--tape", "t.jsonl", "--network", network, "--", PYTHON, str(script))
    assert done.stdout == out
    assert done.returncode == code, done.stderr
    if code == 5:
        assert "replay tried to reach the network 1 time(s)" in done.stderr
        assert "connect to 127.0.0.1:" in done.stderr


def test_sigterm_reaches_the_program(tmp_path: Path) -> None:
    """SIGTERM to ``tracetape run`` is passed on; the recording closes as interrupted."""
    import signal

    script = tmp_path / "agent.py"
    script.write_text("import sys, time\nprint('ready', flush=True)\ntime.sleep(30)\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.Popen(
        [
            TRACETAPE,
            "run",
            "--tape",
            "t.jsonl",
            "--mode",
            "record",
            "--hook",
            "none",
            "--",
            PYTHON,
            str(script),
        ],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline() == "ready\n"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 128 + signal.SIGTERM
    # The recording closes as interrupted (its trailer says so), not as a killed one.
    assert "the recording ended interrupted" in err
    assert not (tmp_path / "t.jsonl.partial").exists()
    trailer = json.loads((tmp_path / "t.jsonl").read_text().splitlines()[-1])
    assert trailer["ended"] == "interrupted"


OPENAI_AGENT = """
import os, sys
import openai

client = openai.OpenAI(base_url=sys.argv[1], max_retries=0)
messages = [{"role": "user", "content": sys.argv[2]}]
for _ in range(3):
    reply = client.chat.completions.create(model="gpt-4o-mini", messages=messages)
    messages += [reply.choices[0].message.model_dump(exclude_none=True),
                 {"role": "user", "content": "go on"}]
print(messages[-2]["content"])
"""


def test_unmodified_openai_agent_replays_with_the_server_stopped(tmp_path: Path) -> None:
    """An OpenAI-SDK program records live, replays offline to the same output, names an edit."""
    script = tmp_path / "agent.py"
    script.write_text(OPENAI_AGENT)
    secret = "sk-proj-runsecret0123456789abcdefgh"
    env = {"OPENAI_API_KEY": secret}
    with fake_openai() as url:
        recorded = run(
            tmp_path,
            "--tape",
            "t.jsonl",
            "--mode",
            "record",
            "--",
            PYTHON,
            str(script),
            url,
            "hi",
            env=env,
        )
    assert recorded.returncode == 0, recorded.stderr
    assert recorded.stdout == "echo: go on\n"
    assert secret not in (tmp_path / "t.jsonl").read_text()
    replayed = run(tmp_path, "--tape", "t.jsonl", "--", PYTHON, str(script), url, "hi", env=env)
    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stdout == recorded.stdout
    edited = run(tmp_path, "--tape", "t.jsonl", "--", PYTHON, str(script), url, "hey", env=env)
    assert edited.returncode == 3
    assert "changed: messages[0].content" in edited.stderr


# An OpenAI-SDK program that lets a failed call through, or catches the SDK's errors (a miss
# is typed as one) and goes on. argv: <base url> <task> [catch].
OPENAI_CATCHER = """
import sys
import openai

client = openai.OpenAI(base_url=sys.argv[1], max_retries=0)
ask = lambda: client.chat.completions.create(
    model="gpt-4o-mini", messages=[{"role": "user", "content": sys.argv[2]}]
)
if sys.argv[3:] == ["catch"]:
    try:
        ask()
    except openai.OpenAIError as exc:
        print("caught", type(exc).__name__)
else:
    print(ask().choices[0].message.content)
"""


@pytest.mark.parametrize(
    ("catch", "out", "said"),
    [
        pytest.param([], "", "the program stopped at the miss (it exited 1):", id="uncaught"),
        pytest.param(
            ["catch"],
            "caught ReplayMiss\n",
            "the program caught the ReplayMiss and went on (it exited 0)",
            id="caught",
        ),
    ],
)
def test_an_sdk_miss_is_told_stopped_or_caught_as_it_was(
    tmp_path: Path, catch: list[str], out: str, said: str
) -> None:
    """A miss an OpenAI-SDK call raises (typed as the SDK's error too) is reported as where
    the program stopped when nothing caught it, and as caught only when the program caught it."""
    script = tmp_path / "agent.py"
    script.write_text(OPENAI_CATCHER)
    env = {"OPENAI_API_KEY": "sk-test"}
    with fake_openai() as url:
        recorded = run(
            tmp_path, "--tape", "t.jsonl", "--mode", "record", "--", PYTHON, str(script), url,
            "hi", env=env,
        )  # fmt: skip
    assert recorded.returncode == 0, recorded.stderr
    done = run(
        tmp_path, "--tape", "t.jsonl", "--", PYTHON, str(script), url, "hey", *catch, env=env
    )
    assert (done.returncode, done.stdout) == (3, out), done.stderr
    assert said in done.stderr
    assert "changed: messages[0].content" in done.stderr
    assert ("caught the ReplayMiss" in done.stderr) == bool(catch)
    assert (f"ReplayMiss at {script}:" in done.stderr) == (not catch)


def test_record_never_overwrites_and_rewrite_does(tmp_path: Path, agent: Path) -> None:
    """``--mode record`` on an existing cassette exits 2 without running the program, naming
    the ``--mode rewrite`` command; ``--mode rewrite`` records over it."""
    record(tmp_path, agent, "2")
    before = (tmp_path / "t.jsonl").read_bytes()
    program = ["--hook", "none", "--", PYTHON, str(agent), "5"]
    again = run(tmp_path, "--tape", "t.jsonl", "--mode", "record", *program)
    assert again.returncode == 2
    assert "never overwrites" in again.stderr and "--mode rewrite" in again.stderr
    assert again.stdout == ""
    assert (tmp_path / "t.jsonl").read_bytes() == before
    rewritten = run(tmp_path, "--tape", "t.jsonl", "--mode", "rewrite", *program)
    assert rewritten.returncode == 0, rewritten.stderr
    assert (tmp_path / "t.jsonl").read_bytes() != before


BIG = """
import tracetape

@tracetape.tool
def fetch(n: int) -> str:
    return "y" * n

fetch(100)
try:
    fetch(200_000)  # cannot be stored: the disk is full
except tracetape.CassetteError:
    pass  # an agent that swallows every error goes on
print("done")
"""


def test_a_recording_stopped_by_a_full_disk_exits_2_and_says_so(
    tmp_path: Path, tiny_disk: Path
) -> None:
    """The program went on (it caught the error), but the recording is incomplete: run exits
    2 and says what stopped it and what the cassette holds."""
    (tmp_path / "big.py").write_text(BIG)
    tape = tiny_disk / "run.jsonl"
    done = run(tmp_path, "--tape", str(tape), "--mode", "record", "--hook", "none", "--",
               PYTHON, "big.py")  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "done" in done.stdout
    assert "the recording stopped:" in done.stderr and "the disk is full" in done.stderr
    assert "holds the 1 decision(s) written before it" in done.stderr


UNPATCHED_AGENT = """
import sys
import httpx2, openai

client = openai.OpenAI(base_url=sys.argv[1], api_key="sk-test", max_retries=0)
# litellm's way: the SDK's low-level post, which the SDK-level hook never sees
raw = client.post("/chat/completions", cast_to=object,
                  body={"model": "m", "messages": [{"role": "user", "content": sys.argv[2]}]})
# a framework's own httpx client
with httpx2.Client() as http:
    own = http.post(sys.argv[1] + "/chat/completions",
                    json={"model": "m", "messages": [{"role": "user", "content": "again"}]}).json()
print(raw["choices"][0]["message"]["content"], "|", own["choices"][0]["message"]["content"])
"""


def test_requests_the_sdk_hook_misses_are_taped_at_the_http_level(tmp_path: Path) -> None:
    """`client.post` and a plain httpx client's model requests are recorded as llm decisions
    under the default hook (auto) and under the SDK hook alone (its HTTP safety net), and
    replay with the server stopped."""
    script = tmp_path / "agent.py"
    script.write_text(UNPATCHED_AGENT)
    with fake_openai() as url:
        recorded = run(tmp_path, "--tape", "t.jsonl", "--mode", "record", "--",
                       PYTHON, str(script), url, "hi")  # fmt: skip
        sdk_only = run(tmp_path, "--tape", "t2.jsonl", "--mode", "record", "--hook", "sdk", "--",
                       PYTHON, str(script), url, "hi")  # fmt: skip
    assert sdk_only.returncode == 0, sdk_only.stderr
    assert [r.kind for r in read_cassette(tmp_path / "t2.jsonl").records] == ["llm", "llm"]
    assert recorded.returncode == 0, recorded.stderr
    assert recorded.stdout == "echo: hi | echo: again\n"
    assert [r.kind for r in read_cassette(tmp_path / "t.jsonl").records] == ["llm", "llm"]
    replayed = run(tmp_path, "--tape", "t.jsonl", "--", PYTHON, str(script), url, "hi")
    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stdout == recorded.stdout


URLLIB_AGENT = """
import sys, urllib.error, urllib.request
try:
    print(urllib.request.urlopen(sys.argv[1] + "/models").status)
except urllib.error.HTTPError as exc:
    print(exc.code)
"""


def test_a_recording_that_taped_nothing_while_using_the_network_says_so(tmp_path: Path) -> None:
    """A program whose requests no hook sees (urllib) records 0 decisions: a warning names
    what it reached, never silence."""
    script = tmp_path / "agent.py"
    script.write_text(URLLIB_AGENT)
    with fake_openai() as url:
        done = run(
            tmp_path, "--tape", "t.jsonl", "--mode", "record", "--", PYTHON, str(script), url
        )
    assert done.returncode == 0, done.stderr
    assert (
        "the program reached the network where no tape heard it, so its replay will miss (or be "
        "blocked at) those requests: connect to 127.0.0.1:"
    ) in done.stderr
    assert "sent where no hook hears: no hook of tracetape hears that client" in done.stderr
    quiet = run(tmp_path, "--tape", "t2.jsonl", "--mode", "record", "--", PYTHON, "-c", "pass")
    assert "reached the network" not in quiet.stderr


TELEMETRY_AGENT = """
import sys, requests, tracetape
span = {"model": "otel", "messages": [{"content": "run f00d"}]}  # what the echo server reads
requests.post(sys.argv[1] + "/v1/traces", json=span, timeout=5)
print(tracetape.env("AGENT_REGION"))
"""


def test_telemetry_is_sent_unrecorded_then_answered_in_replay(tmp_path: Path) -> None:
    """A program's telemetry (over requests, under the default hooks: crewai's case) is no
    decision: recorded runs send it, replays answer it with the network blocked (not exit 5),
    and both reports count it, in text and in JSON."""
    (tmp_path / "pyproject.toml").write_text('[tool.tracetape.telemetry]\nadd = ["127.0.0.1"]\n')
    script = tmp_path / "agent.py"
    script.write_text(TELEMETRY_AGENT)
    with fake_openai() as url:
        done = run(
            tmp_path, "--tape", "t.jsonl", "--mode", "record", "--", PYTHON, str(script), url
        )
    assert done.returncode == 0, done.stderr
    assert "1 telemetry request(s) sent unrecorded, never decisions: 127.0.0.1:" in done.stderr
    assert "reached the network" not in done.stderr
    assert [r.kind for r in read_cassette(tmp_path / "t.jsonl").records] == ["env"]
    replayed = run(tmp_path, "--tape", "t.jsonl", "--format", "json", "--", PYTHON, str(script),
                   url)  # fmt: skip
    assert replayed.returncode == 0, replayed.stderr
    report = json.loads(replayed.stderr)  # the report goes to stderr, stdout is the program's
    assert list(report["telemetry"].values()) == [1]
    assert report["network"] == []


def test_untaped_traffic_is_reported_even_when_something_was_taped(tmp_path: Path) -> None:
    script = tmp_path / "agent.py"
    script.write_text("import tracetape\ntracetape.env('AGENT_REGION')\n" + URLLIB_AGENT)
    with fake_openai() as url:
        done = run(
            tmp_path, "--tape", "t.jsonl", "--mode", "record", "--", PYTHON, str(script), url
        )
    assert done.returncode == 0, done.stderr
    assert "recorded 1 decision(s)" in done.stderr
    assert "reached the network where no tape heard it" in done.stderr


def _miss() -> ReplayMiss:
    return ReplayMiss(
        "tool:1", kind="tool", step=1, matched=0, recorded=1, expected=None, changes=[]
    )


def _raised_while_handling(miss: ReplayMiss) -> BaseException:
    try:
        try:
            raise miss
        except ReplayMiss:
            raise ConnectionError("retries spent") from None
    except ConnectionError as exc:
        return exc


@pytest.mark.parametrize(
    ("stopped", "fate", "turned"),
    [
        pytest.param(lambda miss: miss, "stopped", None, id="uncaught"),
        pytest.param(sdk_compatible_miss, "stopped", None, id="uncaught-as-the-sdks-error"),
        pytest.param(_raised_while_handling, "turned", "ConnectionError", id="wrapped"),
        pytest.param(lambda miss: ValueError("later"), "caught", None, id="caught-then-failed"),
        pytest.param(lambda miss: None, "caught", None, id="caught-then-exited"),
    ],
)
def test_the_report_tells_what_the_program_did_with_the_miss(
    stopped: Callable[[ReplayMiss], BaseException | None], fate: str, turned: str | None
) -> None:
    """The miss's report says whether the error that ended the program is the miss (or its
    SDK-typed copy), an error it was turned into, or none of them: the program caught it."""
    miss = _miss()
    report = _miss_report(miss, stopped(miss))
    assert (report["fate"], report["turned_into"], report["caught"]) == (
        fate,
        turned,
        fate != "stopped",
    )
