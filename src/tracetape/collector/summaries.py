"""Each run's numbers and findings, computed when its lines are stored, so the run list
never analyses on view.

``summarize`` reads one run as the pages do (``views.read_steps``) and checks it
(``check_records``): its latency, tokens (in and out where the answers said them; in all, a
seed trace's ``tokens`` included), cost (and the model calls it could not price), findings
by severity, its final answer (redacted, short), the tools and models it called, and its own
time (its records' ``ts``). ``Summaries`` is the one background worker that computes them
after each stored batch, a run at a time, in the order queued; a run whose lines keep coming
is computed once per pass, not once per batch. After a batch that ended a recording, the
worker also computes the run's verdict against the run of its source before it and draws
that diff's page (the collector's ``app`` says how), before the summary. The database keeps
a summary only while the run holds the events it read (``Database.set_summary``): a batch
stored meanwhile queues the run again. A page that lists runs whose summary is not there yet
waits for them once (``Summaries.wait_once``), at most ``WAIT_S`` seconds; later pages show
them pending.
"""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable, Iterable
from decimal import Decimal
from typing import Any

from ..analysis import AnalysisConfig, check_records
from ..analysis.engine import Workspace
from ..analysis.report import redacted
from ..record import INT64_MAX, Record, RecordTexts
from ..views import final_answer, read_steps

__all__ = ["RANK", "WAIT_S", "Summaries", "summarize"]

# A finding's severity as the ``worst`` column ranks it (0: no finding).
RANK = {"fatal": 3, "suspicious": 2, "expected": 1}
WAIT_S = 10.0
_FINAL_CHARS = 300  # of a run's final answer kept for its row
_NAMES_CHARS = 64 << 10  # of the names a run called, kept for the text filter


def _moment(ts: str | None) -> float | None:
    if not ts:
        return None
    try:
        when = dt.datetime.fromisoformat(ts)
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return when.timestamp()


def _tokens(rec: Record) -> int:
    usage = rec.usage or {}
    if usage:
        return int(usage.get("input") or 0) + int(usage.get("output") or 0)
    return rec.tokens or 0


def summarize(
    texts: RecordTexts,
    run: str,
    *,
    config: AnalysisConfig | None = None,
    workspace: Workspace | None = None,
) -> dict[str, Any]:
    """One run's summary (see the module docstring): a JSON-ready object whose ``began``,
    ``finished``, ``latency_ms``, ``cost``, ``worst`` and ``names`` the database keeps as
    columns too.

    >>> import msgspec
    >>> from tracetape.record import Record, RecordTexts
    >>> rec = Record(kind="tool", name="ls", tokens=812, ms=5.0, ts="2026-08-31T09:12:04Z")
    >>> s = summarize(RecordTexts([msgspec.json.encode(rec)]), "r1")
    >>> s["tokens"], s["models"], s["latency_ms"], s["names"], s["findings"]
    (812, 0, 5.0, 'ls', {})
    """
    records = texts.records()
    views = read_steps(records)
    models = [v for v in views if v.kind == "llm"]
    priced = [v.cost for v in models if v.cost is not None]
    said = [v for v in models if v.tokens is not None]
    moments = [m for m in (_moment(rec.ts) for rec in records) if m is not None]
    findings: dict[str, int] = {}
    problem = None
    try:
        report = check_records(texts, name=run, config=config, workspace=workspace)
    except Exception as exc:  # the summary is a convenience: the lines are stored
        problem = f"the check failed: {type(exc).__name__}: {exc}"
    else:
        for f in report.findings:
            findings[f.severity.value] = findings.get(f.severity.value, 0) + 1
    total = sum(_tokens(rec) for rec in records)
    names = "\n".join(sorted({v.name for v in views if v.name}))
    cost = sum(priced, Decimal(0)) if priced else None
    return {
        "latency_ms": sum(v.ms or 0.0 for v in views),
        "tokens_in": sum(v.tokens_in or 0 for v in said) if said else None,
        "tokens_out": sum(v.tokens_out or 0 for v in said) if said else None,
        "tokens": min(total, INT64_MAX),
        "models": len(models),
        "unpriced": len(models) - len(priced),
        "cost": float(cost) if cost is not None else None,
        "cost_text": None if cost is None else str(cost),
        "findings": findings,
        "worst": max((RANK.get(s, 0) for s in findings), default=0),
        "final": _cut(redacted(final_answer(views))),
        "names": names[:_NAMES_CHARS],
        "began": min(moments) if moments else None,
        "finished": max(moments) if moments else None,
        **({"problem": problem} if problem else {}),
    }


def _cut(text: str | None) -> str | None:
    if text is None or len(text) <= _FINAL_CHARS:
        return text
    return text[: _FINAL_CHARS - 1] + "…"


class Summaries:
    """The background worker (see the module docstring): ``add`` queues runs, ``wait``
    waits until given runs are done; ``compute(run, diff)`` does one (and stores it), with
    ``diff`` when a batch that ended the run's recording asked for its diff too."""

    def __init__(self, compute: Callable[[str, bool], None]):
        self._compute = compute
        self._pending: dict[str, bool] = {}  # in order, without repeats: run -> diff
        self._busy: str | None = None
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._waited: set[str] = set()  # queued runs a page has waited for already

    def add(self, runs: Iterable[str], *, diff: bool = False) -> None:
        """Queue ``runs`` (again: their lines changed), with ``diff`` when their recordings
        ended, and start the worker if idle."""
        with self._cond:
            for run in runs:
                self._pending[run] = self._pending.get(run, False) or diff
                self._waited.discard(run)
            if self._pending and self._thread is None and not self._closed:
                self._thread = threading.Thread(
                    target=self._work, name="tracetape-summaries", daemon=True
                )
                self._thread.start()

    def wait(self, runs: Iterable[str], timeout: float = WAIT_S) -> bool:
        """Wait until none of ``runs`` is queued or being computed (at most ``timeout``
        seconds); whether they are done."""
        wanted = set(runs)

        def done() -> bool:
            return not (wanted & self._pending.keys()) and self._busy not in wanted

        with self._cond:
            return self._cond.wait_for(done, timeout)

    def queued(self, run: str) -> bool:
        """Whether ``run`` is queued or being computed."""
        with self._cond:
            return run in self._pending or run == self._busy

    def wait_once(self, runs: Iterable[str], timeout: float = WAIT_S) -> bool:
        """``wait`` for the runs no page has waited for since they were queued: a page
        waits for a run's summary once, and later pages show it pending instead of waiting
        again (a run that takes long to compute stalls one view, not every one)."""
        with self._cond:
            fresh = set(runs) - self._waited
            self._waited |= fresh
        return self.wait(fresh, timeout) if fresh else False

    def close(self) -> None:
        """Stop after the run being computed; forget the queue."""
        with self._cond:
            self._closed = True
            self._pending.clear()
            self._cond.notify_all()

    def _work(self) -> None:
        while True:
            with self._cond:
                if not self._pending or self._closed:
                    self._thread = None
                    self._cond.notify_all()
                    return
                run = next(iter(self._pending))
                diff = self._pending.pop(run)
                self._busy = run
            try:
                self._compute(run, diff)
            except Exception:
                pass
            finally:
                with self._cond:
                    self._busy = None
                    self._cond.notify_all()
