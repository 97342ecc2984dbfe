"""Variants: per signature and output, where the output was first seen, on which sides, and
the facts of its sightings that drift and replay read; it finds nothing itself."""

from __future__ import annotations

from pathlib import Path

from tests.analysis.helpers import call, write_jsonl
from tracetape.analysis import AnalysisConfig
from tracetape.analysis.detectors import Context, variants
from tracetape.analysis.engine import Calls, Input
from tracetape.analysis.load import load
from tracetape.analysis.sign import sign
from tracetape.formats import TraceFormat

# Two sides, one file each: side 1 for the first file, 2 for the second (as diff_traces).
SIDES = "CASE WHEN file < 1 THEN 1 ELSE 2 END"


def test_each_output_of_a_signature_is_one_variant_with_the_facts_of_its_sightings(
    tmp_path: Path,
) -> None:
    """Run A reads record 1 (v1), writes it, reads it again (v2: after a write to its own
    resource, so not clean and not certain), then reads record 2 with no effect tag (v3: its
    sighting is untagged); run B reads record 1 (v1). v1 is first seen at A's first call
    (``ord`` 0), on both sides (1 | 2); each variant's ``first`` is its first call's ``ord``."""
    a = write_jsonl(
        tmp_path / "a.jsonl",
        [
            call("A", 1, "get", {"id": 1}, "v1", effect="read"),
            call("A", 2, "put", {"id": 1}, "ok", effect="write"),
            call("A", 3, "get", {"id": 1}, "v2", effect="read"),
            call("A", 4, "get", {"id": 2}, "v3"),
        ],
    )
    b = write_jsonl(tmp_path / "b.jsonl", [call("B", 1, "get", {"id": 1}, "v1", effect="read")])
    with Calls(AnalysisConfig()) as calls:
        load(calls, [Input(a, 1, TraceFormat.AUTO), Input(b, 2, TraceFormat.AUTO)])
        sign(calls, SIDES)
        calls.prepare(SIDES)
        ctx = Context(calls, calls.config, compare=True)
        variants.find(ctx)
        rows = calls.rows(
            "SELECT s.name, s.resource, v.out, v.first, v.sides, v.clean, v.certain_at, "
            "v.untagged_at FROM variants v JOIN sigs s USING (sid) ORDER BY v.first"
        )
        (signatures,) = calls.one("SELECT count(DISTINCT sid) FROM variants")
    assert rows == [
        ("get", "1", "v1", 0, 3, True, 0, None),
        ("put", "1", "ok", 1, 1, True, 1, None),
        ("get", "1", "v2", 2, 1, False, None, None),
        ("get", "2", "v3", 3, 1, True, None, 3),
    ]
    assert signatures == 3
    assert ctx.counts == {} and ctx.examples == {}  # it finds nothing itself
