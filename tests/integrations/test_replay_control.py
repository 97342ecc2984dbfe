"""Replay control against the real openai SDK and the fake server: match rules, forks,
interrupted and failed recordings, and replay latency."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

import openai
import pytest
from click.testing import CliRunner
from fakeserver import FakeServer

import tracetape
from tracetape import Match, MatchRulesError, ReplayMiss, Tape, read_cassette
from tracetape.cli import main
from tracetape.errors import ConfigError
from tracetape.formats.cassette import final_chain
from tracetape.integrations import unpatch_all

OPENAI_KEY = "sk-proj-abcdefghijklmnopqrstuvwxyz012345"
PYTHON = sys.executable
TRACETAPE = str(Path(sys.executable).with_name("tracetape"))


@pytest.fixture(autouse=True)
def _no_leftover_patch() -> Any:
    yield
    unpatch_all()


def _client(server: FakeServer) -> Any:
    return openai.OpenAI(base_url=server.base_url + "/v1", api_key=OPENAI_KEY, max_retries=0)


def _ask(path: Path, server: FakeServer, mode: str, prompt: str, **kw: Any) -> str:
    """One chat completion of ``prompt`` (the fake server echoes what follows "echo ") under
    a tape; extra ``kw`` go to ``create`` except the tape's own (``match``)."""
    tape_kw = {k: kw.pop(k) for k in ("match",) if k in kw}
    with Tape(path, mode=mode, **tape_kw) as tape, tracetape.patch_sdks(tape):
        reply = _client(server).chat.completions.create(
            model="gpt-test", messages=[{"role": "user", "content": prompt}], **kw
        )
    return str(reply.choices[0].message.content)


def _volatile_prompt() -> str:
    return f"echo request {uuid.uuid4()} sent at {datetime.now().isoformat()}"


def _header(path: Path) -> dict[str, Any]:
    return dict(json.loads(path.read_text().splitlines()[0]))


def _trailer(path: Path) -> dict[str, Any]:
    return dict(json.loads(path.read_text().splitlines()[-1]))


def _env() -> dict[str, str]:
    """The environment of a subprocess: tracetape comes from the venv, as installed."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def cli(*args: str) -> Any:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


# -- a. b. c. match rules ------------------------------------------------------------------------


def test_masked_uuid_and_time_replay_with_the_server_stopped(
    tmp_path: Path, server: FakeServer
) -> None:
    """A prompt holding a fresh UUID and ``datetime.now().isoformat()`` replays under
    ``mask=["uuid", "ts"]`` with new values; the header carries the rules."""
    path = tmp_path / "masked.jsonl"
    first = _volatile_prompt()
    answer = _ask(path, server, "record", first, match=Match(mask=["uuid", "ts"]))
    assert answer == first.removeprefix("echo ")
    assert len(server.requests) == 1
    assert _header(path)["match"] == {"ignore": [], "mask": ["uuid", "ts"]}
    server.stop()
    second = _volatile_prompt()
    assert second != first
    # no rules given: replay uses the header's; the recorded answer comes back
    assert _ask(path, server, "replay", second) == answer
    assert len(server.requests) == 1


def test_volatile_prompt_misses_without_rules(tmp_path: Path, server: FakeServer) -> None:
    """The same prompt recorded with no rules misses at replay, naming the changed content."""
    path = tmp_path / "plain.jsonl"
    _ask(path, server, "record", _volatile_prompt())
    assert _header(path).get("match") is None
    server.stop()
    with pytest.raises(ReplayMiss) as caught:
        _ask(path, server, "replay", _volatile_prompt())
    assert "messages[0].content" in caught.value.changes
    assert "match rules" not in str(caught.value)
    assert len(server.requests) == 1


def test_miss_under_rules_names_them_and_shows_masked_values(
    tmp_path: Path, server: FakeServer
) -> None:
    """A miss under rules names the header's rules and shows masked values as ``<uuid>``."""
    path = tmp_path / "masked.jsonl"
    _ask(path, server, "record", f"echo A {uuid.uuid4()}", match=Match(mask=["uuid", "ts"]))
    server.stop()
    with pytest.raises(ReplayMiss) as caught:
        _ask(path, server, "replay", f"echo B {uuid.uuid4()}")
    text = str(caught.value)
    assert "match rules (from the cassette's header): mask uuid, ts" in text
    assert "<uuid>" in text
    assert "messages[0].content" in caught.value.changes


