"""The collector's own work, below its routes: storing a batch, each run's summary, verdict
and kept diff page, and the resources every route shares.

``Collector`` is made once per app (``create_app``) and handed to each route by a FastAPI
dependency (``deps.collector``): the database, the settings, one DuckDB workspace for every
analysis of the process (opened by the first), the slots that bound analyses at once
(``max_analyses``), the kept analyses (``memo``) and the background worker (``summaries``).
"""

from __future__ import annotations

import gzip
import hashlib
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from .._version import __version__
from ..analysis import AnalysisConfig, diff_records
from ..analysis.engine import Workspace
from ..analysis.render import verdict_text
from ..config import load_config
from ..record import RecordTexts
from ..redact import Redactor, RedactRules
from ..stores.database import Database, RunConflict
from . import pages
from .ingest import BadBatch, Batch, Registry, parse_batch, redact_stored
from .memo import Analyses
from .summaries import Summaries, summarize

__all__ = ["MAX_BODY", "MAX_LINES", "Collector", "Settings", "many"]

MAX_BODY = 16 << 20
MAX_LINES = 10_000


@dataclass
class Settings:
    """The collector's settings: the bearer ``token`` (none: no auth, loopback only), body
    and line limits, the address it listens on (``bind``) and the other host names it
    answers to (``allowed_hosts``), how many analyses (diffs, checks, pages) run at once
    (``max_analyses``: past it, a 503 with ``Retry-After``), and the analysis configuration."""

    token: str | None = None
    max_body: int = MAX_BODY
    max_lines: int = MAX_LINES
    bind: str | None = "127.0.0.1"
    allowed_hosts: tuple[str, ...] = ()
    max_analyses: int = field(default_factory=lambda: max(2, os.cpu_count() or 2))
    config: AnalysisConfig = field(default_factory=AnalysisConfig.load)
    redactor: Redactor = field(
        default_factory=lambda: Redactor(RedactRules.coerce(load_config("redact") or None))
    )
    registry: Registry = field(default_factory=Registry)


def many(config: AnalysisConfig) -> AnalysisConfig:
    """The configuration with room for every finding a page shows."""
    return replace(config, max_examples=10_000)


