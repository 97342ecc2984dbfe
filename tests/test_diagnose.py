"""``ReplayMiss`` diagnosis on its own: what a miss says for each way a run can part from its
recording (past the end, a repeat, changed, added and removed fields, digests only, no input
copy, an input already played, a stream read past its recorded end)."""

from __future__ import annotations

from typing import Any

import pytest

from tracetape.canonical import canonical_json, field_digests, key_of
from tracetape.diagnose import explain_miss, truncated_stream_miss
from tracetape.errors import ReplayMiss
from tracetape.record import Decision, Record

RERECORD = "Tape('run.jsonl', mode='rewrite')"


def _decision(data: dict[str, Any], kind: str = "llm") -> Decision:
    text = canonical_json(data)
    return Decision(kind, key_of(kind, text), text, data.get("step"))


def _expected(data: dict[str, Any] | None, **fields: Any) -> Record:
    fields.setdefault("input", data)
    return Record(kind="llm", key="llm:0123456789abcdef", seq=3, step=2, **fields)


def _miss(live: dict[str, Any], expected: Record | None, repeated: int = 0) -> ReplayMiss:
    return explain_miss(
        _decision(live), expected, matched=2, recorded=5, repeated=repeated, rerecord=RERECORD
    )


def test_the_first_line_names_the_key_and_the_last_how_to_re_record() -> None:
    live = {"messages": ["hi"], "step": 2}
    miss = _miss(live, None)
    first, *rest = str(miss).splitlines()
    assert first == f"{_decision(live).key} was never recorded — the run diverged here"
    assert "matched 2 of 5 recorded decisions before this miss (kind llm, step 2)" in rest[0]
    assert rest[-1] == f"  if the change is intended, re-record: {RERECORD}"
    assert (miss.matched, miss.recorded, miss.kind, miss.step) == (2, 5, "llm", 2)


def test_a_run_past_the_end_of_the_recording() -> None:
    miss = _miss({"messages": ["hi"], "step": 9}, None)
    assert "no unplayed 'llm' decision is left: the run went on past the end" in str(miss)
    assert miss.expected is None and miss.changes == []


def test_a_repeat_says_the_input_was_played_as_often_as_recorded() -> None:
    live = {"messages": ["hi"], "step": 2}
    miss = _miss(live, _expected(live), repeated=2)
    assert "this exact input was recorded 2 time(s) and all were already played" in str(miss)
    assert "the input equals the expected one: it was already played earlier" in str(miss)


def test_a_changed_string_shows_the_words_that_changed_with_their_context() -> None:
    before = "What is the weather in Paris and what is the time there now, please?"
    after = before.replace("Paris", "Rome")
    miss = _miss({"messages": [after], "step": 2}, _expected({"messages": [before], "step": 2}))
    assert miss.changes == ["messages[0]"]
    lines = str(miss).splitlines()
    assert "  expected: #3 llm step 2 llm:0123456789abcdef" in lines
    minus = next(line for line in lines if line.startswith("    - "))
    plus = next(line for line in lines if line.startswith("    + "))
    assert "Paris" in minus and "Rome" in plus


def test_added_removed_and_retyped_fields_each_say_so() -> None:
    expected = _expected({"messages": ["hi"], "temperature": 0.2, "n": 1, "step": 2})
    miss = _miss({"messages": ["hi"], "n": "1", "tools": ["ls"], "step": 2}, expected)
    text = str(miss)
    assert "  added: tools = " in text and '["ls"]' in text
    assert "  removed: temperature (was 0.2)" in text
    assert '  changed: n: 1 -> "1"' in text  # an integer became a string: the string quoted
    assert set(miss.changes) == {"tools", "temperature", "n"}


def test_more_than_ten_changes_are_counted_not_listed() -> None:
    before = {f"f{i}": i for i in range(14)} | {"step": 2}
    after = {f"f{i}": i + 1 for i in range(14)} | {"step": 2}
    miss = _miss(after, _expected(before))
    assert len(miss.changes) == 14
    assert "  ... and 4 more changed paths" in str(miss)
    assert sum(line.startswith("  changed: ") for line in str(miss).splitlines()) == 10


