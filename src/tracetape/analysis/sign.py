"""The signatures: each distinct argument text of an analysis mapped to its signature.

``sign`` builds ``dmap`` from ``calls0`` (see ``engine``): each call's *signature* is the
kind, the name and the canonical JSON text of the normalized arguments (never an inferred
struct type: a missing key and an explicit null stay apart, a string that looks like a UUID
stays a string). Normalization runs in Python once per distinct argument text, in batches
(once per distinct text without its top-level volatile keys, where DuckDB drops them exactly:
``normalize.unvolatile``); what comes back is that canonical text (the signature key) and the
*resource* the arguments name (``resource_keys``), joined back by the argument text (most
texts' keys come back alone, in the order of the texts, and are paired with them by
position; a text that is its own key, canonical already as a writer of sorted keys writes
it, comes back as a mark: a conversation's text is not copied back). A signature's id is
the ``ord`` of its first call. Keys are grouped where their hashes meet, and compared whole
there: no digest stands for a value, so no two values can collide.

A text that no other text can equal is its own signature and needs no key: one written one
way only (minified, no escape, no float), where the texts of its kind and name that hold the
same keys all hold them in one order at every level (their JSON structure, found by DuckDB: a
*shape*, see ``Signer._to_sign``). A trace whose writer keeps one key order has few texts to
key; where such texts hold the same keys in several orders (two writers), DuckDB keys them,
each written in its keys' sorted order (a *family* of shapes).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import orjson

from ..canonical import canonical_json
from ..formats.schemas import TOO_DEEP, readable
from .engine import BATCH, ORD, Calls, text_hash
from .normalize import How, MemoNormalizer, how_sql, resource_finder, unvolatile
from .shapes import MATCHED, SHAPE, plain_shapes, quoted, shape_columns, sorted_shape

if TYPE_CHECKING:
    from .db import duckdb

__all__ = ["Signer", "sign"]

_SORT = orjson.OPT_SORT_KEYS
# The files of signature keys: one a line, after its id where it has one (JSON holds no raw
# control character, so \x01 parts them, unquoted).
_KEY_DIALECT = "delim = '\x01', quote = '', escape = ''"
# What the files of keys hold for a text that is its own key (written as its key would be:
# canonical already, as a writer of sorted keys writes it): not JSON, so no key is spelled
# so; DuckDB takes the text for it. A conversation's text need not come back.
_OWN = b"="
# A text's key's hash: texts whose key's hash no other text shares are their own
# signatures (see Signer.sign).
_KEY_HASH = "hash(kind, name, coalesce(key, args))"


def sign(calls: Calls, side_of: str) -> None:
    """Build ``dmap`` for the calls with a side (``side_of``, a SQL expression over
    ``calls0``): ``Signer.sign``."""
    Signer(calls).sign(side_of)


# The tables that signing builds on its way to ``dmap`` (besides ``distinct_args``).
_SIGNING = (
    "dsign",
    "text_keys",
    "text_resources",
    "dplain",
    "dalone",
    "dsample",
    "dshapes",
    "dfkey",
)
# Below this many calls, ``runs`` (``_ORDER``) is built beside the signing from its start,
# a little faster; above, beside ``distinct_args``, both spill past the memory limit, so
# there it starts after ``distinct_args`` (benchmarks/README.md, "Measurements behind the
# analysis": runs).
_EARLY_ORDER = 1_000_000
# The calls whose texts' shapes are sampled first (``Signer._shaped``).
_SAMPLE = 8192
# Below this many calls, no text is told alone: their queries cost more than they save
# (benchmarks/README.md, "Measurements behind the analysis": texts alone).
_SHAPED_FROM = 32_768
# The most shapes of classes of more than one shape that ``_families`` reads (each is a
# Python step), and the most families whose texts DuckDB keys (a branch of one CASE each).
_FAMILY_SHAPES = 4096
_FAMILIES = 64


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
    common: list[str] = field(default_factory=list)  # the shapes named by code (shape_columns)

    def sign(self, side_of: str) -> None:
        """Build ``dmap``: each distinct argument text of the calls with a side (``side_of``
        being a SQL expression over ``calls0``) mapped to its signature (``sid``, ``resource``;
        ``prepare`` keeps each signature's first text in ``sigs``), normalizing each text once, in
        Python. Meanwhile DuckDB, in another thread, builds ``runs`` (``Calls.order``).

        Every text was read by orjson or Python's ``json`` where it was loaded (``load``): a
        text that is not right now (nested too deep) is an error that names its call."""
        sides = f"({side_of}) > 0"
        con = self.calls.con
        self.calls.drop("distinct_args", "text_signatures", *_SIGNING)
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
        match, shape = shape_columns(common)
        con.execute(
            "CREATE TABLE distinct_args AS SELECT * EXCLUDE (m), "
            f"CASE WHEN how & {How.NORMALIZE:d} = 0 THEN NULL "
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
        (dropped,) = self.calls.one("SELECT count(norm) FROM distinct_args")
        if dropped:
            con.execute(
                f"CREATE TABLE dsign AS SELECT * EXCLUDE (m), {shape} FROM (SELECT *, {match} "
                f"FROM (SELECT *, {self._how()} AS how FROM (SELECT kind, name, "
                "coalesce(norm, args) AS args, min(first) AS first FROM distinct_args "
                "GROUP BY ALL)))"
            )
        texts = "dsign" if dropped else "distinct_args"
        bare = (self._to_sign(texts) if common is not None else None) or (
            f"(SELECT first, kind, name, args FROM {texts} WHERE how = 0)"
        )
        self.keys(texts, bare)
        # A signature is (kind, name, the canonical JSON text of the normalized args); its
        # sid is its first call's ord, so sids follow the order of first appearance. Every
        # text of a signature normalizes to the same value, so it names the same resource.
        # The signed texts' signatures first (a signed text's id is its texts' least); a
        # text's is its signed text's. Most keys are a text's own: a text whose key's hash
        # no other key has is its own signature, and only the texts that share a hash
        # (``twins``: the same value written twice, or a collision) are grouped by their
        # keys, joined back (grouping every key costs more). ``text_keys`` holds no argument
        # text, and no key where the text is its own (``_OWN``: the twins take it from their
        # texts): the texts take their signatures from the few twins (a join of every text
        # with its key costs more; benchmarks/README.md, "Measurements behind the
        # analysis": signatures by hash).
        # The texts of families keyed by DuckDB (``_to_sign``) are the only ones that can
        # hold their values: grouped apart, where most are twins.
        families = (
            " UNION ALL SELECT first, min(first) OVER (PARTITION BY kind, name, key) FROM dfkey"
            if self.structures
            else ""
        )
        grouped = f"""
            WITH twins AS (
                SELECT k.first, k.kind, k.name, coalesce(k.key, t.args) AS key
                FROM (SELECT * FROM text_keys SEMI JOIN (
                          SELECT h FROM text_keys GROUP BY h HAVING count(*) > 1) USING (h)) k
                JOIN {texts} t USING (first)),
            grouped AS (
                SELECT t.first, g.sid FROM twins t
                JOIN (SELECT kind, name, key, min(first) AS sid FROM twins GROUP BY ALL) g
                    USING (kind, name, key){families})
            SELECT first, g.sid, r.resource
            FROM grouped g FULL JOIN text_resources r USING (first)"""
        if not dropped:
            # Most texts are their own signature and name no resource: ``dmap`` is a view of
            # the texts and of the few that are not (``text_signatures``), not a copy of every
            # text.
            con.execute(f"CREATE TABLE text_signatures AS {grouped}")
            con.execute(
                "CREATE VIEW dmap AS SELECT t.kind, t.name, t.args, t.first, s.resource, "
                "coalesce(s.sid, t.first) AS sid, t.h "
                "FROM distinct_args t LEFT JOIN text_signatures s USING (first)"
            )
            self.calls.dmap = "DROP VIEW dmap; DROP TABLE text_signatures; DROP TABLE distinct_args"
            self.calls.drop(*_SIGNING)
            return
        con.execute(f"""
            CREATE TABLE dmap AS
            SELECT d.kind, d.name, d.args, d.first, s.resource, s.sid, d.h
            FROM distinct_args d JOIN (
                SELECT t.kind, t.name, t.args, g.resource, coalesce(g.sid, t.first) AS sid
                FROM {texts} t LEFT JOIN ({grouped}) g USING (first)) s
            ON s.kind = d.kind AND s.name = d.name AND s.args = coalesce(d.norm, d.args)""")
        self.calls.dmap = "DROP TABLE dmap"
        self.calls.drop("distinct_args", *_SIGNING)

    def _how(self) -> str:
        """What the loop of ``keys`` must do to an argument text: ``how_sql``."""
        return how_sql(self.calls.config.normalizer, self.calls.config.resource_keys)

    def _to_sign(self, texts: str) -> str | None:
        """The texts of the table ``texts`` that need no walk (``how`` 0) and whose keys
        ``_keys`` must find, where DuckDB signs some (a table of the others); else None (all).

        Texts written one way only are told apart by their text where they share a shape:
        minified (so no input is a Parquet file, whose texts are as written), with no escape
        (``how`` 0), each value a string, an integer of 64 bits, a boolean or null
        (``PLAIN_TYPES``), no object an element of an array and no key twice in an object
        (then the shape names the key order of every object). Two such texts with the same
        shape are two values if their texts differ; two whose shapes differ but for key
        order (``sorted_shape``) are two values too. So where every text of a kind and name
        is written one way only (``plain_shapes``), a shape whose keys no other shape holds
        in another order has each of its texts alone: its own signature, with no key (a key
        costs a Python parse and write). The texts of a *family* of shapes
        (the same keys in several orders) are keyed by DuckDB: each written in the family's
        sorted key order (``json_transform_strict`` to the sorted shape, then ``to_json``,
        a fraction of a Python key's cost), a JSON text of its value, so no two values share a
        key (benchmarks/README.md, "Measurements behind the analysis": families)."""
        saved, rest = self._classify(texts)
        if _few(saved, rest):
            self.structures = []
            return None
        if self.structures:
            cases = " ".join(
                f"WHEN {i} THEN to_json(json_transform_strict(args, {quoted(structure)}))"
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
        self.calls.con.execute(f"CREATE TABLE dshapes AS {plain_shapes(texts, self.common)}")
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
        (its kind, name and sorted shape, ``sorted_shape``): -1 where it is the only shape
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
            structure, fits = sorted_shape(real)
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
        most common shapes, at most ``MATCHED`` (``shape_columns``); None: not where some are
        as written (a Parquet input's), nor for fewer than ``_SHAPED_FROM`` calls, nor where a
        sample of the texts (of every n-th call, about ``_SAMPLE`` calls) has too few that
        need no Python key, in shapes of more than one text, to pay for them. Shapes cost
        DuckDB time a text: a trace whose values are not written one way only (floats,
        escapes) takes longer with them."""
        if self.calls.verbatim:
            return None
        if rows < _SHAPED_FROM:
            return None
        self.calls.con.execute(
            f"CREATE TABLE dsample AS SELECT *, {SHAPE} FROM (SELECT *, {self._how()} AS how "
            f"FROM (SELECT DISTINCT kind, name, args FROM calls0 "
            f"WHERE rowid % {max(1, rows // _SAMPLE)} = 0 AND {sides}))"
        )
        saved, rest = self._classify("dsample")
        # A shape of one text in the sample may well be a shape a text (keys that name
        # values): grouping them and telling their classes costs DuckDB about as much as
        # Python's keys, on top of the shapes.
        (single,) = self.calls.one("SELECT count(*) FROM dalone WHERE n = 1")
        # The shapes of at least 1/64 of the sample's shaped texts, most texts first.
        common = self.calls.rows(
            "SELECT shape FROM dsample WHERE shape IS NOT NULL GROUP BY shape "
            "HAVING count(*) * 64 >= (SELECT count(shape) FROM dsample) AND count(*) > 1 "
            "ORDER BY count(*) DESC, shape LIMIT ?",
            [MATCHED],
        )
        self.calls.drop("dalone", "dsample")
        self.structures = []
        return None if _few(saved - single, rest + single) else [shape for (shape,) in common]

    def keys(self, texts: str, bare: str) -> None:
        """The Python loop of ``sign``: the signature key and resource of each text of the
        table ``texts`` that is not alone (``bare``: those with ``how`` 0 to sign, in an
        order that two scans of it keep), into ``text_keys`` and ``text_resources``. A text
        that is not right (nested too deep, or none of the JSON Python reads) is an error
        naming the first call that has it."""
        memo = MemoNormalizer(self.calls.config.normalizer)
        resource_of = resource_finder(self.calls.config.resource_keys)
        errors: list[tuple[int, str]] = []
        loads, dumps = orjson.loads, orjson.dumps
        res: list[bytes] = []  # the resources of a batch
        # The flags as ints: an IntFlag's ``&`` builds a flag, a microsecond a text.
        normalize, check_depth, find_resource = (
            How.NORMALIZE.value,
            How.CHECK_DEPTH.value,
            How.FIND_RESOURCE.value,
        )

        def key(first: int, text: str, how: int) -> bytes | None:
            """A text's key; None where it is not right (then ``errors`` says why, and no key
            is used), and its resource into ``res``."""
            try:
                value = loads(text)
            except orjson.JSONDecodeError:
                # Beyond orjson (NaN, a lone surrogate, 400 digits), from a format read by
                # Python's json: never from the seed-JSONL fast path (``load._refused``).
                try:
                    value = json.loads(text)
                except ValueError as exc:
                    errors.append((first, f"not JSON ({exc})"))
                    return None
            if how & check_depth and not readable(value):
                errors.append((first, TOO_DEEP))
                return None
            normalized = memo(value) if how & normalize else value
            if how & find_resource and (resource := resource_of(normalized)) is not None:
                # a quoted resource may hold a newline: each is still one record
                quoted = resource.replace('"', '""')
                res.append(f'{first},"{quoted}"'.encode())
            try:
                return dumps(normalized, option=_SORT)
            except TypeError:
                return canonical_json(normalized).encode()

        def own(text: str, found: bytes | None) -> bytes | None:
            """``found`` (``text``'s key), or ``_OWN`` where it is ``text`` itself."""
            return _OWN if found == text.encode() else found

        # Each text's key (its canonical text) goes to a file a batch at a time, which DuckDB
        # reads once at the end (in parallel, where a read a batch costs more), and
        # signatures are grouped there: Python holds one batch, whatever the number of
        # distinct texts (a set of them all took check of 3M lines past 1 GiB). In no order
        # (a sort of every distinct text would cost more than the loop saves): of the texts
        # that are not right, the first in the input is the error. The few resources go
        # apart, quoted.
        tmp = self.calls.folder
        plain = _CsvFile(tmp / "plain.txt", _KEY_DIALECT)
        keys = _CsvFile(tmp / "keys.txt", _KEY_DIALECT)
        named = _CsvFile(tmp / "resources.csv", "quote = '\"', escape = '\"'")
        cursor = self.calls.cursor()
        with plain, keys, named:
            # Most texts need no walk, no depth check and no resource (``how`` 0): only their
            # keys, one a line in the order of the table (DuckDB keeps a scan's order, and
            # pairs them with their texts by position), appended to one buffer: cheaper than
            # writing each text's id, or than keeping the list of keys orjson returns (each
            # stays in a block of its own; benchmarks/README.md, "Measurements behind the
            # analysis": the signing loop).
            cursor.execute(f"SELECT args FROM {bare}")
            done = 0
            while rows := cursor.fetchmany(BATCH):
                block = bytearray()
                try:
                    for (text,) in rows:
                        canonical = dumps(loads(text), option=_SORT)
                        block += _OWN if canonical == text.encode() else canonical
                        block += b"\n"
                except (orjson.JSONDecodeError, TypeError):
                    # A text orjson cannot read or write: the batch again, with the ids.
                    block = bytearray()
                    firsts = self.calls.rows(
                        f"SELECT first FROM {bare} LIMIT ? OFFSET ?",
                        [len(rows), done],
                    )
                    for (first,), (text,) in zip(firsts, rows, strict=True):
                        block += own(text, key(first, text, 0)) or b"-"
                        block += b"\n"
                plain.write_block(block)
                done += len(rows)
            cursor.execute(f"SELECT first, args, how FROM {texts} WHERE how <> 0")
            while rows := cursor.fetchmany(BATCH):
                out = []
                for first, text, how in rows:
                    if (found := own(text, key(first, text, how))) is not None:
                        out.append(b"%d\x01%b" % (first, found))
                keys.write(out)
                named.write(res)
                res.clear()
        cursor.close()
        if errors:
            raise self.calls.bad(*min(errors))
        from .db import duckdb

        # Each key with its hash (of the text where the text is its own key).
        query = (
            f"CREATE TABLE text_keys AS SELECT first, kind, name, key, {_KEY_HASH} AS h FROM ("
            f"SELECT * FROM (SELECT first, kind, name, args FROM {bare}) POSITIONAL JOIN {{}} "
            f"UNION ALL SELECT first, kind, name, args, key FROM {texts} JOIN {{}} USING (first))"
        )
        own_key = f"nullif(key, '{_OWN.decode()}') AS key"
        columns = {"first": "BIGINT", "key": "VARCHAR"}

        def create() -> None:
            self.calls.con.execute(
                query.format(
                    f"(SELECT {own_key} FROM {plain.scan({'key': 'VARCHAR'})})",
                    f"(SELECT first, {own_key} FROM {keys.scan(columns)})",
                )
            )

        try:
            create()
        except duckdb.InvalidInputException:  # a key over 2 MB: the lines are measured
            plain.measure()
            create()
        named.load(self.calls.con, "text_resources", {"first": "BIGINT", "resource": "VARCHAR"})