@pytest.mark.parametrize(
    ("field", "recorded", "replayed"),
    [
        pytest.param("seed", 1, 2, id="seed"),
        pytest.param("stop", ["END"], ["STOP"], id="stop"),
    ],
)
def test_an_ignored_request_field_changed_at_replay_still_replays(
    tmp_path: Path, server: FakeServer, field: str, recorded: Any, replayed: Any
) -> None:
    """A request field under ``ignore`` may change at replay; without the rule it misses."""
    ruled, plain = tmp_path / "ruled.jsonl", tmp_path / "plain.jsonl"
    rules = Match(ignore=[field])
    answer = _ask(ruled, server, "record", "echo hi", match=rules, **{field: recorded})
    _ask(plain, server, "record", "echo hi", **{field: recorded})
    assert server.requests[0]["body"][field] == recorded  # the SDK really sent it
    assert _header(ruled)["match"] == {"ignore": [field], "mask": []}
    server.stop()
    assert _ask(ruled, server, "replay", "echo hi", **{field: replayed}) == answer
    with pytest.raises(ReplayMiss) as caught:
        _ask(plain, server, "replay", "echo hi", **{field: replayed})
    assert any(field in change for change in caught.value.changes), caught.value.changes
    assert len(server.requests) == 2


NOISE = {"user": "alice", "metadata": {"run": "1"}, "store": True, "prompt_cache_key": "pk-1"}
OTHER_NOISE = {"user": "bob", "metadata": {"run": "2"}, "store": False, "prompt_cache_key": "pk-2"}


def test_fields_that_never_reach_the_model_are_stored_but_never_keyed(
    tmp_path: Path, server: FakeServer
) -> None:
    """OpenAI's ``user``, ``metadata``, ``store`` and ``prompt_cache_key`` are the provider
    table's noise: stored under the input's ``unkeyed``, not in its key, with no rules; a
    replay that sends others plays the recording, and a miss on another field names them as
    differing but not compared."""
    path = tmp_path / "run.jsonl"
    answer = _ask(path, server, "record", "echo hi", **NOISE)
    assert {k: server.requests[0]["body"][k] for k in NOISE} == NOISE  # the SDK sent them
    server.stop()
    assert _header(path).get("match") is None
    stored = read_cassette(path).records[0].input
    assert stored["unkeyed"] == NOISE and not set(NOISE) & set(stored["params"])
    assert _ask(path, server, "replay", "echo hi", **OTHER_NOISE) == answer
    with pytest.raises(ReplayMiss) as caught:
        _ask(path, server, "replay", "echo ho", **OTHER_NOISE)
    text = str(caught.value)
    assert caught.value.changes == ["messages[0].content"]
    assert "differing too, not compared (fields that never reach the model" in text
    assert "unkeyed.user" in text and "unkeyed.metadata.run" in text
    assert len(server.requests) == 1


