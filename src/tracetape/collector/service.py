"""The collector's own work, below its routes: storing a batch, each run's summary, verdict
and kept diff page, and the resources every route shares.

``Collector`` is made once per app (``create_app``) and handed to each route by a FastAPI
dependency (``deps.collector``): the database, the settings, the worker processes that run
every analysis and the gate that admits them (``workers``: ``max_analyses`` at once,
``analysis_queue`` waiting at most ``analysis_wait`` seconds), the kept analyses (``memo``)
and the background worker (``summaries``), whose runs are analysed in the workers too.
"""

from __future__ import annotations

import hashlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from .._version import __version__
from ..analysis import AnalysisConfig
from ..config import load_config
from ..redact import Redactor, RedactRules
from ..stores.database import Database, RunConflict
from . import jobs, pages
from .ingest import BadBatch, Batch, Registry, parse_batch, redact_stored
from .memo import Analyses
from .summaries import Summaries
from .workers import Gate, Workers, default_size

__all__ = ["ANALYSIS_WAIT_S", "MAX_BODY", "MAX_LINES", "Collector", "Settings"]

MAX_BODY = 16 << 20
MAX_LINES = 10_000
ANALYSIS_WAIT_S = 10.0


@dataclass
class Settings:
    """The collector's settings: the bearer ``token`` (none: no auth, loopback only), body
    and line limits, the address it listens on (``bind``) and the other host names it
    answers to (``allowed_hosts``), how many analyses (diffs, checks, pages) run at once, each
    in a worker process (``max_analyses``), how many requests may wait for one
    (``analysis_queue``; None: twice ``max_analyses``) and for how long (``analysis_wait``
    seconds; past either, a 503 with ``Retry-After``), and the analysis configuration."""

    token: str | None = None
    max_body: int = MAX_BODY
    max_lines: int = MAX_LINES
    bind: str | None = "127.0.0.1"
    allowed_hosts: tuple[str, ...] = ()
    max_analyses: int = field(default_factory=default_size)
    analysis_queue: int | None = None
    analysis_wait: float = ANALYSIS_WAIT_S
    config: AnalysisConfig = field(default_factory=AnalysisConfig.load)
    redactor: Redactor = field(
        default_factory=lambda: Redactor(RedactRules.coerce(load_config("redact") or None))
    )
    registry: Registry = field(default_factory=Registry)


class Collector:
    """What every route of one app shares (see the module docstring)."""

    def __init__(self, db: Database, settings: Settings):
        self.db, self.settings = db, settings
        self.analyses = Analyses()  # the last answers, by the texts they read (``memo``)
        queue = settings.analysis_queue
        self.gate = Gate(
            settings.max_analyses,
            2 * settings.max_analyses if queue is None else queue,
            settings.analysis_wait,
        )
        self.workers = Workers(settings.max_analyses)
        # Health has threads of its own: it answers while every other thread reads or stores.
        self.health_pool = ThreadPoolExecutor(2, thread_name_prefix="tracetape-health")
        # what a kept diff page depends on besides its runs: this collector's code and
        # settings, and the project's redaction rules
        said = f"{__version__}\n{settings.config!r}\n{load_config('redact')!r}\n{pages.CSP}"
        self._made_by = hashlib.sha256(said.encode()).hexdigest()
        self.summaries = Summaries(self.summarized)
        self.summaries.add(db.unsummarized())  # runs stored before, or by a collector stopped

    def close(self) -> None:
        """Stop the background worker, the worker processes and the health threads."""
        self.summaries.close()
        self.workers.close()
        self.health_pool.shutdown(wait=False)

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
        of its source before it and that diff's page (the run list shows the one and links
        the other, and neither is analysed on view), in a worker process
        (``jobs.summary``). The summary is stored last: a page that sees it finds the rest
        done."""
        db = self.db
        texts = db.record_texts(run)
        if not texts.texts:
            return
        before, ended = None, None
        if diff:
            name = db.previous([run]).get(run)
            if name is not None:
                before, ended = (name, db.record_texts(name)), db.endings((name, run))
        with self.gate.held():
            done = self.workers.call(jobs.summary, run, texts, self.settings.config, before, ended)
        if before is not None and done.verdict is not None and ended is not None:
            read = (len(before[1].texts), len(texts.texts))
            if db.set_verdict(run, before[0], done.verdict, read) and done.page is not None:
                self.keep_page((before[0], run), read, ended, done.page)
        db.set_summary(run, done.summary, len(texts.texts))

    # -- kept diff pages ----------------------------------------------------------------------

    def page_key(
        self, runs: tuple[str, str], events: tuple[int, int], ended: dict[str, str]
    ) -> str:
        """The key of a diff page of ``runs``: what it read (``events`` of each, how each
        ended) and what drew it."""
        said = [self._made_by, *runs, *map(str, events), *(ended.get(r, "") for r in runs)]
        return hashlib.sha256("\x00".join(said).encode()).hexdigest()

    def keep_page(
        self, runs: tuple[str, str], events: tuple[int, int], ended: dict[str, str], body: bytes
    ) -> None:
        """Keep a diff page drawn from ``events`` of each run (``body``: gzipped, as
        ``jobs.diff_page`` gives it) in the database."""
        self.db.keep_page(self.page_key(runs, events, ended), runs, body)
