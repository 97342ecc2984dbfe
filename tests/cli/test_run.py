"""``tracetape run`` on the command line: its options (``--mode`` and fork's ``--fork-at`` and
``--branch``, ``--latency``) checked before the program runs, ``--format json``,
``--traceback``, a command not found; what the program does under the tape is
``tests/integrations/test_runner.py``'s."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integrations.test_runner import AGENT, PYTHON, record, run
from tracetape import read_cassette


@pytest.fixture
def agent(tmp_path: Path) -> Path:
    """The program of ``AGENT``, in the test's folder."""
    path = tmp_path / "agent.py"
    path.write_text(AGENT)
    return path


def test_traceback_shows_the_programs_frames_only(tmp_path: Path, agent: Path) -> None:
    """``--traceback`` prints the program's traceback, without tracetape's frames, then the
    diagnosis."""
    record(tmp_path, agent, "2")
    argv = ["--tape", "t.jsonl", "--hook", "none", "--traceback", "--", PYTHON, str(agent), "3"]
    done = run(tmp_path, *argv)
    assert done.returncode == 3
    assert done.stderr.index("Traceback") < done.stderr.index("was never recorded")
    assert f'File "{agent}", line' in done.stderr
    assert "tracetape/tape.py" not in done.stderr


def test_json_report(tmp_path: Path, agent: Path) -> None:
    """``--format json`` prints the run's report on stderr, stdout staying the program's."""
    record(tmp_path, agent, "2")
    done = run(
        tmp_path,
        "--tape",
        "t.jsonl",
        "--format",
        "json",
        "--hook",
        "none",
        "--",
        PYTHON,
        str(agent),
        "3",
    )
    assert done.returncode == 3
    report = json.loads(done.stderr[done.stderr.index("{\n") :])
    assert report["exit_code"] == 3
    assert report["command"] == f"{PYTHON} {agent} 3"
    assert report["program_exit_code"] == 1
    assert report["mode"] == "replay"
    assert report["miss"]["changes"] == ["args.b"]
    assert report["miss"]["caught"] is False
    assert (report["miss"]["fate"], report["miss"]["turned_into"]) == ("stopped", None)


def test_command_not_found_exits_127(tmp_path: Path) -> None:
    """An unknown command exits 127 like a shell does."""
    done = run(tmp_path, "--tape", "t.jsonl", "--mode", "record", "--", "no-such-program-xyz")
    assert done.returncode == 127
    assert "command not found: no-such-program-xyz" in done.stderr


def test_bad_mode_is_a_usage_error(tmp_path: Path) -> None:
    """An unknown ``--mode`` exits 2 listing the valid modes."""
    done = run(tmp_path, "--tape", "t.jsonl", "--mode", "rec", "--", PYTHON, "-c", "pass")
    assert done.returncode == 2
    assert "'replay', 'record', 'auto', 'rewrite'" in done.stderr


def test_fork_mode_replays_the_prefix_then_runs_live_into_a_branch(
    tmp_path: Path, agent: Path
) -> None:
    """``--mode fork``: the changed call runs live (the agent's tool prints ``add ran``),
    the branch is named, its JSON report says where it forked, the cassette is unchanged,
    and the branch replays whole."""
    record(tmp_path, agent, "2")
    recorded = (tmp_path / "t.jsonl").read_bytes()
    hooks = ("--hook", "none", "--format", "json")
    done = run(
        tmp_path, "--tape", "t.jsonl", "--mode", "fork", *hooks, "--", PYTHON, str(agent), "5"
    )
    assert done.returncode == 0, done.stderr
    assert "add ran" in done.stderr and "sum 6" in done.stdout
    report = json.loads(done.stderr[done.stderr.index("{") :])
    assert report["branch"] == str(tmp_path / "t.fork-miss.jsonl")
    assert report["fork"]["seq"] == 1 and report["fork"]["reason"] == "first miss"
    assert report["ended"] == "completed"
    assert (tmp_path / "t.jsonl").read_bytes() == recorded
    again = run(
        tmp_path, "--tape", "t.fork-miss.jsonl", "--hook", "none", "--", PYTHON, str(agent), "5"
    )
    assert again.returncode == 0 and "add ran" not in again.stderr, again.stderr
    named = run(
        tmp_path, "--tape", "t.jsonl", "--mode", "fork", "--branch", "mine.jsonl",
        "--fork-at", "0", "--hook", "none", "--", PYTHON, str(agent), "2",
    )  # fmt: skip
    assert named.returncode == 0 and "add ran" in named.stderr  # step 0 went live
    assert "written to the branch" in named.stderr and "mine.jsonl" in named.stderr