class Collector:
    """What every route of one app shares (see the module docstring)."""

    def __init__(self, db: Database, settings: Settings):
        self.db, self.settings = db, settings
        self.analyses = Analyses()  # the last reports, by the texts they read (``memo``)
        self.slots = threading.BoundedSemaphore(settings.max_analyses)
        # Health has threads of its own: it answers while every other thread analyses.
        self.health_pool = ThreadPoolExecutor(2, thread_name_prefix="tracetape-health")
        self._space: Workspace | None = None
        self._lock = threading.Lock()
        # what a kept diff page depends on besides its runs: this collector's code and
        # settings, and the project's redaction rules
        said = f"{__version__}\n{settings.config!r}\n{load_config('redact')!r}\n{pages.CSP}"
        self._made_by = hashlib.sha256(said.encode()).hexdigest()
        self.summaries = Summaries(self.summarized)
        self.summaries.add(db.unsummarized())  # runs stored before, or by a collector stopped

    def workspace(self) -> Workspace:
        """The one DuckDB database of this process's analyses, opened by the first."""
        with self._lock:
            if self._space is None:
                self._space = Workspace(self.settings.config.memory_limit)
            return self._space

    def close(self) -> None:
        """Stop the worker and the health threads; close the workspace."""
        self.summaries.close()
        self.health_pool.shutdown(wait=False)
        with self._lock:
            if self._space is not None:
                self._space.close()

    # -- storing --------------------------------------------------------------------------

    def store(  # noqa: PLR0917 - the batch's query parameters
        self,
        body: bytes,
        source: str,
        offset: int,
        fmt: str,
        run: str | None = None,
        append: bool = False,
    ) -> dict[str, Any]:
        """Parse and store one batch atomically (``ingest``), redact what it taught in what
        its runs stored before, and queue its runs' summaries (and, where it ended a
        recording, the verdict); the route's answer."""
        conf, db = self.settings, self.db
        batch = parse_batch(
            body,
            source=source,
            offset=offset,
            fmt=fmt,
            redactor=conf.redactor,
            max_lines=conf.max_lines,
            run=run,
            registry=conf.registry,
        )
        try:
            stored = db.store(
                batch.records,
                digest=batch.digest,
                lines=batch.lines,
                keys=batch.keys,
                source=source,
                append=append,
                ended=batch.ended,
            )
        except RunConflict as exc:
            raise BadBatch(409, str(exc)) from None
        if batch.learned:
            self._learned(batch)
        if stored.events or batch.learned:
            db.clear_verdicts(stored.runs)
            db.forget_pages(stored.runs)
            # a recording's last lines: its verdict against the run of its source before it
            self.summaries.add(stored.runs, diff=batch.ended is not None and bool(stored.events))
        return {
            "stored": stored.events,
            "known": stored.known,
            "duplicate": stored.duplicate,
            "runs": stored.runs,
            "redacted": batch.redacted,
            "batch": stored.digest,
        }

    def _learned(self, batch: Batch) -> None:
        """Remember what the batch taught for its runs, and redact it in what they stored
        before (a secret quoted before the line that named it)."""
        conf = self.settings
        for name in batch.runs:
            conf.registry.add(name, batch.learned)
            redactor = conf.redactor.fresh(conf.registry.known(name))
            self.db.rewrite(name, partial(redact_stored, redactor=redactor), list(batch.learned))

    # -- the background worker's job ---------------------------------------------------------

    def summarized(self, run: str, diff: bool) -> None:
        """Compute and keep one run's summary (``summaries``: the run list reads it) and,
        with ``diff`` (its recording's last lines were stored), its verdict against the run
        of its source before it and that diff's page. The summary is stored last: a page
        that sees it finds the rest done."""
        db = self.db
        texts = db.record_texts(run)
        if not texts.texts:
            return
        if diff:
            before = db.previous([run]).get(run)
            if before is not None:
                self._verdict(before, run, texts)
        config = many(self.settings.config)
        found = summarize(texts, run, config=config, workspace=self.workspace())
        db.set_summary(run, found, len(texts.texts))

    def _verdict(self, before: str, run: str, texts: RecordTexts) -> None:
        """Keep ``run``'s verdict against ``before`` and their diff page (the run list shows
        the one and links the other, and neither is analysed on view). A pair the analysis
        cannot read keeps none: its lines are stored, and its diff page says why."""
        db = self.db
        ended = db.endings((before, run))
        ta = db.record_texts(before)
        ra, rb = ta.records(), texts.records()
        try:
            report = diff_records(
                ra, rb, names=(before, run), config=many(self.settings.config),
                workspace=self.workspace(), endings=ended,
            )  # fmt: skip
        except Exception:  # the verdict is a convenience; the lines are stored
            return
        read = (len(ta.texts), len(texts.texts))
        if db.set_verdict(run, before, verdict_text(report), read):
            html = pages.diff_page(before, run, ra, rb, report)
            self.keep_page((before, run), read, ended, html)

    # -- kept diff pages ----------------------------------------------------------------------

    def page_key(
        self, runs: tuple[str, str], events: tuple[int, int], ended: dict[str, str]
    ) -> str:
        """The key of a diff page of ``runs``: what it read (``events`` of each, how each
        ended) and what drew it."""
        said = [self._made_by, *runs, *map(str, events), *(ended.get(r, "") for r in runs)]
        return hashlib.sha256("\x00".join(said).encode()).hexdigest()

    def keep_page(
        self, runs: tuple[str, str], events: tuple[int, int], ended: dict[str, str], html: str
    ) -> None:
        """Keep a diff page drawn from ``events`` of each run (gzipped, in the database)."""
        key = self.page_key(runs, events, ended)
        self.db.keep_page(key, runs, gzip.compress(html.encode(), 5))
