"""The loader: every input of an analysis into the table ``calls0`` (see ``engine``).

One path a format, chosen once a file (``load``):

* seed-JSONL files go straight through one DuckDB ``read_json`` into ``calls0`` (a fleet's
  day is many files), with the SQL their format module offers beside its record reader
  (``formats.jsonl.bulk_select``): every field is read as JSON and its type checked in SQL as
  the Python reader checks it; a row's line is its offset among its file's rows (``line`` is
  left NULL and computed where it is read: ``Calls.line``). The fast path is taken only where
  it is exact: if a field has another type, a line is blank, torn or not JSON, or an argument
  text is one orjson refuses (NaN, 1e310: DuckDB reads them) or nested deeper than the
  analysis walks (the few texts that may be such are asked here, ``_refused``), the file's
  rows are deleted and it is read again by the Python reader, which names the bad line and
  field (or skips it under ``skip_bad_lines``). So every text loaded is one the signing
  reads;
* a Parquet file written by ``tracetape export --parquet`` is read as it is;
* records given as their JSON texts (``RecordTexts``: a store's rows) are read by
  ``read_json`` too, with ``call_args`` in SQL;
* every other format (cassettes, span records, OTLP/JSON) is read as ``Record`` s by
  ``formats.read_records`` and handed to DuckDB as lists of its columns.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import suppress
from pathlib import Path
from typing import Any

import msgspec
import orjson

from ..canonical import canonical_json
from ..errors import TraceError
from ..formats import TraceFormat, detect_format, read_records
from ..formats.cassette import fill_steps
from ..formats.jsonl import bulk_select
from ..formats.schemas import INT64, readable
from ..record import Record, RecordTexts, call_args
from .causes import answer_digest
from .engine import BATCH, COLUMNS, EXPORT_COLUMNS, ORD, Background, Calls, Input
from .normalize import MemoNormalizer

__all__ = ["PARQUET_MAGIC", "export_parquet", "load", "load_records"]

PARQUET_MAGIC = b"PAR1"
# The line of a row of the JSONL fast path that the Python reader must judge (its file is
# then read again by that reader); the others' is NULL until computed (``Calls.line``).
_UNREAD = -1
# The line of a row of the JSONL fast path whose argument text orjson may refuse
# (``formats.jsonl.SUSPECT``): asked to orjson as the file is loaded (``_refused``).
_SUSPECT = -2
_GLOB_CHARS = frozenset("*?[{")
# A file read as records up to this size keeps its records for the report (the calls a diff
# shows); a larger one is read again when they are asked for.
KEEP_BYTES = 16 << 20
# ``_add_records``' batch into calls0: the input's index, then a list of each other column,
# each unnest named by its column: unnamed, DuckDB inserts long texts (a conversation a
# model call) several times slower (benchmarks/README.md, "The diff of long conversations").
_INSERT_COLUMNS = "INSERT INTO calls0 SELECT $1, " + ", ".join(
    f"unnest(${i}::{kind}[]) AS {name}"
    for i, (name, kind) in enumerate(list(COLUMNS.items())[1:], start=2)
)
# What a record adds to the size of the input (``Calls.grow``) besides its argument text.
_ROW_BYTES = 96
# ``RecordTexts`` into calls0: each record's fields read typed, and its ``call_args`` in SQL
# (the input's "args", else the input object without its top-level "step" and "unkeyed", else
# the input; {"key": ...} when no input was stored): the same JSON values as the Python path's.
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
                ELSE json_merge_patch(input, '{{"step": null, "unkeyed": null}}')::VARCHAR END,
           out_digest, effect, tokens
    FROM read_json(?, format = 'newline_delimited', columns = {_RECORD_FIELDS},
                   maximum_object_size = 16777216)
"""


def _lines_in(path: Path) -> int:
    """The number of lines of a file (a last line without newline counts). It runs beside
    DuckDB's read of the same file, so it reads into one buffer, reused: a new 8 MB chunk each
    time costs page faults, taken from DuckDB's threads."""
    count, last, buf = 0, 10, bytearray(1 << 20)
    with path.open("rb", buffering=0) as fh:
        while n := fh.readinto(buf):
            count += buf.count(b"\n", 0, n)
            last = buf[n - 1]
    return count + (last != 10)


