"""Shapes: a JSON text's structure (its keys in their order at each level, each value's type),
as DuckDB's ``json_structure`` gives it, and the SQL that finds it fast.

Signing (``sign``) needs no key for a text that no other text can equal: one written one way
only, whose kind and name hold its keys in one order. Telling that is a matter of shapes:
``SHAPE`` and ``shape_columns`` give each text its shape (the common ones matched by an RE2
pattern, ``shape_pattern``, and named by a short code, ``shape_code``), ``plain_shapes``
counts the shapes whose every text is written one way only, and ``sorted_shape`` names a
*family*: the shapes of the same keys in other orders.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from .normalize import literal

__all__ = [
    "MATCHED",
    "NO_SHAPE",
    "PLAIN_TYPES",
    "SHAPE",
    "SHAPED_TEXT",
    "keys_in",
    "plain_shapes",
    "quoted",
    "shape_code",
    "shape_columns",
    "shape_pattern",
    "sorted_shape",
]


def keys_in(text: str) -> str:
    """SQL: the number of keys of a JSON text with no escape (a key ends with '":', found
    nowhere else where no string holds a quote), or of a shape."""
    return f"(strlen({text}) - strlen(replace({text}, '\":', ''))) // 2"


# A text's *shape* (see ``sign.Signer._to_sign``), where the loop need not walk it (``how`` 0) and
# no object is an element of an array: its JSON structure (its keys in their order at each
# level, each value's type), and its number of keys. Most texts have one of a few shapes,
# which a pattern tells faster than ``json_structure`` (``shape_columns``).
SHAPED_TEXT = "how = 0 AND NOT (contains(args, '[{') OR contains(args, ',{'))"
SHAPE = (
    f"CASE WHEN {SHAPED_TEXT} THEN json_structure(args)::VARCHAR END AS shape, "
    f"CASE WHEN {SHAPED_TEXT} THEN {keys_in('args')} END AS keys"
)
NO_SHAPE = "NULL::VARCHAR AS shape, NULL::BIGINT AS keys"
# The most shapes of a sample that texts are matched against (``shape_columns``).
MATCHED = 8
# RE2 patterns of a value that ``json_structure`` gives each of these types (a pattern
# matches no other value: a string with no escape nor control character; an integer of at
# most 19 digits, or negative of at most 18, which fits 64 bits; ``-0`` is matched by none).
LEAF_PATTERNS = {
    "VARCHAR": r'"[^"\\\x00-\x1F]*"',
    "UBIGINT": "(?:0|[1-9][0-9]{0,18})",
    "BIGINT": "-[1-9][0-9]{0,17}",
    "BOOLEAN": "(?:true|false)",
    "NULL": "null",
}


def shape_pattern(shape: str) -> tuple[str, int] | None:
    """An RE2 pattern that a minified JSON text fully matches only if ``json_structure``
    gives it ``shape`` (objects, each key in the shape's order, of the values of
    ``LEAF_PATTERNS``), and the shape's number of keys; None for a shape it cannot tell (an
    array, an empty object, a float, a key with a quote, an escape or a control character)."""
    count = 0

    def walk(node: Any) -> str | None:
        nonlocal count
        if isinstance(node, str):
            return LEAF_PATTERNS.get(node)
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


def shape_code(index: int) -> str:
    """The short text that stands for the ``index``-th of the common shapes in a table of
    texts (``shape_columns``): no shape's text, which starts with a bracket or a quote."""
    return f"#{index}"


