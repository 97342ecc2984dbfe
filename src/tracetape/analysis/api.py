"""The analysis entry points: ``diff_traces`` (two runs) and ``check_trace`` (one trace)."""

from __future__ import annotations

import gc
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from itertools import islice
from pathlib import Path
from typing import Any

from .config import AnalysisConfig
from .events import CallBatch, TraceError, TraceFormat
from .findings import SIDE_A, SIDE_B, Analyzer, Report
from .readers import TraceSource, detect_format, read_batches, read_events

__all__ = ["check_trace", "diff_traces"]

_SLICE = 8192
Progress = Callable[[Path, int], None]
Feeder = Callable[[Analyzer, int | None], bool]


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector during the streaming pass.

    The pass allocates millions of short-lived, acyclic objects (one dict per line) that
    reference counting frees; meanwhile the signature table grows, and each collection walks
    it for nothing. Measured: about 20% of the pass. Collection resumes afterwards.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _source_cb(progress: Progress | None, path: Path) -> Callable[[int], None] | None:
    if progress is None:
        return None
    return lambda done: progress(path, done)


def diff_traces(
    a: str | os.PathLike[str],
    b: str | os.PathLike[str] | None = None,
    *,
    runs: tuple[str, str] | None = None,
    config: AnalysisConfig | None = None,
    fmt: str | TraceFormat = TraceFormat.AUTO,
    skip_bad_lines: bool = False,
    progress: Progress | None = None,
) -> Report:
    """Compare two runs without executing anything and return the classified findings.

    With two files, every run of ``a`` is the baseline side and every run of ``b`` the
    candidate side; the runs aligned for the first divergence are ``runs`` (else the first
    run of each file). With one file, ``runs=(RUN_A, RUN_B)`` picks the two runs compared
    (else its first two runs) and other runs are ignored. The two files are read in step, so
    memory holds only the lag between the aligned runs, not the files.

    Raises ``TraceError`` (file, line, field) for bad input, and for a run that is not there.
    """
    config = config or AnalysisConfig()
    pa = Path(a)
    sources: list[TraceSource] = []
    options: dict[str, Any] = {
        "config": config,
        "fmt": fmt,
        "skip_bad_lines": skip_bad_lines,
        "progress": progress,
        "sources": sources,
    }
    if b is None:
        analyzer = Analyzer(config, compare=True, runs=runs, inputs=[str(pa)])
        with _gc_paused():
            _feeder(pa, **options)(analyzer, None)
    else:
        pb = Path(b)
        baseline, candidate = runs if runs else (None, None)
        analyzer = Analyzer(
            config, compare=True, baseline=baseline, candidate=candidate, inputs=[str(pa), str(pb)]
        )
        feed_a, feed_b = (_feeder(path, **options, step=_SLICE) for path in (pa, pb))
        with _gc_paused():
            # The files are fed _SLICE calls each in turn, so the aligned runs advance together.
            more_a = more_b = True
            while more_a or more_b:
                more_a = more_a and feed_a(analyzer, SIDE_A)
                more_b = more_b and feed_b(analyzer, SIDE_B)
    _missing_runs(analyzer, runs, [pa] if b is None else [pa, Path(b)])
    return _finish(analyzer, sources)


def _feeder(
    path: Path,
    *,
    config: AnalysisConfig,
    fmt: str | TraceFormat,
    skip_bad_lines: bool,
    progress: Progress | None,
    sources: list[TraceSource],
    step: int | None = None,
) -> Feeder:
    """A function feeding the next ``step`` calls of ``path`` to an analyzer (all of them if
    ``step`` is None); it returns False once the file is done.

    Seed-JSONL traces take the fast path (blocks of raw calls, ``Analyzer.feed_batches``);
    the other formats are read as events. Calls are consumed straight from the readers (not
    collected in lists), which keeps the working set in the CPU cache.
    """
    kind = TraceFormat.parse(fmt)
    if kind is TraceFormat.AUTO:
        kind = detect_format(path, skip_bad_lines=skip_bad_lines)
    options: dict[str, Any] = {
        "normalizer": config.normalizer,
        "skip_bad_lines": skip_bad_lines,
        "progress": _source_cb(progress, path),
        "source": sources,
    }
    if kind is TraceFormat.JSONL:
        batches = read_batches(path, **options)
        if step is None:

            def feed_all(analyzer: Analyzer, side: int | None) -> bool:
                analyzer.feed_batches(batches, side)
                return False

            return feed_all
        groups = _regroup(batches, step)

        def feed_group(analyzer: Analyzer, side: int | None) -> bool:
            group = next(groups, None)
            if group is None:
                return False
            analyzer.feed_batches(group, side)
            return sum(len(batch.calls) for batch in group) == step

        return feed_group
    events = read_events(path, kind, **options)
    if step is None:

        def feed_events(analyzer: Analyzer, side: int | None) -> bool:
            analyzer.feed(events, side)
            return False

        return feed_events
    return lambda analyzer, side: analyzer.feed(islice(events, step), side) == step


