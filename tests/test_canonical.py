"""Canonical JSON, keys, digests, path diffs and normalization."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from tests import _seed
from tests.suite import bounded
from tracetape import key
from tracetape.canonical import (
    Normalizer,
    StreamKey,
    canonical_json,
    changed_paths,
    digest_changes,
    excerpt,
    field_digests,
    fingerprint,
    key_of,
    normalize,
    reference_json,
)

# Secret-free JSON values: text from an alphabet that can spell neither a secret shape nor a
# secret-looking field name, so the keys must equal the seed's exactly.
safe_text = st.text(alphabet="xyzXYZ019 .,:/\\\"'\n\té東🙂\u2028", max_size=12)
scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | safe_text
json_values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(safe_text, children, max_size=4)
    ),
    max_leaves=20,
)


@given(st.dictionaries(safe_text, json_values, max_size=6))
def test_key_equals_the_seeds_key_for_secret_free_payloads(payload: dict[str, Any]) -> None:
    """tracetape.key is byte-for-byte the seed's _key wherever no secret is detected."""
    assert key("llm", payload) == _seed._key("llm", payload)


@given(st.dictionaries(safe_text, json_values, min_size=1, max_size=6))
def test_key_ignores_dict_order(payload: dict[str, Any]) -> None:
    """Reordering a payload's keys does not change its key."""
    reordered = dict(reversed(list(payload.items())))
    assert key("tool", reordered) == key("tool", payload)


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param({"messages": [{"content": "naïve café — 東京"}], "step": 1}, id="unicode"),
        pytest.param({"t": 0.1, "big": 1e16, "small": 1e-7, "neg": -0.0}, id="floats"),
        pytest.param({"n": float("inf"), "m": -math.inf}, id="infinities"),
        # sets are the one exception: sorted lists, not the seed's hash-ordered str()
        pytest.param({"o": object.__name__, "b": b"x"}, id="non-json-values"),
        pytest.param({"a": {"b": {"c": [1, [2, [3, {"d": None}]]]}}}, id="deep-nesting"),
    ],
)
def test_key_matches_the_seed_on_edge_values(payload: dict[str, Any]) -> None:
    """Unicode, float spellings and non-JSON values (via str) key exactly as the seed keys them."""
    assert key("llm", payload) == _seed._key("llm", payload)


def test_canonical_json_is_the_seeds_text() -> None:
    """The canonical text is json.dumps with sorted keys, compact separators, ASCII escapes."""
    payload = {"b": [1.5, "é"], "a": None}
    assert canonical_json(payload) == json.dumps(
        payload, sort_keys=True, separators=(",", ":"), default=str
    )


def test_field_digests_cover_each_field_and_list_element() -> None:
    """Each top-level field and each element of a top-level list gets its own digest."""
    digests = field_digests({"messages": [{"a": 1}, {"a": 2}], "tools": [], "step": 3})
    assert set(digests) == {"messages", "messages[]", "tools", "tools[]", "step"}
    assert len(set(digests["messages[]"])) == 2 and digests["tools[]"] == []


def test_digest_changes_name_changed_elements() -> None:
    """Comparing digests names the changed list elements, or the whole field otherwise."""
    a = field_digests({"messages": [{"a": 1}, {"a": 2}], "step": 3})
    b = field_digests({"messages": [{"a": 1}, {"a": 9}], "step": 4})
    assert digest_changes(a, b) == ["messages[1]", "step"]


def test_changed_paths_names_nested_fields() -> None:
    """Differences are reported as paths with list indexes and dotted keys."""
    before = {"messages": [{"content": "a"}, {"content": "b"}], "params": {"temperature": 0}}
    after = {"messages": [{"content": "a"}, {"content": "c"}], "params": {"temperature": 1}}
    assert [c.path for c in changed_paths(before, after)] == [
        "messages[1].content",
        "params.temperature",
    ]


def test_changed_paths_reports_added_and_removed_elements() -> None:
    """A longer list shows the added element's path with no before value."""
    changes = changed_paths({"m": [1]}, {"m": [1, 2], "x": True})
    assert [(c.path, c.before, c.after) for c in changes] == [("m[1]", None, 2), ("x", None, True)]


def test_excerpt_shows_the_changed_words_with_context() -> None:
    """An excerpt is cut around the first and last differing characters."""
    before = "word " * 40 + "the bug is in main.py" + " tail" * 40
    after = "word " * 40 + "the issue is in main.py" + " tail" * 40
    b, a = excerpt(before, after)
    assert "bug" in b and "issue" in a
    assert len(b) < 80 and b.startswith("…") and b.endswith("…")


def test_normalize_masks_volatile_values() -> None:
    """Volatile keys are dropped; UUIDs, temp paths and ISO timestamps are masked."""
    obj = {
        "request_id": "x",
        "created_at": "y",
        "out": "run 123e4567-e89b-12d3-a456-426614174000 wrote /tmp/tmpab12_x/f "
        "at 2026-08-31T09:12:04Z",
    }
    assert normalize(obj) == {"out": "run <uuid> wrote <tmp>/f at <ts>"}


def test_normalizer_is_configurable() -> None:
    """Configured volatile keys replace the defaults and extra masks apply."""
    norm = Normalizer.from_config(["nonce"], {r"v\d+": "<v>"})
    assert norm({"nonce": 1, "ts": 2, "s": "v12"}) == {"ts": 2, "s": "<v>"}


