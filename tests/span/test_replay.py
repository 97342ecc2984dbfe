"""Span replay on real subprocesses and real callables: the seed's two questions and verdict."""

from __future__ import annotations

import os
import select
import sys
from pathlib import Path
from typing import Any

import pytest

from tracetape import SpanError, fingerprint
from tracetape.redact import Redactor
from tracetape.span import (
    DECISION_LAYER,
    NONDETERMINISTIC,
    WORLD_DRIFTED,
    Live,
    Span,
    env_digest,
    replay,
)

PY = sys.executable


def command(code: str, result: Any = None, **call: Any) -> Span:
    """A span whose tool is ``python -c code``, recorded with ``result``."""
    return Span.from_dict(
        {
            "span_id": "7f3c",
            "tool_call": {"argv": [PY, "-c", code], **call},
            "tool_result": result,
        }
    )


def printed(text: str, code: int = 0) -> dict[str, Any]:
    return {"exit_code": code, "stdout": text, "stderr": ""}


def test_a_deterministic_command_as_recorded_is_the_decision_layer() -> None:
    """Stable and not drifted: the verdict points at the model."""
    result = replay(command("print('3 files changed')", printed("3 files changed\n")))
    assert (result.stable, result.drift, result.verdict) == (True, False, DECISION_LAYER)
    assert result.runs == [result.recorded, result.recorded] == [result.live, result.live]
    lines = result.lines()
    assert (
        lines[1]
        == f"recorded={result.recorded} run1={result.recorded} run2={result.recorded} stable=True"
    )
    assert lines[2] == f"recorded={result.recorded} live={result.recorded} drift=False"
    assert lines[-1].startswith("verdict: decision layer")


@pytest.mark.parametrize(
    "code",
    [
        pytest.param("import time; print(time.time_ns())", id="time"),
        pytest.param("import random; print(random.random())", id="random"),
    ],
)
def test_a_command_printing_time_or_randomness_is_nondeterministic(code: str) -> None:
    """Two live runs disagree: nondeterministic tool, whatever the recording says."""
    result = replay(command(code, printed("0\n")))
    assert result.stable is False
    assert result.verdict == NONDETERMINISTIC
    assert result.changes and result.changes[0].path == "stdout"
    assert result.compared_runs == "run 1 and run 2"


def test_a_deterministic_command_whose_recording_differs_means_the_world_drifted() -> None:
    """Stable but not what was recorded: world drifted, with the normalized diff."""
    result = replay(command("print('4 files changed')", printed("3 files changed\n")))
    assert (result.stable, result.drift, result.verdict) == (True, True, WORLD_DRIFTED)
    assert [(c.path, c.before, c.after) for c in result.changes] == [
        ("stdout", "3 files changed\n", "4 files changed\n")
    ]
    assert result.to_dict()["diff"] == [
        {"path": "stdout", "before": "3 files changed\n", "after": "4 files changed\n"}
    ]


def test_modes_run_only_what_they_ask() -> None:
    """determinism runs twice and gives no drift; drift runs once and gives no stability."""
    span = command("print('x')", printed("x\n"))
    det = replay(span, "determinism")
    assert (len(det.runs), det.live, det.drift, det.verdict) == (2, None, None, None)
    drift = replay(span, "drift")
    assert (drift.runs, drift.stable, drift.drift, drift.verdict) == ([], None, False, None)
    with pytest.raises(ValueError, match="use one of 'determinism', 'drift', 'both'"):
        replay(span, "twice")


def test_uuids_temp_paths_and_timestamps_in_stdout_are_not_drift() -> None:
    """Normalization masks what changes every run for no diagnostic reason."""
    code = (
        "import uuid, tempfile, datetime; d = tempfile.mkdtemp(); "
        "print(uuid.uuid4(), d + '/out.txt', datetime.datetime.now().isoformat())"
    )
    recorded = printed(
        "0b7e1b2c-6a1f-4c1e-9a51-8f0b8f9b2a11 /tmp/tmpab12cd/out.txt 2026-01-01T00:00:00.123\n"
    )
    result = replay(command(code, recorded))
    assert (result.stable, result.drift, result.verdict) == (True, False, DECISION_LAYER)


