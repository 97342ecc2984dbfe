"""The keyer: incremental keys (plain and masked) equal the full path's, and a tape's keyer is
chosen once from its rules."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.canonical.strategies import any_json
from tests.suite import bounded
from tracetape.canonical import (
    MaskedKey,
    StreamKey,
    canonical_json,
    key_of,
    keyer,
    reference_json,
)


def test_the_keyer_is_plain_without_a_mask_and_masked_with_one() -> None:
    """``keyer(None)`` makes ``StreamKey`` s, ``keyer(mask)`` ``MaskedKey`` s masking with it,
    each for the kind asked."""
    plain, masked = keyer(None)("llm"), keyer(str.upper)("tool")
    assert type(plain) is StreamKey and plain.kind == "llm"
    assert isinstance(masked, MaskedKey) and masked.kind == "tool"
    assert masked.key({"q": "a"}) == (b'{"q":"A"}', key_of("tool", '{"q":"A"}'))


def _full_key(kind: str, payload: Any) -> tuple[bytes, str]:
    text = reference_json(payload)
    return text.encode(), key_of(kind, text)


# A stream of payloads as agents make them: a conversation that grows by appending, with edits
# of earlier messages, a fresh conversation, NaNs, non-ASCII text, big integers and floats.
_edits = st.sampled_from(["append", "append", "append", "edit", "fresh", "step"])


# Text that looks like where a model request's messages end (StreamKey saves its state there).
_MARK = '],"params":'
_marked = any_json | st.sampled_from([_MARK, {"content": _MARK + "{}"}, [_MARK]])
_params = st.sampled_from(
    [
        {"temperature": 0.5},
        {"stop": _MARK},
        {"temperature": 0.5, "x": [{"y": _MARK + "]"}]},
        {"x": {"a": 1, "step": 3}, "y": ',"step":7,'},  # what looks like where the step is
    ]
)
_step = st.sampled_from([0, 1, 9, 10, 99, 100, 2**40])


# The tools of a model request as the SDK hooks key it (``finite``, tools last); None: a
# payload without tools, keyed as any other (not ``finite``).
_tools = st.sampled_from(
    [
        None,
        [],
        [{"name": "search", "parameters": {"type": "object"}}],
        [{"name": "t", "x": 1e-07, "y": 0.00001, "z": [_MARK, ',"tools":[']}],
        [{"name": "u", "big": 2**70, "f": 1.5e300, "s": "é"}],
    ]
)


@given(
    st.lists(
        st.tuples(_edits, st.lists(_marked, min_size=1, max_size=3), _params, _tools, _step),
        max_size=12,
    )
)
@bounded(deep=600, ci=150)
def test_incremental_key_is_the_full_key(
    steps: list[tuple[str, list[Any], Any, Any, int]],
) -> None:
    """For any sequence of payloads, the incremental key (and text) equals the full path's,
    whatever the messages, params, tools and steps hold: text that looks like the end of the
    messages or like the step, float forms orjson writes otherwise, big integers, non-ASCII,
    step numbers of new lengths."""
    keys = StreamKey("llm")
    messages: list[Any] = [{"role": "system", "content": "be careful " * 10}]
    for n, (edit, values, params, tools, jump) in enumerate(steps):
        if edit == "append":
            messages = [*messages, *values]
        elif edit == "edit":
            messages = [values[0], *messages[1:]]
        elif edit == "fresh":
            messages = list(values)
        payload = {"messages": messages, "params": params, "step": n + jump}
        if tools is not None:
            payload["tools"] = tools
        assert keys.key(payload, finite=tools is not None) == _full_key("llm", payload)


def _nan_for_none(value: Any) -> Any:
    """``value`` with every None in it (nested too) replaced by a NaN."""
    if value is None:
        return float("nan")
    if isinstance(value, list):
        return [_nan_for_none(v) for v in value]
    if isinstance(value, dict):
        return {k: _nan_for_none(v) for k, v in value.items()}
    return value


@given(
    st.lists(st.tuples(st.sampled_from(["append", "append", "none", "nan"]), any_json), max_size=10)
)
@bounded(deep=300, ci=75)
def test_a_nan_where_a_none_was_keys_as_the_reference(steps: list[tuple[str, Any]]) -> None:
    """A NaN reads as null in orjson's text, as a None does: one that takes a None's place in a
    prefix checked before (same text) is still keyed and written as the reference writes it,
    by the incremental key and by the encoder with a memo. (Each value is followed by text
    longer than the 32 bytes checked before a new part, so a None is soon behind it.)"""
    keys, memo = StreamKey("tool"), [b""]
    items: list[Any] = [{"content": "padding " * 8}]
    for edit, value in steps:
        if edit == "nan":
            items = _nan_for_none(items)
        else:
            items = [*items, None if edit == "none" else value, "padding " * 6]
        payload = {"args": {"items": items}, "name": "t"}
        assert keys.key(payload) == _full_key("tool", payload)
        assert canonical_json(payload, memo) == reference_json(payload)


@given(st.lists(any_json, min_size=1, max_size=8))
@bounded(deep=300, ci=75)
def test_incremental_key_of_any_values(values: list[Any]) -> None:
    """Unrelated payloads one after another (no shared prefix, top-level scalars) key whole."""
    keys = StreamKey("tool")
    for value in values:
        assert keys.key(value) == _full_key("tool", value)


@pytest.mark.parametrize(
    "tail",
    [
        pytest.param(float("nan"), id="nan"),
        pytest.param(1e-07, id="small-float"),
        pytest.param("é", id="non-ascii"),
        pytest.param(2**70, id="big-int"),
        pytest.param(None, id="null"),
    ],
)
def test_incremental_key_checks_what_was_appended(tail: Any) -> None:
    """A value the fast encoder writes differently, appended to a long conversation whose
    prefix was checked before, is still keyed as the reference writes it; so is the next."""
    keys = StreamKey("llm")
    messages: list[Any] = [{"content": "x" * 3000, "refusal": None}]
    for extra in ([], [{"content": "y"}], [{"score": tail}], [{"content": "z"}]):
        messages = [*messages, *extra]
        payload = {"messages": messages, "step": len(messages)}
        assert keys.key(payload) == _full_key("llm", payload)


def test_incremental_key_checks_a_number_cut_by_the_saved_prefix() -> None:
    """The saved prefix can end inside a number (``[1`` shared by ``[10]`` and ``[11]``): a
    float the fast encoder writes differently that starts there is still caught."""
    keys = StreamKey("tool")
    for payload in ([10], [11], [1e-07], {"a": 10}, {"a": 11}, {"a": 1e-07}):
        assert keys.key(payload) == _full_key("tool", payload)