def _is_parquet(path: Path) -> bool:
    try:
        with path.open("rb") as fh:
            return fh.read(4) == PARQUET_MAGIC
    except OSError:
        return False


def load(calls: Calls, inputs: Sequence[Input]) -> None:
    """Read every input into ``calls0`` (see the module docstring). The seed-JSONL files
    are read together, in one statement (a fleet's day is many small files)."""
    jsonl: list[int] = []
    for inp in inputs:
        index = len(calls.inputs)
        calls.inputs.append(inp)
        with suppress(OSError):  # a missing file is reported by its reader
            calls.grow(inp.path.stat().st_size)
        fmt = inp.fmt
        if fmt is TraceFormat.AUTO and _is_parquet(inp.path):
            _load_parquet(calls, index)
            continue
        if fmt is TraceFormat.AUTO:
            fmt = detect_format(inp.path, skip_bad_lines=calls.skip_bad_lines)
            inp.fmt = fmt
        if fmt is TraceFormat.JSONL:
            jsonl.append(index)
            continue
        _load_records(calls, index)
    slow = _load_jsonl(calls, jsonl) if jsonl else set()
    for index in sorted(slow):
        _load_records(calls, index)


def _report(calls: Calls, index: int) -> None:
    if calls.progress is not None:
        path = calls.inputs[index].path
        calls.progress(path, path.stat().st_size)


