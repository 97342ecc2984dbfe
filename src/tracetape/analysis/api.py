"""The analysis entry points: ``diff_traces`` (two runs) and ``check_trace`` (one trace)."""

from __future__ import annotations

import gc
import os
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from itertools import islice
from pathlib import Path
from typing import Any

import msgspec

from ..errors import TraceError
from ..formats import TraceFormat, TraceSource, detect_format, read_records
from ..formats.jsonl import read_blocks_of
from ..record import Record
from .config import AnalysisConfig
from .findings import SIDE_A, SIDE_B, Analyzer, Report
from .packed import Cutter, FormTable, Packed, Packer, Skips, Worker, use_worker

__all__ = ["check_trace", "diff_traces", "fill_steps"]

_SLICE = 8192
Progress = Callable[[Path, int], None]
Feeder = Callable[[Analyzer, int | None], bool]
Sources = list[list[TraceSource | Skips]]  # per input file, what counted its skipped lines


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
    jobs: int | None = None,
) -> Report:
    """Compare two runs without executing anything and return the classified findings.

    With two files, every run of ``a`` is the baseline side and every run of ``b`` the
    candidate side; the runs aligned for the first divergence are ``runs`` (else the first
    run of each file). With one file, ``runs=(RUN_A, RUN_B)`` picks the two runs compared
    (else its first two runs) and other runs are ignored. The two files are read in step, so
    memory holds only the lag between the aligned runs, not the files.

    ``jobs`` 2 decodes the seed-JSONL files in a second process while this one does the
    findings (two cores: about 1.6x the throughput on large files), 1 reads in this process;
    None (the default) uses a second process for files over 8 MiB on a machine with two CPUs
    or more. The report, errors and skip counts are the same either way.

    Raises ``TraceError`` (file, line, field) for bad input, and for a run that is not there.
    """
    config = config or AnalysisConfig()
    pa = Path(a)
    sources: Sources = []
    options: dict[str, Any] = {
        "config": config,
        "fmt": fmt,
        "skip_bad_lines": skip_bad_lines,
        "progress": progress,
        "sources": sources,
        "jobs": jobs,
    }
    stack = ExitStack()
    with stack, _gc_paused():
        if b is None:
            analyzer = Analyzer(config, compare=True, runs=runs, inputs=[str(pa)])
            (feed,) = _feeders([pa], **options, stack=stack)
            feed(analyzer, None)
        else:
            pb = Path(b)
            baseline, candidate = runs if runs else (None, None)
            analyzer = Analyzer(
                config,
                compare=True,
                baseline=baseline,
                candidate=candidate,
                inputs=[str(pa), str(pb)],
            )
            feed_a, feed_b = _feeders([pa, pb], **options, stack=stack, step=_SLICE)
            # The files are fed _SLICE calls each in turn, so the aligned runs advance together.
            more_a = more_b = True
            while more_a or more_b:
                more_a = more_a and feed_a(analyzer, SIDE_A)
                more_b = more_b and feed_b(analyzer, SIDE_B)
    _missing_runs(analyzer, runs, [pa] if b is None else [pa, Path(b)])
    return _finish(analyzer, sources)


