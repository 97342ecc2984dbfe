"""The seed's JSONL trace: one tool call a line, one or many runs a file.

::

    {"run_id": "run_0042", "step": 1, "tool": "search_issues", "args": {...},
     "output_sha": "a1b2c3", "tokens": 812, "ts": "2026-08-31T09:12:04Z"}

with ``effect`` (``read``/``write``/``irreversible``), ``span_id``, ``parent_id`` and ``ms``
honoured when present. A line names its run; it stores the output's digest only, so a record
read from it has ``out_digest`` and no ``out``. Its ``input`` is the tool call as the tape keys
one (``{"name", "args", "step"}``), and its ``key`` that payload's key.

``read_records`` validates every line. Its bulk twin, ``bulk_select``, is the SQL with which
the analysis reads large seed-JSONL traces through DuckDB's ``read_json`` instead
(``analysis.load``), checking each field's type in SQL as this reader checks it; a file it
cannot read exactly goes to this reader, so errors name the same line and field, and
``skip_bad_lines`` drops the same lines.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson

from .._enums import EFFECTS
from ..record import Record
from ._source import TraceFormat, TraceSource
from .schemas import (
    INT64,
    MAX_DEPTH,
    TOO_DEEP,
    deep_sql,
    fmt_of,
    is_effect,
    json_type,
    keyed,
    not_an_effect,
    readable,
    schema_of,
)

__all__ = ["SUSPECT", "bulk_select", "read_records"]


def read_records(src: TraceSource) -> Iterator[Record]:
    """Read the seed's JSONL trace schema as records, one tool call a line.

    >>> import io
    >>> from tracetape.formats import read_records
    >>> line = b'{"run_id":"r1","step":1,"tool":"ls","args":{},"output_sha":"ab"}\\n'
    >>> [(r.run, r.step, r.name, r.out_digest, r.key) for r in read_records([line])]
    [('r1', 1, 'ls', 'ab', 'tool:72f0e8bd012b678a')]
    """
    name = src.name
    for lineno, raw in src.lines():
        c = _jsonl_record(src, raw.rstrip(b"\r\n"), lineno)
        if c is None:
            continue
        # as deep as its brackets at most: most lines are not walked
        if raw.count(b"{") + raw.count(b"[") > MAX_DEPTH and not readable(c["args"]):
            src.bad(TOO_DEEP, lineno, "args")
            continue
        get = c.get
        tool, step = c["tool"], c["step"]
        yield keyed(
            "tool",
            {"name": tool, "args": c["args"], "step": step},
            seq=lineno,
            run=str(c["run_id"]),
            name=tool,
            out_digest=c["output_sha"],
            effect=get("effect"),
            tokens=get("tokens"),
            ms=get("ms"),
            ts=get("ts"),
            span_id=get("span_id"),
            parent_id=get("parent_id"),
            source=name,
            line=lineno,
        )


def _jsonl_record(src: TraceSource, raw: bytes, lineno: int) -> dict[str, Any] | None:
    """Parse and validate one seed-JSONL line; None (after ``src.bad``) if it is unusable."""
    try:
        c = orjson.loads(raw)
        run, step, tool, out, _ = (c["run_id"], c["step"], c["tool"], c["output_sha"], c["args"])
    except orjson.JSONDecodeError as exc:
        if raw.strip():
            src.bad(f"line is not valid JSON ({exc})", lineno)
        return None
    except (KeyError, TypeError):
        _bad_jsonl(src, raw, lineno)
        return None
    effect, tokens = c.get("effect"), c.get("tokens")
    if (
        type(run) is not str
        or type(tool) is not str
        or type(step) is not int
        or not INT64[0] <= step <= INT64[1]
        or type(out) is not str
        or (effect is not None and not is_effect(effect))
        or (tokens is not None and (type(tokens) is not int or not INT64[0] <= tokens <= INT64[1]))
    ) and not _check_jsonl(src, c, lineno):
        return None
    return c  # type: ignore[no-any-return]


_JSONL_REQUIRED = ("run_id", "step", "tool", "args", "output_sha")


def _bad_jsonl(src: TraceSource, raw: bytes, lineno: int) -> None:
    obj = orjson.loads(raw)
    if not isinstance(obj, dict):
        src.bad(f"line holds {schema_of(obj)}, not a trace record object", lineno)
        return
    missing = next(f for f in _JSONL_REQUIRED if f not in obj)
    hint = ""
    if fmt_of(obj) not in (None, TraceFormat.JSONL):
        hint = f"; this line is {schema_of(obj)} but the file started as seed JSONL (mixed schemas)"
    src.bad(
        f"missing (a seed trace record needs {', '.join(_JSONL_REQUIRED)}){hint}",
        lineno,
        missing,
    )


def _check_jsonl(src: TraceSource, c: dict[str, Any], lineno: int) -> bool:
    """Validate field types on the slow path; True if the record is usable."""
    run, step, tool, out = c["run_id"], c["step"], c["tool"], c["output_sha"]
    if not (type(run) is str or type(run) is int):
        src.bad(f"must be a string, found {json_type(run)}", lineno, "run_id")
    elif type(step) is not int:
        src.bad(f"must be an integer step number, found {json_type(step)}", lineno, "step")
    elif not INT64[0] <= step <= INT64[1]:
        src.bad("must be a step number that fits 64 bits", lineno, "step")
    elif type(tool) is not str:
        src.bad(f"must be the tool name as a string, found {json_type(tool)}", lineno, "tool")
    elif type(out) is not str:
        src.bad(
            f"must be the output hash as a string, found {json_type(out)}", lineno, "output_sha"
        )
    elif c.get("effect") is not None and not is_effect(c["effect"]):
        src.bad(not_an_effect(c["effect"]), lineno, "effect")
    elif c.get("tokens") is not None and type(c["tokens"]) is not int:
        src.bad(f"must be an integer, found {json_type(c['tokens'])}", lineno, "tokens")
    elif c.get("tokens") is not None and not INT64[0] <= c["tokens"] <= INT64[1]:
        src.bad("must be a token count that fits 64 bits", lineno, "tokens")
    else:
        return True
    return False


# -- the bulk reader (DuckDB) -----------------------------------------------------------------

# The fields, each read as JSON so that its type can be checked as ``read_records`` checks it
# (a typed read would turn a number into a string and back without a word).
_FIELDS = "{run_id: 'JSON', step: 'JSON', tool: 'JSON', args: 'JSON', output_sha: 'JSON', "
_FIELDS += "effect: 'JSON', tokens: 'JSON'}"
# A JSON value's text, as DuckDB keeps it (minified, escapes of plain characters resolved:
# "re\u0061d" is kept as "read", as ``read_records`` reads it; a number written again, as 1e2
# is kept as 100.0), is a string's when it starts with a quote; an integer's that fits 64
# bits when it is the text of its cast to BIGINT (a cast of text, not of JSON: half the time;
# "5.0" casts to 5, "5.5" to 6, and neither reads back as itself); an effect is one of three
# strings.
_EFFECT_TEXTS = ", ".join(f"'\"{e}\"'" for e in sorted(EFFECTS))  # as SQL literals of their JSON
_OK = f"""
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
# The longest line DuckDB reads: it sizes its read buffers by it (benchmarks/README.md).
_LONGEST = 32 << 20
# An argument text DuckDB reads that the analysis may not (the signing reads it with orjson,
# and walks it recursively), as RE2: DuckDB's JSON reader also takes NaN and Infinity in any
# case (and keeps them, as it keeps a number past a double's range: 1e310, 400 digits), and
# nothing else orjson refuses (it refuses a lone surrogate, a control character, bad UTF-8;
# tests/formats/test_jsonl.py holds it to that). In the minified text DuckDB writes, a value
# starts after a colon, a comma, a bracket or nothing; such a value is NaN or Inf(inity), or a
# number past 1.8e308: an exponent of three digits, or of two and 209 digits before the point
# (200 or more are marked). And DuckDB reads a line nested deeper than ``MAX_DEPTH``
# (``deep_sql``). A text marked is not always refused (a string may hold ":nan", 1.5e300 is a
# double): the loader asks orjson and ``readable``.
SUSPECT = (
    r"(?:^|[:,\[])-?(?:[nN][aA][nN]|[iI][nN][fF]|[0-9]+(?:\.[0-9]+)?[eE][+-]?[0-9]{3}|[0-9]{200})"
)


