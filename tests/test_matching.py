"""Match rules: ignore paths, masks, their checks, and their place in keys and headers."""

from __future__ import annotations

import copy
import json
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tracetape import ConfigError, Match, MatchRulesError, ReplayMiss, Tape, key
from tracetape.canonical import canonical_json, key_of, keyer
from tracetape.matching import MASKS

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=40),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


@pytest.mark.parametrize(
    ("mask", "text", "masked"),
    [
        ("uuid", "id 0b7e1b2c-6a1f-4c1e-9a51-8f0b8f9b2a11.", "id <uuid>."),
        ("tmp", "wrote /tmp/tmpa1b2c3/out.txt", "wrote <tmp>/out.txt"),
        ("ts", "at 2026-12-04T20:43:51Z", "at <ts>"),
        ("ts", "at 2026-12-04T20:43:51.123456", "at <ts>"),
        ("ts", "at 2026-12-04 20:43:51+01:00 sharp", "at <ts> sharp"),
        ("unix-time", "since 1733300000 s", "since <unix-time> s"),
        ("unix-time", "ms 1733300000123, f 1733300000.25", "ms <unix-time>, f <unix-time>"),
        (
            "unix-time",
            "order 12345678901234 and v1.1733300000",
            "order 12345678901234 and v1.1733300000",
        ),
        ("hex-id", "trace 4bf92f3577b34da6a3ce929d0e0e4736 ok", "trace <hex-id> ok"),
        (
            "hex-id",
            "count 1234567890123456 and deadbeefdeadbeefx",
            "count 1234567890123456 and deadbeefdeadbeefx",
        ),
        ("re:order-[0-9]+", "see order-42 now", "see <re> now"),
    ],
)
def test_each_mask_replaces_what_it_names_and_nothing_else(
    mask: str, text: str, masked: str
) -> None:
    assert Match(mask=[mask]).keyed({"m": text}) == {"m": masked}


def test_ts_masks_what_datetime_now_isoformat_prints() -> None:
    now = datetime.now().isoformat()
    assert Match(mask=["ts"]).keyed([now, datetime.now(UTC).isoformat()]) == ["<ts>", "<ts>"]


@pytest.mark.parametrize(
    ("path", "payload", "keyed"),
    [
        ("user", {"params": {"user": "u", "model": "m"}}, {"params": {"model": "m"}}),
        ("metadata", {"body": {"metadata": {"a": 1}, "q": 2}}, {"body": {"q": 2}}),
        ("step", {"step": 3, "params": {"step": 1}}, {"params": {"step": 1}}),
        (
            "messages[*].name",
            {"messages": [{"name": "a", "c": 1}, {"c": 2}]},
            {"messages": [{"c": 1}, {"c": 2}]},
        ),
        ("messages[1]", {"messages": ["a", "b", "c"]}, {"messages": ["a", "c"]}),
        ("messages[5]", {"messages": ["a"]}, {"messages": ["a"]}),
        ("tools[*]", {"tools": [1, 2]}, {"tools": []}),
        ("messages[9].x", {"messages": [{"x": 1}]}, {"messages": [{"x": 1}]}),
        ("a.b.c", {"a": {"b": {"c": 1, "d": 2}}}, {"a": {"b": {"d": 2}}}),
        ("a.b", {"a": "not a mapping"}, {"a": "not a mapping"}),
    ],
)
def test_ignore_paths_leave_out_what_they_name(path: str, payload: object, keyed: object) -> None:
    assert Match(ignore=[path]).keyed(payload) == keyed


@pytest.mark.parametrize(
    "bad",
    [
        {"ignore": ["messages[x]"]},
        {"ignore": [".a"]},
        {"ignore": ["a."]},
        {"ignore": ""},
        {"mask": ["uuids"]},
        {"mask": ["re:("]},
        {"mask": [3]},
        {"masks": ["uuid"]},
        "uuid",
    ],
)
def test_bad_rules_are_config_errors_that_say_what_is_valid(bad: object) -> None:
    with pytest.raises(ConfigError) as raised:
        Match.coerce(bad)  # type: ignore[arg-type]
    assert any(
        w in str(raised.value) for w in ("dotted path", "use one of", "regex", "must be", "valid")
    )


def test_rules_compare_equal_by_their_content_and_describe_themselves() -> None:
    rules = Match.coerce({"ignore": ["user"], "mask": ["uuid", "ts"]})
    assert rules == Match(ignore=("user",), mask=("uuid", "ts"))
    assert rules.describe() == "ignore user; mask uuid, ts"
    assert rules.as_header() == {"ignore": ["user"], "mask": ["uuid", "ts"]}
    assert not Match() and Match().as_header() is None and Match().describe() == "none"


@given(JSON)
def test_keyed_never_changes_its_input_and_no_rules_return_it_as_is(value: object) -> None:
    before = copy.deepcopy(value)
    rules = Match(ignore=["a", "b[*].c"], mask=["uuid", "ts", "hex-id"])
    rules.keyed(value)
    assert value == before
    assert Match().keyed(value) is value


@given(JSON)
def test_masking_is_idempotent(value: object) -> None:
    rules = Match(mask=list(MASKS))
    once = rules.keyed(value)
    assert rules.keyed(once) == once


@given(JSON)
def test_a_tape_with_no_rules_keys_exactly_as_before(value: object) -> None:
    """Empty rules are no rules: a recording's keys are ``tracetape.key``'s (redaction
    included), and no rules go into its header."""
    payload = {"messages": [value], "params": {"user": "u"}, "step": 1}
    with tempfile.TemporaryDirectory() as folder:
        tape = Tape(Path(folder) / "r.jsonl", mode="record", match=Match())
        assert tape.prepare("llm", payload).key == key("llm", payload)
        tape.close()
        assert "match" not in (Path(folder) / "r.jsonl").read_text().splitlines()[0]


