"""The analysis engine: every call of every input in one DuckDB table, signed and ordered.

``Calls.load`` reads the inputs into the table ``calls0`` (one row a call: ``file, line, run,
step, kind, name, args, out, effect, tokens``), each file's calls inserted in their order, so
that a call's ``ord`` (``ORD``: its file's index, then its rowid) orders the input:

* the seed-JSONL files go straight through one DuckDB ``read_json`` into ``calls0`` (a
  fleet's day is many files) with every field read as JSON, its types checked in SQL as the
  Python reader checks them; a row's line is its offset among its file's rows (``line`` is
  left NULL and computed where it is read: ``Calls.line``). The fast path is taken only
  where it is exact: if a field has another type, a line is blank, torn or not JSON, or an
  argument does not parse as the Python reader parses it, the file's rows are deleted and it
  is read again by the Python reader, which names the bad line and field (or skips it under
  ``skip_bad_lines``);
* a Parquet file written by ``tracetape export --parquet`` is read as it is;
* records given as their JSON texts (``RecordTexts``: a store's rows) are read by
  ``read_json`` too, with ``call_args`` in SQL;
* every other format (cassettes, span records, OTLP/JSON) is read as ``Record`` s by
  ``formats.read_records`` and bulk-loaded through a temporary JSONL file.

``Calls.sign`` then gives each call its *signature*: the kind, the name and the canonical JSON
text of the normalized arguments (never an inferred struct type: a missing key and an
explicit null stay apart, a string that looks like a UUID stays a string). Normalization runs
in Python once per distinct argument text, in batches (once per distinct text without its
top-level volatile keys, where DuckDB drops them exactly: ``_unvolatile``); what comes back
is that canonical text (the signature key) and the *resource* the arguments name
(``resource_keys``), joined back by the argument text (most texts' keys come back alone, in
the order of the texts, and are paired with them by position). A signature's id is the
``ord`` of its first call. Keys are grouped where their hashes meet, and compared whole
there: no digest stands for a value, so no two values can collide. A text that no other
text can equal is its own signature and needs no key: one written one way only (minified,
no escape, no float), where the texts of its kind and name that hold the same keys all
hold them in one order at every level (their JSON structure, found by DuckDB: a *shape*,
see ``Calls._to_sign``). A trace whose writer keeps one key order has few texts to key;
where such texts hold the same keys in several orders (two writers), DuckDB keys them,
each written in its keys' sorted order.

While Python signs, DuckDB (in another thread: the loop leaves a core free) builds ``runs``
(per run: first call, calls, tokens, steps, the most calls of one step, and whether its
calls must be put in order for their segments) from each run's calls grouped by step, with
no sort of every call (``_ORDER``). ``Calls.prepare`` then builds ``calls``: the signed
calls of the analyzed runs, each with its run (``rf``: its run's first call) and its step
segment (``seg``: its step, or in a run whose steps go back with more than one call a step,
from one window over that run's calls in call order: ``_SEGMENTS``). Whether a write
came before a call in its run (to anything, to an unnamed resource, to the call's own
resource) and whether an untagged call came so far are comparisons with the first such call,
found by grouping; ``Calls.facts`` joins them where a detector reads them. ``Calls.fork``
gives the detectors a cursor each, so that chains of them run at the same time (see
``detectors``).

DuckDB runs with a ``memory_limit`` and spills to a temporary directory beyond it, so memory
is bounded whatever the number of lines. DuckDB is imported here only (through ``db``),
when an analysis runs.
"""

from __future__ import annotations

import copy
import json
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from ..canonical import Normalizer, canonical_json
from ..errors import ConfigError, TraceError
from ..formats import TraceFormat, TraceSource, detect_format, read_records
from ..formats.schemas import EFFECTS, INT64, MAX_DEPTH, TOO_DEEP, readable
from ..record import Record, RecordTexts, call_args
from .config import AnalysisConfig
from .normalize import MemoNormalizer

if TYPE_CHECKING:
    from .db import duckdb

__all__ = ["ORD", "PARQUET_MAGIC", "Calls", "Input", "Workspace", "fill_steps"]

PARQUET_MAGIC = b"PAR1"
# A call's place in the input (``ord``): its file's index, then its rowid in calls0 (each
# file's calls are inserted in their order).
ORD = "(file::BIGINT << 40 | rowid)"
_ORD_C = ORD.replace("file", "c.file").replace("rowid", "c.rowid")  # of calls0 named c
_ROW_BITS = 40
# The line of a row of the JSONL fast path that the Python reader must judge (its file is
# then read again by that reader); the others' is NULL until computed (``Calls.line``).
_UNREAD = -1
_BATCH = 1 << 16
_GLOB_CHARS = frozenset("*?[{")
# A small analysis runs faster on one thread: below about 100,000 calls DuckDB's parallel
# operators cost more than they save (measured on 2 cores: a diff of two 10,000-call runs
# 10% faster, of 100,000-line traces 10% faster, of 300,000-line ones 20% slower). So an
# analysis starts on one thread and takes DuckDB's default once its inputs pass this size.
_PARALLEL_BYTES = 16 << 20
_SORT = orjson.OPT_SORT_KEYS
_WRITES = "('write', 'irreversible')"
# The files of signature keys: one a line, after its id where it has one (JSON holds no raw
# control character, so \x01 parts them, unquoted).
_KEY_DIALECT = "delim = '\x01', quote = '', escape = ''"
# A signed text's key's hash (of dkey's columns): texts whose key's hash no other text shares
# are their own signatures (see _sign).
_KEY_HASH = "hash(kind, name, key)"


def _text_hash(table: str = "") -> str:
    """SQL: the hash of an argument text, with its kind and name (of ``table``, as ``c.``)."""
    return f"hash({table}kind, {table}name, {table}args)"


def _run_hash(run: str) -> str:
    """SQL: the hash of a run's name (the column ``run``)."""
    return f"hash({run})"


def _keys_in(text: str) -> str:
    """SQL: the number of keys of a JSON text with no escape (a key ends with '":', found
    nowhere else where no string holds a quote), or of a shape."""
    return f"(strlen({text}) - strlen(replace({text}, '\":', ''))) // 2"


# A text's *shape* (see ``Calls._to_sign``), where the loop need not walk it (``how`` 0) and
# no object is an element of an array: its JSON structure (its keys in their order at each
# level, each value's type), and its number of keys. Most texts have one of a few shapes,
# which a pattern tells faster than ``json_structure`` (``_shape_columns``).
_SHAPED_TEXT = "how = 0 AND NOT (contains(args, '[{') OR contains(args, ',{'))"
_SHAPE = (
    f"CASE WHEN {_SHAPED_TEXT} THEN json_structure(args)::VARCHAR END AS shape, "
    f"CASE WHEN {_SHAPED_TEXT} THEN {_keys_in('args')} END AS keys"
)
_NO_SHAPE = "NULL::VARCHAR AS shape, NULL::BIGINT AS keys"
# The most shapes of a sample that texts are matched against (``_shape_columns``).
_MATCHED = 8
# RE2 patterns of a value that ``json_structure`` gives each of these types (a pattern
# matches no other value: a string with no escape nor control character; an integer of at
# most 19 digits, or negative of at most 18, which fits 64 bits; ``-0`` is matched by none).
_LEAF_PATTERNS = {
    "VARCHAR": r'"[^"\\\x00-\x1F]*"',
    "UBIGINT": "(?:0|[1-9][0-9]{0,18})",
    "BIGINT": "-[1-9][0-9]{0,17}",
    "BOOLEAN": "(?:true|false)",
    "NULL": "null",
}


def _shape_pattern(shape: str) -> tuple[str, int] | None:
    """An RE2 pattern that a minified JSON text fully matches only if ``json_structure``
    gives it ``shape`` (objects, each key in the shape's order, of the values of
    ``_LEAF_PATTERNS``), and the shape's number of keys; None for a shape it cannot tell (an
    array, an empty object, a float, a key with a quote, an escape or a control character)."""
    count = 0

    def walk(node: Any) -> str | None:
        nonlocal count
        if isinstance(node, str):
            return _LEAF_PATTERNS.get(node)
        if not isinstance(node, dict) or not node:
            return None
        parts = []
        for key, value in node.items():
            inner = walk(value)
            if inner is None or any(c in '"\\' or c < " " for c in key):
                return None
            count += 1
            parts.append(f'"{"".join(map(_literal, key))}":{inner}')
        return "\\{" + ",".join(parts) + "\\}"

    pattern = walk(json.loads(shape))
    return None if pattern is None else (pattern, count)


