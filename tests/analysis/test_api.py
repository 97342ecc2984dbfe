"""The findings: divergence, repeats, drift and its causes, exploration, fanout, budgets, replay."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from tests.suite import bounded
from tracetape.analysis import (
    AnalysisConfig,
    Limits,
    Report,
    Severity,
    check_trace,
    diff_traces,
    render_markdown,
    render_text,
    summary_lines,
)
from tracetape.analysis.rules import classify_table

from .helpers import SEED_A, SEED_B, call, write_jsonl

UUID_1 = "0b7e1b2c-6a1f-4c1e-9a51-8f0b8f9b2a11"
UUID_2 = "4d3c2b1a-0f9e-4d8c-8b7a-6f5e4d3c2b1a"


def diff(tmp_path: Path, a: list[dict[str, Any]], b: list[dict[str, Any]], **kw: Any) -> Report:
    return diff_traces(
        write_jsonl(tmp_path / "a.jsonl", a), write_jsonl(tmp_path / "b.jsonl", b), **kw
    )


def check(tmp_path: Path, records: list[dict[str, Any]], **limits: int) -> Report:
    config = AnalysisConfig(limits=Limits().merged(**limits))
    return check_trace(write_jsonl(tmp_path / "t.jsonl", records), config=config)


def patterns(report: Report) -> list[str]:
    return sorted(f.pattern for f in report.findings)


def test_the_seed_example_prints_the_seed_lines(tmp_path: Path) -> None:
    """The seed's two traces give its repeat, drift and replay lines."""
    report = diff(tmp_path, SEED_A, SEED_B)
    assert summary_lines(report) == [
        "repeat: run_0042 step 1 == step 2 (same args, same output)",
        "drift: search_issues -> 2 distinct outputs",
        "replay: 1 unique call, 1 mock mismatch",
    ]
    assert report.replay == {"unique": 1, "mismatches": 1, "unrecorded": 0}


def test_first_divergence_names_the_changed_field_paths(tmp_path: Path) -> None:
    """The first position where the runs disagree is reported with both calls and field paths."""
    a = [
        call("A", 1, "search", {"q": "x", "page": 1}, "o1"),
        call("A", 2, "read", {"path": "f", "opts": {"n": 1}}, "o2"),
    ]
    b = [
        call("B", 1, "search", {"q": "x", "page": 1}, "o1"),
        call("B", 2, "read", {"path": "f", "opts": {"n": 2}}, "o2"),
    ]
    report = diff(tmp_path, a, b)
    div = report.divergence
    assert div is not None
    assert div.position == 2
    assert report.aligned == 1
    assert [c.path for c in div.changes] == ["args.opts.n"]
    assert (div.a["run"], div.b["run"], div.a["step"]) == ("A", "B", 2)  # type: ignore[index]
    assert patterns(report) == ["divergence", "replay-miss"]


def test_a_run_that_stops_early_diverges_at_its_end(tmp_path: Path) -> None:
    """When one run is a prefix of the other, the divergence is where the shorter one ended."""
    a = [call("A", 1, "s", {"i": 1}, "o"), call("A", 2, "s", {"i": 2}, "o")]
    report = diff(tmp_path, a, a[:1])
    assert report.divergence is not None
    assert report.divergence.position == 2
    assert report.divergence.b is None


def test_a_divergence_at_a_write_is_fatal(tmp_path: Path) -> None:
    """Runs that diverge at a write call produce a fatal divergent-write finding."""
    a = [call("A", 1, "write_file", {"path": "x", "body": "1"}, "ok", effect="write")]
    b = [call("B", 1, "write_file", {"path": "x", "body": "2"}, "ok", effect="write")]
    report = diff(tmp_path, a, b)
    assert report.worst is Severity.FATAL
    assert "divergent-write" in patterns(report)


def test_identical_runs_have_no_findings(tmp_path: Path) -> None:
    """Two runs that made the same calls with the same outputs produce no finding."""
    a = [call("A", 1, "s", {"q": "x"}, "o"), call("A", 2, "t", {"q": "y"}, "p")]
    b = [{**r, "run_id": "B"} for r in a]
    report = diff(tmp_path, a, b)
    assert report.findings == []
    assert report.divergence is None
    assert report.aligned == 2


