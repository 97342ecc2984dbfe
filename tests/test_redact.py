"""Deterministic redaction on canonical JSON text."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracetape.canonical import canonical_json
from tracetape.redact import Redactor, RedactRules

SECRETS = {
    "openai_key": "sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
    "anthropic_key": "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123",
    "aws_access_key": "AKIAIOSFODNN7EXAMPLE",
    "github_token": "ghp_" + "a1B2c3D4e5" * 4,
    "slack_token": "xoxb-1234567890-abcdefghij",
    "google_api_key": "AIza" + "Sy" + "b" * 33,
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJlLXNpZw",
}
PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7\nabcdef==\n-----END RSA PRIVATE KEY-----"


@pytest.mark.parametrize("detector", sorted(SECRETS))
def test_builtin_detector_replaces_the_secret(detector: str) -> None:
    """Each built-in shape is replaced by a placeholder naming its detector."""
    text = canonical_json({"content": f"the key is {SECRETS[detector]} ok"})
    out = Redactor().redact_text(text)
    assert SECRETS[detector] not in out
    assert f"[REDACTED:{detector}:" in out
    assert json.loads(out)["content"].endswith(" ok")


@pytest.mark.parametrize(
    ("payload", "leak"),
    [
        pytest.param(
            {"headers": {"Authorization": "Bearer abc.def-ghi_jkl0123"}}, "abc.def", id="bearer"
        ),
        pytest.param({"cfg": {"db_password": "hunter2!"}}, "hunter2", id="password-field"),
        pytest.param({"API_KEY": "zz-top-secret-value"}, "zz-top", id="api-key-field"),
        pytest.param({"pem": PEM}, "MIIEowIBAAKCAQEA7", id="private-key-block"),
        pytest.param(
            {"c": json.dumps({"client_secret": "s3cr3t-v@lue"})}, "s3cr3t", id="quoted-json"
        ),
    ],
)
def test_secret_values_never_survive(payload: dict[str, Any], leak: str) -> None:
    """Bearer tokens, secret-named fields, key blocks and secrets inside quoted JSON are removed."""
    out = Redactor().redact_text(canonical_json(payload))
    assert leak not in out
    json.loads(out)


def test_placeholders_are_stable_and_distinct() -> None:
    """The same secret gives the same placeholder; different secrets give different ones."""
    r = Redactor()
    one = r.redact_text(canonical_json({"a": SECRETS["openai_key"]}))
    two = r.redact_text(canonical_json({"b": SECRETS["openai_key"]}))
    other = r.redact_text(canonical_json({"a": SECRETS["openai_key"][:-1] + "X"}))
    assert json.loads(one)["a"] == json.loads(two)["b"] != json.loads(other)["a"]


def test_placeholders_are_left_as_they_are() -> None:
    """Redacting an already redacted text changes nothing."""
    r = Redactor()
    once = r.redact_text(canonical_json({"password": "pw-1", "k": SECRETS["github_token"]}))
    assert r.redact_text(once) == once


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_quoted_secret_gets_the_placeholder_of_the_original(depth: int) -> None:
    """A secret quoted as JSON inside a string, at any depth, gets the same placeholder."""
    r = Redactor()
    inner: Any = {"password": 'pa"ss\\word é', "token": SECRETS["anthropic_key"]}
    direct = json.loads(r.redact_text(canonical_json(inner)))
    quoted: Any = inner
    for _ in range(depth):
        quoted = json.dumps(quoted)
    text = r.redact_text(canonical_json({"content": quoted}))
    unwrapped: Any = json.loads(text)["content"]
    for _ in range(depth):
        unwrapped = json.loads(unwrapped)
    assert unwrapped == direct


def test_the_digest_key_changes_placeholders() -> None:
    """Placeholders are keyed: another redact key gives other digests."""
    text = canonical_json({"a": SECRETS["openai_key"]})
    assert Redactor(key=b"one").redact_text(text) != Redactor(key=b"two").redact_text(text)


def test_user_rules_add_fields_and_patterns() -> None:
    """User field names and regexes redact on top of the built-ins."""
    r = Redactor(RedactRules(fields=("ssn",), patterns={"ticket": r"TCK-[0-9]{6}"}))
    out = r.redact_text(canonical_json({"ssn": "123-45-6789", "note": "see TCK-123456"}))
    assert "123-45-6789" not in out and "TCK-123456" not in out
    assert "[REDACTED:ticket:" in out


def test_rules_accept_mappings_and_lists() -> None:
    """Rules coerce from a mapping and from a list of regexes; unknown keys are errors."""
    assert RedactRules.coerce({"fields": ["x"]}).fields == ("x",)
    assert list(RedactRules.coerce([r"a+"]).patterns.values()) == ["a+"]
    with pytest.raises(ValueError, match="unknown redact option"):
        RedactRules.coerce({"feilds": ["x"]})


def test_invalid_user_regex_is_a_clear_error() -> None:
    """A user pattern that does not compile names itself."""
    with pytest.raises(ValueError, match="'broken' is not a valid regex"):
        Redactor(RedactRules(patterns={"broken": "(unclosed"}))


def test_ordinary_text_is_untouched() -> None:
    """Words that merely resemble anchors (task-list, Asia, tokens) are not redacted."""
    text = canonical_json(
        {"m": "task-list for Asia; max_tokens 5; bearer of news", "max_tokens": 5}
    )
    assert Redactor().redact_text(text) == text


conversation_piece = st.sampled_from(
    [
        "plain words here",
        f"key {SECRETS['openai_key']}",
        json.dumps({"password": "hunter2"}),
        f"Bearer {'t' * 20}",
        "naïve 東京",
        json.dumps({"tool": {"api_key": SECRETS["aws_access_key"]}}),
    ]
)


edit = st.tuples(st.integers(min_value=0, max_value=30), st.lists(conversation_piece, max_size=3))


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.lists(conversation_piece, max_size=4), edit), min_size=1, max_size=8))
def test_incremental_redaction_equals_a_full_scan(steps: list[tuple[list[str], Any]]) -> None:
    """Rescanning only what changed gives exactly what a full scan gives, for appends and edits."""
    incremental, full = Redactor(), Redactor()
    messages: list[dict[str, str]] = [{"role": "system", "content": "x" * 3000}]
    for step, (appended, (where, replacement)) in enumerate(steps, 1):
        messages = [*messages, *({"role": "tool", "content": p} for p in appended)]
        if replacement and where < len(messages):
            messages[where] = {"role": "user", "content": " ".join(replacement)}
        text = canonical_json({"messages": messages, "step": step, "tools": ["a", "b"]})
        assert incremental.redact(text, "llm") == full.redact_text(text)
