"""The signatures: each distinct argument text of an analysis mapped to its signature.

``sign`` builds ``dmap`` from ``calls0`` (see ``engine``): each call's *signature* is the
kind, the name and the canonical JSON text of the normalized arguments (never an inferred
struct type: a missing key and an explicit null stay apart, a string that looks like a UUID
stays a string). Normalization runs in Python once per distinct argument text, in batches
(once per distinct text without its top-level volatile keys, where DuckDB drops them exactly:
``normalize.unvolatile``); what comes back is that canonical text (the signature key) and the
*resource* the arguments name (``resource_keys``), joined back by the argument text (most
texts' keys come back alone, in the order of the texts, and are paired with them by
position). A signature's id is the ``ord`` of its first call. Keys are grouped where their
hashes meet, and compared whole there: no digest stands for a value, so no two values can
collide.

A text that no other text can equal is its own signature and needs no key: one written one
way only (minified, no escape, no float), where the texts of its kind and name that hold the
same keys all hold them in one order at every level (their JSON structure, found by DuckDB: a
*shape*, see ``Signer._to_sign``). A trace whose writer keeps one key order has few texts to
key; where such texts hold the same keys in several orders (two writers), DuckDB keys them,
each written in its keys' sorted order (a *family* of shapes).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from ..canonical import canonical_json
from ..formats.schemas import TOO_DEEP, readable
from .engine import BATCH, ORD, ROW_BITS, Calls, text_hash
from .load import reload
from .normalize import MemoNormalizer, how_sql, literal, resource_finder, unvolatile

if TYPE_CHECKING:
    from .db import duckdb

__all__ = ["Signer", "sign"]

_SORT = orjson.OPT_SORT_KEYS
# The files of signature keys: one a line, after its id where it has one (JSON holds no raw
# control character, so \x01 parts them, unquoted).
_KEY_DIALECT = "delim = '\x01', quote = '', escape = ''"
# A signed text's key's hash (of dkey's columns): texts whose key's hash no other text shares
# are their own signatures (see Signer._sign).
_KEY_HASH = "hash(kind, name, key)"


def sign(calls: Calls, side_of: str) -> None:
    """Build ``dmap`` for the calls with a side (``side_of``, a SQL expression over
    ``calls0``): ``Signer.sign``."""
    Signer(calls).sign(side_of)


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
            parts.append(f'"{"".join(map(literal, key))}":{inner}')
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


def _few(alone: int, rest: int) -> bool:
    """Whether texts alone are too few to be worth copying the others for ``_keys``: none,
    or under an eighth of the texts of ``how`` 0."""
    return not alone or alone * 7 < rest


@dataclass
class Signer:
    """The signing of one analysis's calls (see the module docstring)."""

    calls: Calls
    structures: list[str] = field(default_factory=list)  # the families DuckDB keys (_families)
    common: list[str] = field(default_factory=list)  # the shapes named by code (_shape_columns)

    def sign(self, side_of: str) -> None:
        """Build ``dmap``: each distinct argument text of the calls with a side (``side_of``
        being a SQL expression over ``calls0``) mapped to its signature (``sid``, ``resource``;
        ``prepare`` keeps each signature's first text in ``sigs``), normalizing each text once, in
        Python. Meanwhile DuckDB, in another thread, builds ``runs`` (``Calls.order``).

        A file of the seed-JSONL fast path with an argument text only the Python reader
        judges right (not JSON to orjson, or nested too deep) is read again by that reader,
        and the signing starts over."""
        while True:
            failed = self._sign(side_of)
            if not failed:
                return
            reload(self.calls, failed)

    def _sign(self, side_of: str) -> set[int]:
        sides = f"({side_of}) > 0"
        con = self.calls.con
        self.calls.drop("dargs", *_SIGNING)
        self.structures, self.common = [], []
        # Each distinct text (a text's id is its first call's ord), with what the loop below
        # must do to it (``_how``) and, where DuckDB can drop its top-level volatile keys
        # exactly, the text without them (``norm``, see ``_unvolatile``).
        normalizer = self.calls.config.normalizer
        (rows,) = self.calls.one("SELECT count(*) FROM calls0")
        if rows < _EARLY_ORDER:
            self.calls.order(side_of)
        common = self._shaped(sides, rows)
        self.common = common or []
        match, shape = _shape_columns(common)
        con.execute(
            "CREATE TABLE dargs AS SELECT * EXCLUDE (m), CASE WHEN how & 1 = 0 THEN NULL "
            f"ELSE {unvolatile(normalizer)} END AS norm, {shape} FROM (SELECT *, {match} FROM ("
            f"SELECT *, {self._how()} AS how FROM ("
            f"SELECT kind, name, args, min({ORD}) AS first, {text_hash()} AS h FROM calls0 "
            f"WHERE {sides} GROUP BY kind, name, args)))"
        )
        if rows >= _EARLY_ORDER:
            self.calls.order(side_of)
        # The texts to sign: each distinct text, or where some lost volatile keys, each
        # distinct text without them (a trace that stamps every call with a request id has a
        # text a call, and a few without the ids), with its first text's id.
        (dropped,) = self.calls.one("SELECT count(norm) FROM dargs")
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
        failed = self.keys(texts, bare)
        if failed:
            # A file of the fast path has an argument that only the Python reader judges
            # right (not JSON to it, or nested too deep): read those files with it.
            self.calls.wait_ordered()
            con.execute("DROP TABLE runs")
            return failed
        (keyed,) = self.calls.one("SELECT count(*) FROM dkey")  # a text with a resource is keyed
        if not keyed and not self.structures and not dropped:
            # Every text is alone: its own signature, named by a view of dargs (a copy of
            # 1.5M texts cost 0.1-0.4 s).
            con.execute(
                "CREATE VIEW dmap AS SELECT kind, name, args, first, NULL::VARCHAR AS resource, "
                "first AS sid, h FROM dargs"
            )
            self.calls.dmap = "VIEW"
            self.calls.drop(*_SIGNING)
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
            if self.structures
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
        self.calls.drop("dargs", *_SIGNING)
        return set()

    def _how(self) -> str:
        """What the loop of ``keys`` must do to an argument text: ``how_sql``."""
        return how_sql(self.calls.config.normalizer, self.calls.config.resource_keys)

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
            self.structures = []
            return None
        if self.structures:
            cases = " ".join(
                f"WHEN {i} THEN to_json(json_transform_strict(args, {_quoted(structure)}))"
                for i, structure in enumerate(self.structures)
            )
            from .db import duckdb

            try:
                self.calls.con.execute(
                    f"CREATE TABLE dfkey AS SELECT first, kind, name, "
                    f"(CASE fam {cases} END)::VARCHAR AS key FROM {texts} "
                    "JOIN dalone USING (kind, name, shape, keys) WHERE fam >= 0"
                )
            except duckdb.Error:  # a structure DuckDB refuses: Python keys those texts
                self.calls.drop("dfkey")
                (moved,) = self.calls.one("SELECT coalesce(sum(n), 0) FROM dalone WHERE fam >= 0")
                self.calls.con.execute("DELETE FROM dalone WHERE fam >= 0")
                self.structures = []
                rest += int(moved)
        if not rest:
            return f"(SELECT first, kind, name, args FROM {texts} LIMIT 0)"
        self.calls.con.execute(
            f"CREATE TABLE dplain AS SELECT first, kind, name, args FROM {texts} "
            "ANTI JOIN dalone USING (kind, name, shape, keys) WHERE how = 0"
        )
        return "dplain"

    def _classify(self, texts: str) -> tuple[int, int]:
        """Build ``dalone``: the shapes of the table ``texts`` whose texts need no Python key
        (``fam`` -1: alone; else the index of their family's structure in ``_structures``).
        Return how many texts those shapes hold, and how many other texts have ``how`` 0."""
        self.calls.con.execute(f"CREATE TABLE dshapes AS {_plain_shapes(texts, self.common)}")
        families = self._families()
        self.calls.con.execute(
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
        saved, zero = self.calls.one(
            "SELECT (SELECT coalesce(sum(n), 0) FROM dalone), "
            f"(SELECT count(*) FROM {texts} WHERE how = 0)"
        )
        self.calls.drop("dshapes")
        return int(saved), int(zero) - int(saved)

    def _families(self) -> list[tuple[str, str, str, int]]:
        """The shapes of ``dshapes``' classes of more than one shape, each with its family
        (its kind, name and sorted shape, ``_sorted_shape``): -1 where it is the only shape
        of its family (its texts are alone), else the index of the family's sorted shape in
        ``_structures`` (DuckDB keys its texts). At most ``_FAMILY_SHAPES`` shapes are read
        (else none), and the ``_FAMILIES`` families of the most texts are keyed by DuckDB
        (a branch each of one ``CASE``); the others' shapes are left out (Python keys them)."""
        self.structures = []
        (count,) = self.calls.one("SELECT count(*) FROM dshapes WHERE ways > 1")
        if not count or count > _FAMILY_SHAPES:
            return []
        members: dict[tuple[str, str, str], list[str]] = {}
        texts: dict[tuple[str, str, str], int] = {}
        fit: dict[tuple[str, str, str], bool] = {}
        for kind, name, shape, real, n in self.calls.rows(
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
            elif fit[family] and len(self.structures) < _FAMILIES:
                index = len(self.structures)
                self.structures.append(family[2])
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
        if self.calls.verbatim:
            return None
        if rows < _SHAPED_FROM:
            return None
        self.calls.con.execute(
            f"CREATE TABLE dsample AS SELECT *, {_SHAPE} FROM (SELECT *, {self._how()} AS how "
            f"FROM (SELECT DISTINCT kind, name, args FROM calls0 "
            f"WHERE rowid % {max(1, rows // _SAMPLE)} = 0 AND {sides}))"
        )
        saved, rest = self._classify("dsample")
        # A shape of one text in the sample may well be a shape a text (keys that name
        # values): grouping them and telling their classes costs DuckDB about as much as
        # Python's keys (2.2 against 2.1 s for 1.5M texts at 3M calls), on top of the shapes.
        (single,) = self.calls.one("SELECT count(*) FROM dalone WHERE n = 1")
        # The shapes of at least 1/64 of the sample's shaped texts, most texts first.
        common = self.calls.rows(
            "SELECT shape FROM dsample WHERE shape IS NOT NULL GROUP BY shape "
            "HAVING count(*) * 64 >= (SELECT count(shape) FROM dsample) AND count(*) > 1 "
            "ORDER BY count(*) DESC, shape LIMIT ?",
            [_MATCHED],
        )
        self.calls.drop("dalone", "dsample")
        self.structures = []
        return None if _few(saved - single, rest + single) else [shape for (shape,) in common]

    def keys(self, texts: str, bare: str) -> set[int]:
        """The Python loop of ``_sign``: the signature key and resource of each text of the
        table ``texts`` that is not alone (``bare``: those with ``how`` 0 to sign, in an
        order that two scans of it keep), into ``dkey`` and ``dres``; return the files of
        the fast path to read again."""
        memo = MemoNormalizer(self.calls.config.normalizer)
        resource_of = resource_finder(self.calls.config.resource_keys)
        fast = self.calls.fast
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
                if first >> ROW_BITS in fast:
                    failed.add(first >> ROW_BITS)
                    return None
                try:
                    value = json.loads(text)  # beyond orjson (NaN, a lone surrogate, 400 digits)
                except ValueError as exc:
                    errors.append((first, f"not JSON ({exc})"))
                    return None
            if how & 2 and not readable(value):
                if first >> ROW_BITS not in fast:
                    errors.append((first, TOO_DEEP))
                failed.add(first >> ROW_BITS)
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
        tmp = self.calls.folder
        plain = _CsvFile(tmp / "plain.txt", _KEY_DIALECT)
        keys = _CsvFile(tmp / "keys.txt", _KEY_DIALECT)
        named = _CsvFile(tmp / "resources.csv", "quote = '\"', escape = '\"'")
        cursor = self.calls.cursor()
        with plain, keys, named:
            # Most texts need no walk, no depth check and no resource (``how`` 0): only their
            # keys, one a line in the order of the table (DuckDB keeps a scan's order, and
            # pairs them with their texts by position), appended to one buffer: 0.09 against
            # 0.14 s for 150,000 texts with their ids (formatting an id cost 0.2 us), or
            # 0.20 s for a list of the keys orjson returns (each stays in a block of its own).
            cursor.execute(f"SELECT args FROM {bare}")
            done = 0
            while rows := cursor.fetchmany(BATCH):
                block = bytearray()
                try:
                    for (text,) in rows:
                        block += dumps(loads(text), option=_SORT)
                        block += b"\n"
                except (orjson.JSONDecodeError, TypeError):
                    # A text orjson cannot read or write: the batch again, with the ids.
                    block = bytearray()
                    firsts = self.calls.rows(
                        f"SELECT first FROM {bare} LIMIT ? OFFSET ?",
                        [len(rows), done],
                    )
                    for (first,), (text,) in zip(firsts, rows, strict=True):
                        block += key(first, text, 0) or b"-"
                        block += b"\n"
                plain.write_block(block)
                done += len(rows)
            cursor.execute(f"SELECT first, args, how FROM {texts} WHERE how <> 0")
            while rows := cursor.fetchmany(BATCH):
                out = []
                for first, text, how in rows:
                    if (found := key(first, text, how)) is not None:
                        out.append(b"%d\x01%b" % (first, found))
                keys.write(out)
                named.write(res)
                res.clear()
        cursor.close()
        if errors:
            raise self.calls.bad(*min(errors))
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
            self.calls.con.execute(query.format(plain.scan({"key": "VARCHAR"}), keys.scan(columns)))

        try:
            create()
        except duckdb.InvalidInputException:  # a key over 2 MB: the lines are measured
            plain.measure()
            create()
        named.load(self.calls.con, "dres", {"first": "BIGINT", "resource": "VARCHAR"})
        return set()