def _regroup(batches: Iterator[CallBatch], size: int) -> Iterator[list[CallBatch]]:
    """Regroup blocks of calls into groups of ``size`` calls (the last one may be short).

    Two files are fed ``size`` calls each in turn whatever the format, so the findings kept
    as examples (the first ones found) do not depend on how a reader cuts its blocks.
    """
    group: list[CallBatch] = []
    room = size
    for block in batches:
        batch = block
        while len(batch.calls) >= room:
            group.append(batch._replace(calls=batch.calls[:room]))
            yield group
            batch = batch._replace(line=batch.line + room, calls=batch.calls[room:])
            group, room = [], size
        if batch.calls:
            group.append(batch)
            room -= len(batch.calls)
    if group:
        yield group


def _missing_runs(analyzer: Analyzer, runs: tuple[str, str] | None, paths: list[Path]) -> None:
    """Raise ``TraceError`` for a named run that is not there, or a side with no calls."""
    seen = analyzer.seen_runs

    def listing(side: int | None) -> str:
        names = [r for r, v in seen.items() if side is None or v & side]
        return ", ".join(names[:10]) + (" ..." if len(names) > 10 else "") or "none"

    one_file = len(paths) == 1
    if runs:
        for i, name in enumerate(runs):
            side = SIDE_A if i == 0 else SIDE_B
            if not seen.get(name, 0) & side:
                raise TraceError(
                    f"run {name!r} is not in this trace; runs found: "
                    f"{listing(None if one_file else side)}",
                    path=paths[0] if one_file else paths[i],
                    field="run_id",
                )
    elif one_file and sum(1 for v in seen.values() if v) < 2:
        raise TraceError(
            f"a single file needs two runs to diff, found {len(seen)} ({listing(None)}); "
            "pass a second file: tracetape diff A B",
            path=paths[0],
        )
    if not one_file:
        for path, side in zip(paths, (SIDE_A, SIDE_B), strict=True):
            if not any(v & side for v in seen.values()):
                raise TraceError("the trace holds no calls to compare", path=path)


def check_trace(
    path: str | os.PathLike[str],
    *,
    config: AnalysisConfig | None = None,
    fmt: str | TraceFormat = TraceFormat.AUTO,
    skip_bad_lines: bool = False,
    progress: Progress | None = None,
) -> Report:
    """Analyze every run of one trace for repeats, drift, fanout and budget breaks.

    ``report.broken_invariants`` lists the broken invariants (``fanout`` and the
    ``*-budget`` patterns), which is what makes ``tracetape check`` exit 1.
    """
    config = config or AnalysisConfig()
    p = Path(path)
    sources: list[TraceSource] = []
    analyzer = Analyzer(config, compare=False, inputs=[str(p)])
    feed = _feeder(
        p, config=config, fmt=fmt, skip_bad_lines=skip_bad_lines, progress=progress, sources=sources
    )
    with _gc_paused():
        feed(analyzer, SIDE_A)
    if not analyzer.seen_runs:
        raise TraceError("the trace holds no calls to check", path=p)
    return _finish(analyzer, sources)


def _finish(analyzer: Analyzer, sources: list[TraceSource]) -> Report:
    for src in sources:
        analyzer.skipped += src.skipped
        analyzer.skipped_examples += src.first_skipped[: 5 - len(analyzer.skipped_examples)]
    return analyzer.finish()
