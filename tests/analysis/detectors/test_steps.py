"""Exploration and fanout per step segment (a stretch of a run's calls of one step, whatever the
order of its steps, over files, with no step), and the step budget."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from tests.analysis.helpers import call, check, patterns, write_jsonl
from tests.suite import bounded
from tracetape.analysis import (
    AnalysisConfig,
    Limits,
    check_trace,
)


def test_exploration_and_fanout_are_found_per_step(tmp_path: Path) -> None:
    """Many distinct args of one tool in a step is exploration; too many calls is fanout."""
    records = [call("A", 1, "search", {"q": f"term {i}"}, f"o{i}") for i in range(6)]
    records.append(call("A", 2, "search", {"q": "final"}, "o"))
    report = check(tmp_path, records, max_calls_per_step=5, exploration=4)
    assert patterns(report) == ["exploration", "fanout"]
    fanout = next(f for f in report.findings if f.pattern == "fanout")
    assert (fanout.step, fanout.evidence["calls"]) == (1, 6)
    assert fanout.invariant


def _stretch_reference(
    runs: Any, calls: int, explore: int, max_steps: int | None = None
) -> dict[str, int]:
    """fanout and exploration counted the plain way: a step segment is a stretch of
    consecutive calls of a run with the same step; and with ``max_steps``, step-budget (a
    run's steps: its highest step or its segments, the more)."""
    fanout = exploration = budget = 0
    for run in runs:
        stretches: list[tuple[int | None, list[tuple[str, int]]]] = []
        for step, tool, q in run:
            if stretches and stretches[-1][0] == step:
                stretches[-1][1].append((tool, q))
            else:
                stretches.append((step, [(tool, q)]))
        if max_steps is not None:  # a first stretch with no step is no step
            top = max([0, *(step for step, *_ in run if step is not None)])
            budget += max(top, len(stretches) - (stretches[0][0] is None)) > max_steps
        for _, made in stretches:
            fanout += len(made) > calls
            by_tool: dict[str, set[int]] = {}
            for tool, q in made:
                by_tool.setdefault(tool, set()).add(q)
            exploration += sum(len(qs) > explore for qs in by_tool.values())
    found = {"fanout": fanout, "exploration": exploration}
    return found if max_steps is None else found | {"step-budget": budget}


_steps_runs = st.lists(
    st.lists(
        st.tuples(st.integers(0, 3), st.sampled_from(["s", "t"]), st.integers(0, 3)),
        min_size=1,
        max_size=14,
    ),
    min_size=1,
    max_size=4,
)


@bounded(deep=60, ci=15)
@given(runs=_steps_runs, calls=st.integers(1, 4), explore=st.integers(1, 3))
def test_step_segments_are_stretches_of_one_step(
    runs: list[list[tuple[int, str, int]]], calls: int, explore: int
) -> None:
    """Whatever the order of a run's steps (up, down, back again), fanout, exploration and
    step-budget count what a plain walk over stretches of one step counts."""
    records = [
        call(f"r{i}", step, tool, {"q": q}, "o")
        for i, run in enumerate(runs)
        for step, tool, q in run
    ]
    with tempfile.TemporaryDirectory() as tmp:
        report = check(
            Path(tmp), records, max_calls_per_step=calls, exploration=explore, max_steps=2
        )
    found = {p: report.counts.get(p, 0) for p in ("fanout", "exploration", "step-budget")}
    assert found == _stretch_reference(runs, calls, explore, max_steps=2)


_lone_runs = st.lists(
    st.one_of(
        # One call a step, the steps in any order (up, down, back again).
        st.integers(1, 12).flatmap(
            lambda k: st.permutations(range(k)).flatmap(
                lambda steps: st.tuples(
                    *(
                        st.tuples(st.just(step), st.sampled_from(["s", "t"]), st.integers(0, 3))
                        for step in steps
                    )
                ).map(list)
            )
        ),
        _steps_runs.map(lambda runs: runs[0]),  # or any steps, a step called more than once
    ),
    min_size=1,
    max_size=5,
)


@bounded(deep=60, ci=15)
@given(runs=_lone_runs, files=st.integers(1, 3), calls=st.integers(1, 3))
def test_step_segments_of_runs_spread_over_files(
    runs: list[list[tuple[int, str, int]]], files: int, calls: int
) -> None:
    """Runs whose calls go round several files (read one after another, so that a run's
    steps go back), one call a step or not: fanout, exploration and step-budget count what a
    plain walk over the calls in the files' order counts."""
    parts: list[list[dict[str, Any]]] = [[] for _ in range(files)]
    for i, run in enumerate(runs):
        for k, (step, tool, q) in enumerate(run):
            parts[k % files].append(call(f"r{i}", step, tool, {"q": q}, "o"))
    in_order: dict[str, list[tuple[int, str, int]]] = {}
    for part in parts:
        for rec in part:
            in_order.setdefault(rec["run_id"], []).append(
                (rec["step"], rec["tool"], rec["args"]["q"])
            )
    limits = Limits().merged(max_calls_per_step=calls, exploration=1, max_steps=2)
    with tempfile.TemporaryDirectory() as tmp:
        paths = [
            write_jsonl(Path(tmp) / f"t{n}.jsonl", part) for n, part in enumerate(parts) if part
        ]
        report = check_trace(paths, config=AnalysisConfig(limits=limits))
    found = {p: report.counts.get(p, 0) for p in ("fanout", "exploration", "step-budget")}
    assert found == _stretch_reference(list(in_order.values()), calls, 1, max_steps=2)


@bounded(deep=40, ci=10)
@given(
    runs=st.lists(
        st.lists(
            st.tuples(
                st.none() | st.integers(0, 2), st.sampled_from(["s", "t"]), st.integers(0, 3)
            ),
            min_size=1,
            max_size=14,
        ),
        min_size=1,
        max_size=3,
    ),
    calls=st.integers(1, 3),
)
# One call a step, the steps going back, the first call with none: two steps, not three.
@example(runs=[[(None, "s", 0), (2, "s", 1), (0, "s", 2)]], calls=1)
def test_step_segments_with_no_step_are_stretches_too(
    runs: list[list[tuple[int | None, str, int]]], calls: int
) -> None:
    """Records without a step (a span, a cassette's tool calls) make stretches of their own:
    calls with no step in a row are one segment, apart from any numbered step (and counted
    as a step, but where they open their run)."""
    from tracetape.analysis import check_records
    from tracetape.record import Record

    records = [
        Record(kind="tool", run=f"r{i}", name=tool, step=step, input={"args": {"q": q}},
               out_digest="o", line=k + 1)
        for i, run in enumerate(runs)
        for k, (step, tool, q) in enumerate(run)
    ]  # fmt: skip
    limits = Limits().merged(max_calls_per_step=calls, exploration=1, max_steps=2)
    report = check_records(records, config=AnalysisConfig(limits=limits))
    found = {p: report.counts.get(p, 0) for p in ("fanout", "exploration", "step-budget")}
    assert found == _stretch_reference(runs, calls, 1, max_steps=2)
