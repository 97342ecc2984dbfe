"""``Session``: a tape's signals, network guard and environment checks, and how its run
ended, on their own."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest

from tracetape.errors import EnvironmentDriftError, NetworkBlockedError, ReplayMiss, TapeWarning
from tracetape.redact import Redactor
from tracetape.session import Session, ending_of


@pytest.fixture
def session() -> Iterator[Session]:
    made = Session(Redactor(), env_allow=["AGENT_MODEL"], guard=True)
    yield made
    made.release_sigterm()


@pytest.mark.parametrize(
    ("exc", "signalled", "ended"),
    [
        pytest.param(None, False, "completed", id="none"),
        pytest.param(SystemExit(0), False, "completed", id="exit-0"),
        pytest.param(SystemExit(2), False, "failed: SystemExit", id="exit-2"),
        pytest.param(KeyboardInterrupt(), False, "interrupted", id="ctrl-c"),
        pytest.param(ValueError("x"), True, "interrupted", id="signalled"),
        pytest.param(ValueError("x"), False, "failed: ValueError", id="failed"),
    ],
)
def test_how_a_run_ended(exc: BaseException | None, signalled: bool, ended: str) -> None:
    """The trailer's words: a signal or Ctrl-C interrupts, ``sys.exit(0)`` completes."""
    assert ending_of(exc, signalled) == ended


def test_allowed_variables_are_recorded_by_digest(
    session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An allowed variable's value is kept as a keyed digest, never as itself; an unset one
    is None, and a session allowing none records no ``env``."""
    monkeypatch.setenv("AGENT_MODEL", "gpt-x")
    env = session.environment()
    assert env is not None and env["AGENT_MODEL"].startswith("hmac:")  # type: ignore[union-attr]
    assert "gpt-x" not in str(env)
    monkeypatch.delenv("AGENT_MODEL")
    assert session.environment() == {"AGENT_MODEL": None}
    assert Session(Redactor(), env_allow=(), guard=True).environment() is None


def test_drift_warns_and_strict_drift_raises(
    session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A variable whose value changed since the recording is drift: a warning, or under
    ``strict`` an ``EnvironmentDriftError`` listing it."""
    monkeypatch.setenv("AGENT_MODEL", "a")
    header = {"env": session.environment(), "harness_sha": "abc"}
    session.check_drift("run.jsonl", header, "abc", strict=True)  # no drift: nothing
    monkeypatch.setenv("AGENT_MODEL", "b")
    with pytest.warns(TapeWarning, match="run.jsonl: replaying under drift: .*AGENT_MODEL"):
        session.check_drift("run.jsonl", header, "abc", strict=False)
    with pytest.raises(EnvironmentDriftError) as info:
        session.check_drift("run.jsonl", header, "abc", strict=True)
    assert info.value.drift == ["environment variable AGENT_MODEL has a different value than "
                                "when recorded"]  # fmt: skip


def test_sigterm_ends_the_program_as_a_signalled_exit(session: Session) -> None:
    """While caught, SIGTERM raises ``SystemExit(143)`` and marks the run interrupted;
    released, SIGTERM has its default action again."""
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        pytest.skip("SIGTERM has a handler here already")
    session.catch_sigterm()
    handler = signal.getsignal(signal.SIGTERM)
    assert callable(handler)
    with pytest.raises(SystemExit) as info:
        handler(signal.SIGTERM, None)
    assert info.value.code == 143 and session.signalled
    assert session.ending(None) == "interrupted"
    session.release_sigterm()
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_a_refused_request_is_kept_and_raised(session: Session) -> None:
    """``refuse`` raises a ``NetworkBlockedError`` naming the tape and the hooks to enable,
    and keeps it in ``blocked``."""
    with pytest.raises(NetworkBlockedError, match=r"run\.jsonl replays, and a connection") as info:
        session.refuse("run.jsonl", "a connection to 10.0.0.1:443", ("10.0.0.1", 443))
    assert session.blocked == [info.value] and info.value.address == ("10.0.0.1", 443)
    assert "tracetape.patch_sdks(tape)" in str(info.value)


def test_the_guard_is_armed_once_and_only_when_on() -> None:
    """A session with the guard on arms it once until disarmed; with it off, never."""
    on, off = Session(Redactor(), (), guard=True), Session(Redactor(), (), guard=False)
    for session in (on, off):
        session.arm(lambda: None)
        session.arm(lambda: None)
    assert on.armed and not off.armed
    on.disarm(lambda: None)
    assert not on.armed


def _miss() -> ReplayMiss:
    return ReplayMiss(
        "tool:1", kind="tool", step=1, matched=0, recorded=1, expected=None, changes=[]
    )


def test_a_caught_miss_or_refusal_is_raised_again_at_close(session: Session) -> None:
    """The first refusal is raised when no miss was, else the first miss, with a note that
    the program caught it and went on; nothing when neither happened."""
    session.raise_caught([])
    miss = _miss()
    with pytest.raises(ReplayMiss) as info:
        session.raise_caught([miss])
    assert info.value is miss and "caught this ReplayMiss" in str(info.value.__notes__)
    with pytest.raises(NetworkBlockedError):
        session.refuse("run.jsonl", "a request", "h")
    with pytest.raises(NetworkBlockedError, match="replays") as refused:
        session.raise_caught([])
    assert "caught this error and went on" in str(refused.value.__notes__)


def test_a_miss_turned_into_another_error_is_raised_instead(session: Session) -> None:
    """When the program's own error ended the block after a miss, the miss is raised with a
    note naming that error; a ``ReplayMiss`` that ended it is left as it is."""
    miss = _miss()
    with pytest.raises(ReplayMiss) as info:
        session.raise_turned(ConnectionError("retries exhausted"), [miss])
    assert "turned it into ConnectionError: retries exhausted" in str(info.value.__notes__)
    session.raise_turned(miss, [miss])
    session.raise_turned(None, [miss])