def bulk_select(unread: int, suspect: int) -> str:
    """SQL: the rows of the seed-JSONL files ``$1`` (a list of paths) as the analysis's calls
    (``file, line, run, step, kind, name, args, out, effect, tokens``), ``$2`` mapping a file's
    place in the list to its input index. A row's ``line`` is NULL where every field has the
    type ``read_records`` requires (it is then the row's offset among its file's rows);
    ``unread`` where one has not: its file must be read by ``read_records``, which names the
    line and field; ``suspect`` where the argument text is one orjson may refuse, or nested
    too deep (``SUSPECT``): the caller asks orjson and ``readable``. A line that is not JSON,
    or longer than 32 MB, makes the statement fail."""
    return f"""
        SELECT $2[file_index::BIGINT + 1]::INTEGER,
               CASE WHEN NOT coalesce({_OK}, false) THEN {unread}
                    WHEN regexp_matches(args::VARCHAR, '{SUSPECT}')
                         OR {deep_sql("args::VARCHAR")} THEN {suspect} END,
               run_id->>'$', TRY_CAST(step::VARCHAR AS BIGINT), 'tool', tool->>'$',
               CAST(args AS VARCHAR), output_sha->>'$', {_EFFECT},
               TRY_CAST(tokens::VARCHAR AS BIGINT)
        FROM read_json($1, format = 'newline_delimited', columns = {_FIELDS},
                       maximum_object_size = {_LONGEST})"""
