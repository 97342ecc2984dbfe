"""The collector's analyses as jobs for its worker processes (``workers``): the data in, the
answer out.

Each job takes what the route (or the background worker) read from the database, the runs'
stored texts, and returns what the collector sends or stores: a diff's or a check's JSON
text (exactly ``tracetape diff --format json`` / ``check``'s), a page's HTML, a diff page
gzipped, a run's summary with its verdict. A job reads no database and keeps nothing but one
DuckDB workspace per process (opened by its first analysis): a worker needs no connection of
its own, whatever the store, and handing it the texts costs a copy through a pipe of what
the route reads anyway (the kept analyses are keyed by them: ``memo``).

A job's configuration crosses to the worker whole (pickled), with one care: a rule of the
table that no ``[tool.tracetape.severity]`` overrode arrives as the table's own object
(``rules.divergence_severity`` tells an overridden rule by identity, and a copy would read
as one), so a worker's answer is the one the server's process would give.

``perform`` runs a job in a worker and turns what it raises into ``Failed`` (a plain,
picklable error naming the original's type; ``tape`` when it was a ``TapeError``, which the
diff routes answer with a 400), so an error that cannot cross a process boundary never
breaks the pool. ``started`` prepares each worker process: it ignores Ctrl-C (the server
stops it), closes its workspace when stopped, and exits when the server is gone, however
it went.

>>> import msgspec
>>> from tracetape.record import Record, RecordTexts
>>> texts = RecordTexts([msgspec.json.encode(Record(kind="tool", name="ls", step=1))])
>>> '"findings": []' in perform(check, texts, "r1", AnalysisConfig())
True
"""

from __future__ import annotations

import gzip
import json
import os
import signal
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import fields, replace
from multiprocessing.connection import Connection
from multiprocessing.reduction import ForkingPickler
from typing import Any, NamedTuple, ParamSpec, TypeVar

from ..analysis import AnalysisConfig, check_records, diff_records
from ..analysis.engine import Workspace
from ..analysis.render import verdict_text
from ..analysis.report import redacted
from ..analysis.rules import RULES, Rule
from ..errors import TapeError
from ..record import RecordTexts
from . import pages
from .summaries import summarize

__all__ = [
    "Failed",
    "Summary",
    "check",
    "diff",
    "diff_page",
    "json_text",
    "many",
    "perform",
    "run_page",
    "started",
    "summary",
    "zipped",
]

P = ParamSpec("P")
T = TypeVar("T")

# How long a stopped worker busy in DuckDB gets to reach Python and close its workspace.
_STOP_S = 2.0
# How much a worker's priority is lowered (``os.nice``).
_NICE = 10

_spaces: dict[str, Workspace] = {}  # this process's, by memory limit
_spaces_lock = threading.Lock()


def _table_rule(pattern: str) -> Rule:
    return RULES[pattern]


def _rule_sent(rule: Rule) -> tuple[Callable[..., Rule], tuple[Any, ...]]:
    """How a rule crosses to a worker: the table's own as its pattern (see the module
    docstring), an overridden one as its fields."""
    if RULES.get(rule.pattern) is rule:
        return _table_rule, (rule.pattern,)
    return Rule, tuple(getattr(rule, f.name) for f in fields(rule))


# what multiprocessing pickles, only: a job's arguments on their way to a worker
ForkingPickler.register(Rule, _rule_sent)


class Failed(Exception):
    """Raised (by ``perform``) when a job failed: ``name`` is the type of what it raised,
    ``tape`` whether that was a ``TapeError`` (a run the analysis cannot read)."""

    def __init__(self, name: str, message: str, tape: bool):
        super().__init__(name, message, tape)
        self.name, self.message, self.tape = name, message, tape

    def __str__(self) -> str:
        return self.message


