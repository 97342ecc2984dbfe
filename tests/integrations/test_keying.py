"""Keying a request: model routes, secret query parameters, and the payload every hook
level builds alike."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import msgspec
import openai
import pytest
from click.testing import CliRunner
from fakeserver import FakeServer
from hypothesis import given
from hypothesis import strategies as st
from openai.types.chat import ChatCompletionMessage

import tracetape
from tracetape import Tape, read_cassette
from tracetape.canonical import canonical_json, key_of
from tracetape.cli import main
from tracetape.formats.cassette import KEYS_VERSION
from tracetape.integrations.keying import (
    clean_url,
    llm_payload,
    migrate_noise,
    model_decision,
    unkeyed,
)
from tracetape.integrations.providers import match_route
from tracetape.integrations.proxied import listen, serving
from tracetape.integrations.proxy import ProxyApp
from tracetape.matching import Match as MatchRules
from tracetape.record import Record


def test_sdk_models_are_keyed_as_the_json_the_sdk_sends(tmp_path: Path) -> None:
    """A response message appended to the conversation keys like its JSON form."""
    message = ChatCompletionMessage.construct(role="assistant", content="4")
    with Tape(tmp_path / "t.jsonl", mode="record", harness_sha="x") as tape:
        as_model = tape.prepare(
            "llm", {"messages": [message], "tools": [], "params": {}, "step": 1}
        )
        as_json = tape.prepare(
            "llm",
            {
                "messages": [{"role": "assistant", "content": "4"}],
                "tools": [],
                "params": {},
                "step": 1,
            },
        )
    assert as_model.key == as_json.key


@pytest.mark.parametrize(
    ("path", "name"),
    [
        pytest.param("/v1/chat/completions", "chat.completions", id="chat"),
        pytest.param("/openai/deployments/x/chat/completions", "chat.completions", id="azure"),
        pytest.param("/v1/completions", "completions", id="legacy"),
        pytest.param("/v1/responses", "responses", id="responses"),
        pytest.param("/v1/embeddings", "embeddings", id="embeddings"),
        pytest.param("/v1/messages", "messages", id="anthropic"),
        pytest.param("/v1/messages/count_tokens", None, id="count-tokens"),
        pytest.param("/v1/threads/t/messages", None, id="threads"),
        pytest.param("/v1/models", None, id="models"),
    ],
)
def test_model_routes_are_recognised_by_path(path: str, name: str | None) -> None:
    """Known model routes are recognized by their path suffix, behind any prefix."""
    match = match_route("POST", "127.0.0.1", path)
    assert (match.route.name if match else None) == name


@pytest.mark.parametrize(
    ("url", "kept"),
    [
        pytest.param("https://h/p?q=1&api_key=s", "https://h/p?q=1", id="api-key"),
        pytest.param("https://h/p?access_token=s&page=2", "https://h/p?page=2", id="token"),
        pytest.param("https://h/p?X-Amz-Signature=s&a=b", "https://h/p?a=b", id="signature"),
        pytest.param(
            "https://h/p?sig=s&code=c&author=me", "https://h/p?author=me", id="short-names"
        ),
        pytest.param("https://h:8080/p?key=s", "https://h:8080/p", id="port-all-dropped"),
    ],
)
def test_secret_query_params_are_dropped_from_the_url(url: str, kept: str) -> None:
    """Secret-looking query parameters never reach an http key; ordinary ones stay."""
    parsed = httpx2.URL(url)
    parts = (parsed.scheme, parsed.netloc.decode(), parsed.path, parsed.query.decode())
    assert clean_url(*parts) == kept


# -- the providers' noise: stored, never keyed (keys 4) -------------------------------------------

KEYS_3 = Path(__file__).parents[1] / "fixtures" / "recorded_before_noise_fields.jsonl"
ADD = {
    "name": "add",
    "description": "a + b",
    "input_schema": {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    },
}


def _noisy_run(base_url: str, session: str) -> list[str]:
    """What the keys-3 fixture recorded: an Anthropic tool loop sending ``metadata.user_id``,
    then an OpenAI one sending ``user``, ``metadata``, ``store``, ``prompt_cache_key`` and
    ``safety_identifier``, each of them naming ``session``. Their answers."""
    claude = anthropic.Anthropic(base_url=base_url, api_key="sk-ant-test", max_retries=0)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Please sum 1 to 2."}]
    while True:
        msg = claude.messages.create(
            model="claude-test", max_tokens=100, tools=[ADD], messages=messages,  # type: ignore[arg-type]
            metadata={"user_id": f"user_abc_account__session_{session}"},
        )  # fmt: skip
        content = [b.model_dump(exclude_none=True) for b in msg.content]
        messages.append({"role": "assistant", "content": content})
        uses = [b for b in msg.content if b.type == "tool_use"]
        if not uses:
            break
        results = [
            {"type": "tool_result", "tool_use_id": u.id, "content": str(sum(u.input.values()))}  # type: ignore[union-attr]
            for u in uses
        ]
        messages.append({"role": "user", "content": results})
    said = [str(getattr(msg.content[0], "text", ""))]
    gpt = openai.OpenAI(base_url=f"{base_url}/v1", api_key="sk-test", max_retries=0)
    chat: list[Any] = [{"role": "user", "content": "Please sum 1 to 2."}]
    function = {"type": "function", "function": {"name": "add", "parameters": ADD["input_schema"]}}
    while True:
        done = gpt.chat.completions.create(
            model="gpt-test", messages=chat, tools=[function],  # type: ignore[list-item]
            user=f"u-{session}", metadata={"session": session}, store=True,
            prompt_cache_key=f"pk-{session}", safety_identifier=f"sid-{session}",
        )  # fmt: skip
        message = done.choices[0].message
        chat.append(message.model_dump(exclude_none=True))
        if not message.tool_calls:
            break
        for call in message.tool_calls:
            args = json.loads(call.function.arguments)  # type: ignore[union-attr]
            chat.append(
                {"role": "tool", "tool_call_id": call.id, "content": str(sum(args.values()))}
            )
    return [*said, str(message.content)]


SAID = ["The total is 3.", "The total is 3."]


def test_a_cassette_keyed_with_the_noise_replays_another_session_through_the_hooks(
    tmp_path: Path,
) -> None:
    """The keys-3 fixture (recorded before the noise was unkeyed, with session A) replays a
    run that sends session B's noise, strict, with no server: re-keyed as it is taken."""
    tape = Tape(KEYS_3, mode="replay", strict=True, harness_sha="fixture")
    with tape, tracetape.patch_sdks(tape):
        assert _noisy_run("http://127.0.0.1:9", "B") == SAID
    assert read_cassette(KEYS_3).header["keys"] == 3  # type: ignore[index]  # left as it was


