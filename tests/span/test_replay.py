"""Span replay on real subprocesses: the seed's two questions (is the tool stable? did the
world drift?), the verdict, the modes, normalization."""

from __future__ import annotations

import pytest

from tests.span.helpers import command, printed
from tracetape.span import (
    DECISION_LAYER,
    NONDETERMINISTIC,
    WORLD_DRIFTED,
    replay,
)


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