def perform(job: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """``job(*args, **kwargs)``, what it raised turned into ``Failed``."""
    try:
        return job(*args, **kwargs)
    except Exception as exc:
        raise Failed(type(exc).__name__, str(exc), isinstance(exc, TapeError)) from None


def started(server: Connection) -> None:
    """Prepare a worker process: it yields the CPU to the server (a lower priority: on a
    busy machine the event loop, which answers every request and ``/healthz``, comes before
    an analysis); Ctrl-C is the server's to handle (it stops its workers); a stop (SIGTERM)
    closes the workspace, removing its files, and exits; and the worker stops
    itself once the server is gone, however it went: ``server`` is the end of a pipe whose
    other end only the server holds, so reading it ends when the server does (its parent
    is the fork server, which outlives the server while a worker holds it open)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _stop)
    with suppress(AttributeError, OSError):  # where the system lets it
        os.nice(_NICE)

    def watch() -> None:
        with suppress(EOFError, OSError):
            server.recv_bytes()  # nothing is ever sent: this returns when the server ends
        os.kill(os.getpid(), signal.SIGTERM)  # runs ``_stop`` on the main thread
        time.sleep(_STOP_S)  # busy in DuckDB: ``_stop`` runs when the query returns
        os._exit(0)

    threading.Thread(target=watch, name="tracetape-server-watch", daemon=True).start()


def _stop(signum: int, frame: object) -> None:
    for space in _spaces.values():
        space.close()
    os._exit(0)


def workspace(config: AnalysisConfig) -> Workspace:
    """This process's DuckDB workspace, opened by its first analysis."""
    with _spaces_lock:
        space = _spaces.get(config.memory_limit)
        if space is None:
            space = _spaces[config.memory_limit] = Workspace(config.memory_limit)
        return space


def many(config: AnalysisConfig) -> AnalysisConfig:
    """The configuration with room for every finding a page shows."""
    return replace(config, max_examples=10_000)


def json_text(data: Any) -> str:
    """``data`` as the API's JSON text."""
    return json.dumps(data, ensure_ascii=False, default=str)


def zipped(html: str) -> bytes:
    """A page gzipped, as a kept page is stored and sent (the same bytes for the same page:
    no time in the header)."""
    return gzip.compress(html.encode(), 5, mtime=0)


# -- the jobs -------------------------------------------------------------------------------


def check(texts: RecordTexts, run: str, config: AnalysisConfig) -> str:
    """``tracetape check --format json`` of a stored run."""
    report = check_records(texts, name=run, config=config, workspace=workspace(config))
    return json_text(redacted(report.to_dict()))


def diff(
    ra: RecordTexts,
    rb: RecordTexts,
    names: tuple[str, str],
    ended: dict[str, str],
    config: AnalysisConfig,
) -> str:
    """``tracetape diff --format json`` of two stored runs (DuckDB reads the texts in bulk)."""
    report = diff_records(
        ra, rb, names=names, config=config, workspace=workspace(config), endings=ended
    )
    return json_text(redacted(report.to_dict()))


def diff_page(
    runs: tuple[str, str],
    ta: RecordTexts,
    tb: RecordTexts,
    ended: dict[str, str],
    config: AnalysisConfig,
) -> bytes:
    """The diff page of two stored runs, gzipped (as it is kept and sent)."""
    a, b = runs
    ra, rb = ta.records(), tb.records()
    report = diff_records(
        ra, rb, names=(a, b), config=many(config), workspace=workspace(config), endings=ended
    )
    return zipped(pages.diff_page(a, b, ra, rb, report))


def run_page(run: str, summary: dict[str, Any], texts: RecordTexts) -> str:
    """One run's page."""
    return pages.run_page(run, summary, texts.records())


class Summary(NamedTuple):
    """A run's summary (``summaries.summarize``), and its verdict against the run before it
    and that diff's page (gzipped) where they were asked for and the analysis could read
    both."""

    summary: dict[str, Any]
    verdict: str | None = None
    page: bytes | None = None


def summary(
    run: str,
    texts: RecordTexts,
    config: AnalysisConfig,
    before: tuple[str, RecordTexts] | None = None,
    ended: dict[str, str] | None = None,
) -> Summary:
    """``run``'s summary and, with ``before`` (the run of its source before it and its
    texts), its verdict against that run and their diff page. A pair the analysis cannot
    read has no verdict: its lines are stored, and its diff page says why."""
    verdict = page = None
    if before is not None:
        name, tb = before
        ra, rb = tb.records(), texts.records()
        try:
            report = diff_records(
                ra, rb, names=(name, run), config=many(config), workspace=workspace(config),
                endings=ended,
            )  # fmt: skip
        except Exception:  # the verdict is a convenience; the lines are stored
            pass
        else:
            verdict = verdict_text(report)
            page = zipped(pages.diff_page(name, run, ra, rb, report))
    found = summarize(texts, run, config=many(config), workspace=workspace(config))
    return Summary(found, verdict, page)