def test_tracetape_migrate_keys_it_as_a_fresh_recording_does(
    tmp_path: Path, server: FakeServer
) -> None:
    """``tracetape migrate`` moves each record's noise under ``unkeyed`` and re-keys it: the
    keys are a fresh recording's (of another session), and the migrated cassette replays."""
    path = tmp_path / "old.jsonl"
    path.write_bytes(KEYS_3.read_bytes())
    done = CliRunner().invoke(main, ["migrate", str(path)])
    assert done.exit_code == 0, done.output
    assert f"keys 3 -> {KEYS_VERSION} (the providers' noise stored unkeyed)" in done.output
    assert "6 of 6 record(s) re-keyed" in done.output
    fresh = tmp_path / "fresh.jsonl"
    with Tape(fresh, mode="record") as tape, tracetape.patch_sdks(tape):
        assert _noisy_run(server.base_url, "Z") == SAID
    migrated, recorded = read_cassette(path).records, read_cassette(fresh).records
    assert [r.key for r in migrated] == [r.key for r in recorded]
    assert migrated[0].input["unkeyed"] == {"metadata": {"user_id": "user_abc_account__session_A"}}
    assert recorded[-1].input["unkeyed"] == {
        "metadata": {"session": "Z"}, "prompt_cache_key": "pk-Z", "safety_identifier": "sid-Z",
        "store": True, "user": "u-Z",
    }  # fmt: skip
    server.stop()
    tape = Tape(path, mode="replay", strict=True, harness_sha="fixture")
    with tape, tracetape.patch_sdks(tape):
        assert _noisy_run(server.base_url, "C") == SAID


def test_a_cassette_keyed_with_the_noise_replays_through_the_proxy(tmp_path: Path) -> None:
    """The proxy re-keys a keys-3 cassette as the hooks do: another session's noise plays."""
    tape = Tape(KEYS_3, mode="replay", strict=True, harness_sha="fixture")
    with serving(ProxyApp(tape), listen("127.0.0.1", 0)) as url:
        assert _noisy_run(url, "B") == SAID
    tape.close()


