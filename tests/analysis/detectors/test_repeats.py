"""Repeats: a call made again in a run with its output the same (a duplicate call or write) or
changed, and over max_repeats; the counts are those of a plain walk."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from tests.analysis.helpers import call, check, patterns
from tests.suite import bounded
from tracetape.analysis import (
    AnalysisConfig,
    Limits,
    Severity,
    summary_lines,
)


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
