"""The analysis workspace: every call of every input in one DuckDB table, and what the
detectors read of it.

An analysis goes through three rooms, each a module:

* ``load`` reads the inputs into the table ``calls0`` (one row a call: ``file, line, run,
  step, kind, name, args, out, effect, tokens``), each file's calls inserted in their order,
  so that a call's ``ord`` (``ORD``: its file's index, then its rowid) orders the input;
* ``sign`` gives each distinct argument text its *signature* (``dmap``), normalizing each text
  once, while DuckDB, in another thread, builds ``runs`` (``Calls.order``);
* ``Calls.prepare`` (here) then builds ``calls``: the signed calls of the analyzed runs, each
  with its run (``rf``: its run's first call) and its step segment (``seg``: its step, or in a
  run whose steps go back with more than one call a step, from one window over that run's
  calls in call order: ``_SEGMENTS``), ``sigs`` (each signature's first text, the evidence of
  findings) and the few rows ``Calls.facts`` joins where a detector reads them: whether a
  write came before a call in its run (to anything, to an unnamed resource, to the call's own
  resource) and whether an untagged call came so far, each a comparison with the first such
  call, found by grouping. ``Calls.fork`` gives the detectors a cursor each, so that chains
  of them run at the same time (see ``detectors``).

``Calls`` holds the state the rooms share: the connection, the inputs, which files the
seed-JSONL fast path read (their lines are computed from rowids: ``Calls.line``) and the
query helpers. DuckDB runs with a ``memory_limit`` and spills to a temporary directory beyond
it, so memory is bounded whatever the number of lines. DuckDB is imported here only (through
``db``), when an analysis runs.
"""

from __future__ import annotations

import copy
import json
import tempfile
import threading
from collections.abc import Callable, Iterable, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from .._enums import WRITES
from ..errors import ConfigError, TraceError
from ..formats import TraceFormat, TraceSource
from ..record import INT64_MAX, Record
from .config import AnalysisConfig
from .normalize import MemoNormalizer

if TYPE_CHECKING:
    from .db import duckdb

__all__ = [
    "BATCH",
    "COLUMNS",
    "EXPORT_COLUMNS",
    "ORD",
    "ROW_BITS",
    "Background",
    "Calls",
    "Input",
    "Workspace",
    "run_hash",
    "text_hash",
]

# A call's place in the input (``ord``): its file's index, then its rowid in calls0 (each
# file's calls are inserted in their order).
ORD = "(file::BIGINT << 40 | rowid)"
_ORD_C = ORD.replace("file", "c.file").replace("rowid", "c.rowid")  # of calls0 named c
ROW_BITS = 40
# Rows a batch, where rows go between Python and DuckDB a batch at a time.
BATCH = 1 << 16
# A small analysis runs faster on one thread: below this size of inputs DuckDB's parallel
# operators cost more than they save (benchmarks/README.md). So an analysis starts on one
# thread and takes DuckDB's default once its inputs pass this size.
_PARALLEL_BYTES = 16 << 20
_WRITES = "(" + ", ".join(f"'{e}'" for e in sorted(WRITES)) + ")"  # as a SQL list


def text_hash(table: str = "") -> str:
    """SQL: the hash of an argument text, with its kind and name (of ``table``, as ``c.``)."""
    return f"hash({table}kind, {table}name, {table}args)"


def run_hash(run: str) -> str:
    """SQL: the hash of a run's name (the column ``run``)."""
    return f"hash({run})"


COLUMNS = {
    "file": "INTEGER",
    "line": "BIGINT",
    "run": "VARCHAR",
    "step": "BIGINT",
    "kind": "VARCHAR",
    "name": "VARCHAR",
    "args": "VARCHAR",
    "out": "VARCHAR",
    "effect": "VARCHAR",
    "tokens": "BIGINT",
}
# A Parquet export's columns: ``seq`` numbers the calls across the inputs.
EXPORT_COLUMNS = ["seq", *(c for c in COLUMNS if c != "file")]