def shape_columns(common: Sequence[str] | None) -> tuple[str, str]:
    """SQL: a text's shape and number of keys (``SHAPE``) in two steps, the first (``m``)
    to select beside ``how``, the second over it: a text that fully matches the pattern of
    one of the ``common`` shapes (``shape_pattern``) has that shape, and the others theirs
    from ``json_structure`` (a match is a fraction of the cost of ``json_structure``). None:
    no shape. A common shape is named by its code (``shape_code``), which DuckDB keeps in
    the row (at most 12 bytes), where a shape's text made the tables large enough to spill
    the statements after it (benchmarks/README.md, "Measurements behind the analysis":
    shapes)."""
    if common is None:
        return "NULL::INTEGER AS m", NO_SHAPE
    whens: list[str] = []
    shapes: list[str] = []
    keys: list[str] = []
    for code, shape in enumerate(common):
        found = shape_pattern(shape)
        if found is None:
            continue
        pattern, count = found
        i = len(whens) + 1
        whens.append(f"WHEN regexp_full_match(args, {quoted(pattern)}) THEN {i}")
        shapes.append(f"WHEN {i} THEN {quoted(shape_code(code))}")
        keys.append(f"WHEN {i} THEN {count}")
    matched = f"CASE {' '.join(whens)} ELSE 0 END" if whens else "0"
    first = f"CASE WHEN {SHAPED_TEXT} THEN {matched} END AS m"
    shapes.append("WHEN 0 THEN json_structure(args)::VARCHAR")
    keys.append(f"WHEN 0 THEN {keys_in('args')}")
    return first, f"CASE m {' '.join(shapes)} END AS shape, CASE m {' '.join(keys)} END AS keys"


# The types of JSON structure that a value written one way only has: a string with no
# escape, an integer of 64 bits, a boolean, null (a float, or a mixed array: "JSON", may be
# written in more ways than one). A shape without them holds no value type (a string
# followed by a comma, a bracket or its end: in a shape, a key is followed by a colon).
PLAIN_TYPES = ("UBIGINT", "BIGINT", "VARCHAR", "BOOLEAN", "NULL")


def plain_shapes(texts: str, common: Sequence[str]) -> str:
    """SQL: the shapes of the table ``texts`` whose every text of their kind and name is
    written one way only (``plain``, see ``sign.Signer._to_sign``), each with its number of texts
    (``n``) and of shapes in its class (``ways``). A shape's class: the hash of its kind and
    name, number of keys, length and sorted top-level keys, the same for any shape of the
    same keys in other orders at any level (a class may hold shapes of other keys too, in
    nested objects or where hashes meet: ``_families`` tells them apart). Counted by a group
    and a join on the hash, which costs less than a window over the shapes. A shape of the
    ``common`` ones is named by its code in ``texts`` and in the result (``shape``, see
    ``shape_columns``), and by its text in ``real``."""
    stripped = "real"
    for name in PLAIN_TYPES:
        stripped = f"replace({stripped}, '\"{name}\"', '')"
    real = " ".join(
        f"WHEN {quoted(shape_code(i))} THEN {quoted(shape)}" for i, shape in enumerate(common)
    )
    real = f"CASE shape {real} ELSE shape END" if real else "shape"
    return f"""
        WITH shapes AS (
            SELECT *, {real} AS real FROM (
                SELECT kind, name, shape, keys, count(*) AS n, bool_and(how = 0) AS zero
                FROM {texts} GROUP BY ALL)),
        plain AS (
            SELECT *, coalesce(zero AND keys = {keys_in("real")}
                               AND NOT regexp_matches({stripped}, '"[,}}\\]]|"$'), false) AS plain
            FROM shapes),
        kept AS (
            SELECT kind, name, shape, real, keys, n,
                   hash(kind, name, keys, strlen(real), list_sort(json_keys(real))) AS class
            FROM plain ANTI JOIN (SELECT kind, name FROM plain WHERE NOT plain) USING (kind, name))
        SELECT kind, name, shape, real, keys, n, ways
        FROM kept JOIN (SELECT class, count(*) AS ways FROM kept GROUP BY class) USING (class)"""


def quoted(text: str) -> str:
    """A SQL string literal of ``text``."""
    return "'" + text.replace("'", "''") + "'"


def sorted_shape(shape: str) -> tuple[str, bool]:
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