def _shape_code(index: int) -> str:
    """The short text that stands for the ``index``-th of the common shapes in a table of
    texts (``_shape_columns``): no shape's text, which starts with a bracket or a quote."""
    return f"#{index}"


def _shape_columns(common: Sequence[str] | None) -> tuple[str, str]:
    """SQL: a text's shape and number of keys (``_SHAPE``) in two steps, the first (``m``)
    to select beside ``how``, the second over it: a text that fully matches the pattern of
    one of the ``common`` shapes (``_shape_pattern``) has that shape, and the others theirs
    from ``json_structure`` (3M texts of one shape, on two threads: 0.3 s matched against
    1.2 s by ``json_structure``). None: no shape. A common shape is named by its code
    (``_shape_code``), which DuckDB keeps in the row (at most 12 bytes), where a shape's text
    took the tables 170 MB more at 3M texts (913 against 743 MB after ``dargs``), which
    spilled the statements after it."""
    if common is None:
        return "NULL::INTEGER AS m", _NO_SHAPE
    whens: list[str] = []
    shapes: list[str] = []
    keys: list[str] = []
    for code, shape in enumerate(common):
        found = _shape_pattern(shape)
        if found is None:
            continue
        pattern, count = found
        i = len(whens) + 1
        whens.append(f"WHEN regexp_full_match(args, {_quoted(pattern)}) THEN {i}")
        shapes.append(f"WHEN {i} THEN {_quoted(_shape_code(code))}")
        keys.append(f"WHEN {i} THEN {count}")
    matched = f"CASE {' '.join(whens)} ELSE 0 END" if whens else "0"
    first = f"CASE WHEN {_SHAPED_TEXT} THEN {matched} END AS m"
    shapes.append("WHEN 0 THEN json_structure(args)::VARCHAR")
    keys.append(f"WHEN 0 THEN {_keys_in('args')}")
    return first, f"CASE m {' '.join(shapes)} END AS shape, CASE m {' '.join(keys)} END AS keys"


# The tables that signing builds on its way to ``dmap`` (besides ``dargs``).
_SIGNING = ("dsign", "dkey", "dres", "dplain", "dalone", "dsample", "dshapes", "dfkey")
# Below this many calls, ``runs`` (``_ORDER``) is built beside the signing from its start
# (300k calls, fresh check processes against after ``dargs``: 0.91-1.02 of the time, 0.97
# the median of seven traces); at 3M, beside ``dargs``, both spilled past the memory limit
# and took 5-18% longer, so there it starts after ``dargs``.
_EARLY_ORDER = 1_000_000
# The calls whose texts' shapes are sampled first (``Calls._shaped``).
_SAMPLE = 8192
# Below this many calls, no text is told alone: their queries cost more than they save (a
# diff of 4,000 calls in a fresh process took 264 against 252 ms with them, of 30,000 calls
# 371 against 368 ms).
_SHAPED_FROM = 32_768
# The types of JSON structure that a value written one way only has: a string with no
# escape, an integer of 64 bits, a boolean, null (a float, or a mixed array: "JSON", may be
# written in more ways than one). A shape without them holds no value type (a string
# followed by a comma, a bracket or its end: in a shape, a key is followed by a colon).
_PLAIN_TYPES = ("UBIGINT", "BIGINT", "VARCHAR", "BOOLEAN", "NULL")
# The most shapes of classes of more than one shape that ``_families`` reads (a shape costs
# it ~3 us), and the most families whose texts DuckDB keys (a branch of one CASE each).
_FAMILY_SHAPES = 4096
_FAMILIES = 64


def _plain_shapes(texts: str, common: Sequence[str]) -> str:
    """SQL: the shapes of the table ``texts`` whose every text of their kind and name is
    written one way only (``plain``, see ``Calls._to_sign``), each with its number of texts
    (``n``) and of shapes in its class (``ways``). A shape's class: the hash of its kind and
    name, number of keys, length and sorted top-level keys, the same for any shape of the
    same keys in other orders at any level (a class may hold shapes of other keys too, in
    nested objects or where hashes meet: ``_families`` tells them apart). Counted by a group
    and a join on the hash: a window over 1.5M shapes took 1.67 s. A shape of the ``common``
    ones is named by its code in ``texts`` and in the result (``shape``, see
    ``_shape_columns``), and by its text in ``real``."""
    stripped = "real"
    for name in _PLAIN_TYPES:
        stripped = f"replace({stripped}, '\"{name}\"', '')"
    real = " ".join(
        f"WHEN {_quoted(_shape_code(i))} THEN {_quoted(shape)}" for i, shape in enumerate(common)
    )
    real = f"CASE shape {real} ELSE shape END" if real else "shape"
    return f"""
        WITH shapes AS (
            SELECT *, {real} AS real FROM (
                SELECT kind, name, shape, keys, count(*) AS n, bool_and(how = 0) AS zero
                FROM {texts} GROUP BY ALL)),
        plain AS (
            SELECT *, coalesce(zero AND keys = {_keys_in("real")}
                               AND NOT regexp_matches({stripped}, '"[,}}\\]]|"$'), false) AS plain
            FROM shapes),
        kept AS (
            SELECT kind, name, shape, real, keys, n,
                   hash(kind, name, keys, strlen(real), list_sort(json_keys(real))) AS class
            FROM plain ANTI JOIN (SELECT kind, name FROM plain WHERE NOT plain) USING (kind, name))
        SELECT kind, name, shape, real, keys, n, ways
        FROM kept JOIN (SELECT class, count(*) AS ways FROM kept GROUP BY class) USING (class)"""


def _quoted(text: str) -> str:
    """A SQL string literal of ``text``."""
    return "'" + text.replace("'", "''") + "'"


def _sorted_shape(shape: str) -> tuple[str, bool]:
    """A shape with the keys of every object sorted (the same for any shape of the same keys
    in other orders), and whether DuckDB's ``json_transform`` takes it as a structure: no
    empty key, and no two keys of an object equal but for case (a struct's fields)."""
    fits = True

    def walk(node: Any) -> Any:
        nonlocal fits
        if isinstance(node, dict):
            keys = sorted(node)
            if "" in node or len({k.lower() for k in keys}) < len(keys):
                fits = False
            return {k: walk(node[k]) for k in keys}
        if isinstance(node, list):
            return [walk(n) for n in node]
        return node

    return json.dumps(walk(json.loads(shape)), ensure_ascii=False, separators=(",", ":")), fits


# The columns of calls0, in order.
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

