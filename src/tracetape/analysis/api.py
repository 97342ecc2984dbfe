"""The analysis entry points: ``diff_traces`` (two runs) and ``check_trace`` (every run).

Both read their inputs into the engine's workspace (``engine.Calls``, by ``load``), sign
their calls (``sign``), run every detector (``detectors``) and build the ``Report`` from
their results. An input is a path, a glob
pattern (``traces/*.jsonl``), or a list of them; a file is any trace format ``formats``
reads, or Parquet written by ``tracetape export --parquet``.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

from ..errors import TraceError
from ..formats import TraceFormat
from ..record import Record, RecordTexts
from .config import AnalysisConfig
from .detectors import SIDE_A, SIDE_B, Context, detect, leading
from .engine import ORD, Calls, Input, Workspace
from .load import export_parquet as write_parquet
from .load import load, load_records
from .report import Report
from .sign import sign

__all__ = [
    "Traces",
    "check_records",
    "check_trace",
    "diff_records",
    "diff_traces",
    "expand",
    "export_parquet",
]

Progress = Callable[[Path, int], None]
Traces = str | os.PathLike[str] | Sequence[str | os.PathLike[str]]
_GLOB = frozenset("*?[")


def expand(traces: Traces) -> list[Path]:
    """The files of ``traces``: paths as given, glob patterns expanded (sorted).

    Raises ``TraceError`` for a pattern that matches no file.
    """
    items = [traces] if isinstance(traces, str | os.PathLike) else list(traces)
    files: list[Path] = []
    for item in items:
        text = os.fspath(item)
        if _GLOB & set(text) and not Path(text).exists():
            found = sorted(glob.glob(text, recursive=True))  # noqa: PTH207 - absolute too
            matched = [Path(f) for f in found if Path(f).is_file()]
            if not matched:
                raise TraceError("no file matches this pattern", path=text)
            files += matched
        else:
            files.append(Path(text))
    if not files:
        raise TraceError("no trace file given", path="")
    return files


def diff_traces(
    a: Traces,
    b: Traces | None = None,
    *,
    runs: tuple[str, str] | None = None,
    config: AnalysisConfig | None = None,
    fmt: str | TraceFormat = TraceFormat.AUTO,
    skip_bad_lines: bool = False,
    progress: Progress | None = None,
) -> Report:
    """Compare two runs without executing anything and return the classified findings.

    With ``b``, every run of ``a`` is the baseline side and every run of ``b`` the candidate
    side; the runs aligned for the first divergence are ``runs`` (else the first run of each
    side). Without ``b``, ``runs=(RUN_A, RUN_B)`` picks the two runs compared among all the
    runs of ``a`` (else its first two runs) and other runs are left out. ``a`` and ``b`` are
    each a file, a glob pattern or a list of them.

    Raises ``TraceError`` (file, line, field) for bad input, and for a run that is not there.
    """
    config = config or AnalysisConfig()
    kind = TraceFormat.parse(fmt)
    files_a = expand(a)
    files_b = expand(b) if b is not None else []
    inputs = [Input(p, SIDE_A, kind) for p in files_a] + [Input(p, SIDE_B, kind) for p in files_b]
    with Calls(config, skip_bad_lines, progress) as calls:
        load(calls, inputs)
        return _diff(calls, runs, files_a, files_b)


def diff_records(
    a: Iterable[Record] | RecordTexts,
    b: Iterable[Record] | RecordTexts,
    *,
    names: tuple[str, str] = ("A", "B"),
    runs: tuple[str, str] | None = None,
    config: AnalysisConfig | None = None,
    workspace: Workspace | None = None,
    endings: Mapping[str, str] | None = None,
) -> Report:
    """``diff_traces`` of two record streams (request bodies read with ``read_records``, or a
    store's runs as ``RecordTexts``, which DuckDB reads without decoding each record in
    Python) instead of files: the same detectors, the same report. ``names`` name the two
    sides in errors and in ``report.inputs``. A ``workspace`` runs the analysis in a
    database kept open for many (a server's). ``endings``: how runs ended, by run id, where
    the records do not say (a store keeps it beside them)."""
    config = config or AnalysisConfig()
    with Calls(config, workspace=workspace) as calls:
        load_records(calls, a, names[0], SIDE_A)
        load_records(calls, b, names[1], SIDE_B)
        calls.endings.update(endings or {})
        return _diff(calls, runs, [Path(names[0])], [Path(names[1])])


def _diff(
    calls: Calls, runs: tuple[str, str] | None, files_a: list[Path], files_b: list[Path]
) -> Report:
    if files_b:
        side_of = f"CASE WHEN file < {len(files_a)} THEN {SIDE_A} ELSE {SIDE_B} END"
    else:
        side_of = _pick(runs or [r for (r,) in calls.rows(_FIRST_RUNS)])
    # The first run of each side (one pass; the runs are listed only for an error).
    firsts: dict[int, str] = dict(calls.rows(_FIRSTS.format(side=side_of)))
    _missing_runs(calls, side_of, firsts, runs, files_a=files_a, files_b=files_b)
    baseline, candidate = runs or (firsts.get(SIDE_A), firsts.get(SIDE_B))
    ctx = Context(calls, calls.config, compare=True, baseline=baseline, candidate=candidate)
    return _analyze(ctx, side_of, [*files_a, *files_b])


_FIRST_RUNS = f"SELECT run FROM calls0 GROUP BY run ORDER BY min({ORD}) LIMIT 2"
_FIRSTS = f"""
    SELECT side, arg_min(run, ord) FROM (SELECT run, {{side}} AS side, {ORD} AS ord
                                         FROM calls0)
    WHERE side > 0 GROUP BY side
"""
# Each run's sides (a bit each) in the order of first appearance, for what an error lists.
_SEEN = f"""
    SELECT run, bit_or(side) AS sides FROM (SELECT run, {{side}} AS side, {ORD} AS ord
                                            FROM calls0 {{where}})
    GROUP BY run ORDER BY min(ord)
"""


def _pick(pair: Sequence[str]) -> str:
    """The side of a run of one pool: the first of ``pair`` is the baseline, the second the
    candidate, every other run is left out."""
    quoted = [_quote(r) for r in pair]
    whens = "".join(
        f" WHEN {q} THEN {side}" for q, side in zip(quoted, (SIDE_A, SIDE_B), strict=False)
    )
    return f"CASE run{whens} ELSE 0 END" if whens else "0"


def _quote(text: str) -> str:
    return f"'{text.replace(chr(39), chr(39) * 2)}'"


def _missing_runs(
    calls: Calls,
    side_of: str,
    firsts: dict[int, str],
    runs: tuple[str, str] | None,
    *,
    files_a: list[Path],
    files_b: list[Path],
) -> None:
    """Raise ``TraceError`` for a named run that is not there, or a side with no calls."""

    def listing(side: int | None) -> str:
        rows = calls.rows(
            f"SELECT run FROM ({_SEEN.format(side=side_of, where='')}) "
            f"WHERE {'true' if side is None else f'sides & {side} > 0'} LIMIT 11"
        )
        names = [r for (r,) in rows]
        return ", ".join(names[:10]) + (" ..." if len(names) > 10 else "") or "none"

    pool = not files_b
    if runs:
        named = f"WHERE run IN ({', '.join(map(_quote, runs))})"
        seen = dict(calls.rows(_SEEN.format(side=side_of, where=named)))
        for i, name in enumerate(runs):
            side = SIDE_A if i == 0 else SIDE_B
            if not seen.get(name, 0) & side:
                raise TraceError(
                    f"run {name!r} is not in this trace; runs found: "
                    f"{listing(None if pool else side)}",
                    path=files_a[0] if pool or i == 0 else files_b[0],
                    field="run_id",
                )
    elif pool and len(firsts) < 2:
        (found,) = calls.one("SELECT count(DISTINCT run) FROM calls0")
        raise TraceError(
            f"a single file needs two runs to diff, found {found} ({listing(None)}); "
            "pass a second file: tracetape diff A B",
            path=files_a[0],
        )
    if not pool:
        for files, side in ((files_a, SIDE_A), (files_b, SIDE_B)):
            if side not in firsts:
                raise TraceError("the trace holds no calls to compare", path=files[0])


def check_trace(
    path: Traces,
    *,
    config: AnalysisConfig | None = None,
    fmt: str | TraceFormat = TraceFormat.AUTO,
    skip_bad_lines: bool = False,
    progress: Progress | None = None,
) -> Report:
    """Analyze every run of a trace (a file, a glob pattern or a list of them) for repeats,
    drift, fanout and budget breaks.

    ``report.broken_invariants`` lists the broken invariants (``fanout`` and the
    ``*-budget`` patterns), which is what makes ``tracetape check`` exit 1. A run spread over
    several files is one run.
    """
    config = config or AnalysisConfig()
    kind = TraceFormat.parse(fmt)
    files = expand(path)
    with Calls(config, skip_bad_lines, progress) as calls:
        load(calls, [Input(p, SIDE_A, kind) for p in files])
        (n,) = calls.one("SELECT count(*) FROM calls0")
        if not n:
            raise TraceError("the trace holds no calls to check", path=files[0])
        return _analyze(Context(calls, config, compare=False), str(SIDE_A), files)


def check_records(
    records: Iterable[Record] | RecordTexts,
    *,
    name: str = "records",
    config: AnalysisConfig | None = None,
    workspace: Workspace | None = None,
) -> Report:
    """``check_trace`` of a record stream (a store's run) instead of files: the same
    detectors, the same report; ``name`` names it in errors and in ``report.inputs``
    (``workspace``: see ``diff_records``)."""
    config = config or AnalysisConfig()
    with Calls(config, workspace=workspace) as calls:
        load_records(calls, records, name, SIDE_A)
        (n,) = calls.one("SELECT count(*) FROM calls0")
        if not n:
            raise TraceError("the trace holds no calls to check", path=name)
        return _analyze(Context(calls, config, compare=False), str(SIDE_A), [Path(name)])


def _analyze(ctx: Context, side_of: str, files: list[Path]) -> Report:
    calls = ctx.calls
    sign(calls, side_of)
    calls.prepare(side_of)
    detect(ctx)
    leads = leading()
    findings = [f for kept in ctx.examples.values() for f in kept]
    findings.sort(key=lambda f: (-f.severity.rank, f.pattern not in leads, f.pattern))
    stats = {
        side: {"run": run, "calls": n, "steps": steps, "max_step": top, "tokens": tokens}
        for side, run, n, steps, top, tokens in calls.rows(
            "SELECT side, run, calls, steps, max_step, tokens FROM runs "
            "WHERE (side = 1 AND run = $1) OR (side = 2 AND run = $2)",
            [ctx.baseline, ctx.candidate],
        )
    }
    (nruns,) = calls.one("SELECT count(*) FROM runs")
    (signatures,) = calls.one("SELECT count(*) FROM sigs")
    skipped, examples = calls.skipped
    limits = ctx.config.limits
    compare = ctx.compare
    return Report(
        inputs=[str(f) for f in files],
        findings=findings,
        counts=dict(sorted(ctx.counts.items())),
        runs=nruns,
        events=calls.events,
        baseline=stats.get(SIDE_A) or ({"run": ctx.baseline} if compare else None),
        candidate=stats.get(SIDE_B) or ({"run": ctx.candidate} if compare else None),
        divergence=ctx.divergence,
        roots=ctx.roots,
        outcome=ctx.outcome,
        aligned=ctx.aligned,
        replay=ctx.replay,
        skipped=skipped,
        skipped_examples=examples,
        limits={k: getattr(limits, k) for k in limits.__dataclass_fields__},
        signatures=signatures,
    )


def export_parquet(
    traces: Traces,
    output: str | os.PathLike[str],
    *,
    fmt: str | TraceFormat = TraceFormat.AUTO,
    skip_bad_lines: bool = False,
    progress: Progress | None = None,
) -> int:
    """Write the calls of ``traces`` (files, glob patterns, any format) to one Parquet file
    that ``diff_traces`` and ``check_trace`` read back faster than the traces; return the
    number of calls written. Columns: ``seq, line, run, step, kind, name, args`` (JSON
    text), ``out`` (the output's fingerprint), ``effect, tokens``."""
    kind = TraceFormat.parse(fmt)
    files = expand(traces)
    with Calls(AnalysisConfig(), skip_bad_lines, progress) as calls:
        load(calls, [Input(p, SIDE_A, kind) for p in files])
        return write_parquet(calls, Path(output))