def test_fresh_request_uuids_do_not_make_calls_differ(tmp_path: Path) -> None:
    """A request UUID or timestamp in args is normalized away (the seed's second comment)."""
    a = [call("A", 1, "s", {"q": "x", "request_id": UUID_1, "at": "2026-01-01T00:00:00Z"}, "o")]
    b = [call("B", 1, "s", {"q": "x", "request_id": UUID_2, "at": "2026-02-02T10:00:00Z"}, "o")]
    report = diff(tmp_path, a, b)
    assert report.findings == []
    assert report.aligned == 1


def test_a_uuid_inside_a_string_is_masked(tmp_path: Path) -> None:
    """A UUID inside an argument string is masked, so the calls count as repeats."""
    records = [call("A", 1, "get", {"url": f"/items/{u}"}, "o") for u in (UUID_1, UUID_2)]
    assert patterns(check(tmp_path, records)) == ["duplicate-call"]


def test_drift_after_a_local_write_is_an_expected_echo(tmp_path: Path) -> None:
    """A read whose output changed after the run's own write to the same resource is expected."""
    records = [
        call("A", 1, "read_file", {"path": "notes.md"}, "v1", effect="read"),
        call("A", 2, "write_file", {"path": "notes.md", "body": "new"}, "ok", effect="write"),
        call("A", 3, "read_file", {"path": "notes.md"}, "v2", effect="read"),
    ]
    report = check(tmp_path, records)
    assert patterns(report) == ["write-echo"]  # and no changed-output repeat: the write explains it
    finding = report.findings[0]
    assert finding.severity is Severity.EXPECTED
    assert finding.evidence["within_run"] is True


def test_drift_without_a_local_write_is_external(tmp_path: Path) -> None:
    """With effect tags and no write to the resource, changed output is external drift."""
    records = [
        call("A", 1, "read_file", {"path": "notes.md"}, "v1", effect="read"),
        call("A", 2, "write_file", {"path": "other.md"}, "ok", effect="write"),
        call("A", 3, "read_file", {"path": "notes.md"}, "v2", effect="read"),
    ]
    (finding,) = [f for f in check(tmp_path, records).findings if f.message.startswith("drift")]
    assert finding.pattern == "external-drift"


def test_drift_across_runs_after_a_write_in_one_run_is_an_echo(tmp_path: Path) -> None:
    """Across runs, the output that differs only where that run wrote first is the write's echo."""
    a = [call("A", 1, "get_record", {"id": 7}, "old", effect="read")]
    b = [
        call("B", 1, "update_record", {"id": 7, "v": 2}, "ok", effect="write"),
        call("B", 2, "get_record", {"id": 7}, "new", effect="read"),
    ]
    drift = [f for f in diff(tmp_path, a, b).findings if f.message.startswith("drift")]
    assert [f.pattern for f in drift] == ["write-echo"]


def test_drift_without_effect_tags_has_an_undetermined_cause(tmp_path: Path) -> None:
    """Without effect tags a drift is reported with its cause undetermined."""
    (finding,) = [
        f for f in diff(tmp_path, SEED_A, SEED_B).findings if f.message.startswith("drift")
    ]
    assert finding.pattern == "drift"
    assert "undetermined" in finding.evidence["cause"]


def test_a_repeated_write_is_fatal(tmp_path: Path) -> None:
    """The same write twice in a run is a duplicated side effect: fatal."""
    records = [
        call("A", s, "charge_card", {"amount": 5}, "ok", effect="irreversible") for s in (1, 2)
    ]
    report = check(tmp_path, records)
    assert patterns(report) == ["duplicate-write"]
    assert report.worst is Severity.FATAL


def test_repeats_with_different_outputs_are_repeats_and_drift(tmp_path: Path) -> None:
    """A call repeated with a different output is a changed-output repeat and drift in the run."""
    records = [call("A", s, "s", {"q": 1}, out) for s, out in ((1, "x"), (2, "y"))]
    report = check(tmp_path, records)
    assert patterns(report) == ["drift", "repeat-changed-output"]
    assert summary_lines(report)[0] == "repeat: A step 1 == step 2 (same args, different output)"
    drift = next(f for f in report.findings if f.pattern == "drift")
    assert drift.evidence["within_run"] is True


def test_exploration_and_fanout_are_found_per_step(tmp_path: Path) -> None:
    """Many distinct args of one tool in a step is exploration; too many calls is fanout."""
    records = [call("A", 1, "search", {"q": f"term {i}"}, f"o{i}") for i in range(6)]
    records.append(call("A", 2, "search", {"q": "final"}, "o"))
    report = check(tmp_path, records, max_calls_per_step=5, exploration=4)
    assert patterns(report) == ["exploration", "fanout"]
    fanout = next(f for f in report.findings if f.pattern == "fanout")
    assert (fanout.step, fanout.evidence["calls"]) == (1, 6)
    assert fanout.invariant


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


