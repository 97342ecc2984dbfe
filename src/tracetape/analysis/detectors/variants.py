"""Variants: per signature and output, where the output was first seen (the call's ``ord``), on
which sides, and the facts of its sightings that drift classifies by (see ``drift``);
``replay`` reads it too. It finds nothing itself.
"""

from __future__ import annotations

from . import Context

READS = ("calls",)
CREATES = ("variants",)
PATTERNS = ()

_VARIANTS = """
    CREATE TABLE variants AS
    SELECT sid, out, min(ord) AS first, bit_or(side) AS sides, bool_or(clean) AS clean,
           min(ord) FILTER (WHERE certain_ok AND NOT untagged) AS certain_at,
           min(ord) FILTER (WHERE certain_ok AND untagged) AS untagged_at
    FROM ({facts}) GROUP BY sid, out
"""


def find(ctx: Context) -> None:
    """Build ``variants``."""
    ctx.calls.con.execute(_VARIANTS.format(facts=ctx.calls.facts("SELECT * FROM calls")))
