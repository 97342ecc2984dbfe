"""Canonical JSON, keys by definition, digests, path diffs and normalization."""

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
from tests.canonical.strategies import any_json
from tests.suite import bounded
from tracetape import key
from tracetape.canonical import (
    Normalizer,
    canonical_json,
    changed_paths,
    digest_changes,
    excerpt,
    field_digests,
    fingerprint,
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