def test_a_command_over_its_timeout_is_killed_with_its_children(tmp_path: Path) -> None:
    """The recorded timeout_s applies; the whole process group dies; the runs say so."""
    pids = tmp_path / "pids"
    code = (
        "import subprocess, sys, time; "
        "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
        f"open({str(pids)!r}, 'a').write(str(c.pid) + chr(10)); time.sleep(60)"
    )
    result = replay(command(code, printed(""), timeout_s=0.5))
    assert result.notes == [
        "run 1 timed out after 0.5 s (the whole process group was killed)",
        "run 2 timed out after 0.5 s (the whole process group was killed)",
        "drift run timed out after 0.5 s (the whole process group was killed)",
    ]
    assert result.live_value == {"exit_code": None, "stdout": "", "stderr": "", "timed_out": True}
    assert result.verdict == WORLD_DRIFTED  # it finished when recorded; it hangs now
    for pid in map(int, pids.read_text().split()):
        assert _ends(pid), "the tool's child outlived the timeout"


def _ends(pid: int, within: float = 30.0) -> bool:
    """Whether process ``pid`` ends within ``within`` seconds: its pidfd is readable once it
    has exited (a zombie, dead but not yet reaped, has), and a pid already reaped has none.
    The SIGKILL was sent; the process may still be on its way out."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        readable, _, _ = select.select([fd], [], [], within)
        return bool(readable)
    finally:
        os.close(fd)


def test_a_command_that_is_not_installed_is_a_clear_error() -> None:
    """No verdict from a tool that is not there: SpanError says what to do."""
    span = Span.from_dict(
        {"span_id": "1", "tool_call": {"argv": ["tracetape-no-such-tool", "-x"]}, "tool_result": 0}
    )
    with pytest.raises(SpanError, match="'tracetape-no-such-tool' is not installed here"):
        replay(span)


def test_cwd_and_pinned_environment_reach_the_command(tmp_path: Path) -> None:
    """The recorded cwd is used, --cwd replaces it, pinned variables are set, pure_env
    drops the rest."""
    code = "import os; print(os.getcwd(), os.environ.get('PIN'), 'HOME' in os.environ)"
    span = command(code, printed(f"{tmp_path} yes False\n"), cwd=str(tmp_path))
    live = Live(env={"PIN": "yes"}, pure_env=True)
    assert replay(span, live=live).verdict == DECISION_LAYER
    moved = replay(span, live=Live(env={"PIN": "yes"}, pure_env=True, cwd="/"))
    assert moved.drift is True
    missing = command(code, printed(""), cwd=str(tmp_path / "gone"))
    with pytest.raises(SpanError, match=r"recorded cwd .* is not a folder here; .* --cwd DIR"):
        replay(missing)


def test_environment_drift_is_reported_beside_the_verdict() -> None:
    """Per-variable digests (a cassette's) and one env_digest (a span's) are both compared."""
    mac = Redactor().mac
    span = command(
        "print('ok')",
        printed("ok\n"),
        env={"MODEL_REGION": f"hmac:{mac('eu', 16)}"},
    )
    same = replay(span, live=Live(env={"MODEL_REGION": "eu"}))
    assert same.env_drift == []
    moved = replay(span, live=Live(env={"MODEL_REGION": "us"}))
    assert moved.env_drift == [
        "environment variable MODEL_REGION has a different value than when recorded"
    ]
    assert moved.verdict == DECISION_LAYER  # the verdict stands; the drift is beside it
    assert "environment drift: environment variable MODEL_REGION" in "\n".join(moved.lines())
    digest = env_digest(["LANG_X"], {"LANG_X": "C"})
    whole = command("print('ok')", printed("ok\n"), env_digest=digest, env_names=["LANG_X"])
    assert replay(whole, live=Live(env={"LANG_X": "C"})).env_drift == []
    (line,) = replay(whole, live=Live(env={"LANG_X": "fr"})).env_drift
    assert line.startswith(f"environment digest differs over LANG_X: recorded {digest}, now ")
    seed = command("print('ok')", printed("ok\n"), env_digest="sha256:9a1e")
    (unnamed,) = replay(seed).env_drift
    assert "no variables are named" in unnamed and "--env-allow" in unnamed


def lookup(city: str, units: str = "metric") -> dict[str, Any]:
    return {"city": city, "units": units, "temp": 21}


def failing(path: str) -> str:
    raise FileNotFoundError(2, "No such file or directory", path)


def python_tool(result: Any, effect: str | None = None, **args: Any) -> Span:
    data: dict[str, Any] = {
        "span_id": "ab12",
        "tool_call": {"name": "lookup", "args": args},
        "tool_result": result,
    }
    if effect:
        data["effect"] = effect
    return Span.from_dict(data)


def test_a_python_tool_runs_live_through_the_named_callable() -> None:
    """--call: the callable gets the recorded arguments; its result is JSON as recorded."""
    span = python_tool({"city": "Oslo", "units": "metric", "temp": 21}, city="Oslo")
    assert replay(span, live=Live(call=lookup)).verdict == DECISION_LAYER
    drifted = python_tool({"city": "Oslo", "units": "metric", "temp": 19}, city="Oslo")
    assert replay(drifted, live=Live(call=lookup)).verdict == WORLD_DRIFTED
    with pytest.raises(SpanError, match=r"Python tool .* --call module:function"):
        replay(span)


def test_a_python_tool_that_raises_compares_as_the_tape_records_it() -> None:
    """An exception becomes the tape's raised-record, so a recorded failure replays equal."""
    from tracetape.integrations.tools import raised_record

    recorded = raised_record(FileNotFoundError(2, "No such file or directory", "a.txt"))
    span = python_tool(recorded, path="a.txt")
    assert replay(span, live=Live(call=failing)).verdict == DECISION_LAYER