def _feeders(
    paths: list[Path],
    *,
    config: AnalysisConfig,
    fmt: str | TraceFormat,
    skip_bad_lines: bool,
    progress: Progress | None,
    sources: Sources,
    jobs: int | None,
    stack: ExitStack,
    step: int | None = None,
) -> list[Feeder]:
    """One function per path feeding its next ``step`` calls to an analyzer (all of them if
    ``step`` is None); each returns False once its file is done. The feeders are called in
    turn, in path order. ``stack`` closes the reading when the analysis is done or
    abandoned (which stops a worker process).

    Seed-JSONL traces take the fast path (packed chunks, ``Analyzer.feed_packed``), packed
    in one second process for all the paths ``use_worker`` picks; the other formats are read
    as events. Calls are consumed as they are read (not collected): memory stays flat.
    """
    kinds = [TraceFormat.parse(fmt) for _ in paths]
    for i, path in enumerate(paths):
        if kinds[i] is TraceFormat.AUTO:
            kinds[i] = detect_format(path, skip_bad_lines=skip_bad_lines)
    slots: list[list[TraceSource | Skips]] = [[] for _ in paths]
    sources += slots  # in path order, whenever each file's reading starts
    jsonl = [i for i, kind in enumerate(kinds) if kind is TraceFormat.JSONL]
    remote = [i for i in jsonl if use_worker(paths[i], jobs)]
    worker = None
    if remote:
        skips = [Skips() for _ in remote]
        for i, skip in zip(remote, skips, strict=True):
            slots[i].append(skip)
        worker = Worker(
            [paths[i] for i in remote],
            normalizer=config.normalizer,
            skip_bad_lines=skip_bad_lines,
            group=step,
            progress=[_source_cb(progress, paths[i]) for i in remote],
            skips=skips,
        )
        stack.callback(worker.close)
    feeders: list[Feeder] = []
    for i, path in enumerate(paths):
        options: dict[str, Any] = {
            "normalizer": config.normalizer,
            "skip_bad_lines": skip_bad_lines,
            "progress": _source_cb(progress, path),
            "source": slots[i],
        }
        if worker is not None and i in remote:
            feeders.append(_remote_feeder(worker, remote.index(i), step))
        elif kinds[i] is TraceFormat.JSONL:
            blocks = read_blocks_of(
                path,
                normalizer=config.normalizer,
                skip_bad_lines=skip_bad_lines,
                progress=options["progress"],
                sources=options["source"],
            )
            chunks = Packer(config.normalizer).pack(blocks)
            stack.callback(chunks.close)
            feeders.append(_packed_feeder(chunks, step))
        else:
            records = read_records(
                path,
                kinds[i],
                normalizer=options["normalizer"],
                skip_bad_lines=skip_bad_lines,
                progress=options["progress"],
                sources=options["source"],
            )
            if kinds[i] is TraceFormat.CASSETTE:
                records = fill_steps(records)
            feeders.append(_event_feeder(records, step))
    return feeders


def fill_steps(records: Iterator[Record]) -> Iterator[Record]:
    """Give a cassette's records without a step the step of the model turn they belong to:
    each ``llm`` record without one starts a step (as do records before the first turn)."""
    step = 0
    replace = msgspec.structs.replace
    for rec in records:
        if rec.step is not None:
            step = rec.step
            yield rec
            continue
        if rec.kind == "llm" or step == 0:
            step += 1
        yield replace(rec, step=step)


def _packed_feeder(chunks: Iterator[Packed], step: int | None) -> Feeder:
    table = FormTable()
    if step is None:

        def feed_all(analyzer: Analyzer, side: int | None) -> bool:
            analyzer.feed_packed(chunks, side, table)
            return False

        return feed_all
    cut = Cutter(chunks)

    def feed_group(analyzer: Analyzer, side: int | None) -> bool:
        analyzer.feed_packed(cut.take(step), side, table)
        return cut.more

    return feed_group


def _remote_feeder(worker: Worker, i: int, step: int | None) -> Feeder:
    table = FormTable()

    def feed_turn(analyzer: Analyzer, side: int | None) -> bool:
        analyzer.feed_packed(worker.turn(i), side, table)
        return step is not None and worker.more[i]

    return feed_turn


def _event_feeder(events: Iterator[Record], step: int | None) -> Feeder:
    if step is None:

        def feed_events(analyzer: Analyzer, side: int | None) -> bool:
            analyzer.feed(events, side)
            return False

        return feed_events
    return lambda analyzer, side: analyzer.feed(islice(events, step), side) == step


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
    jobs: int | None = None,
) -> Report:
    """Analyze every run of one trace for repeats, drift, fanout and budget breaks.

    ``report.broken_invariants`` lists the broken invariants (``fanout`` and the
    ``*-budget`` patterns), which is what makes ``tracetape check`` exit 1. ``jobs`` is
    ``diff_traces``'s.
    """
    config = config or AnalysisConfig()
    p = Path(path)
    sources: Sources = []
    analyzer = Analyzer(config, compare=False, inputs=[str(p)])
    with ExitStack() as stack, _gc_paused():
        (feed,) = _feeders(
            [p],
            config=config,
            fmt=fmt,
            skip_bad_lines=skip_bad_lines,
            progress=progress,
            sources=sources,
            jobs=jobs,
            stack=stack,
        )
        feed(analyzer, SIDE_A)
    if not analyzer.seen_runs:
        raise TraceError("the trace holds no calls to check", path=p)
    return _finish(analyzer, sources)


def _finish(analyzer: Analyzer, sources: Sources) -> Report:
    for src in (src for slot in sources for src in slot):
        analyzer.skipped += src.skipped
        analyzer.skipped_examples += src.first_skipped[: 5 - len(analyzer.skipped_examples)]
    return analyzer.finish()