def test_runs_that_differ_only_in_their_noise_agree_in_a_diff(
    tmp_path: Path, server: FakeServer
) -> None:
    """``tracetape diff`` compares what was keyed: two sessions agree on every call."""
    for session in "AB":
        tape = Tape(tmp_path / f"{session}.jsonl", mode="record")
        with tape, tracetape.patch_sdks(tape):
            _noisy_run(server.base_url, session)
    done = CliRunner().invoke(
        main, ["diff", str(tmp_path / "A.jsonl"), str(tmp_path / "B.jsonl"), "--format", "json"]
    )
    assert done.exit_code == 0, done.output
    assert (
        "no divergence"
        in CliRunner()
        .invoke(main, ["diff", str(tmp_path / "A.jsonl"), str(tmp_path / "B.jsonl")])
        .output
    )


def test_migrating_the_noise_keeps_what_a_keep_rule_keys_and_touches_nothing_else() -> None:
    """``migrate_noise`` under ``keep = ["user"]`` moves the rest; a record of no provider, of
    another kind, or already unkeyed is kept as it is (the same object)."""
    params = {"model": "m", "user": "u", "store": True}
    old = Record(kind="llm", key="llm:x", api="openai.chat.completions",
                 input={"messages": [], "tools": [], "params": params, "step": 1})  # fmt: skip
    new = migrate_noise([old], MatchRules(keep=["user"]))[0]
    assert new.input["params"] == {"model": "m", "user": "u"}
    assert new.input["unkeyed"] == {"store": True}
    kept = {"messages": [], "tools": [], "params": {"model": "m", "user": "u"}, "step": 1}
    assert new.key == key_of("llm", canonical_json(kept))
    others = [
        msgspec.structs.replace(old, api=None),
        msgspec.structs.replace(old, kind="tool"),
        msgspec.structs.replace(old, input={**old.input, "unkeyed": {}}),
        msgspec.structs.replace(old, input=None),
    ]
    assert all(a is b for a, b in zip(migrate_noise(others, MatchRules()), others, strict=True))


def test_unkeyed_fields_are_redacted_like_any_other(tmp_path: Path) -> None:
    """A secret in a noise field is redacted in the stored input: stored is not exempt."""
    secret = "sk-proj-abcDEF0123456789ghijKLMN0123456789xyzt"
    with Tape(tmp_path / "t.jsonl", mode="record", harness_sha="x") as tape:
        match = match_route("POST", "h", "/v1/chat/completions")
        assert match is not None
        decision = model_decision(tape, match, {"model": "m", "messages": [],
                                                "metadata": {"note": f"key {secret}"}})  # fmt: skip
        tape.record(decision.decision, {"status": 200, "body": {}})
    text = (tmp_path / "t.jsonl").read_text()
    assert secret not in text and '"unkeyed":{"metadata":{"note":"key ' in text


_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text("ab ", max_size=4),
    lambda inner: (
        st.lists(inner, max_size=2) | st.dictionaries(st.text("xy", max_size=2), inner, max_size=2)
    ),
    max_leaves=4,
)
_FIELDS = ["model", "temperature", "user", "metadata", "store", "keep_alive", "prompt_cache_key"]
_ROUTES = {
    "openai.chat.completions": "/v1/chat/completions",
    "openai.responses": "/v1/responses",
    "anthropic.messages": "/v1/messages",
    "ollama.chat": "/api/chat",
}


@given(
    api=st.sampled_from(sorted(_ROUTES)),
    fields=st.dictionaries(st.sampled_from([*_FIELDS, "safety_identifier", "labels"]), _VALUES),
    keep=st.sets(st.sampled_from(["user", "metadata", "store"]), max_size=2),
    other=_VALUES,
)
def test_a_migrated_record_keys_and_stores_as_a_fresh_decision_and_noise_never_keys(
    api: str, fields: dict[str, Any], keep: set[str], other: Any
) -> None:
    """For any body: the key of its payload does not move with its noise's values, and a
    record keyed before (its noise in ``params``), migrated, has the fresh decision's key and
    stored input, under any ``keep``."""
    match = match_route("POST", "h", _ROUTES[api])
    assert match is not None and match.api == api
    body = {**fields, "messages": [{"role": "user", "content": "hi"}]}
    payload = llm_payload(match, body, 1, keep)
    noise = unkeyed(match, body, keep)
    key = key_of("llm", canonical_json(payload))
    moved = {**body, **{k: other for k in noise or {}}}
    assert key_of("llm", canonical_json(llm_payload(match, moved, 1, keep))) == key
    old = llm_payload(match, body, 1, match.provider.noise)  # everything in params, as keys 3
    rec = Record(kind="llm", key=key_of("llm", canonical_json(old)), api=api, input=old)
    new = migrate_noise([rec], MatchRules(keep=sorted(keep)))[0]
    assert new.key == key
    assert new.input == ({**payload, "unkeyed": noise} if noise else old)
