"""Records in a database: SQLite (embedded, the default) or PostgreSQL, through SQLAlchemy Core.

The collector stores every trace line it receives as an *event* (the redacted
``Record`` as JSON; rewritten only to redact a secret its run named later) in ``events``,
keeps one summary row per run in ``runs`` (its source, first
and last time seen, events, steps, tokens, how it ended where a trailer or a commit said;
its numbers and findings once the collector's worker computed them: ``set_summary``) and
one row per
received batch in ``batches``, whose key is the digest of the batch's lines. A record comes
with its *line key* (a digest of its run and its place in it: see ``collector.ingest``),
unique, so a line sent again, in any batching, is recognised and not stored twice; a batch
sent twice (a client retry) is recognised by its digest at once. A batch is one transaction:
all its new lines or none. A run belongs to one source: lines of another source are refused
(``RunConflict``) unless the batch says it appends.

The schema is versioned with Alembic (``stores/migrations``); ``Database.open`` upgrades it
to the newest version before anything else runs, under a lock (PostgreSQL's advisory lock;
SQLite's write lock), so several collector processes may start at once against one database.

SQLite runs in WAL mode with a busy timeout, so readers never wait for the writer and
concurrent writers queue instead of failing. PostgreSQL (``postgresql+psycopg://...``) lets
several collector processes (``--workers N`` or several hosts) share one database: the
collector keeps no state of its own.

``DatabaseStore(db, run)`` is the tape's ``RecordStore`` over one run of a database.

SQLAlchemy and Alembic are the ``[server]`` extra, imported only here.

Why one module: it is the schema. The tables, the statements written in each driver's
parameter style, the queries over them and the store that writes them change together
whenever the schema does (a new column touches each of them, beside its migration).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from ..errors import CassetteNotFoundError, ConfigError, RunConflict
from ..formats.cassette import RUN_ID, Cassette
from ..record import INT64_MAX, Record, RecordTexts, decode_record

__all__ = [
    "DEFAULT_URL",
    "RUN_ID",
    "Database",
    "DatabaseStore",
    "RunConflict",
    "Stored",
    "batch_digest",
    "metadata",
]

DEFAULT_URL = "sqlite:///tracetape.db"

metadata = sa.MetaData()
_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

batches = sa.Table(
    "batches",
    metadata,
    sa.Column("digest", sa.String(64), primary_key=True),
    sa.Column("received", sa.Float, nullable=False),
    sa.Column("lines", sa.Integer, nullable=False),
)
runs = sa.Table(
    "runs",
    metadata,
    sa.Column("run_id", sa.String(200), primary_key=True),
    sa.Column("source", sa.Text, nullable=True),
    sa.Column("first_seen", sa.Float, nullable=False),
    sa.Column("last_seen", sa.Float, nullable=False),
    sa.Column("events", sa.BigInteger, nullable=False),
    sa.Column("steps", sa.BigInteger, nullable=False),
    sa.Column("tokens", sa.BigInteger, nullable=False),
    # how the recording ended, where a trailer or a commit said (``migrations`` 0003)
    sa.Column("ended", sa.String(140), nullable=True),
    # its verdict against the run of its source before it (``verdict_of``), once computed
    sa.Column("verdict", sa.Text, nullable=True),
    sa.Column("verdict_of", sa.String(200), nullable=True),
    # its numbers and findings, computed from ``summary_of`` events after they were stored
    # (``migrations`` 0004: what each column holds)
    sa.Column("summary", sa.Text, nullable=True),
    sa.Column("summary_of", sa.BigInteger, nullable=True),
    sa.Column("began", sa.Float, nullable=True),
    sa.Column("finished", sa.Float, nullable=True),
    sa.Column("latency_ms", sa.Float, nullable=True),
    sa.Column("cost", sa.Float, nullable=True),
    sa.Column("worst", sa.Integer, nullable=True),
    sa.Column("names", sa.Text, nullable=True),
    sa.Index("runs_last_seen", "last_seen"),
)
# Diff pages kept whole, gzipped, by a key of what they read (``migrations`` 0004).
pages = sa.Table(
    "pages",
    metadata,
    sa.Column("key", sa.String(64), primary_key=True),
    sa.Column("run_a", sa.String(200), nullable=False),
    sa.Column("run_b", sa.String(200), nullable=False),
    sa.Column("made", sa.Float, nullable=False),
    sa.Column("body", sa.LargeBinary, nullable=False),
    sa.Index("pages_run_a", "run_a"),
    sa.Index("pages_run_b", "run_b"),
)
# The columns the run list sorts by, as the page names them.
SORTABLE = {
    "run": runs.c.run_id,
    "last_seen": runs.c.last_seen,
    "steps": runs.c.steps,
    "calls": runs.c.events,
    "tokens": runs.c.tokens,
    "latency": runs.c.latency_ms,
    "cost": runs.c.cost,
}
events = sa.Table(
    "events",
    metadata,
    sa.Column("id", _ID, primary_key=True, autoincrement=True),
    sa.Column("run_id", sa.String(200), nullable=False),
    sa.Column("received", sa.Float, nullable=False),
    sa.Column("kind", sa.String(32), nullable=False),
    sa.Column("name", sa.Text, nullable=True),
    sa.Column("step", sa.BigInteger, nullable=True),
    sa.Column("batch", sa.String(64), sa.ForeignKey("batches.digest"), nullable=True),
    sa.Column("record", sa.Text, nullable=False),
    sa.Column("line_key", sa.BigInteger, nullable=True),
    sa.Index("events_run", "run_id", "id"),
    sa.Index("events_name", "name", "run_id"),
    sa.Index("events_line", "line_key", unique=True),
)

_encode = msgspec.json.Encoder().encode


def batch_digest(lines: Iterable[bytes]) -> str:
    """The digest that names a batch: SHA-256 over its lines (each newline-terminated)."""
    h = hashlib.sha256()
    for line in lines:
        h.update(line.rstrip(b"\r\n"))
        h.update(b"\n")
    return h.hexdigest()


@dataclass(frozen=True)
class Stored:
    """What storing a batch did: ``events`` records stored, ``known`` records already stored
    before (a line sent again), the ``runs`` the batch touched, and whether the whole batch
    was a ``duplicate`` of one stored before."""

    events: int
    runs: list[str]
    duplicate: bool
    digest: str
    known: int = 0


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=FULL")  # a 2xx means the lines are on disk
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


class Database:
    """A tracetape database: schema, batch ingest and the collector's queries.

    >>> import tempfile, os
    >>> db = Database.open("sqlite:///" + os.path.join(tempfile.mkdtemp(), "t.db"))
    >>> rec = Record(kind="tool", run="r1", name="ls", step=1, out=["a"])
    >>> db.store([rec], digest="d1").events, db.store([rec], digest="d1").duplicate
    (1, True)
    >>> [r.name for r in db.records("r1")]
    ['ls']
    """

    def __init__(self, engine: Engine):
        self.engine = engine
        self.url = engine.url
        self._sql = _statements(engine.dialect.name, engine.dialect.paramstyle)

    @classmethod
    def open(cls, url: str = DEFAULT_URL, *, migrate: bool = True) -> Database:
        """Connect to ``url`` and upgrade its schema to the newest version.

        Raises ``ConfigError`` for a URL SQLAlchemy cannot use or a database it cannot reach.
        """
        try:
            parsed = sa.engine.make_url(url)
        except sa.exc.ArgumentError:
            raise ConfigError(
                f"{url!r} is not a database URL; use sqlite:///PATH or "
                "postgresql+psycopg://USER:PASSWORD@HOST/DB"
            ) from None
        backend = parsed.get_backend_name()
        if backend not in ("sqlite", "postgresql"):
            raise ConfigError(
                f"{parsed.render_as_string()}: tracetape stores in SQLite or PostgreSQL"
            )
        options: dict[str, Any] = {}
        if backend == "sqlite":
            path = parsed.database
            if path and path != ":memory:":
                Path(path).parent.mkdir(parents=True, exist_ok=True)
            options["connect_args"] = {"check_same_thread": False, "timeout": 30}
        else:
            options.update(pool_pre_ping=True, pool_size=8, max_overflow=8)
        try:
            engine = sa.create_engine(parsed, **options)
        except (sa.exc.ArgumentError, ImportError) as exc:
            raise ConfigError(f"{parsed.render_as_string()}: {exc}") from None
        if backend == "sqlite":
            sa.event.listen(engine, "connect", _sqlite_pragmas)
        db = cls(engine)
        if migrate:
            db.migrate()
        return db

    def migrate(self) -> None:
        """Upgrade the schema to the newest Alembic revision (creating it on first start)."""
        from .migrations import upgrade

        try:
            upgrade(self.engine)
        except sa.exc.OperationalError as exc:
            raise ConfigError(
                f"{self.url.render_as_string()}: cannot reach the database: {exc.orig}"
            ) from None

    def close(self) -> None:
        """Close every pooled connection."""
        self.engine.dispose()

    # -- writing ---------------------------------------------------------------------------

    def store(
        self,
        records: Sequence[Record],
        *,
        digest: str,
        lines: int | None = None,
        run: str | None = None,
        keys: Sequence[int | None] | None = None,
        source: str | None = None,
        append: bool = False,
        ended: str | None = None,
    ) -> Stored:
        """Store one batch atomically: every record not stored before, or none.

        A batch whose ``digest`` is already stored is not stored again (``Stored.duplicate``);
        a record whose line key (``keys``, one per record) its run already holds is not
        either (``Stored.known``). ``run`` files every record under that run instead of its
        own. A run that holds lines of another ``source`` refuses these (``RunConflict``)
        unless ``append``. ``ended``: how the batch's recording ended (a cassette's trailer),
        kept as its runs' ending.
        """
        line_keys: list[int | None] = list(keys) if keys is not None else [None] * len(records)
        count = len(records) if lines is None else lines
        for attempt in range(3):
            try:
                return self._store(records, line_keys, digest, count, run, source, append, ended)
            except sa.exc.IntegrityError:
                # Another writer stored the same batch or the same lines at the same time.
                with self.engine.connect() as conn:
                    known = conn.execute(
                        sa.select(batches.c.digest).where(batches.c.digest == digest)
                    ).first()
                if known is not None:
                    names = sorted({run or rec.run or "" for rec in records})
                    return Stored(0, names, True, digest, len(records))
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    def _store(  # noqa: PLR0917 - store()'s arguments
        self,
        records: Sequence[Record],
        keys: list[int | None],
        digest: str,
        count: int,
        run: str | None,
        source: str | None,
        append: bool,
        ended: str | None = None,
    ) -> Stored:
        now = time.time()
        names = [run or rec.run or "" for rec in records]
        runs_sent = sorted(set(names))
        with self.engine.begin() as conn:
            # a batch stored before fails here (its digest is the key): store() says so
            conn.execute(batches.insert(), {"digest": digest, "received": now, "lines": count})
            existing = dict(
                conn.execute(
                    sa.select(runs.c.run_id, runs.c.source).where(runs.c.run_id.in_(runs_sent))
                ).all()
            )
            if source is not None and not append:
                for name, stored in existing.items():
                    if stored and stored != source:
                        raise RunConflict(name, stored, source)
            # only a run stored before can hold a line of this batch already
            known = self._known_keys(conn, names, keys, set(existing))
            kept = list(zip(names, records, keys, strict=True))
            if known:
                kept = [(n, rec, k) for n, rec, k in kept if k not in known]
            rows = [
                (
                    name,
                    now,
                    _text(rec.kind),
                    None if rec.name is None else _text(rec.name),
                    rec.step,
                    digest,
                    _encode(rec).decode(),
                    key,
                )
                for name, rec, key in kept
            ]
            summary = _summaries([rec for _, rec, _ in kept], now, run, source)
            # The DB-API's executemany with constant SQL (every value a parameter):
            # SQLAlchemy's per-row parameter processing costs more than the insert.
            cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
            try:
                if rows:
                    cursor.executemany(self._sql["events"], rows)
                if summary:
                    cursor.executemany(self._sql["runs"], summary)  # in run order
            finally:
                cursor.close()
            if ended is not None and runs_sent:
                conn.execute(runs.update().where(runs.c.run_id.in_(runs_sent)).values(ended=ended))
        return Stored(len(rows), runs_sent, False, digest, len(records) - len(rows))

    def previous(self, run_ids: Iterable[str]) -> dict[str, str]:
        """For each of ``run_ids`` whose lines name a source, the run of the same source
        first seen just before it (the baseline a diff of it would take)."""
        wanted = sorted(set(run_ids))
        if not wanted:
            return {}
        earlier = runs.alias("earlier")
        before = (
            sa.select(earlier.c.run_id)
            .where(earlier.c.source == runs.c.source, earlier.c.first_seen < runs.c.first_seen)
            .order_by(earlier.c.first_seen.desc(), earlier.c.run_id.desc())
            .limit(1)
            .scalar_subquery()
        )
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(runs.c.run_id, before).where(
                    runs.c.run_id.in_(wanted), runs.c.source.is_not(None)
                )
            )
            return {run: prev for run, prev in rows if prev is not None}

    def set_verdict(self, run: str, of: str, verdict: str, read: tuple[int, int]) -> bool:
        """Keep ``run``'s verdict against the run ``of``, computed from ``read`` records of
        each (``of``'s, then ``run``'s): only while both still hold that many (lines another
        writer stored meanwhile make it stale); whether it was kept."""
        earlier = runs.alias("earlier")
        still = sa.exists().where(earlier.c.run_id == of, earlier.c.events == read[0])
        with self.engine.begin() as conn:
            done = conn.execute(
                runs.update()
                .where(runs.c.run_id == run, runs.c.events == read[1], still)
                .values(verdict=verdict, verdict_of=of)
            )
            return bool(done.rowcount)

    def clear_verdicts(self, run_ids: Iterable[str]) -> None:
        """Forget the verdicts that read any of ``run_ids`` (theirs, and those of the runs
        that were compared against them): their lines changed."""
        wanted = sorted(set(run_ids))
        if not wanted:
            return
        with self.engine.begin() as conn:
            conn.execute(
                runs.update()
                .where(sa.or_(runs.c.run_id.in_(wanted), runs.c.verdict_of.in_(wanted)))
                .values(verdict=None, verdict_of=None)
            )

    def unsummarized(self) -> list[str]:
        """The runs whose summary was not computed from all their events (stale or none)."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(runs.c.run_id)
                .where(sa.or_(runs.c.summary_of.is_(None), runs.c.summary_of != runs.c.events))
                .order_by(runs.c.last_seen.desc())
            )
            return [run for (run,) in rows]

    def set_summary(self, run: str, summary: Mapping[str, Any], read: int) -> bool:
        """Keep ``run``'s summary (``summary``: the JSON object, with the columns the run
        list sorts and filters by: ``began``, ``finished``, ``latency_ms``, ``cost``,
        ``worst``, ``names``), computed from ``read`` events: only while the run still holds
        that many (lines stored meanwhile make it stale); whether it was kept."""
        columns = {k: summary.get(k) for k in _SUMMARY_COLUMNS}
        body = {k: v for k, v in summary.items() if k != "names"}  # the filter's, not shown
        with self.engine.begin() as conn:
            done = conn.execute(
                runs.update()
                .where(runs.c.run_id == run, runs.c.events == read)
                .values(summary=_text(msgspec.json.encode(body).decode()), summary_of=read,
                        **columns)
            )  # fmt: skip
            return bool(done.rowcount)

    KEPT_PAGES = 500  # diff pages kept; the oldest beyond go

    def keep_page(self, key: str, runs: tuple[str, str], body: bytes) -> None:
        """Keep a diff page of ``runs`` (``body``: gzipped HTML) under ``key``; forget the
        oldest beyond ``KEPT_PAGES``."""
        row = {"key": key, "run_a": runs[0], "run_b": runs[1], "made": time.time(), "body": body}
        with self.engine.begin() as conn:
            conn.execute(pages.delete().where(pages.c.key == key))
            conn.execute(pages.insert(), row)
            old = (
                sa.select(pages.c.key)
                .order_by(pages.c.made.desc(), pages.c.key)
                .offset(self.KEPT_PAGES)
                .scalar_subquery()
            )
            conn.execute(pages.delete().where(pages.c.key.in_(old)))

    def page(self, key: str) -> bytes | None:
        """The kept page under ``key`` (gzipped HTML), or None."""
        with self.engine.connect() as conn:
            found = conn.execute(sa.select(pages.c.body).where(pages.c.key == key)).first()
            return None if found is None else bytes(found[0])

    def forget_pages(self, run_ids: Iterable[str]) -> None:
        """Forget the kept pages that read any of ``run_ids`` (their lines changed)."""
        wanted = sorted(set(run_ids))
        if not wanted:
            return
        with self.engine.begin() as conn:
            conn.execute(
                pages.delete().where(sa.or_(pages.c.run_a.in_(wanted), pages.c.run_b.in_(wanted)))
            )

    def endings(self, run_ids: Iterable[str]) -> dict[str, str]:
        """How each of ``run_ids`` ended, where it was said (``store``'s ``ended``)."""
        wanted = sorted(set(run_ids))
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(runs.c.run_id, runs.c.ended).where(
                    runs.c.run_id.in_(wanted), runs.c.ended.is_not(None)
                )
            )
            return {run: ended for run, ended in rows}

    @staticmethod
    def _known_keys(
        conn: Connection, names: list[str], keys: list[int | None], existing: set[str]
    ) -> set[int]:
        """The line keys of this batch that the runs stored before hold (a key is a digest
        of its run too: it is unique in the table)."""
        wanted = sorted(
            {k for k, name in zip(keys, names, strict=True) if k is not None and name in existing}
        )
        out: set[int] = set()
        for k in range(0, len(wanted), 500):
            rows = conn.execute(
                sa.select(events.c.line_key).where(events.c.line_key.in_(wanted[k : k + 500]))
            )
            out.update(int(key) for (key,) in rows)
        return out

    def rewrite(
        self, run: str, fix: Callable[[bytes], bytes | None], containing: Sequence[str]
    ) -> int:
        """Replace the stored text of each record of ``run`` that holds one of the strings
        ``containing`` (as its JSON text writes them) and that ``fix`` changes (``fix`` gets
        the text and returns the new one, or None to keep it), in one transaction; return
        how many changed. The collector re-redacts a run this way when one of its batches
        teaches a secret its earlier lines quoted."""
        if not containing:
            return 0
        found = [
            events.c.record.like(f"%{_like(_encode(text).decode()[1:-1])}%", escape="\\")
            for text in containing
        ]
        with self.engine.begin() as conn:
            rows = conn.execute(
                sa.select(events.c.id, events.c.record).where(
                    events.c.run_id == run, sa.or_(*found)
                )
            ).all()
            changed = [(i, new) for i, text in rows if (new := fix(text.encode())) is not None]
            for i, new in changed:
                conn.execute(events.update().where(events.c.id == i).values(record=new.decode()))
        return len(changed)

    # -- reading ---------------------------------------------------------------------------

    def run_exists(self, run: str) -> bool:
        """Whether ``run`` has events."""
        with self.engine.connect() as conn:
            found = conn.execute(sa.select(runs.c.run_id).where(runs.c.run_id == run)).first()
        return found is not None

    def records(self, run: str) -> list[Record]:
        """The records of ``run``, in the order they were received."""
        return self.record_texts(run).records()

    def record_texts(self, run: str) -> RecordTexts:
        """The records of ``run`` as stored (their JSON texts, UTF-8), in the order they
        were received: what the analysis reads without decoding each in Python."""
        with self.engine.connect() as conn:
            # The DB-API cursor with constant SQL: SQLAlchemy's result rows cost more than
            # the read (a diff reads whole runs through here).
            cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
            try:
                cursor.execute(self._sql["records"], (run,))
                return RecordTexts([bytes(text) for (text,) in cursor.fetchall()])
            finally:
                cursor.close()

    def events(self, run: str, *, after: int = 0, limit: int = 1000) -> list[tuple[int, Record]]:
        """A page of ``run``'s events: (event id, record), ids above ``after``, in order."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(events.c.id, events.c.record)
                .where(events.c.run_id == run, events.c.id > after)
                .order_by(events.c.id)
                .limit(limit)
            )
            return [(i, decode_record(r)) for i, r in rows]

    def runs_by_id(self, ids: Sequence[str]) -> list[dict[str, Any]]:
        """The summary rows of the runs ``ids`` (those that exist)."""
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(*_SHOWN).where(runs.c.run_id.in_(list(ids))))
            return [_summarized(row._mapping) for row in rows]

    def runs(
        self,
        *,
        since: float | None = None,
        until: float | None = None,
        tool: str | None = None,
        before: tuple[float, str] | None = None,
        limit: int = 50,
        text: str | None = None,
        sort: str = "last_seen",
        descending: bool = True,
        offset: int = 0,
        worst: int | None = None,
    ) -> list[dict[str, Any]]:
        """Runs, newest first (by last event): that ran in ``[since, until]`` (their records'
        own time where they say it, else when they were stored), that called ``tool``,
        whose id or a called tool or model holds ``text``, whose worst finding ranks at
        least ``worst``; ``before`` is the (last_seen, run_id) of the previous page's last
        run. ``sort`` (a column of ``SORTABLE``) and ``descending`` order them otherwise,
        paged by ``offset``. A row's ``summary`` is its JSON object, decoded (None until
        computed)."""
        column = SORTABLE.get(sort)
        if column is None:
            raise ValueError(f"runs sort by one of {', '.join(SORTABLE)}, not {sort!r}")
        first = column.desc() if descending else column.asc()
        tie = runs.c.run_id.desc() if descending else runs.c.run_id.asc()
        query = sa.select(*_SHOWN).order_by(first.nulls_last(), tie)
        if text:
            like = "%" + _like(text) + "%"
            query = query.where(
                sa.or_(
                    runs.c.run_id.ilike(like, escape="\\"),
                    runs.c.names.ilike(like, escape="\\"),
                    # a run not summarized yet: its calls' names
                    sa.and_(
                        runs.c.names.is_(None),
                        sa.exists().where(
                            events.c.run_id == runs.c.run_id,
                            events.c.name.ilike(like, escape="\\"),
                        ),
                    ),
                )
            )
        if since is not None:
            query = query.where(sa.func.coalesce(runs.c.finished, runs.c.last_seen) >= since)
        if until is not None:
            query = query.where(sa.func.coalesce(runs.c.began, runs.c.first_seen) <= until)
        if worst:
            query = query.where(runs.c.worst >= worst)
        if tool is not None:
            query = query.where(
                sa.exists().where(events.c.name == tool, events.c.run_id == runs.c.run_id)
            )
        if before is not None:
            seen, run = before
            query = query.where(
                sa.or_(
                    runs.c.last_seen < seen, sa.and_(runs.c.last_seen == seen, runs.c.run_id < run)
                )
            )
        if offset:
            query = query.offset(offset)
        with self.engine.connect() as conn:
            return [_summarized(row._mapping) for row in conn.execute(query.limit(limit))]


# The columns of a run as the API shows it (not the run list's internal ones).
_SHOWN = [c for c in runs.c if c.name != "names"]
_SUMMARY_COLUMNS = ("began", "finished", "latency_ms", "cost", "worst", "names")


def _summarized(row: Any) -> dict[str, Any]:
    """A ``runs`` row as a dict, its summary decoded."""
    out = dict(row)
    if out.get("summary") is not None:
        out["summary"] = msgspec.json.decode(out["summary"])
    return out


_RUN_COLUMNS = ("run_id", "source", "first_seen", "last_seen", "events", "steps", "tokens")
_EVENTS_SQL = (
    "INSERT INTO events (run_id, received, kind, name, step, batch, record, line_key) "
    "VALUES ({p}, {p}, {p}, {p}, {p}, {p}, {p}, {p})"
)
_RUNS_SQL = (
    "INSERT INTO runs (run_id, source, first_seen, last_seen, events, steps, tokens) "
    "VALUES ({p}, {p}, {p}, {p}, {p}, {p}, {p}) "
    "ON CONFLICT (run_id) DO UPDATE SET "
    "last_seen = {greatest}(runs.last_seen, excluded.last_seen), "
    "events = runs.events + excluded.events, "
    "steps = {greatest}(runs.steps, excluded.steps), "
    # a run's tokens stop at the largest 64-bit number instead of overflowing
    "tokens = CASE WHEN runs.tokens > {top} - excluded.tokens THEN {top} "
    "ELSE runs.tokens + excluded.tokens END"
)


def _statements(dialect: str, paramstyle: str) -> dict[str, str]:
    """The statements run through the DB-API (a batch's two inserts, a run's records), in the
    driver's parameter style: constant text, every value a parameter."""
    p = "?" if paramstyle == "qmark" else "%s"
    greatest = "max" if dialect == "sqlite" else "greatest"
    as_bytes = "CAST(record AS BLOB)" if dialect == "sqlite" else "convert_to(record, 'UTF8')"
    return {
        "events": _EVENTS_SQL.format(p=p),
        "runs": _RUNS_SQL.format(p=p, greatest=greatest, top=INT64_MAX),
        # as UTF-8 bytes: what the analysis writes for DuckDB, with no encoding on the way
        "records": f"SELECT {as_bytes} FROM events WHERE run_id = {p} ORDER BY id",
    }