def test_mock_replay_counts_mismatches_and_misses(tmp_path: Path) -> None:
    """Replaying the candidate against the baseline counts changed outputs and unrecorded calls."""
    a = [call("A", 1, "s", {"q": 1}, "x"), call("A", 2, "s", {"q": 2}, "y")]
    b = [
        call("B", 1, "s", {"q": 1}, "x"),
        call("B", 2, "s", {"q": 2}, "z"),
        call("B", 3, "s", {"q": 3}, "w"),
    ]
    report = diff(tmp_path, a, b)
    assert report.replay == {"unique": 3, "mismatches": 1, "unrecorded": 1}
    assert {"replay-mismatch", "replay-miss"} <= set(patterns(report))


def test_one_file_with_many_runs_diffs_the_named_runs(tmp_path: Path) -> None:
    """diff FILE --runs A B compares those two runs and ignores the others."""
    records = [
        call("r1", 1, "s", {"q": 1}, "x"),
        call("r2", 1, "s", {"q": 1}, "y"),
        call("r3", 1, "s", {"q": 9}, "z"),
    ]
    path = write_jsonl(tmp_path / "t.jsonl", records)
    report = diff_traces(path, runs=("r1", "r3"))
    assert (report.baseline["run"], report.candidate["run"]) == ("r1", "r3")  # type: ignore[index]
    assert report.divergence is not None and report.divergence.changes[0].path == "args.q"
    assert report.runs == 2


def test_the_same_run_id_in_both_files_names_two_runs(tmp_path: Path) -> None:
    """Run ids are per file: run_1 in A and run_1 in B are compared, not merged."""
    a = [call("run_1", 1, "s", {"q": 1}, "x")]
    b = [call("run_1", 1, "s", {"q": 1}, "x")]
    report = diff(tmp_path, a, b)
    assert report.findings == []
    assert report.runs == 2


def test_severity_overrides_apply(tmp_path: Path) -> None:
    """A per-pattern override in the config changes the finding's severity."""
    config = AnalysisConfig(rules=classify_table({"duplicate-call": "fatal"}))
    report = check_trace(write_jsonl(tmp_path / "t.jsonl", SEED_A), config=config)
    assert [(f.pattern, f.severity) for f in report.findings] == [
        ("duplicate-call", Severity.FATAL)
    ]


def test_many_runs_of_the_same_calls_share_their_signatures(tmp_path: Path) -> None:
    """Many short runs of the same calls (a fresh request id each) make three signatures;
    every run is whole and every repeat is counted."""
    records = [
        call(
            f"run_{r}", i, "s", {"q": i % 3, "request_id": f"{r:08d}-0000-4000-8000-{i:012d}"}, "o"
        )
        for r in range(500)
        for i in range(1, 7)
    ]
    report = check(tmp_path, records)
    assert report.signatures == 3
    assert report.runs == 500
    assert report.counts["duplicate-call"] == 3 * 500


def test_examples_are_capped_but_counts_are_exact(tmp_path: Path) -> None:
    """Past max_examples a pattern's findings are counted but not all kept; the first ones
    in the input are kept."""
    records = [call(f"r{r:02d}", s, "s", {}, "o") for r in range(20) for s in (1, 2)]
    path = write_jsonl(tmp_path / "t.jsonl", records)
    report = check_trace(path, config=AnalysisConfig(max_examples=5))
    assert report.counts["duplicate-call"] == 20
    assert [f.run for f in report.findings] == ["r00", "r01", "r02", "r03", "r04"]


def test_the_first_resource_key_names_the_resource(tmp_path: Path) -> None:
    """With several resource keys in args, the one listed first in resource_keys wins."""
    records = [
        call("A", 1, "get", {"id": 1, "path": "p"}, "v1", effect="read"),
        call("A", 2, "put", {"path": "p", "body": 2}, "ok", effect="write"),
        call("A", 3, "get", {"id": 1, "path": "p"}, "v2", effect="read"),
    ]
    drift = [f for f in check(tmp_path, records).findings if f.message.startswith("drift")]
    assert [(f.pattern, f.evidence["resource"]) for f in drift] == [("write-echo", "p")]