uuids = st.uuids().map(str)


@given(st.dictionaries(safe_text, safe_text, max_size=4), uuids, uuids)
def test_fingerprint_ignores_fresh_request_uuids(args: dict[str, str], u1: str, u2: str) -> None:
    """A fresh UUID in args does not make an identical call look different (seed comment 2)."""
    assert fingerprint({**args, "rid": u1}) == fingerprint({**args, "rid": u2})


@given(json_values)
def test_normalize_is_idempotent(value: Any) -> None:
    """Normalizing twice gives the same result as normalizing once."""
    assert normalize(normalize(value)) == normalize(value)


any_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(any_json)
@bounded(deep=1000, ci=250)
def test_fast_encoder_is_the_canonical_json(value: Any) -> None:
    """The orjson fast path gives the reference text for any JSON value, top-level scalars
    (the float ``1.439488178100376e-07``) included."""
    assert canonical_json(value) == reference_json(value)


@given(st.lists(st.lists(any_json, min_size=1, max_size=3), min_size=1, max_size=6))
@bounded(deep=200, ci=50)
def test_fast_encoder_with_memory_is_the_canonical_json(steps: list[list[Any]]) -> None:
    """Checking only what follows the previous safe text still gives canonical_json's text,
    for a conversation that grows by appending values of any kind (floats included)."""
    memo = [b""]
    messages: list[Any] = [{"content": "x" * 100}]
    for appended in steps:
        messages = [*messages, *appended]
        payload = {"messages": messages, "params": {"temperature": 0.5}, "step": len(messages)}
        assert canonical_json(payload, memo) == reference_json(payload)


@given(st.floats(allow_nan=False, allow_infinity=False))
@settings(max_examples=2000)
def test_fast_encoder_floats(value: float) -> None:
    """Every finite float is written as Python's json writes it."""
    assert canonical_json(value) == reference_json(value)
    assert canonical_json({"t": value, "l": [value]}) == reference_json({"t": value, "l": [value]})


def test_fast_encoder_agrees_on_objects() -> None:
    """SDK models (pydantic, as the SDKs build theirs), enums, tuples, dates and dataclasses
    encode the same on both paths."""
    import dataclasses
    import datetime
    import enum

    class Color(enum.Enum):
        RED = "red"

    @dataclasses.dataclass
    class Point:
        x: int

    class Message(BaseModel):  # what an SDK's response model is: pydantic, built unchecked
        role: str
        content: str | None = None

    message = Message.model_construct(role="assistant", content="4")
    payload = {
        "m": [message, (1, 2)],
        "e": Color.RED,
        "d": datetime.date(2026, 1, 2),
        "p": Point(1),
        "s": {"b"},
    }
    stdlib = reference_json(payload)
    assert canonical_json(payload) == stdlib
    assert canonical_json({**payload, "u": "é"}) == reference_json({**payload, "u": "é"})
    assert '"e":"red"' in stdlib


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(1.439488178100376e-7, id="top-level-small-float"),
        pytest.param(1e16, id="top-level-big-float"),
        pytest.param(-0.00001, id="top-level-negative-small"),
        pytest.param(float("nan"), id="nan"),
        pytest.param({"t": float("inf"), "u": [float("-inf")]}, id="infinities"),
        pytest.param({"a": None, "b": float("nan")}, id="nan-beside-null"),
        pytest.param(2**70, id="big-int"),
    ],
)
def test_fast_path_edge_values(value: Any) -> None:
    """Top-level floats, non-finite floats (written NaN/Infinity as the seed's json.dumps
    writes them) and big integers give the reference text."""
    assert canonical_json(value) == reference_json(value)


def test_set_keys_do_not_depend_on_the_hash_seed(tmp_path: Path) -> None:
    """A payload holding a set has the same key in processes with different hash seeds."""
    code = (
        "from tracetape import key; "
        "print(key('tool', {'name': 'f', 'args': {'tags': {'alpha', 'beta', 'gamma', 'delta'}}}))"
    )
    keys = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": str(seed)},
            cwd=tmp_path,
        ).stdout
        for seed in (1, 2, 3, 4)
    }
    assert len(keys) == 1


def test_a_nan_beside_nulls_in_a_growing_stream_keys_as_the_reference() -> None:
    """A NaN appended to a conversation whose messages already hold None values is still
    written as the reference writes it, whatever the memo of the previous text."""
    memo = [b""]
    messages: list[Any] = [{"role": "assistant", "content": "x", "refusal": None}]
    assert canonical_json({"m": messages}, memo) == reference_json({"m": messages})
    messages = [*messages, {"role": "tool", "score": float("nan")}]
    assert canonical_json({"m": messages}, memo) == reference_json({"m": messages})
    assert "NaN" in canonical_json({"m": messages}, memo)


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


def test_values_json_has_no_type_for_key_as_documented() -> None:
    """The README's forms: str() for datetimes, Decimals and bytes, lists for tuples and sets."""
    import datetime
    import decimal

    payload = {
        "d": datetime.datetime(2026, 1, 2, 3, 4, 5),
        "x": decimal.Decimal("1.10"),
        "b": b"..",
        "t": (1, 2),
        "s": {"b", "a"},
    }
    text = '{"b":"b\'..\'","d":"2026-01-02 03:04:05","s":["a","b"],"t":[1,2],"x":"1.10"}'
    assert canonical_json(payload) == reference_json(payload) == text