def test_digests_name_the_changed_fields_when_no_input_copy_was_stored() -> None:
    before = {"messages": ["hi"], "model": "m1", "step": 2}
    expected = _expected(None, digests=field_digests(before))
    miss = _miss({"messages": ["hi"], "model": "m2", "step": 2}, expected)
    assert miss.changes == ["model"]
    assert "  changed: model (digest differs; the input copy was not stored)" in str(miss)


def test_a_seed_cassette_without_input_or_digests_asks_for_a_re_recording() -> None:
    miss = _miss({"messages": ["hi"], "step": 2}, _expected(None))
    assert miss.changes == []
    assert "has no input copy (a cassette of the seed's format)" in str(miss)


def test_a_stream_read_past_its_recorded_end() -> None:
    live = {"messages": ["hi"], "step": 2}
    rec = _expected(live, out={"events": [{"delta": "a"}, {"delta": "b"}]})
    miss = truncated_stream_miss(_decision(live), rec, matched=1, recorded=4, rerecord=RERECORD)
    assert "stopped reading this stream after 2 event(s)" in str(miss)
    assert miss.expected is rec and (miss.matched, miss.recorded) == (1, 4)


UUID_A, UUID_B = "0b7e1b2c-6a1f-4c1e-9a51-8f0b8f9b2a11", "3f1c9d2e-2b4a-4f6e-8c1d-5e7a9b0c1d2e"
HINT = "would match"


@pytest.mark.parametrize(
    ("before", "after", "rule"),
    [
        pytest.param(f"request {UUID_A}", f"request {UUID_B}", '["uuid"]', id="uuid"),
        pytest.param(
            "at 2026-01-02T03:04:05.123456", "at 2026-03-04T10:11:12.654321", '["ts"]', id="ts"
        ),
        pytest.param("sent 1767225600 ok", "sent 1767312000 ok", '["unix-time"]', id="unix-time"),
        pytest.param(
            "trace 4bf92f3577b34da6a3ce", "trace 00f067aa0ba902b7a3ce", '["hex-id"]', id="hex"
        ),
        pytest.param(
            f"{UUID_A} at 2026-01-02T03:04:05",
            f"{UUID_B} at 2026-01-02T09:04:05",
            '["uuid", "ts"]',
            id="uuid-and-ts",
        ),
    ],
)
def test_a_change_that_is_only_an_id_or_a_time_names_the_mask_rule(
    before: str, after: str, rule: str
) -> None:
    """A miss whose only change is what a mask finds names the fewest masks, as a
    ``[tool.tracetape.match]`` rule, that would match it."""
    live = {"messages": [after], "step": 2}
    text = str(_miss(live, _expected({"messages": [before], "step": 2})))
    assert f"[tool.tracetape.match] mask = {rule} {HINT}" in text
    assert "tracetape migrate" in text


@pytest.mark.parametrize(
    ("before", "after"),
    [
        pytest.param("find the flaky tests", "find the slow tests", id="a-word"),
        pytest.param(f"find {UUID_A} flaky", f"find {UUID_B} slow", id="a-uuid-and-a-word"),
        pytest.param(1767225600, 1767312000, id="a-number-no-mask-sees"),
    ],
)
def test_a_change_beyond_what_masks_find_names_no_mask_rule(before: Any, after: Any) -> None:
    """A miss that changes a word (beside a UUID or not), or a value no mask reads, has no hint."""
    live = {"messages": [after], "step": 2}
    assert HINT not in str(_miss(live, _expected({"messages": [before], "step": 2})))


def test_the_mask_hint_holds_only_when_every_change_is_maskable() -> None:
    """One maskable change beside one that is not gives no hint."""
    live = {"messages": [f"id {UUID_B}"], "params": {"model": "b"}, "step": 2}
    before = {"messages": [f"id {UUID_A}"], "params": {"model": "a"}, "step": 2}
    assert HINT not in str(_miss(live, _expected(before)))
