"""``Record``, the one shape of a decision: its JSON as a store keeps it, the types every field
must have, the arguments calls are compared by; ``Decision``, a record before its output."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tracetape.record import (
    INT64_MAX,
    Decision,
    Record,
    RecordTexts,
    call_args,
    decode_record,
    record_problem,
)

_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-INT64_MAX - 1, INT64_MAX)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=12,
)
_int64 = st.integers(-INT64_MAX - 1, INT64_MAX)
_count = st.integers(0, INT64_MAX)
_records = st.builds(
    Record,
    kind=st.text(min_size=1, max_size=32),
    key=st.none() | st.text(),
    seq=st.none() | _int64,
    run=st.none() | st.text(),
    name=st.none() | st.text(),
    step=st.none() | _int64,
    input=_json,
    out=_json,
    effect=st.none() | st.sampled_from(["read", "write", "irreversible"]),
    tokens=st.none() | _count,
    usage=st.none() | st.dictionaries(st.text(), _count, max_size=3),
    ms=st.none() | st.floats(min_value=0, max_value=1e9),
    extra=st.none() | st.dictionaries(st.text(), _json, max_size=3),
    source=st.text(),
    line=_count,
)


@given(_records)
def test_a_record_reads_back_from_its_json_as_it_was(rec: Record) -> None:
    """Any record whose fields have their types: encoded as a store keeps it, decoded again,
    it is equal, and has no type problem."""
    assert decode_record(msgspec.json.encode(rec)) == rec
    assert record_problem(rec) is None


def test_a_field_at_its_default_is_left_out_of_the_json() -> None:
    """The JSON holds only what a record says (a trace's record is a few fields)."""
    rec = Record(kind="tool", name="ls", out=None, step=1)
    assert json.loads(msgspec.json.encode(rec)) == {"kind": "tool", "name": "ls", "step": 1}


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        pytest.param({"kind": ""}, ("kind", "must be `str` of length >= 1"), id="empty-kind"),
        pytest.param({"kind": "k" * 33}, ("kind", "must be `str` of length <= 32"), id="long-kind"),
        pytest.param({"step": "3"}, ("step", "must be `int | null`, found `str`"), id="step-text"),
        pytest.param(
            {"seq": -(1 << 63) - 1}, ("seq", "must be `int` >= -9223372036854775808"), id="seq-low"
        ),
        pytest.param({"tokens": -1}, ("tokens", "must be `int` >= 0"), id="tokens-negative"),
        pytest.param(
            {"usage": {"input": "many"}}, ("usage", "must be `int`, found `str`"), id="usage-value"
        ),
        pytest.param(
            {"line": 1 << 63}, ("line", "must be `int` <= 9223372036854775807"), id="line-high"
        ),
    ],
)
def test_a_field_of_the_wrong_type_is_named_with_what_it_must_be(
    fields: dict[str, Any], problem: tuple[str, str]
) -> None:
    """A reader may build a record no store could decode again: ``record_problem`` names the
    first such field and its type, and the decoder refuses its JSON."""
    rec = Record(**{"kind": "tool", **fields})
    assert record_problem(rec) == problem
    with pytest.raises(msgspec.ValidationError):
        decode_record(msgspec.json.encode(rec))


def test_a_refused_value_is_never_echoed() -> None:
    """The value of a field of the wrong type may be a secret: the problem names its type."""
    secret = "sk-proj-Zz9Yy8Xx7Ww6Vv5Uu4Tt3Ss2Rr1Qq0Pp"
    problem = record_problem(Record(kind="tool", tokens=secret))  # type: ignore[arg-type]
    assert problem == ("tokens", "must be `int | null`, found `str`")


@pytest.mark.parametrize(
    ("rec", "args"),
    [
        pytest.param(
            Record(kind="tool", input={"name": "s", "args": {"q": 1}, "step": 2}),
            {"q": 1},
            id="args",
        ),
        pytest.param(
            Record(kind="llm", input={"messages": [], "step": 2}), {"messages": []}, id="no-step"
        ),
        pytest.param(Record(kind="llm", input=["a"]), ["a"], id="not-a-dict"),
        pytest.param(Record(kind="llm", key="llm:1"), {"key": "llm:1"}, id="no-input"),
    ],
)
def test_calls_are_compared_by_their_arguments(rec: Record, args: Any) -> None:
    """A tool's ``args``; else the input without its step; without an input, the key."""
    assert call_args(rec) == args


def test_record_texts_decode_to_their_records() -> None:
    """Texts as a store keeps them decode to the records they were encoded from, in order."""
    records = [
        Record(kind="tool", name="a", out=[1]),
        Record(kind="llm", step=2, usage={"input": 3}),
    ]
    texts = RecordTexts([msgspec.json.encode(r) for r in records])
    assert texts.records() == records


def test_a_decision_gives_its_text_and_input_from_str_or_bytes() -> None:
    """A decision keyed without decoding holds ASCII bytes: ``blob`` is the text as ``str``
    either way, and ``input()`` the JSON data."""
    text = '{"args":{"q":"x"},"step":1}'
    for held in (text, text.encode()):
        decision = Decision("tool", "tool:0123456789abcdef", held, 1)
        assert decision.blob == text
        assert decision.input() == {"args": {"q": "x"}, "step": 1}
        assert decision.payload is None


def test_a_raised_exception_is_recorded_and_raised_again_as_it_was() -> None:
    """A call's exception is recorded in place of its output (its type, arguments and
    message) and raised again from it; an output that is not one passes through; a type
    that cannot be rebuilt comes back as a RuntimeError that names it."""
    import pytest

    from tracetape.record import RAISED, raised_record, reraise

    out = raised_record(FileNotFoundError(2, "No such file", "/tmp/x"))
    assert out[RAISED]["type"] == "builtins.FileNotFoundError"
    with pytest.raises(FileNotFoundError) as caught:
        reraise(out)
    assert caught.value.filename == "/tmp/x"
    assert reraise({"ok": 1}) == {"ok": 1}
    gone = {RAISED: {"type": "nowhere.Gone", "args": [], "message": "lost"}}
    with pytest.raises(RuntimeError, match=r"nowhere\.Gone: lost \(replayed tool error\)"):
        reraise(gone)