@pytest.mark.parametrize(
    ("options", "said"),
    [
        (["--fork-at", "2"], "--fork-at and --branch need --mode fork"),
        (["--branch", "b.jsonl"], "--fork-at and --branch need --mode fork"),
        (["--latency", "slow"], "--latency"),
        (["--mode", "fork"], "no such cassette"),
    ],
)
def test_replay_control_options_are_checked_before_the_program_runs(
    tmp_path: Path, agent: Path, options: list[str], said: str
) -> None:
    done = run(tmp_path, "--tape", "none.jsonl", *options, "--", PYTHON, str(agent), "2")
    assert done.returncode == 2 and said in done.stderr, done.stderr
    assert "add ran" not in done.stderr


def test_latency_replays_at_the_recorded_speed_or_a_factor_of_it(tmp_path: Path) -> None:
    """``--latency 4`` waits four times each decision's recorded time (a lower bound: the
    process's own start comes on top)."""
    import time

    script = tmp_path / "slow.py"
    # the tool's sleep is the behaviour under test: the time --latency multiplies, measured
    # as a lower bound only
    script.write_text(
        "import time\nfrom tracetape.integrations.tools import tool\n\n"
        "@tool\ndef slow():\n    time.sleep(0.5)\n    return 'done'\n\nprint(slow())\n"
    )
    recorded = run(tmp_path, "--tape", "s.jsonl", "--mode", "record", "--hook", "none", "--",
                   PYTHON, str(script))  # fmt: skip
    assert recorded.returncode == 0, recorded.stderr
    ms = read_cassette(tmp_path / "s.jsonl").records[0].ms or 0.0
    assert ms >= 500
    start = time.perf_counter()
    replayed = run(tmp_path, "--tape", "s.jsonl", "--latency", "4", "--hook", "none", "--",
                   PYTHON, str(script))  # fmt: skip
    assert replayed.returncode == 0 and replayed.stdout == "done\n", replayed.stderr
    assert time.perf_counter() - start >= 4 * ms / 1000


def test_an_edited_cassette_exits_2_naming_its_line_unless_edits_are_trusted(
    tmp_path: Path, agent: Path
) -> None:
    """A recorded output changed by hand: replay refuses before the program runs (exit 2, the
    file and line named, what to do); ``--trust-edits`` replays the edit with a warning."""
    record(tmp_path, agent, "2")
    cassette = tmp_path / "t.jsonl"
    lines = cassette.read_bytes().splitlines(keepends=True)
    assert lines[1].count(b'"out":3,') == 1
    cassette.write_bytes(
        b"".join([lines[0], lines[1].replace(b'"out":3,', b'"out":4,'), *lines[2:]])
    )
    argv = ["--tape", "t.jsonl", "--hook", "none", "--", PYTHON, str(agent), "2"]
    done = run(tmp_path, *argv)
    assert done.returncode == 2, done.stderr
    assert f"{cassette}:2: the header or this record was changed" in done.stderr
    assert "--trust-edits" in done.stderr and "add ran" not in done.stderr and not done.stdout
    trusted = run(tmp_path, "--trust-edits", *argv)
    assert trusted.returncode == 0, trusted.stderr
    assert trusted.stdout.startswith("sum 4 ") and "its seal is broken at line 2" in trusted.stderr
    assert "tracetape run: warning: " in trusted.stderr and "TapeWarning" not in trusted.stderr
