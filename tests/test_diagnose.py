"""``ReplayMiss`` diagnosis on its own: what a miss says for each way a run can part from its
recording (past the end, a repeat, changed, added and removed fields, digests only, no input
copy, an input already played, a stream read past its recorded end)."""

from __future__ import annotations

from typing import Any

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