def _like(text: str) -> str:
    """``text`` as a LIKE pattern's literal part (its wildcards and the escape escaped)."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _text(value: str) -> str:
    """A column value PostgreSQL accepts: NUL becomes U+FFFD (the record keeps it, escaped)."""
    return value.replace("\x00", "\ufffd") if "\x00" in value else value


def _summaries(
    records: Sequence[Record], now: float, run: str | None, source: str | None = None
) -> list[tuple[Any, ...]]:
    """One ``runs`` row per run of a batch (the columns of ``_RUNS_SQL``), in run order; a
    new run's source is the batch's (else its first record's)."""
    out: dict[str, dict[str, Any]] = {}
    for rec in records:
        name = run or rec.run or ""
        row = out.get(name)
        if row is None:
            row = out[name] = {
                "run_id": name,
                "source": source or rec.source or None,
                "first_seen": now,
                "last_seen": now,
                "events": 0,
                "steps": 0,
                "tokens": 0,
            }
        row["events"] += 1
        if rec.step is not None and rec.step > row["steps"]:
            row["steps"] = rec.step
        if rec.tokens:
            row["tokens"] = min(INT64_MAX, row["tokens"] + rec.tokens)
    return [tuple(out[k][c] for c in _RUN_COLUMNS) for k in sorted(out)]


class DatabaseStore:
    """The tape's ``RecordStore`` over one run of a database: ``Tape(DatabaseStore(db, "r1"))``
    records into the collector's tables and replays from them.

    A recording is written to a pending run (``RUN~pending``) and renamed on ``commit``, so the
    run that replays is never half-written; ``abort`` drops the pending rows.
    """

    def __init__(self, db: Database, run: str):
        if not RUN_ID.fullmatch(run):
            raise ValueError(f"{run!r} is not a run id (letters, digits and ._:@+=-)")
        self.db, self.run = db, run
        self._pending = f"{run}~pending"
        self._header: dict[str, Any] = {}
        self._seq = 0

    @property
    def name(self) -> str:
        """``DATABASE#RUN``."""
        return f"{self.db.url.render_as_string()}#{self.run}"

    def exists(self) -> bool:
        """Whether the run has records."""
        return self.db.run_exists(self.run)

    def load(self) -> Cassette:
        """The run's records (no header: a database run keeps only records)."""
        records = self.db.records(self.run)
        if not records:
            raise CassetteNotFoundError("no such run in the database", path=self.name)
        return Cassette(Path(self.name), None, records)

    def begin(self, header: Mapping[str, Any]) -> None:
        """Start a new recording (its header is not stored)."""
        self._header = dict(header)
        self._seq = 0
        self._drop(self._pending)

    def append(self, record: Record) -> int:
        """Store one record durably (one transaction); return its sequence number."""
        self._seq += 1
        rec = msgspec.structs.replace(record, run=self.run, seq=self._seq)
        digest = hashlib.sha256(f"{self._pending}:{self._seq}:{time.time_ns()}".encode())
        self.db.store([rec], digest=digest.hexdigest(), run=self._pending)
        return self._seq

    def commit(self, ended: str = "completed") -> None:
        """Make the recording the run's: the old run's rows go, the pending rows take its name,
        and the run keeps how the recording ``ended``."""
        with self.db.engine.begin() as conn:
            self._delete(conn, self.run)
            conn.execute(
                events.update().where(events.c.run_id == self._pending).values(run_id=self.run)
            )
            conn.execute(
                runs.update()
                .where(runs.c.run_id == self._pending)
                .values(run_id=self.run, ended=ended)
            )

    def abort(self) -> None:
        """Drop the pending recording."""
        self._drop(self._pending)

    def _drop(self, run: str) -> None:
        with self.db.engine.begin() as conn:
            self._delete(conn, run)

    @staticmethod
    def _delete(conn: Connection, run: str) -> None:
        conn.execute(events.delete().where(events.c.run_id == run))
        conn.execute(runs.delete().where(runs.c.run_id == run))