# ``runs`` (per run: first and last call, calls, tokens, step segments, highest step, the most calls
# of one step: no segment, a stretch of one step's calls, is longer; whether its segments
# need its calls in order) without putting every call in order: a run's calls are grouped by
# step number. A run that makes one call a step, none without a step, has a segment a call,
# whatever the order of its steps (runs spread over several files, read one after another,
# go back): its steps are its segments. Of the other runs, one whose steps never go back (no
# NULL step, each step's calls all before the next step's: a window over its steps, not its
# calls) has its steps as its segments too. Then a call's segment is its step number;
# ``prepare`` puts in order only the calls of the runs left (``windowed``, see
# ``_SEGMENTS``), and sets their steps from the segments it finds.
_ORDER = f"""
    CREATE TABLE run_steps AS
    SELECT {{side_of}} AS side, run, step, min({ORD}) AS lo, max({ORD}) AS hi,
           count(*) AS n, sum(coalesce(tokens, 0)) AS tokens
    FROM calls0 WHERE ({{side_of}}) > 0 GROUP BY ALL;
    CREATE TABLE runs AS
    WITH g AS (
        SELECT side, run, min(lo) AS first, max(hi) AS last, sum(n)::BIGINT AS calls,
               least(sum(tokens), {INT64_MAX})::BIGINT AS tokens, count(*) AS steps,
               greatest(0, coalesce(max(step), 0)) AS max_step, max(n) AS most,
               bool_and(n = 1 AND step IS NOT NULL) AS lone
        FROM run_steps GROUP BY side, run),
    back AS (
        SELECT side, run FROM (
            SELECT side, run, step, lo,
                   lag(hi) OVER (PARTITION BY side, run ORDER BY step) AS before
            FROM run_steps SEMI JOIN (SELECT side, run FROM g WHERE NOT lone) USING (side, run))
        GROUP BY side, run HAVING bool_or(step IS NULL OR coalesce(lo < before, false)))
    SELECT g.* EXCLUDE (lone), b.run IS NOT NULL AS windowed, {{run_hash}} AS rh
    FROM g LEFT JOIN back b USING (side, run);
    DROP TABLE run_steps
"""
# ``calls``: the signed calls (``{signed}``) of the analyzed runs, each with its run (``rf``)
# and its step segment (``seg``): its step number where its run's steps never go back, or
# go back one call a step; else (``_WINDOWED``: one window over each such run, in call
# order) the ord of the latest call at or before it that opens a segment: the run's first
# call, or one whose step differs from its predecessor's. Every call keeps its row: no
# table of every call is joined by ord. A call finds its run by its side and ``{run}``: the
# run's name, or its hash (``rh``).
_SEGMENTS = """
    CREATE TABLE calls AS
    WITH signed AS (
        SELECT c.side, c.ord, c.step, c.out, c.effect, c.sid, c.resource, r.first AS rf,
               r.windowed
        FROM ({signed}) c JOIN runs r ON r.side = c.side AND {run} WHERE c.side > 0)
    SELECT * EXCLUDE (windowed), step AS seg FROM signed WHERE NOT windowed
"""
_WINDOWED = """
    UNION ALL
    SELECT * EXCLUDE (opens),
           max(ord) FILTER (WHERE opens) OVER (PARTITION BY rf ORDER BY ord
                                               ROWS UNBOUNDED PRECEDING) AS seg
    FROM (SELECT * EXCLUDE (windowed),
                 lag(ord) OVER w IS NULL OR step IS DISTINCT FROM lag(step) OVER w AS opens
          FROM signed WHERE windowed WINDOW w AS (PARTITION BY rf ORDER BY ord))
"""


@dataclass
class Input:
    """One input file: its path, the side it is on (1 baseline, 2 candidate; 1 for check)
    and its format (``auto`` to sniff it)."""

    path: Path
    side: int = 1
    fmt: TraceFormat = TraceFormat.AUTO


class Background:
    """``work`` running in a thread of its own (DuckDB lets go of the GIL while a query runs):
    ``wait`` waits for it and raises what it raised."""

    def __init__(self, work: Callable[[], object]):
        self._failure: list[BaseException] = []

        def run() -> None:
            try:
                work()
            except BaseException as exc:  # raised by wait(), in the waiting thread
                self._failure.append(exc)

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()

    def running(self, timeout: float) -> bool:
        """Whether the work still runs after waiting up to ``timeout`` seconds for it."""
        self._thread.join(timeout)
        return self._thread.is_alive()

    def wait(self) -> None:
        """Wait for the work; raise what it raised."""
        self._thread.join()
        if self._failure:
            raise self._failure[0]