def test_a_keep_rule_keys_a_noise_field_after_all(tmp_path: Path, server: FakeServer) -> None:
    """``keep`` names the noise a tape keys: ``user`` stays in the params and the header,
    and another user misses naming it; the rest of the noise is still unkeyed."""
    path = tmp_path / "run.jsonl"
    answer = _ask(path, server, "record", "echo hi", match=Match(keep=["user"]), **NOISE)
    server.stop()
    assert _header(path)["match"] == {"ignore": [], "mask": [], "keep": ["user"]}
    stored = read_cassette(path).records[0].input
    assert stored["params"]["user"] == "alice" and "user" not in stored["unkeyed"]
    assert _ask(path, server, "replay", "echo hi", **{**OTHER_NOISE, "user": "alice"}) == answer
    with pytest.raises(ReplayMiss) as caught:
        _ask(path, server, "replay", "echo hi", **OTHER_NOISE)
    assert caught.value.changes == ["params.user"]
    assert "match rules (from the cassette's header): keep user" in str(caught.value)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        pytest.param(["params.user"], "is not a request field's name", id="a-path"),
        pytest.param("user", "must be a list of strings", id="a-string"),
        pytest.param([3], "must be a list of strings; 3 is not one", id="a-number"),
    ],
)
def test_a_bad_keep_rule_says_what_it_takes(value: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Match.coerce({"keep": value})


@pytest.mark.parametrize(
    ("recorded", "given"),
    [
        pytest.param(Match(mask=["uuid"]), Match(mask=["uuid", "ts"]), id="more-masks"),
        pytest.param(Match(ignore=["user"]), Match(ignore=["metadata"]), id="other-ignore"),
        pytest.param(None, Match(mask=["uuid"]), id="rules-on-a-cassette-without"),
    ],
)
def test_different_rules_at_replay_raise(
    tmp_path: Path, server: FakeServer, recorded: Match | None, given: Match
) -> None:
    """Rules given at replay that differ from the header's raise ``MatchRulesError``; the
    same rules replay."""
    path = tmp_path / "t.jsonl"
    _ask(path, server, "record", "echo hi", match=recorded)
    server.stop()
    with pytest.raises(MatchRulesError) as caught:
        Tape(path, mode="replay", match=given)
    assert given.describe() in str(caught.value)
    if recorded is not None:
        assert _ask(path, server, "replay", "echo hi", match=recorded) == "hi"


# -- d. e. fork ----------------------------------------------------------------------------------


def _three_steps(client: Any, third: str) -> list[str]:
    """Three chat completions, each sent the conversation so far; the answers."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "echo hello"}]
    answers = []
    for prompt in (None, "second", third):
        if prompt is not None:
            messages.append({"role": "user", "content": prompt})
        reply = client.chat.completions.create(model="gpt-test", messages=messages)
        answers.append(str(reply.choices[0].message.content))
        messages.append(reply.choices[0].message.model_dump(exclude_none=True))
    return answers


def _run_three(path: Path, server: FakeServer, mode: str, third: str, **kw: Any) -> Tape:
    with Tape(path, mode=mode, **kw) as tape, tracetape.patch_sdks(tape):
        _three_steps(_client(server), third)
    return tape


def test_fork_goes_live_at_the_first_changed_step(tmp_path: Path, server: FakeServer) -> None:
    """Forking a three-step run whose step-3 prompt changed sends only step 3 live, writes the
    whole run to the branch (which replays offline), and leaves the parent's bytes alone."""
    parent = tmp_path / "run.jsonl"
    _run_three(parent, server, "record", "third")
    assert [r.step for r in read_cassette(parent).records] == [1, 2, 3]
    before = parent.read_bytes()
    server.requests.clear()

    tape = _run_three(parent, server, "fork", "THIRD")
    assert [len(r["body"]["messages"]) for r in server.requests] == [5]
    assert server.requests[0]["body"]["messages"][-1]["content"] == "THIRD"
    assert tape.branch == tmp_path / "run.fork-miss.jsonl"
    assert tape.fork_point is not None
    assert tape.fork_point["seq"] == 3
    assert tape.fork_point["step"] == 3
    assert tape.fork_point["kind"] == "llm"
    assert tape.fork_point["reason"] == "first miss"
    assert parent.read_bytes() == before

    branch = read_cassette(tape.branch)
    assert [r.step for r in branch.records] == [1, 2, 3]
    assert branch.ended == "completed"
    parent_records = read_cassette(parent).records
    assert [r.key for r in branch.records[:2]] == [r.key for r in parent_records[:2]]
    assert branch.records[2].key != parent_records[2].key
    header = _header(tape.branch)
    assert header["parent"]["path"] == str(parent)
    assert header["parent"]["chain"] == final_chain(parent)
    assert header["parent"]["run_id"] == _header(parent)["run_id"]
    assert header["fork"] == tape.fork_point

    server.stop()
    replayed = _run_three(tape.branch, server, "replay", "THIRD", strict=True)
    assert replayed.matched == 3
    assert len(server.requests) == 1
    assert parent.read_bytes() == before


def test_fork_at_a_step_goes_live_from_it(tmp_path: Path, server: FakeServer) -> None:
    """``fork_at=2`` replays step 1 and goes live from step 2, even with nothing changed."""
    parent = tmp_path / "run.jsonl"
    _run_three(parent, server, "record", "third")
    before = parent.read_bytes()
    server.requests.clear()
    branch = tmp_path / "at2.jsonl"
    tape = _run_three(parent, server, "fork", "third", fork_at=2, branch=branch)
    assert [len(r["body"]["messages"]) for r in server.requests] == [3, 5]
    assert tape.branch == branch
    assert tape.fork_point is not None
    assert (tape.fork_point["seq"], tape.fork_point["step"]) == (2, 2)
    assert tape.fork_point["reason"] == "fork_at 2"
    assert [r.step for r in read_cassette(branch).records] == [1, 2, 3]
    assert parent.read_bytes() == before
    assert not (tmp_path / "run.fork-miss.jsonl").exists()


def test_diff_of_parent_and_branch_shows_the_fork_point(tmp_path: Path, server: FakeServer) -> None:
    """``tracetape diff PARENT BRANCH --format json``: the first divergence is the fork point,
    with the changed prompt."""
    parent = tmp_path / "run.jsonl"
    _run_three(parent, server, "record", "third")
    tape = _run_three(parent, server, "fork", "THIRD")
    assert tape.branch is not None and tape.fork_point is not None
    result = cli("diff", str(parent), str(tape.branch), "--format", "json")
    data = json.loads(result.output)
    divergence = data["divergence"]
    assert divergence["position"] == tape.fork_point["seq"] == 3
    assert divergence["a"]["step"] == divergence["b"]["step"] == 3
    assert divergence["changes"] == [
        {"path": "args.messages[4].content", "before": "third", "after": "THIRD"}
    ]
    assert data["aligned"] == 2


# An unmodified three-step SDK agent; argv: BASE_URL THIRD_PROMPT.
FORK_AGENT = """
import sys
import openai

client = openai.OpenAI(base_url=sys.argv[1] + "/v1", api_key="sk-test", max_retries=0)
messages = [{"role": "user", "content": "echo hello"}]
for prompt in (None, "second", sys.argv[2]):
    if prompt is not None:
        messages.append({"role": "user", "content": prompt})
    reply = client.chat.completions.create(model="gpt-test", messages=messages)
    messages.append(reply.choices[0].message.model_dump(exclude_none=True))
print(reply.choices[0].message.content)
"""


def _complete(command: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=60, check=False
    )


def _tracetape_run(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return _complete([TRACETAPE, "run", *args], cwd)


def test_tracetape_run_fork(tmp_path: Path, server: FakeServer) -> None:
    """``tracetape run --mode fork`` of an unmodified agent goes live at the changed step
    only, says where it forked, and its branch replays offline."""
    script = tmp_path / "agent.py"
    script.write_text(FORK_AGENT)
    agent = [PYTHON, str(script), server.base_url]
    recorded = _tracetape_run(tmp_path, "--tape", "t.jsonl", "--mode", "record", "--", *agent, "x")
    assert recorded.returncode == 0, recorded.stderr
    parent = tmp_path / "t.jsonl"
    before = parent.read_bytes()
    server.requests.clear()

    forked = _tracetape_run(tmp_path, "--tape", "t.jsonl", "--mode", "fork", "--", *agent, "y")
    assert forked.returncode == 0, forked.stderr
    assert forked.stdout == recorded.stdout
    assert "forked t.jsonl at decision 3 (step 3), first miss" in forked.stderr
    assert [len(r["body"]["messages"]) for r in server.requests] == [5]
    assert parent.read_bytes() == before
    branch = tmp_path / "t.fork-miss.jsonl"
    assert _header(branch)["fork"]["seq"] == 3

    server.stop()
    replayed = _tracetape_run(tmp_path, "--tape", str(branch), "--strict", "--", *agent, "y")
    assert replayed.returncode == 0, replayed.stderr
    assert "replayed 3 of 3 recorded decision(s)" in replayed.stderr
    assert parent.read_bytes() == before


# -- f. g. interrupted and failed recordings -----------------------------------------------------

# argv: BASE_URL block|no [TAPE MODE]; with TAPE it opens the tape itself, else it knows
# nothing of tracetape (``tracetape run`` tapes it). After its first decision it says so and,
# with "block", waits on stdin.
AGENT = """
import signal, sys
import openai

signal.signal(signal.SIGINT, signal.default_int_handler)  # whatever the test's parent ignores


def agent():
    client = openai.OpenAI(base_url=sys.argv[1] + "/v1", api_key="sk-test", max_retries=0)
    messages = [{"role": "user", "content": "echo hello"}]
    for turn in range(3):
        reply = client.chat.completions.create(model="gpt-test", messages=messages)
        messages += [reply.choices[0].message.model_dump(exclude_none=True),
                     {"role": "user", "content": f"go on {turn}"}]
        if turn == 0 and sys.argv[2] == "block":
            print("decided 1", flush=True)
            sys.stdin.readline()
    print("done", flush=True)


if len(sys.argv) > 3:
    import tracetape
    with tracetape.Tape(sys.argv[3], mode=sys.argv[4]) as tape, tracetape.patch_sdks(tape):
        agent()
else:
    agent()
"""

SIGNALS = [
    pytest.param(signal.SIGINT, id="sigint"),
    pytest.param(signal.SIGTERM, id="sigterm"),
]


def _interrupt(command: list[str], cwd: Path, signum: int, *, group: bool) -> tuple[int, str]:
    """Start ``command``, wait for its first decision, send ``signum`` (to its process group
    when ``group``, as a terminal's Ctrl-C does); its exit code and stderr."""
    proc = subprocess.Popen(
        command,
        cwd=cwd,
        env=_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=group,
    )

    def send(sig: int) -> None:
        if group:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, sig)
        else:
            proc.send_signal(sig)

    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if line != "decided 1\n":
            send(signal.SIGKILL)
            _, err = proc.communicate(timeout=30)
            pytest.fail(f"the agent never decided: {line!r}\n{err}")
        send(signum)
        # stdin stays open until the process has ended: closed (as communicate closes it),
        # the agent's readline would end first and its next call race the signal
        proc.wait(timeout=60)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            send(signal.SIGKILL)
            proc.communicate()
    assert "done" not in out
    return proc.returncode, err


def _assert_interrupted(path: Path) -> None:
    assert path.exists()
    assert not Path(f"{path}.partial").exists()
    trailer = _trailer(path)
    assert trailer["ended"] == "interrupted"
    assert trailer["end"] == 1
    cassette = read_cassette(path)
    assert cassette.ended == "interrupted"
    assert [r.step for r in cassette.records] == [1]
    verified = cli("verify", str(path))
    assert verified.exit_code == 0, verified.output
    assert "the recording ended interrupted" in verified.output


@pytest.mark.parametrize("signum", SIGNALS)
def test_a_signalled_tape_recording_closes_interrupted(
    tmp_path: Path, server: FakeServer, signum: int
) -> None:
    """A script recording under ``with Tape(...)``, signalled after its first decision, leaves
    a cassette whose trailer says interrupted; replaying past the cut says so."""
    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    path = tmp_path / "t.jsonl"
    command = [PYTHON, str(script), server.base_url, "block", str(path), "record"]
    code, err = _interrupt(command, tmp_path, signum, group=False)
    expected = -signal.SIGINT if signum == signal.SIGINT else 128 + signal.SIGTERM
    assert code == expected, err
    assert len(server.requests) == 1
    _assert_interrupted(path)

    server.stop()
    replay = _complete([PYTHON, str(script), server.base_url, "no", str(path), "replay"], tmp_path)
    assert replay.returncode == 1
    assert "ReplayMiss" in replay.stderr
    assert "the recording was interrupted after 1 decisions" in replay.stderr
    assert "re-record it" in replay.stderr


@pytest.mark.parametrize("signum", SIGNALS)
def test_a_signalled_tracetape_run_recording_closes_interrupted(
    tmp_path: Path, server: FakeServer, signum: int
) -> None:
    """``tracetape run --mode record`` of an unmodified SDK agent: Ctrl-C (SIGINT to the
    process group) or SIGTERM (to ``tracetape run``, which passes it on) after its first
    decision leave a cassette ended interrupted; replaying past the cut exits 3 saying so."""
    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    record = [TRACETAPE, "run", "--tape", "t.jsonl", "--mode", "record", "--"]
    command = [*record, PYTHON, str(script), server.base_url, "block"]
    code, err = _interrupt(command, tmp_path, signum, group=signum == signal.SIGINT)
    assert code == 128 + signum, err
    assert "the recording ended interrupted" in err
    assert len(server.requests) == 1
    _assert_interrupted(tmp_path / "t.jsonl")

    server.stop()
    replay = _tracetape_run(
        tmp_path, "--tape", "t.jsonl", "--", PYTHON, str(script), server.base_url, "no"
    )
    assert replay.returncode == 3, replay.stderr
    assert "the recording was interrupted after 1 decisions" in replay.stderr


def test_an_agent_exception_while_recording_ends_failed(tmp_path: Path, server: FakeServer) -> None:
    """An exception out of the agent closes the recording as ``failed: ValueError``."""
    path = tmp_path / "t.jsonl"

    def record() -> None:
        with Tape(path, mode="record") as tape, tracetape.patch_sdks(tape):
            _client(server).chat.completions.create(
                model="gpt-test", messages=[{"role": "user", "content": "echo hi"}]
            )
            raise ValueError("the agent broke")  # out of the tape's with block

    with pytest.raises(ValueError, match="the agent broke"):
        record()
    assert not Path(f"{path}.partial").exists()
    assert _trailer(path)["ended"] == "failed: ValueError"
    cassette = read_cassette(path)
    assert cassette.ended == "failed: ValueError"
    assert len(cassette.records) == 1
    verified = cli("verify", str(path))
    assert verified.exit_code == 0, verified.output
    assert "failed: ValueError" in verified.output


# -- h. replay latency ---------------------------------------------------------------------------


def _slow() -> int:
    # the behaviour under test: a decision that took time, which replay latency repeats
    # (the tests measure lower bounds only)
    time.sleep(0.06)
    return 42


def _timed(path: Path, **kw: Any) -> float:
    """Seconds one replayed call takes (the tape's setup left out)."""
    with Tape(path, mode="replay", **kw) as tape:
        start = time.perf_counter()
        assert tape.call("tool", {"name": "slow", "args": [], "step": 1}, lambda: 0) == 42
        return time.perf_counter() - start


def test_replay_latency_waits_the_recorded_time(tmp_path: Path) -> None:
    """``replay_latency="recorded"`` waits at least each decision's recorded ms (a factor
    scales it); the default replays at once."""
    path = tmp_path / "t.jsonl"
    with Tape(path, mode="record") as tape:
        assert tape.call("tool", {"name": "slow", "args": [], "step": 1}, _slow) == 42
    ms = read_cassette(path).records[0].ms
    assert ms is not None and ms >= 55
    recorded = ms / 1000
    assert _timed(path, replay_latency="recorded") >= recorded * 0.9
    assert _timed(path, replay_latency=2.0) >= recorded * 2 * 0.9
    assert _timed(path) < recorded * 0.5
