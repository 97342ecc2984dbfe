"""Batch ingest: the one-scan check of a whole batch redacts exactly what record-by-record
redaction does, whatever the batch holds and however its lines are escaped."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any
from unittest.mock import patch

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.test_redact import PEM, SECRETS
from tracetape.collector import ingest
from tracetape.collector.ingest import BadBatch, _redacted, parse_batch
from tracetape.redact import Redactor

PIECES = [*SECRETS.values(), PEM, "hunter2hunter2", "plain words", "sk-learn_estimator", "é\u00a0"]
texts = st.lists(st.sampled_from(PIECES) | st.text(max_size=12), max_size=4).map(" ".join)
keys = st.sampled_from(["q", "path", "api_key", "password", "max_tokens", "note", "X-API-KEY"])
values = st.recursive(
    texts | st.integers() | st.booleans() | st.none(),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(keys, c, max_size=3),
    max_leaves=8,
)


def _escaped(value: Any) -> str:
    """JSON with every ``s`` of every string written as ``\\u0073``: a producer may escape
    any character, and the secret it sends is the same."""
    if isinstance(value, str):
        return '"' + "".join("\\u0073" if c == "s" else json.dumps(c)[1:-1] for c in value) + '"'
    if isinstance(value, list):
        return "[" + ",".join(_escaped(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{_escaped(k)}:{_escaped(v)}" for k, v in value.items()) + "}"
    return json.dumps(value)


def _line(run: int, step: int, args: Any, escape: bool) -> str:
    line = {"run_id": f"r{run}", "step": step, "tool": "t", "args": args, "output_sha": "ab"}
    return _escaped(line) if escape else json.dumps(line, ensure_ascii=False)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(values, st.booleans()), min_size=1, max_size=8), st.integers(1, 3))
@example(batch=[({"api_key": ["00000\x7f"]}, False), ("00000\x7f", False)], chunk=1)
def test_a_batch_scan_redacts_as_record_by_record_redaction(batch: list[Any], chunk: int) -> None:
    """Whatever the batch and the chunk size (small here, to cross chunk boundaries)."""
    with patch.object(ingest, "_CHUNK", chunk):
        _check(batch)


@pytest.mark.parametrize("secret", ["00000\x7f", "abcdefgé", "abcdefgh\u2028", "😀" * 8])
@pytest.mark.parametrize("chunk", [1, 2, 64])
@pytest.mark.parametrize("escape", [False, True])
def test_a_secret_learned_in_one_chunk_is_redacted_in_the_next(
    secret: str, chunk: int, escape: bool
) -> None:
    """A secret a field name revealed (``api_key``) is redacted where it comes back under a
    plain field, in a later chunk of the batch, also when it holds what orjson writes raw and
    canonical JSON escapes (non-ASCII, DEL) and whether the producer escaped it or not."""
    with patch.object(ingest, "_CHUNK", chunk):
        _check([({"api_key": secret}, escape), ({"note": [secret]}, escape), (secret, escape)])
    body = "\n".join(
        _line(0, i + 1, args, escape)
        for i, args in enumerate([{"api_key": secret}, {"note": secret}, secret])
    ).encode()
    with patch.object(ingest, "_CHUNK", chunk):
        batch = parse_batch(
            body, source="s", offset=0, fmt="jsonl", redactor=Redactor(), max_lines=100
        )
    assert secret not in json.dumps([r.input for r in batch.records], ensure_ascii=False)


def _check(batch: list[Any]) -> None:
    lines = [_line(i % 2, i + 1, {"a": args}, escape) for i, (args, escape) in enumerate(batch)]
    body = "\n".join(lines).encode()
    parsed = parse_batch(
        body, source="s", offset=0, fmt="jsonl", redactor=Redactor(), max_lines=100
    )
    # the reference: record by record, twice with one registry (a secret learned anywhere in
    # the batch is redacted everywhere in it, before the line that named it too)
    one_by_one = Redactor()
    read = parse_batch(body, source="s", offset=0, fmt="jsonl", redactor=_Nothing(),
                       max_lines=100).records  # fmt: skip
    for rec in read:
        _redacted(rec, one_by_one)
    expected = [_redacted(rec, one_by_one) for rec in read]
    assert [r.input for r in parsed.records] == [r.input for r in expected]
    stored = json.dumps([r.input for r in parsed.records])
    for secret in SECRETS.values():
        assert secret not in stored


class _Nothing(Redactor):
    """A redactor that finds nothing: the batch as read, for the reference redaction."""

    def fresh(self, known: Mapping[str, str] | None = None) -> Redactor:
        return self

    def is_clean(self, text: str) -> bool:
        return True


def test_lines_end_where_a_file_reader_ends_them() -> None:
    """A carriage return is JSON whitespace, not a line end: a JSONL body is read as the same
    file would be by ``tracetape diff``, with the same line numbers."""
    first = '{"run_id": "r1", "step": 1,\r "tool": "ls", "args": {}, "output_sha": "ab"}'
    second = json.dumps({"run_id": "r1", "step": 2, "tool": "ls", "args": {}, "output_sha": "cd"})
    body = f"{first}\n{second}\n".encode()
    batch = parse_batch(body, source="s", offset=10, fmt="auto", redactor=Redactor(), max_lines=9)
    assert [(r.line, r.step) for r in batch.records] == [(11, 1), (12, 2)]


@pytest.mark.parametrize("field", ["step", "tokens"])
def test_a_number_the_store_cannot_hold_is_a_bad_line(field: str) -> None:
    """A step or token count past 64 bits (orjson reads up to 2**64 - 1; SQLite and the
    analysis hold 64 bits) is refused with its line and field, and nothing is stored."""
    record = {"run_id": "r1", "step": 1, "tool": "ls", "args": {}, "output_sha": "ab"}
    body = (json.dumps(record) + "\n" + json.dumps({**record, field: 1 << 63}) + "\n").encode()
    with pytest.raises(BadBatch) as caught:
        parse_batch(body, source="s", offset=0, fmt="jsonl", redactor=Redactor(), max_lines=9)
    assert caught.value.status == 400
    assert "fits 64 bits" in str(caught.value.lines)
    assert [(e["line"], e["field"]) for e in caught.value.lines] == [(2, field)]