def test_interleaved_runs_are_analyzed_whole(tmp_path: Path) -> None:
    """A run whose calls are spread among other runs' calls is still one run."""
    records = [call(r, 1, "s", {}, "o") for r in ["r1", "r2", "r3", "r1"]]
    report = check(tmp_path, records)
    assert report.runs == 3
    assert [f.message for f in report.findings] == [
        "repeat: r1 step 1 == step 1 (same args, same output)"
    ]


def test_drift_after_a_write_to_an_unnamed_resource_is_undetermined(tmp_path: Path) -> None:
    """A read naming no resource, after some write, drifts with an undetermined cause."""
    records = [
        call("A", 1, "search", {"q": "x"}, "v1", effect="read"),
        call("A", 2, "write_file", {"path": "notes.md"}, "ok", effect="write"),
        call("A", 3, "search", {"q": "x"}, "v2", effect="read"),
    ]
    (finding,) = [f for f in check(tmp_path, records).findings if f.message.startswith("drift")]
    assert finding.pattern == "drift"
    assert "names no resource" in finding.evidence["cause"]


def test_a_capped_pattern_ends_with_how_many_more(tmp_path: Path) -> None:
    """A pattern with more findings than a report keeps ends its lines with one counting the
    rest, in text and Markdown; the count in the table stays exact."""
    records = [call(f"r{i}", 1, "search", {"q": "x"}, "o") for i in range(5) for _ in range(2)]
    path = write_jsonl(tmp_path / "t.jsonl", records)
    report = check_trace(path, config=AnalysisConfig(max_examples=2))
    more = "… and 3 more duplicate-call findings (a report keeps the first 2; counts are exact)"
    lines = render_text(report).splitlines()
    assert lines[2] == more
    assert more in render_markdown(report)
    assert report.counts["duplicate-call"] == 5


def _repeat_reference(runs: Any, max_repeats: int) -> dict[str, int]:
    """The repeat findings counted the plain way: per run, the calls of one tool with the
    same arguments; ``duplicate-*`` when every output is the first's, else
    ``repeat-changed-output`` when a later call's output differs with no write before it in
    its run that explains the change (to no named resource, or to the call's own)."""
    found = dict.fromkeys(
        ["repeat-budget", "duplicate-call", "duplicate-write", "repeat-changed-output"], 0
    )
    for run in runs:
        groups: dict[tuple[str, int, str | None], list[tuple[str | None, bool]]] = {}
        writes: list[str | None] = []  # the resources written so far in the run
        for tool, q, path, out, effect in run:
            explained = any(w is None or w == path for w in writes)
            groups.setdefault((tool, q, path), []).append((out, explained))
            if effect in ("write", "irreversible"):
                writes.append(path)
        for (_, q, path), made in groups.items():
            if len(made) < 2:
                continue
            found["repeat-budget"] += len(made) - 1 > max_repeats
            first = made[0][0]
            if all(out == first for out, _ in made):
                effect = next(e for t, qq, pp, o, e in run if (qq, pp) == (q, path))
                write = effect in ("write", "irreversible")
                found["duplicate-write" if write else "duplicate-call"] += 1
            elif any(out != first and not explained for out, explained in made[1:]):
                found["repeat-changed-output"] += 1
    return found


@bounded(deep=60, ci=15)
@given(
    runs=st.lists(
        st.lists(
            st.tuples(
                st.just("t"),
                st.integers(0, 2),
                st.none() | st.sampled_from(["/a", "/b"]),
                st.none() | st.sampled_from(["o1", "o2"]),
                st.none() | st.sampled_from(["read", "write", "irreversible"]),
            ),
            min_size=1,
            max_size=12,
        ),
        min_size=1,
        max_size=3,
    ),
    max_repeats=st.integers(0, 3),
)
def test_repeats_are_what_a_plain_walk_finds(runs: Any, max_repeats: int) -> None:
    """Repeat findings over calls with and without outputs, effect tags and resources, writes
    before and after: the counts of a plain walk over each run."""
    from tracetape.analysis import check_records
    from tracetape.record import Record

    records = [
        Record(
            kind="tool",
            run=f"r{i}",
            name=tool,
            step=k + 1,
            input={"args": {"q": q} if path is None else {"q": q, "path": path}},
            out_digest=out,
            effect=effect,
            line=k + 1,
        )
        for i, run in enumerate(runs)
        for k, (tool, q, path, out, effect) in enumerate(run)
    ]
    limits = Limits().merged(max_repeats=max_repeats)
    report = check_records(records, config=AnalysisConfig(limits=limits))
    expected = _repeat_reference(runs, max_repeats)
    assert {p: report.counts.get(p, 0) for p in expected} == expected


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