# The seed-JSONL fields, each read as JSON so that its type can be checked as the Python
# reader checks it (a typed read would turn a number into a string and back without a word).
_JSONL_FIELDS = "{run_id: 'JSON', step: 'JSON', tool: 'JSON', args: 'JSON', output_sha: 'JSON', "
_JSONL_FIELDS += "effect: 'JSON', tokens: 'JSON'}"
# A JSON value's text, as DuckDB keeps it (minified, escapes of plain characters resolved:
# "re\u0061d" is kept as "read", as the Python reader reads it; a number written again, as
# 1e2 is kept as 100.0), is a string's when it starts with a quote; an integer's that fits 64
# bits when it is the text of its cast to BIGINT (a cast of text, not of JSON: half the time;
# "5.0" casts to 5, "5.5" to 6, and neither reads back as itself); an effect is one of three
# strings.
_EFFECT_TEXTS = ", ".join(f"'\"{e}\"'" for e in sorted(EFFECTS))  # as SQL literals of their JSON
_JSONL_OK = f"""
    starts_with(run_id::VARCHAR, '"') AND starts_with(tool::VARCHAR, '"')
    AND starts_with(output_sha::VARCHAR, '"') AND args IS NOT NULL
    AND TRY_CAST(step::VARCHAR AS BIGINT)::VARCHAR = step::VARCHAR
    AND (effect IS NULL OR effect::VARCHAR IN ({_EFFECT_TEXTS}))
    AND (tokens IS NULL OR TRY_CAST(tokens::VARCHAR AS BIGINT)::VARCHAR = tokens::VARCHAR)
"""
# A row's effect where it is right (one of ``EFFECTS``): named by its text, not read from
# it (half the time of ``->>``).
_EFFECT = "CASE effect::VARCHAR " + " ".join(f"WHEN '\"{e}\"' THEN '{e}'" for e in sorted(EFFECTS))
_EFFECT += " END"
# The files' rows straight into calls0: ``$2`` maps a file's place in the list (DuckDB's
# ``file_index``) to its input index. DuckDB sizes its read buffers by the largest object it
# accepts: at 32 MB the read took 20% less time than at DuckDB's default 16 MB (300k and 3M
# lines, files of 25-350 MB; 6 MB files no change, 64 MB no better). A longer line makes the
# statement fail, and the Python reader reads that file.
_JSONL_INSERT = f"""
    INSERT INTO calls0
    SELECT $2[file_index::BIGINT + 1]::INTEGER, CASE WHEN {{ok}} THEN NULL ELSE {_UNREAD} END,
           run_id->>'$', TRY_CAST(step::VARCHAR AS BIGINT), 'tool', tool->>'$',
           CAST(args AS VARCHAR), output_sha->>'$', {_EFFECT},
           TRY_CAST(tokens::VARCHAR AS BIGINT)
    FROM read_json($1, format = 'newline_delimited', columns = {{fields}},
                   maximum_object_size = 33554432)
"""
# ``runs`` (per run: first call, calls, tokens, step segments, highest step, the most calls
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
        SELECT side, run, min(lo) AS first, sum(n)::BIGINT AS calls,
               sum(tokens)::BIGINT AS tokens, count(*) AS steps,
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
_READ_OUR_JSONL = "{" + ", ".join(f"{k}: '{v}'" for k, v in COLUMNS.items()) + "}"
# ``RecordTexts`` into calls0: each record's fields read typed, and its ``call_args`` in SQL
# (the input's "args", else the input object without its top-level "step", else the input;
# {"key": ...} when no input was stored): the same JSON values as the Python path's text.
_RECORD_FIELDS = "{kind: 'VARCHAR', key: 'VARCHAR', run: 'VARCHAR', name: 'VARCHAR', "
_RECORD_FIELDS += "step: 'BIGINT', input: 'JSON', out_digest: 'VARCHAR', effect: 'VARCHAR', "
_RECORD_FIELDS += "tokens: 'BIGINT', line: 'BIGINT'}"
_RECORD_ROWS = f"""
    INSERT INTO calls0
    SELECT ?, coalesce(line, 0), coalesce(run, ''), step, kind,
           coalesce(nullif(name, ''), kind),
           CASE WHEN input IS NULL THEN json_object('key', key)::VARCHAR
                WHEN json_type(input) <> 'OBJECT' THEN input::VARCHAR
                WHEN json_exists(input, '$.args') THEN (input -> '$.args')::VARCHAR
                ELSE json_merge_patch(input, '{{"step": null}}')::VARCHAR END,
           out_digest, effect, tokens
    FROM read_json(?, format = 'newline_delimited', columns = {_RECORD_FIELDS},
                   maximum_object_size = 16777216)
"""


@dataclass
class Input:
    """One input file: its path, the side it is on (1 baseline, 2 candidate; 1 for check)
    and its format (``auto`` to sniff it)."""

    path: Path
    side: int = 1
    fmt: TraceFormat = TraceFormat.AUTO


def fill_steps(records: Iterator[Record]) -> Iterator[Record]:
    """Give a cassette's records without a step the step of the model turn they belong to:
    each ``llm`` record without one starts a step (as do records before the first turn)."""
    import msgspec

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


def _lines_in(path: Path) -> int:
    """The number of lines of a file (a last line without newline counts). It runs beside
    DuckDB's read of the same file, so it reads into one buffer, reused: a new 8 MB chunk each
    time cost page faults, twice the time, taken from DuckDB's threads."""
    count, last, buf = 0, 10, bytearray(1 << 20)
    with path.open("rb", buffering=0) as fh:
        while n := fh.readinto(buf):
            count += buf.count(b"\n", 0, n)
            last = buf[n - 1]
    return count + (last != 10)


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


def _is_parquet(path: Path) -> bool:
    try:
        with path.open("rb") as fh:
            return fh.read(4) == PARQUET_MAGIC
    except OSError:
        return False


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
    # after each 16 MB written (a third of the time of a 300k-line diff).
    con.execute("SET checkpoint_threshold = '1TB'")
    return con