def _ask(tape: Tape, text: str, user: str = "u1") -> str:
    payload = {"messages": [{"role": "user", "content": text}], "params": {"user": user}, "step": 1}
    return tape.call("llm", payload, lambda: "answer")


def test_rules_go_into_the_header_and_replay_uses_them(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    with Tape(path, "record", match=Match(ignore=["user"], mask=["uuid"])) as tape:
        _ask(tape, "job 0b7e1b2c-6a1f-4c1e-9a51-8f0b8f9b2a11")
    header = json.loads(path.read_text().splitlines()[0])
    assert header["match"] == {"ignore": ["user"], "mask": ["uuid"]}
    record = json.loads(path.read_text().splitlines()[1])
    assert "0b7e1b2c-6a1f-4c1e-9a51-8f0b8f9b2a11" in json.dumps(record["input"])  # all stored
    assert record["input"]["params"] == {"user": "u1"}
    with Tape(path, "replay") as tape:
        assert _ask(tape, "job 11111111-2222-3333-4444-555555555555", user="u2") == "answer"
    with Tape(path, "replay", match={"ignore": ["user"], "mask": ["uuid"]}) as tape:
        assert _ask(tape, "job 11111111-2222-3333-4444-555555555555") == "answer"


def test_rules_given_at_replay_that_differ_are_an_error(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    with Tape(path, "record", match=Match(mask=["uuid"])) as tape:
        _ask(tape, "x")
    with pytest.raises(MatchRulesError) as raised:
        Tape(path, "replay", match=Match(mask=["ts"]))
    message = str(raised.value)
    assert "mask ts" in message and "mask uuid" in message and "tracetape migrate" in message
    with Tape(path, "rewrite", match=Match(mask=["ts"])) as tape:  # re-recording may change them
        _ask(tape, "x")
    assert json.loads(path.read_text().splitlines()[0])["match"] == {"ignore": [], "mask": ["ts"]}


def test_a_cassette_without_rules_misses_on_a_fresh_uuid_and_a_miss_shows_masks(
    tmp_path: Path,
) -> None:
    plain, masked = tmp_path / "plain.jsonl", tmp_path / "masked.jsonl"
    for path, rules in ((plain, None), (masked, Match(mask=["uuid"]))):
        with Tape(path, "record", match=rules) as tape:
            _ask(tape, "job 0b7e1b2c-6a1f-4c1e-9a51-8f0b8f9b2a11 please")
    with pytest.raises(ReplayMiss), Tape(plain, "replay") as tape:
        _ask(tape, "job 11111111-2222-3333-4444-555555555555 please")
    with pytest.raises(ReplayMiss) as raised, Tape(masked, "replay") as tape:
        _ask(tape, "task 11111111-2222-3333-4444-555555555555 please")
    text = str(raised.value)
    assert "match rules (from the cassette's header): mask uuid" in text
    assert "'job <uuid> please'" in text and "'task <uuid> please'" in text
    assert "0b7e1b2c" not in text and "11111111" not in text


def test_rules_from_pyproject_are_recorded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.tracetape.match]\nmask = ["uuid"]\n')
    monkeypatch.chdir(tmp_path)
    with Tape("r.jsonl", "record") as tape:
        _ask(tape, "job 0b7e1b2c-6a1f-4c1e-9a51-8f0b8f9b2a11")
    with Tape("r.jsonl", "replay") as tape:
        assert _ask(tape, "job 11111111-2222-3333-4444-555555555555") == "answer"
    (tmp_path / "pyproject.toml").write_text('[tool.tracetape.match]\nmask = ["ts"]\n')
    from tracetape.config import _load

    _load.cache_clear()
    with pytest.raises(MatchRulesError):
        Tape("r.jsonl", "replay")


def test_a_header_with_broken_rules_is_a_cassette_error_naming_line_1(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    with Tape(path, "record", match=Match(mask=["uuid"])) as tape:
        _ask(tape, "x")
    lines = path.read_text().splitlines()
    lines[0] = lines[0].replace('"mask":["uuid"]', '"mask":["nope"]')
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(Exception, match=r"r\.jsonl:1: header field 'match'"):
        Tape(path, "replay")


PIECES = [
    *'ab09-:/ ."\\\nTZé',
    "0b7e1b2c-6a1f-4c1e-9a51-8f0b8f9b2a11",
    "2026-12-04T20:43:51Z",
    "/tmp/tmpab1/x",
    "1733300000",
    "deadbeef01234567",
]
TEXTS = st.lists(st.sampled_from(PIECES), max_size=6).map("".join)
VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | TEXTS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXTS, inner, max_size=3),
    max_leaves=12,
)


@given(st.lists(VALUES, min_size=1, max_size=6), st.data())
def test_masked_keys_are_the_keys_of_the_masked_payloads(messages: list[Any], data: Any) -> None:
    """Replay masks the canonical text incrementally (``MaskedKey``); a recording masks the
    payload, then encodes it: both give the same text and key, for a conversation growing
    by appending and for one edited in the middle."""
    rules = Match(mask=data.draw(st.lists(st.sampled_from([*MASKS, "re:[ab]+"]), min_size=1)))
    keys = keyer(rules.mask_string)("llm")
    conversations = [messages[: i + 1] for i in range(len(messages))]
    conversations.append(data.draw(st.lists(VALUES, max_size=4)))  # anything at all after
    for step, conversation in enumerate(conversations, 1):
        payload = {"messages": conversation, "params": {"model": "m"}, "step": step}
        text, found = keys.key(payload)
        expected = canonical_json(rules.keyed(payload))
        assert text.decode() == expected
        assert found == key_of("llm", expected)
