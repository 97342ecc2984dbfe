"""botocore's client events, on boto3's Bedrock Runtime client and a fake server: a call is one
decision whatever botocore's retries (a throttling error, a retried 503, a failed connection
replay at once as they ended), credentials are learned from the signed request, other calls are
taped under ``patch_http`` only, and a client that outlives the hooks is not taped."""

from __future__ import annotations

from pathlib import Path

import botocore.exceptions
import pytest
from botocore.config import Config

import tracetape
from tests.integrations.providers.fake_bedrock import FakeBedrock
from tests.integrations.providers.test_bedrock import (
    KEY_ID,
    MODEL,
    TOKEN,
    assert_no_credentials,
    bedrock_client,
    call_route,
    replaying,
)
from tracetape import Tape, read_cassette

pytestmark = pytest.mark.usefixtures("no_leftover_patch")


def test_a_recorded_throttling_error_is_raised_at_once(
    tmp_path: Path, bedrock: FakeBedrock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A throttling error the recorded call ended with replays under botocore's default
    retries without one retry (none would be recorded to play, nor slept on)."""
    path = tmp_path / "run.jsonl"
    once = Config(retries={"total_max_attempts": 1})
    with (
        Tape(path, mode="record") as tape,
        tracetape.patch_sdks(tape),
        pytest.raises(botocore.exceptions.ClientError),
    ):
        call_route(bedrock_client(bedrock.base_url, config=once), "converse", "busy-model")
    bedrock.stop()
    with (
        replaying(path, "sdk", monkeypatch) as tape,
        pytest.raises(botocore.exceptions.ClientError) as replayed,
    ):
        call_route(bedrock_client(bedrock.base_url), "converse", "busy-model")
    assert replayed.value.response["Error"]["Code"] == "ThrottlingException"
    assert replayed.value.response["ResponseMetadata"]["RetryAttempts"] == 0
    assert not tape.misses


def test_botocore_retries_are_one_decision_its_outcome(
    tmp_path: Path, bedrock: FakeBedrock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A call botocore retried after a 503 is recorded once, as the answer it ended with,
    and replays to that answer without a retry."""
    path = tmp_path / "run.jsonl"
    with Tape(path, mode="record") as tape, tracetape.patch_sdks(tape):
        client = bedrock_client(bedrock.base_url)
        # retry at once rather than after botocore's backoff
        client.meta.events.register_first(
            "needs-retry.bedrock-runtime", lambda attempts, **_: 0 if attempts == 1 else None
        )
        recorded = call_route(client, "converse", "flaky-model")
    assert recorded["ResponseMetadata"]["RetryAttempts"] == 1
    assert len(bedrock.requests) == 2
    (rec,) = read_cassette(path).records
    assert rec.out["status"] == 200
    bedrock.stop()
    with replaying(path, "sdk", monkeypatch):
        replayed = call_route(bedrock_client(bedrock.base_url), "converse", "flaky-model")
    assert replayed["output"] == recorded["output"]
    assert replayed["ResponseMetadata"]["RetryAttempts"] == 0


def test_a_failed_connection_replays_as_the_same_botocore_error(
    tmp_path: Path, bedrock: FakeBedrock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A call that reached no server is a decision too: it replays as the same
    ``EndpointConnectionError``, at once, under botocore's default retries."""
    path = tmp_path / "run.jsonl"
    bedrock.stop()
    once = Config(retries={"total_max_attempts": 1})
    with (
        Tape(path, mode="record") as tape,
        tracetape.patch_sdks(tape),
        pytest.raises(botocore.exceptions.EndpointConnectionError) as recorded,
    ):
        call_route(bedrock_client(bedrock.base_url, config=once), "converse", "m")
    with (
        replaying(path, "sdk", monkeypatch) as tape,
        pytest.raises(botocore.exceptions.EndpointConnectionError) as replayed,
    ):
        call_route(bedrock_client(bedrock.base_url), "converse", "m")
    assert str(replayed.value) == str(recorded.value)
    assert not tape.misses


@pytest.mark.parametrize("header", ["X-Amz-Security-Token", "Authorization"])
def test_an_echoed_credential_never_reaches_the_cassette(
    tmp_path: Path, bedrock: FakeBedrock, header: str
) -> None:
    """The session token, and SigV4's key id and signature, are learned from the request: an
    answer quoting them back is stored redacted."""
    path = tmp_path / "run.jsonl"
    messages = [{"role": "user", "content": [{"text": f"show header {header}"}]}]
    with Tape(path, mode="record") as tape, tracetape.patch_sdks(tape):
        answer = bedrock_client(bedrock.base_url).converse(modelId=MODEL, messages=messages)
    echoed = answer["output"]["message"]["content"][0]["text"]
    assert (TOKEN if header.startswith("X-") else KEY_ID) in echoed
    assert_no_credentials(path)
    assert "[REDACTED:" in path.read_text()
    if header == "Authorization":
        assert echoed.rsplit("Signature=", 1)[1] not in path.read_text()


def test_other_calls_are_http_decisions_under_patch_http_only(
    tmp_path: Path, bedrock: FakeBedrock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``count_tokens`` is no model call: ``patch_sdks`` lets it through untaped, and
    ``patch_http`` tapes it as an ``http`` decision that replays offline."""
    count = {"converse": {"messages": [{"role": "user", "content": [{"text": "hi"}]}]}}
    sdk_path, http_path = tmp_path / "sdk.jsonl", tmp_path / "http.jsonl"
    with Tape(sdk_path, mode="record") as tape, tracetape.patch_sdks(tape):
        bedrock_client(bedrock.base_url).count_tokens(modelId=MODEL, input=count)
    assert read_cassette(sdk_path).records == []
    with Tape(http_path, mode="record") as tape, tracetape.patch_http(tape):
        recorded = bedrock_client(bedrock.base_url).count_tokens(modelId=MODEL, input=count)
    (rec,) = read_cassette(http_path).records
    assert rec.kind == "http" and rec.out["body"] == {"inputTokens": 1}
    assert rec.input["url"].endswith("/count-tokens")
    bedrock.stop()
    with replaying(http_path, "http", monkeypatch):
        replayed = bedrock_client(bedrock.base_url).count_tokens(modelId=MODEL, input=count)
    assert replayed["inputTokens"] == recorded["inputTokens"] == 1


def test_a_client_outliving_the_hooks_is_not_taped(tmp_path: Path, bedrock: FakeBedrock) -> None:
    """A client created under the hooks and used after them goes to the server untaped."""
    path = tmp_path / "run.jsonl"
    with Tape(path, mode="record") as tape, tracetape.patch_sdks(tape):
        client = bedrock_client(bedrock.base_url)
        call_route(client, "converse", MODEL)
    with Tape(tmp_path / "after.jsonl", mode="record") as after:
        call_route(client, "converse", MODEL)
    assert len(read_cassette(path).records) == 1
    assert read_cassette(after.path).records == []
    assert len(bedrock.requests) == 2
