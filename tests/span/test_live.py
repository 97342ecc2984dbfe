"""Running a span's tool live: a command as a subprocess (its timeout, its cwd, its environment),
a Python tool through its callable (a write only through a stub), live output redacted, the
environment compared."""

from __future__ import annotations

import os
import re
import select
from pathlib import Path
from typing import Any

import pytest

from tracetape import SpanError, fingerprint
from tracetape.redact import Redactor
from tracetape.span import (
    DECISION_LAYER,
    WORLD_DRIFTED,
    Live,
    Span,
    env_digest,
    load_callable,
    replay,
)

from .helpers import command, printed


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
    from tracetape.record import raised_record

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


@pytest.mark.parametrize(
    ("spec", "said"),
    [
        pytest.param("os.path.join", "name a function as module:function", id="no-colon"),
        pytest.param(":join", "name a function as module:function", id="no-module"),
        pytest.param("no_such_module_x:f", "cannot import no_such_module_x", id="no-module-found"),
        pytest.param("os.path:nope", "os.path has no nope", id="no-function"),
        pytest.param("os:sep", "sep is not callable", id="not-callable"),
    ],
)
def test_a_callable_that_cannot_be_found_says_why(spec: str, said: str) -> None:
    """``--call`` names what it could not find, and how to name a function."""
    with pytest.raises(SpanError, match=f"^--call '{re.escape(spec)}': {said}"):
        load_callable(spec)


def test_a_callable_is_found_by_module_and_qualified_name() -> None:
    """``module:function`` and ``module:Class.method``."""
    assert load_callable("os.path:join") is os.path.join
    assert load_callable("pathlib:Path.cwd")() == Path.cwd()
    assert load_callable(f"{__name__}:lookup") is lookup


def test_the_environment_digest_covers_the_named_variables_set_or_not() -> None:
    """Equal values give equal digests, whatever else is set; an unset variable differs from
    an empty one; the digest holds no value."""
    one = env_digest(["A", "B"], {"A": "1", "B": "", "C": "x"})
    assert one == env_digest(["B", "A", "A"], {"A": "1", "B": ""})
    assert one != env_digest(["A", "B"], {"A": "1"})
    assert one.startswith("sha256:") and len(one) == len("sha256:") + 16