received: list[Any] = []


def fake_post(issue: int, body: str) -> dict[str, Any]:
    received.append({"issue": issue, "body": body})
    return {"posted": False}


@pytest.mark.parametrize("effect", ["write", "irreversible"])
def test_a_write_span_is_refused_without_a_stub(effect: str) -> None:
    """Never run live: a clear refusal naming --stub."""
    span = python_tool({"posted": True}, effect, issue=412, body="fix")
    with pytest.raises(SpanError, match=f"effect '{effect}'.*never run.*--stub module:function"):
        replay(span, live=Live(call=fake_post))
    argv = Span.from_dict(
        {"span_id": "w", "effect": effect, "tool_call": {"argv": ["rm", "-rf", "x"]}}
    )
    with pytest.raises(SpanError, match="never run"):
        replay(argv)


def test_a_write_span_with_a_stub_compares_the_arguments_it_received() -> None:
    """The stub is called with the recorded arguments (three times in mode both), and the
    arguments are what is compared, not a result."""
    received.clear()
    span = python_tool({"posted": True, "url": "https://x/412"}, "write", issue=412, body="fix")
    result = replay(span, live=Live(stub=fake_post))
    assert received == [{"issue": 412, "body": "fix"}] * 3
    assert result.compared == "stub arguments"
    assert result.recorded == fingerprint({"issue": 412, "body": "fix"})
    assert (result.stable, result.drift, result.verdict) == (True, False, DECISION_LAYER)
    assert "compared: the stub arguments" in "\n".join(result.lines())


def test_live_output_is_redacted_before_it_is_compared_or_printed() -> None:
    """A secret the tool prints live is a placeholder, as in the recording."""
    key = "sk-proj-LiveLeak0123456789abcdefXYZ"
    recorded = Redactor().redact_value(printed(f"token {key}\n"))[0]
    assert key not in str(recorded)
    result = replay(command(f"print('token {key}')", recorded))
    assert result.verdict == DECISION_LAYER
    assert key not in str(result.to_dict())


def test_a_cassette_span_compares_the_headers_environment_digests(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tape(env_allow=...) keeps a keyed digest per variable; the span carries them and
    replay names the variable that changed."""
    from tracetape import Tape
    from tracetape.span import read_spans

    monkeypatch.setenv("AGENT_REGION", "eu")
    path = tmp_path / "run.jsonl"
    with Tape(path, mode="record", env_allow=["AGENT_REGION"]) as tape:
        tape.call("tool", {"name": "lookup", "args": {"city": "Oslo"}, "step": 1},
                  lambda: lookup("Oslo"))  # fmt: skip
    (span,) = read_spans(path)
    assert set(span.tool_call["env"]) == {"AGENT_REGION"}
    assert replay(span, live=Live(call=lookup)).env_drift == []
    monkeypatch.setenv("AGENT_REGION", "us")
    result = replay(span, live=Live(call=lookup))
    assert result.env_drift == [
        "environment variable AGENT_REGION has a different value than when recorded"
    ]
    assert replay(span, live=Live(call=lookup, env={"AGENT_REGION": "eu"})).env_drift == []


async def lookup_async(city: str) -> dict[str, Any]:
    return {"city": city, "units": "metric", "temp": 21}


def test_an_async_python_tool_is_awaited() -> None:
    span = python_tool({"city": "Oslo", "units": "metric", "temp": 21}, city="Oslo")
    assert replay(span, live=Live(call=lookup_async)).verdict == DECISION_LAYER
