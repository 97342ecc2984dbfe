"""Span records: one tool span a line, read as a tool record that keeps the whole result and
the model decision."""

from __future__ import annotations

from pathlib import Path

import pytest

from tracetape.canonical import canonical_json, key_of
from tracetape.errors import TraceError
from tracetape.formats import TraceFormat, detect_format, read_records
from tracetape.record import call_args

from ..analysis.helpers import write_jsonl
from .helpers import SPAN, read_all


def test_span_records_are_read(tmp_path: Path) -> None:
    """Span records become tool events named by the model decision, compared on tool_call."""
    span = {
        "span_id": "7f3c",
        "tool_call": {
            "argv": ["git", "diff", "--stat"],
            "env_digest": "sha256:9a1e",
            "timeout_s": 30,
        },
        "tool_result": {"exit_code": 0, "stdout": " 3 files changed", "stderr": ""},
        "model_decision": {"tool_name": "git_diff_stat", "args": {}, "model_id": "<redacted>"},
    }
    path = write_jsonl(tmp_path / "spans.jsonl", [span, {**span, "span_id": "8a00"}])
    events = read_all(path)
    assert detect_format(path) is TraceFormat.SPANS
    assert [(e.name, e.step, e.span_id) for e in events] == [
        ("git_diff_stat", 1, "7f3c"),
        ("git_diff_stat", 2, "8a00"),
    ]
    assert call_args(events[0])["argv"] == ["git", "diff", "--stat"]
    assert events[0].out_digest == events[1].out_digest


@pytest.mark.parametrize("effect", [["write"], {"w": 1}, 5])
def test_a_span_record_with_an_effect_of_another_type_names_the_field(
    tmp_path: Path, effect: object
) -> None:
    """An effect that is a list, an object or a number is a bad line, named, not a crash."""
    span = {"span_id": "7f3c", "model_decision": {"tool_name": "ls", "args": {}}}
    path = write_jsonl(tmp_path / "spans.jsonl", [span, {**span, "effect": effect}])
    with pytest.raises(TraceError, match="'read', 'write'") as info:
        read_all(path)
    assert (info.value.line, info.value.field) == (2, "effect")


def test_span_records_keep_the_whole_result_and_the_model_decision(tmp_path: Path) -> None:
    """A span's tool_result is its record's out, its model_decision in extra, its key the tape's."""
    path = write_jsonl(tmp_path / "spans.jsonl", [SPAN, {**SPAN, "span_id": "8a00"}])
    records = list(read_records(path))
    assert [r.out for r in records] == [SPAN["tool_result"], SPAN["tool_result"]]
    assert [r.extra for r in records] == [{"model_decision": SPAN["model_decision"]}] * 2
    for step, rec in enumerate(records, 1):
        payload = {"name": "git_diff_stat", "args": SPAN["tool_call"], "step": step}
        assert rec.input == payload
        assert rec.key == key_of("tool", canonical_json(payload))
    assert records[0].key != records[1].key  # the step is part of the call