def _load_jsonl(calls: Calls, indices: list[int]) -> set[int]:
    """Read seed-JSONL files through DuckDB's ``read_json``, all in one statement; return
    those it cannot read exactly (each is then read by the Python reader). A statement
    that fails (a line that is not JSON) is tried again one file at a time, to tell
    which."""
    from .db import duckdb

    paths = [calls.inputs[i].path for i in indices]
    # DuckDB reads a name holding * ? [ { as a pattern: such a file is read by Python.
    slow = {i for i, p in zip(indices, paths, strict=True) if _GLOB_CHARS & set(str(p))}
    if slow:
        rest = [i for i in indices if i not in slow]
        return slow | (_load_jsonl(calls, rest) if rest else set())
    if len(set(paths)) < len(paths):  # a file given twice (diff A A) is read twice
        return set().union(*(_load_jsonl(calls, [i]) for i in indices))
    con = calls.con
    query = "INSERT INTO calls0 " + bulk_select(_UNREAD, _SUSPECT)
    try:
        # The files' lines are counted here while DuckDB reads them (in another thread).
        lines = _watched(
            calls,
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
        return set().union(*(_load_jsonl(calls, [i]) for i in indices))
    # Each file's rows, bad rows and first row: a file's rows are consecutive, in its
    # line order (the insertion order is kept), so a row's line is its offset.
    found = {
        index: (rows, bad, suspect, first, last)
        for index, rows, bad, suspect, first, last in con.execute(
            f"SELECT file, count(*), count(*) FILTER (WHERE line = {_UNREAD}), "
            f"count(*) FILTER (WHERE line = {_SUSPECT}), min(rowid), max(rowid) "
            "FROM calls0 WHERE file IN (SELECT unnest($1::INTEGER[])) GROUP BY file",
            [indices],
        ).fetchall()
    }
    for index, count in zip(indices, lines, strict=True):
        rows, bad, suspect, first, last = found.get(index, (0, 0, 0, 0, -1))
        torn = bad or not rows or rows != count or last - first + 1 != rows
        if torn or (suspect and _refused(calls, index)):
            slow.add(index)
        else:
            calls.first_rows[index] = first
    if slow:
        con.execute(
            "DELETE FROM calls0 WHERE file IN (SELECT unnest($1::INTEGER[]))", [sorted(slow)]
        )
    for index in indices:
        if index not in slow:
            _report(calls, index)
    return slow


def _refused(calls: Calls, index: int) -> bool:
    """Whether orjson refuses an argument text of file ``index`` that the fast path marked
    ``_SUSPECT``, or finds it nested deeper than the analysis walks; if none, the marks go."""
    cursor = calls.cursor()
    cursor.execute(f"SELECT args FROM calls0 WHERE file = ? AND line = {_SUSPECT}", [index])
    loads = orjson.loads
    try:
        while rows := cursor.fetchmany(BATCH):
            for (text,) in rows:
                try:
                    if not readable(loads(text)):
                        return True
                except orjson.JSONDecodeError:
                    return True
    finally:
        cursor.close()
    calls.con.execute(
        f"UPDATE calls0 SET line = NULL WHERE file = ? AND line = {_SUSPECT}",
        [index],
    )
    return False


def _watched(
    calls: Calls,
    query: str,
    params: list[Any],
    paths: Sequence[Path],
    meanwhile: Callable[[], list[int]],
) -> list[int]:
    """Run ``query`` reading ``paths`` in another thread while this one runs
    ``meanwhile`` (DuckDB lets go of the GIL), then reports the query's progress as bytes
    of the files, in order; return what ``meanwhile`` returned."""
    job = Background(lambda: calls.con.execute(query, params))
    try:
        result = meanwhile()
    finally:
        progress = calls.progress
        sizes = [p.stat().st_size for p in paths] if progress is not None else []
        while progress is not None and job.running(0.05):
            done = calls.con.query_progress()
            if done > 0:
                left = int(sum(sizes) * min(done, 100.0) / 100)
                for path, size in zip(paths, sizes, strict=True):  # the files read so far
                    progress(path, min(size, left))
                    left -= min(size, left)
                    if not left:
                        break
    job.wait()
    return result


def _load_parquet(calls: Calls, index: int) -> None:
    from .db import duckdb

    path = calls.inputs[index].path
    try:
        found = calls.con.execute(
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
        calls.con.execute(
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
    calls.verbatim = True
    _report(calls, index)


def _load_records(calls: Calls, index: int) -> None:
    """Read a file with the Python readers and bulk-load it through a JSONL file."""
    inp = calls.inputs[index]
    progress = calls.progress
    records = read_records(
        inp.path,
        inp.fmt,
        normalizer=calls.config.normalizer,
        skip_bad_lines=calls.skip_bad_lines,
        progress=None if progress is None else (lambda done: progress(inp.path, done)),
        sources=calls.sources,
    )
    if inp.fmt is TraceFormat.CASSETTE:
        records = fill_steps(records)
    read = len(calls.sources)
    small = False
    with suppress(OSError):  # a missing file is reported by its reader
        small = inp.fmt is not TraceFormat.JSONL and inp.path.stat().st_size <= KEEP_BYTES
    kept: list[Record] | None = [] if small else None
    _add_records(calls, records, index, kept)
    if kept is not None:
        calls.kept[index] = kept
    ended = calls.sources[-1].ended if len(calls.sources) > read else None
    _started(calls, index, ended)
    _report(calls, index)


def _started(calls: Calls, index: int, ended: str | None = None) -> None:
    """Note where the rows of input ``index`` start (``records.records_at``), and how its
    runs ended where its format says."""
    (start,) = calls.one("SELECT min(rowid) FROM calls0 WHERE file = ?", [index])
    if start is not None:
        calls.starts[index] = start
    if ended is not None:
        for (run,) in calls.rows("SELECT DISTINCT run FROM calls0 WHERE file = ?", [index]):
            calls.endings[run] = ended


def load_records(
    calls: Calls, records: Iterable[Record] | RecordTexts, name: str, side: int = 1
) -> None:
    """Add the calls of ``records`` (a request body read with ``read_records``, or a
    store's rows as ``RecordTexts``) as one more input named ``name`` on ``side``."""
    calls.inputs.append(Input(Path(name), side))
    index = len(calls.inputs) - 1
    if isinstance(records, RecordTexts):
        calls.kept[index] = records.texts
        if not _add_texts(calls, records.texts, index):
            _add_records(calls, records.records(), index)
    elif isinstance(records, list | tuple):
        calls.kept[index] = records
        _add_records(calls, records, index)
    else:
        kept: list[Record] = []
        _add_records(calls, records, index, kept)
        calls.kept[index] = kept
    _started(calls, index)


def _add_texts(calls: Calls, texts: list[bytes], index: int) -> bool:
    """Bulk-load records from their JSON texts, read by DuckDB (``call_args`` in SQL);
    False (nothing loaded) where it cannot read them as the Python path would."""
    from .db import duckdb

    out = calls.folder / f"load{index}.jsonl"
    try:
        data = b"\n".join(texts) + b"\n"
        out.write_bytes(data)
        calls.grow(len(data))
        (loaded,) = calls.con.execute(_RECORD_ROWS, [index, str(out)]).fetchone() or (0,)
    except duckdb.Error:
        return False  # a text DuckDB does not read as Python does
    finally:
        out.unlink(missing_ok=True)
    if loaded != len(texts):  # not one record a line: read them in Python
        calls.con.execute("DELETE FROM calls0 WHERE file = ?", [index])
        return False
    _answers(calls, texts, index)
    return True


class _Answer(msgspec.Struct, gc=False):
    """A stored record's answer, read without its input (the conversation: the bulk)."""

    kind: str
    api: str | None = None
    out: Any = None


_decode_answer = msgspec.json.Decoder(_Answer).decode


def _answers(calls: Calls, texts: list[bytes], index: int) -> None:
    """A model answer's digest is what it says (``causes.answer_digest``), as the Python path
    gives it: the stored digest, of the whole envelope, is replaced for each model call
    recorded at a provider's boundary."""
    norm = MemoNormalizer(calls.config.normalizer)  # answers' prose: rarely a mask to look for
    rows: list[int] = []
    digests: list[str] = []
    for i, text in enumerate(texts):
        if b'"llm"' not in text or b'"api"' not in text:
            continue
        rec = _decode_answer(text)
        said = answer_digest(rec.out, rec.api, norm) if rec.kind == "llm" else None
        if said is not None:
            rows.append(i)
            digests.append(said)
    if rows:
        calls.con.execute(
            "UPDATE calls0 SET out = d.out FROM (SELECT unnest($1::BIGINT[]) AS i, "
            "unnest($2::VARCHAR[]) AS out) d "
            "WHERE file = $3 AND rowid = (SELECT min(rowid) FROM calls0 WHERE file = $3) + d.i",
            [rows, digests, index],
        )


def _add_records(
    calls: Calls, records: Iterable[Record], index: int, kept: list[Record] | None = None
) -> None:
    """Insert the calls of ``records``, a batch at a time, as lists of their columns that
    DuckDB unnests side by side: no file is written. ``kept`` gets each record too."""
    dumps = orjson.dumps
    norm = MemoNormalizer(calls.config.normalizer)  # answers' prose: rarely a mask to look for
    path = calls.inputs[index].path
    columns: list[list[Any]] = [[] for _ in range(len(COLUMNS) - 1)]
    line, run, step, kind, name, args, out, effect, tokens = columns
    size = 0
    for rec in records:
        for what, number in (("step", rec.step), ("tokens", rec.tokens)):
            if number is not None and not INT64[0] <= number <= INT64[1]:
                raise TraceError(
                    f"field '{what}': {number} does not fit 64 bits",
                    path=path,
                    line=rec.line,
                    field=what,
                )
        if kept is not None:
            kept.append(rec)
        value = call_args(rec)
        said = answer_digest(rec.out, rec.api, norm) if rec.kind == "llm" else None
        try:
            text = dumps(value).decode()
        except TypeError:
            text = canonical_json(value)
        line.append(rec.line)
        run.append(rec.run or "")
        step.append(rec.step)
        kind.append(rec.kind)
        name.append(rec.name or rec.kind)
        args.append(text)
        out.append(said or rec.out_digest)
        effect.append(rec.effect)
        tokens.append(rec.tokens)
        size += len(text) + _ROW_BYTES
        if len(line) >= BATCH:
            _insert(calls, index, columns, size)
            size = 0
    if line:
        _insert(calls, index, columns, size)


def _insert(calls: Calls, index: int, columns: list[list[Any]], size: int) -> None:
    """Insert one batch of ``_add_records`` (and empty its lists)."""
    calls.grow(size)
    calls.con.execute(_INSERT_COLUMNS, [index, *columns])
    for column in columns:
        column.clear()


def export_parquet(calls: Calls, output: Path) -> int:
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
        calls.con.execute(
            f"COPY (SELECT row_number() OVER (ORDER BY {ORD}) AS seq, {calls.line()} AS line, "
            f"{columns} FROM calls0 ORDER BY {ORD}) TO '{target}' (FORMAT parquet)"
        )
        partial.replace(output)
    except duckdb.IOException as exc:
        raise OSError(f"{output}: cannot write it ({str(exc).splitlines()[0]})") from None
    finally:
        partial.unlink(missing_ok=True)
    return int(calls.one("SELECT count(*) FROM calls0")[0])
