"""Every bound of a run at its edge: a run exactly at a bound breaks nothing, one call, token,
step or repeat past it does (the other tests go far past it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

import pytest

from tests.analysis.helpers import call, check, patterns, write_jsonl
from tracetape.analysis import AnalysisConfig, Limits, Report, check_trace


def _check(tmp_path: Path, records: list[dict[str, Any]], **limits: int) -> Report:
    config = AnalysisConfig(limits=Limits().merged(**limits))
    return check_trace(write_jsonl(tmp_path / "t.jsonl", records), config=config)


def _found(report: Report, pattern: str) -> list[dict[str, Any]]:
    """The evidence of each ``pattern`` finding, and its count agrees with it."""
    found = [f.evidence for f in report.findings if f.pattern == pattern]
    assert report.counts.get(pattern, 0) == len(found)
    return found


# Three steps of one call each, 100 tokens a call, all different: 3 calls, 300 tokens, 3 steps.
THREE_STEPS = [call("A", s, "poll", {"job": s}, f"o{s}", tokens=100) for s in (1, 2, 3)]
# One call made three times: repeated twice.
REPEATED = [call("A", s, "poll", {"job": 1}, "pending") for s in (1, 2, 3)]
# One step of four calls of one tool, each with its own arguments.
ONE_STEP = [call("A", 1, "search", {"q": f"term {i}"}, f"o{i}") for i in range(4)]


class Bound(NamedTuple):
    """A limit, the value the run is exactly at, the run, the pattern past it, and the
    evidence field that says what the run did."""

    limit: str
    at: int
    records: list[dict[str, Any]]
    pattern: str
    measure: str


BOUNDS = [
    pytest.param(Bound("max_calls", 3, THREE_STEPS, "call-budget", "calls"), id="calls"),
    pytest.param(Bound("max_tokens", 300, THREE_STEPS, "token-budget", "tokens"), id="tokens"),
    pytest.param(Bound("max_steps", 3, THREE_STEPS, "step-budget", "steps"), id="steps"),
    pytest.param(Bound("max_repeats", 2, REPEATED, "repeat-budget", "count"), id="repeats"),
    pytest.param(Bound("max_calls_per_step", 4, ONE_STEP, "fanout", "calls"), id="fanout"),
    pytest.param(
        Bound("exploration", 4, ONE_STEP, "exploration", "distinct_args"), id="exploration"
    ),
]


@pytest.mark.parametrize("bound", BOUNDS)
def test_a_run_at_a_bound_passes_and_one_past_it_breaks_it(tmp_path: Path, bound: Bound) -> None:
    """With the bound equal to what the run did: no finding; one below it: one finding,
    naming the bound and what the run did."""
    at, pattern, records = bound.at, bound.pattern, bound.records
    assert _found(_check(tmp_path, records, **{bound.limit: at}), pattern) == []
    (evidence,) = _found(_check(tmp_path, records, **{bound.limit: at - 1}), pattern)
    assert evidence["bound"] == at - 1
    # a repeat's count is its calls; the bound counts the repeats after the first
    assert evidence[bound.measure] == (at + 1 if pattern == "repeat-budget" else at)


@pytest.mark.parametrize(
    ("max_steps", "over", "hit"),
    [
        pytest.param(2, 1, 0, id="one-below"),
        pytest.param(3, 0, 1, id="at"),
        pytest.param(4, 0, 0, id="one-above"),
    ],
)
def test_a_run_that_stops_at_max_steps_is_a_hit_not_a_break(
    tmp_path: Path, max_steps: int, over: int, hit: int
) -> None:
    """A run of 3 steps: past max_steps 2 it breaks the step budget; at max_steps 3 it
    only hit it (suspicious: it may have run out of steps); under max_steps 4, neither."""
    report = _check(tmp_path, THREE_STEPS, max_steps=max_steps)
    assert len(_found(report, "step-budget")) == over
    assert len(_found(report, "step-budget-hit")) == hit
    assert [f.pattern for f in report.broken_invariants] == ["step-budget"] * over


@pytest.mark.parametrize(
    ("limits", "pattern"),
    [
        pytest.param({"max_tokens": 250}, "token-budget", id="tokens"),
        pytest.param({"max_steps": 2}, "step-budget", id="steps"),
        pytest.param({"max_steps": 3}, "step-budget-hit", id="steps-hit"),
        pytest.param({"max_calls": 2}, "call-budget", id="calls"),
        pytest.param({"max_repeats": 1}, "repeat-budget", id="repeats"),
    ],
)
def test_budgets_are_enforced(tmp_path: Path, limits: dict[str, int], pattern: str) -> None:
    """A run above a configured bound gets the matching budget finding."""
    records = [call("A", s, "poll", {"job": 1}, "pending") for s in (1, 2, 3)]
    assert pattern in patterns(check(tmp_path, records, **limits))
