"""The error tree: what each error is (its tracetape base and the builtin it stands for), and
the context each carries into its message."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tracetape import errors
from tracetape.errors import (
    CassetteError,
    CassetteExistsError,
    CassetteLockedError,
    CassetteNotFoundError,
    ConfigError,
    EnvironmentDriftError,
    NetworkBlockedError,
    ReplayMiss,
    TapeError,
    TapeWarning,
    TraceError,
    UnplayedDecisionsError,
)
from tracetape.record import Record

_BRANCH = re.compile(r"^(?P<indent>(?:[│ ] {3})*)[├└]── (?P<name>\w+)")


def _drawn_tree() -> dict[str, str]:
    """Each class the module docstring draws under another, and that other."""
    doc = errors.__doc__ or ""
    tree = doc.split("The tree::", 1)[1].split("\n\n", 2)[1]
    parents: dict[int, str] = {}
    drawn: dict[str, str] = {}
    for indented in tree.splitlines():
        line = indented.removeprefix("    ")
        branch = _BRANCH.match(line)
        if branch:
            depth = len(branch["indent"]) // 4 + 1
            drawn[branch["name"]] = parents[depth - 1]
            parents[depth] = branch["name"]
        elif line and line[0].isalpha():
            parents[0] = line.split()[0]
    return drawn


def test_the_drawn_tree_is_the_class_tree() -> None:
    """Every class the docstring draws under another is a direct subclass of it."""
    drawn = _drawn_tree()
    assert len(drawn) >= 12 and drawn["CassetteNotFoundError"] == "CassetteError"
    for name, parent in drawn.items():
        assert getattr(errors, parent) in getattr(errors, name).__bases__, f"{name} < {parent}"


def test_every_error_is_a_tape_error_and_the_warning_a_user_warning() -> None:
    """``except TapeError`` catches whatever tracetape raises on purpose; its warning is a
    ``UserWarning`` (shown once by default, an error under ``-W error``)."""
    for name in errors.__all__:
        cls = getattr(errors, name)
        assert issubclass(cls, TapeWarning if name == "TapeWarning" else TapeError), name
    assert issubclass(TapeWarning, UserWarning) and not issubclass(TapeWarning, TapeError)


@pytest.mark.parametrize(
    ("error", "builtin"),
    [
        pytest.param(
            CassetteNotFoundError("missing", path="p.jsonl"), FileNotFoundError, id="not-found"
        ),
        pytest.param(CassetteExistsError("exists", path="p.jsonl"), FileExistsError, id="exists"),
        pytest.param(ConfigError("max_steps must be a number"), ValueError, id="config"),
    ],
)
def test_an_error_is_the_builtin_it_stands_for(error: Exception, builtin: type[Exception]) -> None:
    """Code that catches the builtin (``FileNotFoundError``...) catches ours too."""
    with pytest.raises(builtin):
        raise error


def test_a_blocked_connection_is_not_an_os_error() -> None:
    """HTTP clients retry ``OSError`` and wrap it in their own errors: a blocked connection
    must reach the program as itself."""
    blocked = NetworkBlockedError("a connection to 10.0.0.1:443", ("10.0.0.1", 443))
    assert not isinstance(blocked, OSError) and blocked.address == ("10.0.0.1", 443)


@pytest.mark.parametrize(
    ("path", "line", "said"),
    [
        pytest.param("run.jsonl", 7, "run.jsonl:7: torn", id="path-and-line"),
        pytest.param(Path("dir") / "run.jsonl", None, "dir/run.jsonl: torn", id="path"),
        pytest.param(None, 3, "torn", id="neither"),
    ],
)
def test_a_cassette_error_starts_with_where(
    path: str | Path | None, line: int | None, said: str
) -> None:
    """``path:line:`` (or ``path:``) leads the message, as compilers say it; ``.path`` is a
    string and ``.line`` the number."""
    error = CassetteError("torn", path=path, line=line)
    assert str(error) == said
    assert error.path == (None if path is None else str(path)) and error.line == line


def test_the_context_of_each_error_is_kept() -> None:
    """A trace error names its field, a locked cassette the writer's pid, drift and unplayed
    errors their lists."""
    trace = TraceError("not a number", path="t.jsonl", line=2, field="step")
    assert (str(trace), trace.field) == ("t.jsonl:2: not a number", "step")
    locked = CassetteLockedError("in use", path="run.jsonl", pid=4242)
    assert (str(locked), locked.pid) == ("run.jsonl: in use", 4242)
    drift = EnvironmentDriftError("drifted", ("a", "b"))
    assert drift.drift == ["a", "b"]
    unplayed = UnplayedDecisionsError("2 unplayed", [Record(kind="tool"), Record(kind="llm")])
    assert [r.kind for r in unplayed.unplayed] == ["tool", "llm"]


def test_a_miss_says_its_key_first_then_its_diagnosis() -> None:
    """The first line is the seed's sentence (log greps match it); the diagnosis follows."""
    expected = Record(kind="llm", key="llm:0123456789abcdef")
    miss = ReplayMiss(
        "llm:fedcba9876543210",
        kind="llm",
        step=2,
        matched=1,
        recorded=3,
        expected=expected,
        changes=("messages[0].content",),
        diagnosis="  messages[0].content changed",
    )
    assert str(miss).splitlines() == [
        "llm:fedcba9876543210 was never recorded — the run diverged here",
        "  messages[0].content changed",
    ]
    assert (miss.kind, miss.step, miss.matched, miss.recorded) == ("llm", 2, 1, 3)
    assert miss.expected is expected and miss.changes == ["messages[0].content"]
    bare = ReplayMiss(
        "tool:1", kind="tool", step=None, matched=0, recorded=0, expected=None, changes=()
    )
    assert str(bare) == "tool:1 was never recorded — the run diverged here"