class Workspace:
    """One DuckDB database kept open for many analyses (the collector's requests): each
    analysis gets a connection and a schema of its own, dropped when it ends. This saves
    opening a database per analysis (about 10 ms). The threads setting is the database's, so
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


class _CsvFile:
    """Records for a table, written to a CSV file a batch at a time and read by DuckDB once
    (``load``, or ``scan`` within a statement), with ``dialect``. DuckDB's CSV reader
    refuses a record over 2 MB unless told the longest."""

    def __init__(self, path: Path, dialect: str):
        self.path = path
        self.dialect = dialect
        self.longest = 0
        self._fh = path.open("wb")

    def __enter__(self) -> _CsvFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self._fh.close()

    def write(self, records: list[bytes]) -> None:
        """Add ``records``, one a line."""
        if records:
            self._fh.write(b"\n".join(records) + b"\n")
            self.longest = max(self.longest, *map(len, records))

    def write_block(self, block: bytes | bytearray) -> None:
        """Add ``block``: records, each ending with a newline, not measured (a record over
        2 MB makes the read fail: then ``measure``)."""
        self._fh.write(block)

    def measure(self) -> None:
        """Set ``longest`` from the records written."""
        self._fh.close()
        with self.path.open("rb") as fh:
            self.longest = max(map(len, fh), default=0)

    def scan(self, columns: dict[str, str]) -> str:
        """The records written, as SQL (``columns``: names and types)."""
        self._fh.close()
        if not self.path.stat().st_size:  # no record: DuckDB cannot sniff an empty file
            nulls = ", ".join(f"NULL::{kind} AS {name}" for name, kind in columns.items())
            return f"(SELECT {nulls} LIMIT 0)"
        struct = ", ".join(f"'{name}': '{kind}'" for name, kind in columns.items())
        path = str(self.path).replace("'", "''")
        return (
            f"read_csv('{path}', header = false, {self.dialect}, allow_quoted_nulls = false, "
            f"columns = {{{struct}}}, max_line_size = {max(2_000_000, self.longest + 2)})"
        )

    def load(self, con: duckdb.DuckDBPyConnection, table: str, columns: dict[str, str]) -> None:
        """Create ``table`` (``columns``: names and types) from the records written."""
        con.execute(f"CREATE TABLE {table} AS SELECT * FROM {self.scan(columns)}")


@dataclass
class Calls:
    """The calls of an analysis in DuckDB (see the module docstring)."""

    config: AnalysisConfig
    skip_bad_lines: bool = False
    progress: Callable[[Path, int], None] | None = None
    con: duckdb.DuckDBPyConnection = field(init=False)
    sources: list[TraceSource] = field(default_factory=list)
    inputs: list[Input] = field(default_factory=list)
    _fast: set[int] = field(default_factory=set)
    _verbatim: bool = False  # a Parquet input's argument texts are as written (see _to_sign)
    _dmap: str = "TABLE"  # what _sign made dmap: a TABLE, or a VIEW of dargs
    _structures: list[str] = field(default_factory=list)  # the families DuckDB keys (_families)
    _common: list[str] = field(default_factory=list)  # the shapes named by code (_shape_columns)
    _first: dict[int, int] = field(default_factory=dict)  # a fast file's first rowid
    _tmp: tempfile.TemporaryDirectory[str] = field(init=False)
    workspace: Workspace | None = None
    _bytes: int = 0  # of the inputs read so far
    _threads: int = field(init=False)  # DuckDB's default, taken past _PARALLEL_BYTES
    _schema: str = ""  # in a workspace, this analysis's own
    _ordered: Background | None = None  # builds runs beside signing (see sign)
    events: int = 0  # the calls read (prepare drops calls0)
    _facts: str = ""  # see facts()

    def __post_init__(self) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="tracetape-")
        if self.workspace is not None:
            self.con, self._schema = self.workspace.open()
            self._threads = 1  # the workspace's setting (one thread an analysis)
        else:
            self.con = _connect(self.config.memory_limit, Path(self._tmp.name) / "spill")
            (self._threads,) = self.one("SELECT current_setting('threads')")
            self.con.execute("SET threads = 1")
        # DuckDB's own bar would print to stdout; its progress feeds ours (``_load_jsonl``).
        self.con.execute(
            "SET enable_progress_bar_print = false; SET progress_bar_time = 0; "
            f"SET enable_progress_bar = {'true' if self.progress else 'false'}"
        )
        columns = ", ".join(f"{k} {v}" for k, v in COLUMNS.items())
        self.con.execute(f"CREATE TABLE calls0 ({columns})")

    def _grow(self, size: int) -> None:
        """Count ``size`` more bytes of input; past ``_PARALLEL_BYTES``, use every thread."""
        before, self._bytes = self._bytes, self._bytes + size
        if before <= _PARALLEL_BYTES < self._bytes and self._threads > 1:
            self.con.execute(f"SET threads = {int(self._threads)}")

    def close(self) -> None:
        """Close the database (or drop this analysis's schema in its workspace) and remove
        its temporary files."""
        with suppress(Exception):  # a statement still running in another thread ends first
            self._wait_ordered()
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

    # -- loading -------------------------------------------------------------------------------

    def load(self, inputs: Sequence[Input]) -> None:
        """Read every input into ``calls0`` (see the module docstring). The seed-JSONL files
        are read together, in one statement (a fleet's day is many small files)."""
        jsonl: list[int] = []
        for inp in inputs:
            index = len(self.inputs)
            self.inputs.append(inp)
            with suppress(OSError):  # a missing file is reported by its reader
                self._grow(inp.path.stat().st_size)
            fmt = inp.fmt
            if fmt is TraceFormat.AUTO and _is_parquet(inp.path):
                self._load_parquet(index)
                continue
            if fmt is TraceFormat.AUTO:
                fmt = detect_format(inp.path, skip_bad_lines=self.skip_bad_lines)
                inp.fmt = fmt
            if fmt is TraceFormat.JSONL:
                jsonl.append(index)
                continue
            self._load_records(index)
        slow = self._load_jsonl(jsonl) if jsonl else set()
        self._fast.update(set(jsonl) - slow)
        for index in sorted(slow):
            self._load_records(index)

    def _report(self, index: int) -> None:
        if self.progress is not None:
            path = self.inputs[index].path
            self.progress(path, path.stat().st_size)

    def _load_jsonl(self, indices: list[int]) -> set[int]:
        """Read seed-JSONL files through DuckDB's ``read_json``, all in one statement; return
        those it cannot read exactly (each is then read by the Python reader). A statement
        that fails (a line that is not JSON) is tried again one file at a time, to tell
        which."""
        from .db import duckdb

        paths = [self.inputs[i].path for i in indices]
        # DuckDB reads a name holding * ? [ { as a pattern: such a file is read by Python.
        slow = {i for i, p in zip(indices, paths, strict=True) if _GLOB_CHARS & set(str(p))}
        if slow:
            rest = [i for i in indices if i not in slow]
            return slow | (self._load_jsonl(rest) if rest else set())
        if len(set(paths)) < len(paths):  # a file given twice (diff A A) is read twice
            return set().union(*(self._load_jsonl([i]) for i in indices))
        con = self.con
        query = _JSONL_INSERT.format(ok=_JSONL_OK, fields=_JSONL_FIELDS)
        try:
            # The files' lines are counted here while DuckDB reads them (in another thread).
            lines = self._watched(
                query,
                [[str(p) for p in paths], indices],
                paths,
                lambda: [_lines_in(p) for p in paths],
            )
        except (duckdb.InvalidInputException, duckdb.ConversionException):
            # A line DuckDB cannot read (the statement inserted nothing); a mistake in the
            # query itself is raised.
            if len(indices) == 1:
                return set(indices)
            return set().union(*(self._load_jsonl([i]) for i in indices))
        # Each file's rows, bad rows and first row: a file's rows are consecutive, in its
        # line order (the insertion order is kept), so a row's line is its offset.
        found = {
            index: (rows, bad, first, last)
            for index, rows, bad, first, last in con.execute(
                f"SELECT file, count(*), count(*) FILTER (WHERE line = {_UNREAD}), min(rowid), "
                "max(rowid) FROM calls0 WHERE file IN (SELECT unnest($1::INTEGER[])) GROUP BY file",
                [indices],
            ).fetchall()
        }
        for index, count in zip(indices, lines, strict=True):
            rows, bad, first, last = found.get(index, (0, 0, 0, -1))
            if bad or not rows or rows != count or last - first + 1 != rows:
                slow.add(index)
            else:
                self._first[index] = first
        if slow:
            con.execute(
                "DELETE FROM calls0 WHERE file IN (SELECT unnest($1::INTEGER[]))", [sorted(slow)]
            )
        for index in indices:
            if index not in slow:
                self._report(index)
        return slow

    def line(self) -> str:
        """The line of a row of calls0, as SQL: its ``line``, or on the fast path its offset
        among its file's rows (``lines`` computes the same from an ord, once calls0 is
        gone)."""
        if not self._first:
            return "line"
        starts = [self._first.get(i, 0) - 1 for i in range(len(self.inputs))]
        return f"coalesce(line, rowid - {starts}[file + 1])"

    def lines(self, ords: Iterable[int]) -> dict[int, int | None]:
        """The lines of the calls at ``ords`` (for the evidence of findings): a call of the
        fast path is its offset among its file's rows; the others' were kept by ``prepare``."""
        ords = set(ords)
        mask = (1 << _ROW_BITS) - 1
        found: dict[int, int | None] = {
            o: (o & mask) - self._first[o >> _ROW_BITS] + 1
            for o in ords
            if o >> _ROW_BITS in self._first
        }
        rest = [o for o in ords if o not in found]
        if rest:  # read by another reader, which gave the line (or none: NULL)
            query = "SELECT ord, line FROM lines WHERE ord IN (SELECT unnest($1::BIGINT[]))"
            found |= dict(self.rows(query, [rest]))
        return {o: found.get(o) for o in ords}

    def _watched(
        self,
        query: str,
        params: list[Any],
        paths: Sequence[Path],
        meanwhile: Callable[[], list[int]],
    ) -> list[int]:
        """Run ``query`` reading ``paths`` in another thread while this one runs
        ``meanwhile`` (DuckDB lets go of the GIL), then reports the query's progress as bytes
        of the files, in order; return what ``meanwhile`` returned."""
        job = Background(lambda: self.con.execute(query, params))
        try:
            result = meanwhile()
        finally:
            progress = self.progress
            sizes = [p.stat().st_size for p in paths] if progress is not None else []
            while progress is not None and job.running(0.05):
                done = self.con.query_progress()
                if done > 0:
                    left = int(sum(sizes) * min(done, 100.0) / 100)
                    for path, size in zip(paths, sizes, strict=True):  # the files read so far
                        progress(path, min(size, left))
                        left -= min(size, left)
                        if not left:
                            break
        job.wait()
        return result

    def _load_parquet(self, index: int) -> None:
        from .db import duckdb

        path = self.inputs[index].path
        try:
            found = self.con.execute(
                "SELECT name FROM parquet_schema(?) WHERE name <> 'schema'", [str(path)]
            ).fetchall()
        except duckdb.Error as exc:
            raise TraceError(f"not a readable Parquet file ({exc})", path=path) from None
        have = {name for (name,) in found}
        missing = [c for c in EXPORT_COLUMNS if c not in have]
        if missing:
            raise TraceError(
                f"the Parquet file lacks the column(s) {', '.join(missing)}; write it with "
                "tracetape export --parquet",
                path=path,
            )
        try:
            self.con.execute(
                f"INSERT INTO calls0 SELECT ?, {', '.join(EXPORT_COLUMNS[1:])} "
                "FROM read_parquet(?) ORDER BY seq",
                [index, str(path)],
            )
        except duckdb.Error as exc:
            raise TraceError(
                f"the Parquet file's columns do not hold what tracetape export --parquet "
                f"writes ({str(exc).splitlines()[0]})",
                path=path,
            ) from None
        self._verbatim = True
        self._report(index)

    def _load_records(self, index: int) -> None:
        """Read a file with the Python readers and bulk-load it through a JSONL file."""
        inp = self.inputs[index]
        progress = self.progress
        records = read_records(
            inp.path,
            inp.fmt,
            normalizer=self.config.normalizer,
            skip_bad_lines=self.skip_bad_lines,
            progress=None if progress is None else (lambda done: progress(inp.path, done)),
            sources=self.sources,
        )
        if inp.fmt is TraceFormat.CASSETTE:
            records = fill_steps(records)
        self._add_records(records, index)
        self._report(index)

    def load_records(
        self, records: Iterable[Record] | RecordTexts, name: str, side: int = 1
    ) -> None:
        """Add the calls of ``records`` (a request body read with ``read_records``, or a
        store's rows as ``RecordTexts``) as one more input named ``name`` on ``side``."""
        self.inputs.append(Input(Path(name), side))
        index = len(self.inputs) - 1
        if isinstance(records, RecordTexts):
            if self._add_texts(records.texts, index):
                return
            records = records.records()
        self._add_records(records, index)

    def _add_texts(self, texts: list[bytes], index: int) -> bool:
        """Bulk-load records from their JSON texts, read by DuckDB (``call_args`` in SQL);
        False (nothing loaded) where it cannot read them as the Python path would."""
        from .db import duckdb

        out = Path(self._tmp.name) / f"load{index}.jsonl"
        try:
            data = b"\n".join(texts) + b"\n"
            out.write_bytes(data)
            self._grow(len(data))
            (loaded,) = self.con.execute(_RECORD_ROWS, [index, str(out)]).fetchone() or (0,)
        except duckdb.Error:
            return False  # a text DuckDB does not read as Python does
        finally:
            out.unlink(missing_ok=True)
        if loaded != len(texts):  # not one record a line: read them in Python
            self.con.execute("DELETE FROM calls0 WHERE file = ?", [index])
            return False
        return True

    def _add_records(self, records: Iterable[Record], index: int) -> None:
        """Bulk-load records through a JSONL file DuckDB reads typed (it is ours)."""
        out = Path(self._tmp.name) / f"load{index}.jsonl"
        dumps = orjson.dumps
        longest = 0
        with out.open("wb") as fh:
            batch: list[bytes] = []
            for rec in records:
                for what, number in (("step", rec.step), ("tokens", rec.tokens)):
                    if number is not None and not INT64[0] <= number <= INT64[1]:
                        raise TraceError(
                            f"field '{what}': {number} does not fit 64 bits",
                            path=self.inputs[index].path,
                            line=rec.line,
                            field=what,
                        )
                args = call_args(rec)
                try:
                    text = dumps(args).decode()
                except TypeError:
                    text = canonical_json(args)
                row = {
                    "file": index,
                    "line": rec.line,
                    "run": rec.run or "",
                    "step": rec.step,
                    "kind": rec.kind,
                    "name": rec.name or rec.kind,
                    "args": text,
                    "out": rec.out_digest,
                    "effect": rec.effect,
                    "tokens": rec.tokens,
                }
                line = dumps(row)
                longest = max(longest, len(line))
                batch.append(line)
                if len(batch) >= _BATCH:
                    fh.write(b"\n".join(batch) + b"\n")
                    batch.clear()
            if batch:
                fh.write(b"\n".join(batch) + b"\n")
        self._grow(out.stat().st_size)
        if out.stat().st_size:
            # As large as the longest line: a record over DuckDB's default is no error here.
            self.con.execute(
                "INSERT INTO calls0 SELECT * FROM read_json(?, format = 'newline_delimited', "
                f"columns = {_READ_OUR_JSONL}, maximum_object_size = ?)",
                [str(out), max(1 << 24, longest + 1)],
            )
        out.unlink()

    def export_parquet(self, output: Path) -> int:
        """Write the loaded calls to ``output`` as Parquet, in input order (``seq`` numbers
        them across the inputs; ``line`` stays each call's line in its file); return how many.
        The file is written beside ``output`` and moved in place when complete."""
        from .db import duckdb

        if output.is_dir():
            raise OSError(f"{output}: is a folder; name the Parquet file to write")
        if not output.parent.is_dir():
            raise OSError(f"{output.parent}: no such folder to write {output.name} in")
        partial = output.with_name(f".{output.name}.partial")
        target = str(partial).replace("'", "''")
        columns = ", ".join(EXPORT_COLUMNS[2:])  # seq and line are computed
        try:
            self.con.execute(
                f"COPY (SELECT row_number() OVER (ORDER BY {ORD}) AS seq, {self.line()} AS line, "
                f"{columns} FROM calls0 ORDER BY {ORD}) TO '{target}' (FORMAT parquet)"
            )
            partial.replace(output)
        except duckdb.IOException as exc:
            raise OSError(f"{output}: cannot write it ({str(exc).splitlines()[0]})") from None
        finally:
            partial.unlink(missing_ok=True)
        return int(self.one("SELECT count(*) FROM calls0")[0])

    def _reload(self, files: set[int]) -> None:
        """Read ``files`` (loaded by the fast path) again with the Python reader."""
        for index in sorted(files):
            self.con.execute("DELETE FROM calls0 WHERE file = ?", [index])
            self._fast.discard(index)
            self._first.pop(index, None)
            self._load_records(index)

    # -- signatures ----------------------------------------------------------------------------

    def sign(self, side_of: str) -> None:
        """Build ``dmap``: each distinct argument text of the calls with a side (``side_of``
        being a SQL expression over ``calls0``) mapped to its signature (``sid``, ``resource``;
        ``prepare`` keeps each signature's first text in ``sigs``), normalizing each text once, in
        Python. Meanwhile DuckDB, in another thread, builds ``runs`` (``_ORDER``): the Python
        loop leaves a core free."""
        while True:
            failed = self._sign(side_of)
            if not failed:
                return
            self._reload(failed)

    def _cursor(self) -> duckdb.DuckDBPyConnection:
        """A new cursor on this analysis's tables (one per thread)."""
        cursor = self.con.cursor()
        if self._schema:  # a new connection starts in the workspace's main schema
            cursor.execute(f"USE memory.{self._schema}")
        return cursor

    def fork(self) -> Calls:
        """These calls on a cursor of their own, for another thread (close its ``con``)."""
        view = copy.copy(self)
        view.con = self._cursor()
        return view

    @property
    def concurrent(self) -> bool:
        """Whether work may run in threads of its own at once: not in a workspace, where
        each analysis runs on one thread and concurrent requests are the parallelism."""
        return self.workspace is None

    def _start(self, query: str) -> Background | None:
        """Run ``query`` on a cursor of its own in another thread; not ``concurrent``: run it
        now (and return None)."""
        if not self.concurrent:
            self.con.execute(query)
            return None
        cursor = self._cursor()

        def run() -> None:
            try:
                cursor.execute(query)
            finally:
                cursor.close()

        return Background(run)

    def _wait_ordered(self) -> None:
        """Wait for the statements ``sign`` started beside it (see ``_ORDER``)."""
        job, self._ordered = self._ordered, None
        if job is not None:
            job.wait()

    def _sign(self, side_of: str) -> set[int]:
        sides = f"({side_of}) > 0"
        con = self.con
        self._drop("dargs", *_SIGNING)
        self._structures, self._common = [], []
        # Each distinct text (a text's id is its first call's ord), with what the loop below
        # must do to it (``_how``) and, where DuckDB can drop its top-level volatile keys
        # exactly, the text without them (``norm``, see ``_unvolatile``).
        normalizer = self.config.normalizer
        (rows,) = self.one("SELECT count(*) FROM calls0")
        order = _ORDER.format(side_of=side_of, run_hash=_run_hash("g.run"))
        if rows < _EARLY_ORDER:
            self._ordered = self._start(order)
        common = self._shaped(sides, rows)
        self._common = common or []
        match, shape = _shape_columns(common)
        con.execute(
            "CREATE TABLE dargs AS SELECT * EXCLUDE (m), CASE WHEN how & 1 = 0 THEN NULL "
            f"ELSE {_unvolatile(normalizer)} END AS norm, {shape} FROM (SELECT *, {match} FROM ("
            f"SELECT *, {self._how()} AS how FROM ("
            f"SELECT kind, name, args, min({ORD}) AS first, {_text_hash()} AS h FROM calls0 "
            f"WHERE {sides} GROUP BY kind, name, args)))"
        )
        if rows >= _EARLY_ORDER:
            self._ordered = self._start(order)
        # The texts to sign: each distinct text, or where some lost volatile keys, each
        # distinct text without them (a trace that stamps every call with a request id has a
        # text a call, and a few without the ids), with its first text's id.
        (dropped,) = self.one("SELECT count(norm) FROM dargs")
        if dropped:
            con.execute(
                f"CREATE TABLE dsign AS SELECT * EXCLUDE (m), {shape} FROM (SELECT *, {match} "
                f"FROM (SELECT *, {self._how()} AS how FROM (SELECT kind, name, "
                "coalesce(norm, args) AS args, min(first) AS first FROM dargs GROUP BY ALL)))"
            )
        texts = "dsign" if dropped else "dargs"
        bare = (self._to_sign(texts) if common is not None else None) or (
            f"(SELECT first, kind, name, args FROM {texts} WHERE how = 0)"
        )
        failed = self._keys(texts, bare)
        if failed:
            # A file of the fast path has an argument that only the Python reader judges
            # right (not JSON to it, or nested too deep): read those files with it.
            self._wait_ordered()
            con.execute("DROP TABLE runs")
            return failed
        (keyed,) = self.one("SELECT count(*) FROM dkey")  # a text with a resource is keyed
        if not keyed and not self._structures and not dropped:
            # Every text is alone: its own signature, named by a view of dargs (a copy of
            # 1.5M texts cost 0.1-0.4 s).
            con.execute(
                "CREATE VIEW dmap AS SELECT kind, name, args, first, NULL::VARCHAR AS resource, "
                "first AS sid, h FROM dargs"
            )
            self._dmap = "VIEW"
            self._drop(*_SIGNING)
            return set()
        # A signature is (kind, name, the canonical JSON text of the normalized args); its
        # sid is its first call's ord, so sids follow the order of first appearance. Every
        # text of a signature normalizes to the same value, so it names the same resource.
        # The signed texts' signatures first (a signed text's id is its texts' least); a
        # text's is its signed text's. Most keys are a text's own: a text whose key's hash
        # no other key has is its own signature, and only the texts that share a hash
        # (``twins``: the same value written twice, or a collision) are grouped by their
        # keys, joined back (grouping every key cost 0.78 against 0.45 s at 1.5M texts).
        # ``dkey`` holds no argument text: the texts take their signatures from the few
        # twins (a join of every text with its key cost 0.17 s more at 1.5M texts).
        # The texts of families keyed by DuckDB (``_to_sign``) are the only ones that can
        # hold their values: grouped apart, where most are twins.
        families = (
            " UNION ALL SELECT first, min(first) OVER (PARTITION BY kind, name, key) FROM dfkey"
            if self._structures
            else ""
        )
        signed = f"""
            WITH keyed AS (SELECT *, {_KEY_HASH} AS h FROM dkey),
            twins AS (
                SELECT * FROM keyed
                SEMI JOIN (SELECT h FROM keyed GROUP BY h HAVING count(*) > 1) USING (h)),
            grouped AS (
                SELECT t.first, g.sid FROM twins t
                JOIN (SELECT kind, name, key, min(first) AS sid FROM twins GROUP BY ALL) g
                    USING (kind, name, key){families})
            SELECT t.kind, t.name, t.args, t.first, r.resource, coalesce(g.sid, t.first) AS sid
                   {"" if dropped else ", t.h"}
            FROM {texts} t
            LEFT JOIN grouped g USING (first)
            LEFT JOIN dres r ON r.first = t.first"""
        if dropped:
            signed = f"""
                SELECT d.kind, d.name, d.args, d.first, s.resource, s.sid, d.h
                FROM dargs d JOIN ({signed}) s ON s.kind = d.kind AND s.name = d.name
                AND s.args = coalesce(d.norm, d.args)"""
        con.execute(f"CREATE TABLE dmap AS {signed}")
        self._drop("dargs", *_SIGNING)
        return set()

    def _drop(self, *tables: str) -> None:
        """Drop ``tables``, those that exist."""
        self.con.execute("".join(f"DROP TABLE IF EXISTS {table};" for table in tables))

    def _how(self) -> str:
        """What the loop of ``_keys`` must do to an argument text: ``_how``."""
        return _how(self.config.normalizer, self.config.resource_keys)

    def _to_sign(self, texts: str) -> str | None:
        """The texts of the table ``texts`` that need no walk (``how`` 0) and whose keys
        ``_keys`` must find, where DuckDB signs some (a table of the others); else None (all).

        Texts written one way only are told apart by their text where they share a shape:
        minified (so no input is a Parquet file, whose texts are as written), with no escape
        (``how`` 0), each value a string, an integer of 64 bits, a boolean or null
        (``_PLAIN_TYPES``), no object an element of an array and no key twice in an object
        (then the shape names the key order of every object). Two such texts with the same
        shape are two values if their texts differ; two whose shapes differ but for key
        order (``_sorted_shape``) are two values too. So where every text of a kind and name
        is written one way only (``_plain_shapes``), a shape whose keys no other shape holds
        in another order has each of its texts alone: its own signature, with no key (a key
        cost a Python parse and write, ~0.9 us a text). The texts of a *family* of shapes
        (the same keys in several orders) are keyed by DuckDB: each written in the family's
        sorted key order (``json_transform_strict`` to the sorted shape, then ``to_json``:
        ~0.16 us a text), a JSON text of its value, so no two values share a key."""
        saved, rest = self._classify(texts)
        if _few(saved, rest):
            self._structures = []
            return None
        if self._structures:
            cases = " ".join(
                f"WHEN {i} THEN to_json(json_transform_strict(args, {_quoted(structure)}))"
                for i, structure in enumerate(self._structures)
            )
            from .db import duckdb

            try:
                self.con.execute(
                    f"CREATE TABLE dfkey AS SELECT first, kind, name, "
                    f"(CASE fam {cases} END)::VARCHAR AS key FROM {texts} "
                    "JOIN dalone USING (kind, name, shape, keys) WHERE fam >= 0"
                )
            except duckdb.Error:  # a structure DuckDB refuses: Python keys those texts
                self._drop("dfkey")
                (moved,) = self.one("SELECT coalesce(sum(n), 0) FROM dalone WHERE fam >= 0")
                self.con.execute("DELETE FROM dalone WHERE fam >= 0")
                self._structures = []
                rest += int(moved)
        if not rest:
            return f"(SELECT first, kind, name, args FROM {texts} LIMIT 0)"
        self.con.execute(
            f"CREATE TABLE dplain AS SELECT first, kind, name, args FROM {texts} "
            "ANTI JOIN dalone USING (kind, name, shape, keys) WHERE how = 0"
        )
        return "dplain"

    def _classify(self, texts: str) -> tuple[int, int]:
        """Build ``dalone``: the shapes of the table ``texts`` whose texts need no Python key
        (``fam`` -1: alone; else the index of their family's structure in ``_structures``).
        Return how many texts those shapes hold, and how many other texts have ``how`` 0."""
        self.con.execute(f"CREATE TABLE dshapes AS {_plain_shapes(texts, self._common)}")
        families = self._families()
        self.con.execute(
            "CREATE TABLE dalone AS SELECT kind, name, shape, keys, n, -1 AS fam FROM dshapes "
            "WHERE ways = 1 UNION ALL SELECT s.kind, s.name, s.shape, s.keys, s.n, f.fam "
            "FROM dshapes s JOIN (SELECT unnest($kinds) AS kind, unnest($names) AS name, "
            "unnest($shapes) AS shape, unnest($fams) AS fam) f USING (kind, name, shape)",
            {
                "kinds": [f[0] for f in families],
                "names": [f[1] for f in families],
                "shapes": [f[2] for f in families],
                "fams": [f[3] for f in families],
            },
        )
        saved, zero = self.one(
            "SELECT (SELECT coalesce(sum(n), 0) FROM dalone), "
            f"(SELECT count(*) FROM {texts} WHERE how = 0)"
        )
        self._drop("dshapes")
        return int(saved), int(zero) - int(saved)

    def _families(self) -> list[tuple[str, str, str, int]]:
        """The shapes of ``dshapes``' classes of more than one shape, each with its family
        (its kind, name and sorted shape, ``_sorted_shape``): -1 where it is the only shape
        of its family (its texts are alone), else the index of the family's sorted shape in
        ``_structures`` (DuckDB keys its texts). At most ``_FAMILY_SHAPES`` shapes are read
        (else none), and the ``_FAMILIES`` families of the most texts are keyed by DuckDB
        (a branch each of one ``CASE``); the others' shapes are left out (Python keys them)."""
        self._structures = []
        (count,) = self.one("SELECT count(*) FROM dshapes WHERE ways > 1")
        if not count or count > _FAMILY_SHAPES:
            return []
        members: dict[tuple[str, str, str], list[str]] = {}
        texts: dict[tuple[str, str, str], int] = {}
        fit: dict[tuple[str, str, str], bool] = {}
        for kind, name, shape, real, n in self.rows(
            "SELECT kind, name, shape, real, n FROM dshapes WHERE ways > 1"
        ):
            structure, fits = _sorted_shape(real)
            family = (kind, name, structure)
            members.setdefault(family, []).append(shape)
            texts[family] = texts.get(family, 0) + n
            fit[family] = fit.get(family, True) and fits
        out = []
        for family in sorted(members, key=lambda f: (-texts[f], f)):
            shapes = members[family]
            if len(shapes) == 1:
                index = -1
            elif fit[family] and len(self._structures) < _FAMILIES:
                index = len(self._structures)
                self._structures.append(family[2])
            else:
                continue
            out += [(family[0], family[1], shape, index) for shape in shapes]
        return out

    def _shaped(self, sides: str, rows: int) -> list[str] | None:
        """Whether to find the shapes of the texts (``_to_sign``), and if so the sample's
        most common shapes, at most ``_MATCHED`` (``_shape_columns``); None: not where some are
        as written (a Parquet input's), nor for fewer than ``_SHAPED_FROM`` calls, nor where a
        sample of the texts (of every n-th call, about ``_SAMPLE`` calls) has too few that
        need no Python key, in shapes of more than one text, to pay for them. A shape costs
        DuckDB about 0.3 us a text: a trace whose values are not written one way only
        (floats, escapes) takes longer with them."""
        if self._verbatim:
            return None
        if rows < _SHAPED_FROM:
            return None
        self.con.execute(
            f"CREATE TABLE dsample AS SELECT *, {_SHAPE} FROM (SELECT *, {self._how()} AS how "
            f"FROM (SELECT DISTINCT kind, name, args FROM calls0 "
            f"WHERE rowid % {max(1, rows // _SAMPLE)} = 0 AND {sides}))"
        )
        saved, rest = self._classify("dsample")
        # A shape of one text in the sample may well be a shape a text (keys that name
        # values): grouping them and telling their classes costs DuckDB about as much as
        # Python's keys (2.2 against 2.1 s for 1.5M texts at 3M calls), on top of the shapes.
        (single,) = self.one("SELECT count(*) FROM dalone WHERE n = 1")
        # The shapes of at least 1/64 of the sample's shaped texts, most texts first.
        common = self.rows(
            "SELECT shape FROM dsample WHERE shape IS NOT NULL GROUP BY shape "
            "HAVING count(*) * 64 >= (SELECT count(shape) FROM dsample) AND count(*) > 1 "
            "ORDER BY count(*) DESC, shape LIMIT ?",
            [_MATCHED],
        )
        self._drop("dalone", "dsample")
        self._structures = []
        return None if _few(saved - single, rest + single) else [shape for (shape,) in common]

    def _keys(self, texts: str, bare: str) -> set[int]:
        """The Python loop of ``_sign``: the signature key and resource of each text of the
        table ``texts`` that is not alone (``bare``: those with ``how`` 0 to sign, in an
        order that two scans of it keep), into ``dkey`` and ``dres``; return the files of
        the fast path to read again."""
        memo = MemoNormalizer(self.config.normalizer)
        resource_of = _resource_finder(self.config.resource_keys)
        fast = self._fast
        failed: set[int] = set()
        errors: list[tuple[int, str]] = []
        loads, dumps = orjson.loads, orjson.dumps
        res: list[bytes] = []  # the resources of a batch

        def key(first: int, text: str, how: int) -> bytes | None:
            """A text's key; None where it is not right (then ``failed`` or ``errors`` says
            why, and no key is used), and its resource into ``res``."""
            try:
                value = loads(text)
            except orjson.JSONDecodeError:
                if first >> _ROW_BITS in fast:
                    failed.add(first >> _ROW_BITS)
                    return None
                try:
                    value = json.loads(text)  # beyond orjson (NaN, a lone surrogate, 400 digits)
                except ValueError as exc:
                    errors.append((first, f"not JSON ({exc})"))
                    return None
            if how & 2 and not readable(value):
                if first >> _ROW_BITS not in fast:
                    errors.append((first, TOO_DEEP))
                failed.add(first >> _ROW_BITS)
                return None
            normalized = memo(value) if how & 1 else value
            if how & 4 and (resource := resource_of(normalized)) is not None:
                # a quoted resource may hold a newline: each is still one record
                quoted = resource.replace('"', '""')
                res.append(f'{first},"{quoted}"'.encode())
            try:
                return dumps(normalized, option=_SORT)
            except TypeError:
                return canonical_json(normalized).encode()

        # Each text's key (its canonical text) goes to a file a batch at a time, which DuckDB
        # reads once at the end (in parallel: a read a batch took three times as long), and
        # signatures are grouped there: Python holds one batch, whatever the number of
        # distinct texts (a set of them all cost ~250 bytes a text: 1.5M distinct texts took
        # check past 1 GiB). In no order (a sort of every distinct text would cost more than
        # the loop saves): of the texts that are not right, the first in the input is the
        # error. The few resources go apart, quoted.
        tmp = Path(self._tmp.name)
        plain = _CsvFile(tmp / "plain.txt", _KEY_DIALECT)
        keys = _CsvFile(tmp / "keys.txt", _KEY_DIALECT)
        named = _CsvFile(tmp / "resources.csv", "quote = '\"', escape = '\"'")
        cursor = self._cursor()
        with plain, keys, named:
            # Most texts need no walk, no depth check and no resource (``how`` 0): only their
            # keys, one a line in the order of the table (DuckDB keeps a scan's order, and
            # pairs them with their texts by position), appended to one buffer: 0.09 against
            # 0.14 s for 150,000 texts with their ids (formatting an id cost 0.2 us), or
            # 0.20 s for a list of the keys orjson returns (each stays in a block of its own).
            cursor.execute(f"SELECT args FROM {bare}")
            done = 0
            while rows := cursor.fetchmany(_BATCH):
                block = bytearray()
                try:
                    for (text,) in rows:
                        block += dumps(loads(text), option=_SORT)
                        block += b"\n"
                except (orjson.JSONDecodeError, TypeError):
                    # A text orjson cannot read or write: the batch again, with the ids.
                    block = bytearray()
                    firsts = self.rows(
                        f"SELECT first FROM {bare} LIMIT ? OFFSET ?",
                        [len(rows), done],
                    )
                    for (first,), (text,) in zip(firsts, rows, strict=True):
                        block += key(first, text, 0) or b"-"
                        block += b"\n"
                plain.write_block(block)
                done += len(rows)
            cursor.execute(f"SELECT first, args, how FROM {texts} WHERE how <> 0")
            while rows := cursor.fetchmany(_BATCH):
                out = []
                for first, text, how in rows:
                    if (found := key(first, text, how)) is not None:
                        out.append(b"%d\x01%b" % (first, found))
                keys.write(out)
                named.write(res)
                res.clear()
        cursor.close()
        if errors:
            raise self._bad(*min(errors))
        if failed & fast:
            return failed & fast
        from .db import duckdb

        query = (
            f"CREATE TABLE dkey AS SELECT * FROM (SELECT first, kind, name FROM {bare}) "
            "POSITIONAL JOIN {} "
            f"UNION ALL SELECT first, kind, name, key FROM {texts} JOIN {{}} USING (first)"
        )
        columns = {"first": "BIGINT", "key": "VARCHAR"}

        def create() -> None:
            self.con.execute(query.format(plain.scan({"key": "VARCHAR"}), keys.scan(columns)))

        try:
            create()
        except duckdb.InvalidInputException:  # a key over 2 MB: the lines are measured
            plain.measure()
            create()
        named.load(self.con, "dres", {"first": "BIGINT", "resource": "VARCHAR"})
        return set()

    def _bad(self, first: int, message: str) -> TraceError:
        """The error for the argument text of the call at ``first`` (its ``ORD``)."""
        (line,) = self.one(f"SELECT {self.line()} FROM calls0 WHERE {ORD} = ?", [first])
        return TraceError(
            f"field 'args': {message}",
            path=self.inputs[first >> _ROW_BITS].path,
            line=line,
            field="args",
        )

    def sig_args(self, sids: Sequence[int]) -> dict[int, Any]:
        """The normalized arguments of signatures, as their first call gave them (key order
        kept), for the evidence of findings."""
        if not sids:
            return {}
        rows = self.con.execute(
            "SELECT sid, args FROM sigs WHERE sid IN (SELECT unnest($1::BIGINT[]))",
            [list(set(sids))],
        ).fetchall()
        memo = MemoNormalizer(self.config.normalizer)
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
        self._wait_ordered()
        # As narrow as the detectors allow (at 3M lines calls and calls0 are most of the
        # engine's memory): a call's run is its run's first call (``runs`` names it), its
        # tool its signature's (``sigs``), and its line is computed from its ord (``lines``)
        # but where a reader other than the fast path gave it.
        if len(self._first) < len(self.inputs):  # some lines were given by another reader
            con.execute(
                f"CREATE TABLE lines AS SELECT {ORD} AS ord, line FROM calls0 "
                f"WHERE line IS NOT NULL AND ({side_of}) > 0"
            )
        # Each call joins its text in dmap and its run in runs by their hashes (0.32 against
        # 0.51 s for 3M calls and 1.5M texts): a call's text and run are there, so where two
        # texts (or runs) share a hash, a call of either finds both, and calls has more rows
        # than the runs have calls; then calls is built again, joined by name and text.
        signed = f"""
            SELECT c.*, {side_of} AS side, {_ORD_C} AS ord, d.sid, d.resource
            FROM calls0 c JOIN dmap d ON {{}}"""
        (windowed,) = self.one("SELECT coalesce(bool_or(windowed), false) FROM runs")
        segments = _SEGMENTS + (_WINDOWED if windowed else "")
        by_hash = signed.format(f"d.h = {_text_hash('c.')}")
        con.execute(segments.format(signed=by_hash, run=f"r.rh = {_run_hash('c.run')}"))
        if self.one("SELECT (SELECT count(*) FROM calls) <> (SELECT sum(calls) FROM runs)")[0]:
            by_text = signed.format("d.kind = c.kind AND d.name = c.name AND d.args = c.args")
            con.execute(f"DROP TABLE calls; {segments.format(signed=by_text, run='r.run = c.run')}")
        # What the detectors read is in calls, runs and sigs: the input's rows go (at 3M
        # lines they are half the engine's memory, and the detectors would spill), and of
        # the argument texts, each signature's first (its evidence) stays, in ``sigs``.
        (self.events,) = self.one("SELECT count(*) FROM calls0")
        con.execute(
            "DROP TABLE calls0; CREATE TABLE sigs AS SELECT sid, kind, name, resource, args "
            f"FROM dmap WHERE first = sid; DROP {self._dmap} dmap; DROP TABLE IF EXISTS dargs"
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


def _how(normalizer: Normalizer, keys: Sequence[str]) -> str:
    """What the loop of ``Calls._keys`` must do to an argument text (the column ``args``), as
    SQL: walk it with the normalizer (1: it may change), check its depth (2: more brackets
    than MAX_DEPTH), look for a resource in it (4: it may name one). The first and the last
    each look for keys spelled in the text: most texts spell none of either, which one pass
    of both patterns tells (0.22 against 0.36 s for two passes over 1.5M texts)."""

    def how(spelled: bool) -> str:
        return (
            f"CASE WHEN {_may_change(normalizer, spelled)} THEN 1 ELSE 0 END "
            f"+ CASE WHEN {_DEEP} THEN 2 ELSE 0 END "
            f"+ CASE WHEN {_may_name(keys, spelled)} THEN 4 ELSE 0 END"
        )

    volatile, named = _volatile_pattern(normalizer), _resource_pattern(keys)
    if volatile is None or named is None:
        return how(True)
    either = f"regexp_matches(args, '{volatile}|{named}')"
    return f"CASE WHEN {either} THEN {how(True)} ELSE {how(False)} END"


def _few(alone: int, rest: int) -> bool:
    """Whether texts alone are too few to be worth copying the others for ``_keys``: none,
    or under an eighth of the texts of ``how`` 0."""
    return not alone or alone * 7 < rest


def _may_change(normalizer: Normalizer, spelled: bool = True) -> str:
    """A SQL test on an argument's JSON text (the column ``args``) that is false only when
    normalizing cannot change it: no volatile key (as the text spells keys: no escape in it),
    nothing a built-in mask needs (a UUID and an ISO time hold a dash, a temp path names /tmp/
    or /var/folders/), and no custom masks nor character classes in the volatile keys. Then
    the normalizer's walk is skipped: the value is its own normalized form. DuckDB runs it on
    every distinct text at once, in parallel, where a Python test cost ~0.7 us a text. Not
    ``spelled``: the test for a text known to spell no volatile key."""
    pattern = _volatile_pattern(normalizer)
    if pattern is None:
        return "true"  # anything may change: walk every value
    regex = f" OR regexp_matches(args, '{pattern}')" if spelled else ""
    return (
        "(contains(args, '\\') OR contains(args, '-') OR contains(args, '/tmp/') "
        f"OR contains(args, '/var/folders/'){regex})"
    )


def _volatile_pattern(normalizer: Normalizer) -> str | None:
    """RE2 (what DuckDB's regexp_matches runs): a volatile key spelled between quotes, then a
    colon. None: the normalizer may change any value (custom masks, character classes)."""
    if normalizer.masks or any("[" in k for k in normalizer.volatile_keys):
        return None
    names = "|".join(map(_key_pattern, normalizer.volatile_keys))
    return f'"(?:{names})"\\s*:'


# Whether an argument text (the column ``args``) has more brackets than MAX_DEPTH.
_DEEP = (
    f"strlen(args) > {MAX_DEPTH} AND "
    f"strlen(args) - strlen(replace(replace(args, '[', ''), '{{', '')) > {MAX_DEPTH}"
)


def _unvolatile(normalizer: Normalizer) -> str:
    """SQL: an argument text (the column ``args``) without its top-level volatile keys of
    exact names, where DuckDB drops them exactly; else NULL. The normalizer drops those keys
    anyway, so the text left normalizes to the same value (and names the same resource),
    and one Python walk serves every text that differs only in them.

    DuckDB's ``json_merge_patch`` with ``{"key": null, ...}`` drops them and writes the rest
    as it was (numbers, duplicate keys and key order too). A text is patched only if it is an
    object, not too deep to read (the Python reader judges those whole) and holds nothing
    that the Python reader might refuse where DuckDB reads it: an escape (a lone surrogate),
    NaN or infinity, a trailing comma, 300 digits in a row or an exponent of 3 digits (a
    number orjson reads as infinity). Then both read it alike, and the dropped values can
    hide no error."""
    exact = [k for k in normalizer.volatile_keys if not any(c in k for c in "*?[")]
    if not exact:
        return "NULL"
    names = "|".join(map(_key_pattern, exact))
    patch = json.dumps(dict.fromkeys(exact)).replace("'", "''")
    value = r"[:,[]\s*[+-]?"  # where a value starts: after a colon, a comma or a bracket
    odd = rf"{value}(?i:nan|inf)|{value}[0-9.]+[eE][+-]?[0-9]{{3}}|[0-9]{{300}}|,\s*[]}}]"
    # Each WHEN is tried on the texts the WHENs before it left (most texts name no volatile
    # key, and are done with one test).
    return f"""CASE
        WHEN NOT regexp_matches(args, '"(?:{names})"\\s*:') THEN NULL
        WHEN NOT starts_with(args, '{{') OR contains(args, '\\') THEN NULL
        WHEN regexp_matches(args, '{odd}') OR ({_DEEP}) OR NOT json_valid(args) THEN NULL
        ELSE nullif(json_merge_patch(args, '{patch}')::VARCHAR, args) END"""


def _key_pattern(glob: str) -> str:
    """A volatile-key glob (``*`` and ``?`` only) as an RE2 pattern over a JSON key's text."""
    return "".join('[^"]*' if c == "*" else '[^"]' if c == "?" else _literal(c) for c in glob)


def _literal(char: str) -> str:
    """One character as an RE2 pattern that matches it alone: letters, digits and ``_`` as
    themselves, any other by its code point (nothing to quote in a SQL string either)."""
    return char if char.isascii() and (char.isalnum() or char == "_") else f"\\x{{{ord(char):X}}}"


def _may_name(keys: Sequence[str], spelled: bool = True) -> str:
    """A SQL test on an argument's JSON text (the column ``args``) that is false only when its
    value holds none of the resource ``keys``: the text spells none of them between quotes and
    has no escape (with which a writer may spell a key: ``"\\u00e9"``, ``"q\\""``). Not
    ``spelled``: the test for a text known to spell none."""
    pattern = _resource_pattern(keys)
    if pattern is None:
        return "false"
    regex = f" OR regexp_matches(args, '{pattern}')" if spelled else ""
    return f"(contains(args, '\\'){regex})"


def _resource_pattern(keys: Sequence[str]) -> str | None:
    """RE2: a resource key spelled between quotes (None: no key)."""
    if not keys:
        return None
    return '"(?:' + "|".join("".join(map(_literal, key)) for key in keys) + ')"'


def _resource_finder(keys: Sequence[str]) -> Callable[[Any], str | None]:
    """The resource that normalized arguments name: the value of the first of ``keys`` they
    hold (a string or an integer)."""
    order = list(dict.fromkeys(keys))  # earlier resource keys win
    missing = object()

    def resource(args: Any) -> str | None:
        if type(args) is not dict:
            return None
        for name in order:  # a few lookups, not a walk of the arguments
            value = args.get(name, missing)
            if value is missing:
                continue
            kind = type(value)  # a string or an integer, not a bool
            if kind is str or kind is int or (isinstance(value, str | int) and kind is not bool):
                return str(value)
        return None

    return resource