def _connect(memory_limit: str, spill: Path) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB database with a memory limit, spilling to ``spill`` beyond it."""
    from .db import duckdb

    con = duckdb.connect(
        config={
            "memory_limit": memory_limit,
            "temp_directory": str(spill),
            "preserve_insertion_order": True,
        }
    )
    # No automatic checkpoint: it would compress every table of this short-lived database
    # after each 16 MB written (a large share of a diff's time; benchmarks/README.md,
    # "Measurements behind the analysis": checkpoints).
    con.execute("SET checkpoint_threshold = '1TB'")
    return con


class Workspace:
    """One DuckDB database kept open for many analyses (the collector's requests): each
    analysis gets a connection and a schema of its own, dropped when it ends. This saves
    opening a database per analysis. The threads setting is the database's, so
    each analysis runs on one thread: concurrent requests are the parallelism."""

    def __init__(self, memory_limit: str = "640MB"):
        self._tmp = tempfile.TemporaryDirectory(prefix="tracetape-workspace-")
        self.con = _connect(memory_limit, Path(self._tmp.name) / "spill")
        self.con.execute("SET threads = 1")
        self._lock = threading.Lock()
        self._count = 0

    def open(self) -> tuple[duckdb.DuckDBPyConnection, str]:
        """A new connection, using a new schema of its own; and the schema's name."""
        with self._lock:
            self._count += 1
            schema = f"analysis_{self._count}"
        cursor = self.con.cursor()
        cursor.execute(f"CREATE SCHEMA {schema}; USE memory.{schema}")
        return cursor, schema

    def close(self) -> None:
        """Close the database and remove its temporary files."""
        with suppress(Exception):
            self.con.close()
        self._tmp.cleanup()


@dataclass
class Calls:
    """The calls of an analysis in DuckDB (see the module docstring)."""

    config: AnalysisConfig
    skip_bad_lines: bool = False
    progress: Callable[[Path, int], None] | None = None
    con: duckdb.DuckDBPyConnection = field(init=False)
    sources: list[TraceSource] = field(default_factory=list)
    inputs: list[Input] = field(default_factory=list)
    # The files the seed-JSONL fast path read, each with its first rowid.
    first_rows: dict[int, int] = field(default_factory=dict)
    verbatim: bool = False  # a Parquet input's argument texts are as written (see sign)
    dmap: str = "DROP TABLE dmap"  # what drops dmap and the tables sign made it a view of
    _tmp: tempfile.TemporaryDirectory[str] = field(init=False)
    workspace: Workspace | None = None
    _bytes: int = 0  # of the inputs read so far
    _threads: int = field(init=False)  # DuckDB's default, taken past _PARALLEL_BYTES
    _schema: str = ""  # in a workspace, this analysis's own
    _ordered: Background | None = None  # builds runs beside signing (see sign)
    events: int = 0  # the calls read (prepare drops calls0)
    _facts: str = ""  # see facts()
    # The records behind the rows of the inputs read as records (``records.records_at``):
    # each such input's first rowid, and its records where they were kept as read (a store's
    # texts, a list given, a small file), else read again when asked.
    starts: dict[int, int] = field(default_factory=dict)
    kept: dict[int, Sequence[Record] | list[bytes]] = field(default_factory=dict)
    endings: dict[str, str] = field(default_factory=dict)  # a run's, where its format says

    def __post_init__(self) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="tracetape-")
        if self.workspace is not None:
            self.con, self._schema = self.workspace.open()
            self._threads = 1  # the workspace's setting (one thread an analysis)
        else:
            self.con = _connect(self.config.memory_limit, Path(self._tmp.name) / "spill")
            (self._threads,) = self.one("SELECT current_setting('threads')")
            self.con.execute("SET threads = 1")
        # DuckDB's own bar would print to stdout; its progress feeds ours (``load``).
        self.con.execute(
            "SET enable_progress_bar_print = false; SET progress_bar_time = 0; "
            f"SET enable_progress_bar = {'true' if self.progress else 'false'}"
        )
        columns = ", ".join(f"{k} {v}" for k, v in COLUMNS.items())
        self.con.execute(f"CREATE TABLE calls0 ({columns})")

    @property
    def folder(self) -> Path:
        """This analysis's temporary folder (removed when it closes)."""
        return Path(self._tmp.name)

    def grow(self, size: int) -> None:
        """Count ``size`` more bytes of input; past ``_PARALLEL_BYTES``, use every thread."""
        before, self._bytes = self._bytes, self._bytes + size
        if before <= _PARALLEL_BYTES < self._bytes and self._threads > 1:
            self.con.execute(f"SET threads = {int(self._threads)}")

    def close(self) -> None:
        """Close the database (or drop this analysis's schema in its workspace) and remove
        its temporary files."""
        with suppress(Exception):  # a statement still running in another thread ends first
            self.wait_ordered()
        with suppress(Exception):
            if self.workspace is not None:
                self.con.execute(f"USE memory.main; DROP SCHEMA {self._schema} CASCADE")
            self.con.close()
        self._tmp.cleanup()

    def __enter__(self) -> Calls:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: object, tb: object) -> None:
        self.close()
        from .db import duckdb

        if isinstance(exc, duckdb.OutOfMemoryException):
            raise ConfigError(
                f"the analysis needs more memory than its memory_limit "
                f"({self.config.memory_limit}); it spills to a temporary folder beyond it, but "
                "some steps need a minimum: raise memory_limit in [tool.tracetape.analysis]"
            ) from None
        if isinstance(exc, duckdb.IOException):
            raise ConfigError(
                f"the analysis could not write its temporary files ({exc}); free disk space "
                "in the temporary folder (TMPDIR)"
            ) from None

    def line(self) -> str:
        """The line of a row of calls0, as SQL: its ``line``, or on the fast path its offset
        among its file's rows (``lines`` computes the same from an ord, once calls0 is
        gone)."""
        if not self.first_rows:
            return "line"
        starts = [self.first_rows.get(i, 0) - 1 for i in range(len(self.inputs))]
        return f"coalesce(line, rowid - {starts}[file + 1])"

    def lines(self, ords: Iterable[int]) -> dict[int, int | None]:
        """The lines of the calls at ``ords`` (for the evidence of findings): a call of the
        fast path is its offset among its file's rows; the others' were kept by ``prepare``."""
        ords = set(ords)
        mask = (1 << ROW_BITS) - 1
        found: dict[int, int | None] = {
            o: (o & mask) - self.first_rows[o >> ROW_BITS] + 1
            for o in ords
            if o >> ROW_BITS in self.first_rows
        }
        rest = [o for o in ords if o not in found]
        if rest:  # read by another reader, which gave the line (or none: NULL)
            query = "SELECT ord, line FROM lines WHERE ord IN (SELECT unnest($1::BIGINT[]))"
            found |= dict(self.rows(query, [rest]))
        return {o: found.get(o) for o in ords}

    def cursor(self) -> duckdb.DuckDBPyConnection:
        """A new cursor on this analysis's tables (one per thread)."""
        cursor = self.con.cursor()
        if self._schema:  # a new connection starts in the workspace's main schema
            cursor.execute(f"USE memory.{self._schema}")
        return cursor

    def fork(self) -> Calls:
        """These calls on a cursor of their own, for another thread (close its ``con``)."""
        view = copy.copy(self)
        view.con = self.cursor()
        return view

    @property
    def concurrent(self) -> bool:
        """Whether work may run in threads of its own at once: not in a workspace, where
        each analysis runs on one thread and concurrent requests are the parallelism."""
        return self.workspace is None

    def order(self, side_of: str) -> None:
        """Start building ``runs`` (``_ORDER``) of the calls with a side (``side_of``, a SQL
        expression over ``calls0``) on a cursor of its own in another thread, so that it runs
        beside the signing (the Python loop leaves a core free); not ``concurrent``: build it
        now. ``prepare`` waits for it."""
        query = _ORDER.format(side_of=side_of, run_hash=run_hash("g.run"))
        if not self.concurrent:
            self.con.execute(query)
            return
        cursor = self.cursor()

        def run() -> None:
            try:
                cursor.execute(query)
            finally:
                cursor.close()

        self._ordered = Background(run)

    def wait_ordered(self) -> None:
        """Wait for ``runs`` (``order``); raise what building it raised."""
        job, self._ordered = self._ordered, None
        if job is not None:
            job.wait()

    def drop(self, *tables: str) -> None:
        """Drop ``tables``, those that exist."""
        self.con.execute("".join(f"DROP TABLE IF EXISTS {table};" for table in tables))

    def bad(self, first: int, message: str) -> TraceError:
        """The error for the argument text of the call at ``first`` (its ``ORD``)."""
        (line,) = self.one(f"SELECT {self.line()} FROM calls0 WHERE {ORD} = ?", [first])
        return TraceError(
            f"field 'args': {message}",
            path=self.inputs[first >> ROW_BITS].path,
            line=line,
            field="args",
        )

    def sig_args(self, sids: Sequence[int], *, normalized: bool = True) -> dict[int, Any]:
        """The normalized arguments of signatures, as their first call gave them (key order
        kept), for the evidence of findings (``normalized=False``: as written, which is
        quicker where equal texts are all that is asked)."""
        if not sids:
            return {}
        rows = self.con.execute(
            "SELECT sid, args FROM sigs WHERE sid IN (SELECT unnest($1::BIGINT[]))",
            [list(set(sids))],
        ).fetchall()
        memo: Callable[[Any], Any] = (
            MemoNormalizer(self.config.normalizer) if normalized else (lambda value: value)
        )
        out = {}
        for sid, text in rows:
            try:
                value = orjson.loads(text)
            except orjson.JSONDecodeError:
                value = json.loads(text)  # signed already: it parses (an int past 64 bits)
            out[sid] = memo(value)
        return out

    # -- the table the detectors read ----------------------------------------------------------

    def prepare(self, side_of: str) -> None:
        """Build ``calls``: the signed calls with a side (``side_of``, a SQL expression over
        ``calls0``; 0 leaves a call out), each with its run and step segment (``_SEGMENTS``;
        ``runs`` was built beside the signing, and gets here the steps of the runs whose steps
        go back), ``sigs`` (each signature's kind, name, resource and first argument text),
        and the tables ``facts`` joins: whether a write (or an untagged call) came before a
        call is a comparison with the first such call of its run, or of its run and
        resource, found by grouping."""
        con = self.con
        self.wait_ordered()
        # As narrow as the detectors allow (at 3M lines calls and calls0 are most of the
        # engine's memory): a call's run is its run's first call (``runs`` names it), its
        # tool its signature's (``sigs``), and its line is computed from its ord (``lines``)
        # but where a reader other than the fast path gave it.
        if len(self.first_rows) < len(self.inputs):  # some lines were given by another reader
            con.execute(
                f"CREATE TABLE lines AS SELECT {ORD} AS ord, line FROM calls0 "
                f"WHERE line IS NOT NULL AND ({side_of}) > 0"
            )
        # Each call joins its text in dmap and its run in runs by their hashes (cheaper than
        # by the texts; benchmarks/README.md, "Measurements behind the analysis": joins by
        # hash): a call's text and run are there, so where two
        # texts (or runs) share a hash, a call of either finds both, and calls has more rows
        # than the runs have calls; then calls is built again, joined by name and text.
        signed = f"""
            SELECT c.*, {side_of} AS side, {_ORD_C} AS ord, d.sid, d.resource
            FROM calls0 c JOIN dmap d ON {{}}"""
        (windowed,) = self.one("SELECT coalesce(bool_or(windowed), false) FROM runs")
        segments = _SEGMENTS + (_WINDOWED if windowed else "")
        by_hash = signed.format(f"d.h = {text_hash('c.')}")
        con.execute(segments.format(signed=by_hash, run=f"r.rh = {run_hash('c.run')}"))
        if self.one("SELECT (SELECT count(*) FROM calls) <> (SELECT sum(calls) FROM runs)")[0]:
            by_text = signed.format("d.kind = c.kind AND d.name = c.name AND d.args = c.args")
            con.execute(f"DROP TABLE calls; {segments.format(signed=by_text, run='r.run = c.run')}")
        # What the detectors read is in calls, runs and sigs: the input's rows go (at 3M
        # lines they are half the engine's memory, and the detectors would spill), and of
        # the argument texts, each signature's first (its evidence) stays, in ``sigs``.
        (self.events,) = self.one("SELECT count(*) FROM calls0")
        con.execute(
            "DROP TABLE calls0; CREATE TABLE sigs AS SELECT sid, kind, name, resource, args "
            f"FROM dmap WHERE first = sid; {self.dmap}"
        )
        if windowed:
            # A run whose segments came from the window: its segments, less the first where
            # its first call has no step (that segment opens the run, but is no step).
            con.execute("""
                UPDATE runs SET steps = s.steps
                FROM (SELECT rf, count(DISTINCT seg) - coalesce(
                                 min(ord) FILTER (WHERE step IS NULL) = min(ord), false)::INTEGER
                                 AS steps
                      FROM calls WHERE rf IN (SELECT first FROM runs WHERE windowed) GROUP BY rf) s
                WHERE runs.first = s.rf
            """)
        writes, untagged = self.one(
            f"SELECT coalesce(bool_or(effect IN {_WRITES}), false), "
            "coalesce(bool_or(effect IS NULL), false) FROM calls"
        )
        joins = ""
        if writes:
            # The first write of each run (to anything, to no named resource), and of each
            # run and resource: a handful of rows, from the writes alone.
            con.execute(f"""
                CREATE TABLE first_writes AS
                SELECT rf, resource, min(ord) AS w_res FROM calls
                WHERE effect IN {_WRITES} GROUP BY ALL;
                CREATE TABLE run_writes AS
                SELECT rf, min(w_res) AS w_any, min(w_res) FILTER (WHERE resource IS NULL) AS w_null
                FROM first_writes GROUP BY rf
            """)
            joins += """
                LEFT JOIN run_writes USING (rf)
                LEFT JOIN (SELECT * FROM first_writes WHERE resource IS NOT NULL)
                    USING (rf, resource)"""
            any_w, null_w, res_w = (
                f"coalesce(ord > {w}, false)" for w in ("w_any", "w_null", "w_res")
            )
        else:
            any_w = null_w = res_w = "false"
        # clean: no write to the call's own resource came first in the run; certain_ok: also
        # none at all, or only to other named resources; explained: an output change here
        # may be the echo of a write (to an unnamed resource, or to this one).
        facts = [
            f"NOT {res_w} AS clean",
            f"NOT {res_w} AND (NOT {any_w} OR (resource IS NOT NULL AND NOT {null_w})) "
            "AS certain_ok",
            f"{null_w} OR {res_w} AS explained",
        ]
        if untagged:
            con.execute(
                "CREATE TABLE run_untagged AS SELECT rf, min(ord) AS untagged_from FROM calls "
                "WHERE effect IS NULL GROUP BY rf"
            )
            joins += " LEFT JOIN run_untagged USING (rf)"
            facts.append("coalesce(ord >= untagged_from, false) AS untagged")
        else:
            facts.append("false AS untagged")
        self._facts = f"{', '.join(facts)} FROM ({{}}) {joins}"

    def facts(self, source: str) -> str:
        """A query adding to the calls ``source`` selects (all of ``calls``, or some of
        them) what came before each in its run (``clean``, ``certain_ok``, ``explained``,
        ``untagged``): the few rows of the tables ``prepare`` built, joined where they are read,
        to the calls read there only."""
        return "SELECT *, " + self._facts.format(source)

    def rows(self, query: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """The rows of a query."""
        return self.con.execute(query, list(params)).fetchall()

    def one(self, query: str, params: Sequence[Any] = ()) -> tuple[Any, ...]:
        """The one row of a query."""
        row = self.con.execute(query, list(params)).fetchone()
        assert row is not None
        return row

    @property
    def skipped(self) -> tuple[int, list[str]]:
        """Lines skipped under ``skip_bad_lines``, and the first few of them."""
        count, examples = 0, list[str]()
        for src in self.sources:
            count += src.skipped
            examples += src.first_skipped[: 5 - len(examples)]
        return count, examples
