"""The Bedrock provider through the real boto3, taped at botocore's events: ``converse``,
``converse_stream`` and ``invoke_model`` against a local fake Bedrock Runtime, recorded,
replayed with the server stopped, no AWS credentials and the network blocked, at both hook
levels; errors, retries and failed connections as decisions; and ``tracetape run`` on an
unmodified boto3 script."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import botocore.exceptions
import pytest
from botocore.config import Config

import tracetape
from tracetape import ReplayMiss, Tape, read_cassette
from tracetape.integrations import unpatch_all
from tracetape.integrations.network import block_network
from tracetape.integrations.providers import Usage, provider
from tracetape.integrations.runner import EXIT_REPLAY_MISS

from .fake_bedrock import REQUEST_ID, FakeBedrock

# An inference profile's ARN: ":" and "/" travel URL-encoded in the path.
MODEL = (
    "arn:aws:bedrock:us-east-1:123456789012:inference-profile/"
    "us.anthropic.claude-sonnet-4-20250514-v1:0"
)
KEY_ID = "AKIATRACETAPE0TEST01"
SECRET = "tR4c3t4p3/S3cr3tAcc3ssK3yF0rT3st1ngOnly0"
TOKEN = "IQoJb3JpZ2luX2VjEHTracetapeSessionToken0123456789abcdefghijklmnopqrstuv"
KEYS = {"aws_access_key_id": KEY_ID, "aws_secret_access_key": SECRET, "aws_session_token": TOKEN}
TASK = "sum 1 to 3, carefully"
TOOLS = {
    "tools": [
        {
            "toolSpec": {
                "name": "add",
                "description": "Add two integers.",
                "inputSchema": {"json": {"type": "object", "properties": {}}},
            }
        }
    ]
}
HOOKS = {"sdk": tracetape.patch_sdks, "http": tracetape.patch_http}


@tracetape.tool
def add(a: int, b: int) -> int:
    """The agent's tool."""
    return a + b


@pytest.fixture(autouse=True)
def _unhooked() -> Iterator[None]:
    yield
    unpatch_all()


@pytest.fixture
def no_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No AWS credentials anywhere botocore looks, but the EC2 metadata service."""
    for name in [n for n in os.environ if n.startswith("AWS_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))


_SESSION = boto3.session.Session()


def bedrock_client(base: str, *, keys: bool = True, config: Config | None = None) -> Any:
    """A bedrock-runtime client given keys, or, without, of a session of its own that looks
    its credentials up now (a session keeps the credentials it found)."""
    session = _SESSION if keys else boto3.session.Session()
    return session.client(
        "bedrock-runtime",
        endpoint_url=base,
        region_name="us-east-1",
        config=config,
        **(KEYS if keys else {}),
    )


@contextlib.contextmanager
def replaying(path: Path, level: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Tape]:
    """Replay ``path`` at ``level`` with the network blocked, loopback included."""
    if level == "sdk":
        # The SDK level tapes the model calls only: a client still looks its credentials up
        # for its other calls; here it finds none without asking the network.
        monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    with block_network(), Tape(path, mode="replay") as tape, HOOKS[level](tape):
        yield tape


def _assembled(stream: Any) -> dict[str, Any]:
    """The message a ``converse_stream`` stream assembles."""
    content: dict[int, dict[str, Any]] = {}
    for event in stream:
        if "contentBlockStart" in event:
            start = event["contentBlockStart"]
            use = dict(start["start"]["toolUse"], input="")
            content[start["contentBlockIndex"]] = {"toolUse": use}
        elif "contentBlockDelta" in event:
            delta = event["contentBlockDelta"]
            block = content.setdefault(delta["contentBlockIndex"], {"text": ""})
            if "toolUse" in block:
                block["toolUse"]["input"] += delta["delta"]["toolUse"]["input"]
            else:
                block["text"] += delta["delta"]["text"]
    for block in content.values():
        if "toolUse" in block:
            block["toolUse"]["input"] = json.loads(block["toolUse"]["input"])
    return {"role": "assistant", "content": [content[i] for i in sorted(content)]}


def converse_loop(client: Any, task: str, *, stream: bool = False) -> str:
    """An agent: converse until the model stops asking for ``add``."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": [{"text": task}]}]
    while True:
        if stream:
            answer = client.converse_stream(modelId=MODEL, messages=messages, toolConfig=TOOLS)
            message = _assembled(answer["stream"])
        else:
            answer = client.converse(modelId=MODEL, messages=messages, toolConfig=TOOLS)
            message = answer["output"]["message"]
        messages.append(message)
        uses = [block["toolUse"] for block in message["content"] if "toolUse" in block]
        if not uses:
            return str(message["content"][0]["text"])
        results = [
            {"toolResult": {"toolUseId": u["toolUseId"], "content": [{"json": {"sum": s}}]}}
            for u in uses
            for s in [add(**u["input"])]
        ]
        messages.append({"role": "user", "content": results})


def invoke_loop(client: Any, task: str) -> str:
    """The same agent on ``invoke_model`` with Anthropic's Messages body, as Bedrock takes it."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": task}]
    tools = [{"name": "add", "description": "Add.", "input_schema": {"type": "object"}}]
    while True:
        body = {
            "anthropic_version": "bedrock-2023-05-31",
            "max_tokens": 64,
            "messages": messages,
            "tools": tools,
        }
        answer = client.invoke_model(modelId=MODEL, body=json.dumps(body))
        message = json.loads(answer["body"].read())
        messages.append({"role": "assistant", "content": message["content"]})
        uses = [block for block in message["content"] if block["type"] == "tool_use"]
        if not uses:
            return str(message["content"][0]["text"])
        results = [
            {"type": "tool_result", "tool_use_id": u["id"], "content": str(add(**u["input"]))}
            for u in uses
        ]
        messages.append({"role": "user", "content": results})


def assert_no_credentials(path: Path) -> None:
    """None of the client's credentials is in the file at ``path``."""
    text = path.read_bytes()
    for secret in (KEY_ID, SECRET, TOKEN):
        assert secret.encode() not in text


AGENTS = {
    "converse": converse_loop,
    "converse-stream": lambda client, task: converse_loop(client, task, stream=True),
    "invoke": invoke_loop,
}


@pytest.mark.usefixtures("no_credentials")
@pytest.mark.parametrize("level", ["sdk", "http"])
@pytest.mark.parametrize("route", list(AGENTS))
def test_a_tool_loop_replays_offline_without_credentials(
    tmp_path: Path, bedrock: FakeBedrock, monkeypatch: pytest.MonkeyPatch, level: str, route: str
) -> None:
    """A four-call tool loop records steps 1..4 (its tool calls 1..3) with usage, tokens and
    route, keeps no credential, and replays to the same answer with the server stopped, no
    AWS credentials and no network."""
    path = tmp_path / "run.jsonl"
    agent = AGENTS[route]
    with Tape(path, mode="record") as tape, HOOKS[level](tape):
        answer = agent(bedrock_client(bedrock.base_url), TASK)
    assert answer == "The total is 6."
    records = read_cassette(path).records
    models = [r for r in records if r.kind == "llm"]
    assert [r.step for r in models] == [1, 2, 3, 4]
    assert [r.step for r in records if r.kind == "tool"] == [1, 2, 3]
    assert {r.api for r in models} == {f"bedrock.{route}"}
    assert [(r.usage, r.tokens) for r in models] == [
        ({"input": n, "output": 1}, n + 1) for n in (1, 3, 5, 7)
    ]
    assert models[0].input["params"]["model"] == MODEL
    assert bedrock.requests[0]["path"].startswith("/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A")
    assert (
        "AWS4-HMAC-SHA256 Credential=" + KEY_ID in bedrock.requests[0]["headers"]["Authorization"]
    )
    assert_no_credentials(path)
    sent = len(bedrock.requests)
    bedrock.stop()
    with replaying(path, level, monkeypatch):
        assert agent(bedrock_client(bedrock.base_url, keys=False), TASK) == answer
    assert len(bedrock.requests) == sent


def test_a_converse_stream_replays_event_for_event(
    tmp_path: Path, bedrock: FakeBedrock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A recorded event stream is stored in the AWS framing, event by event, and botocore
    parses the replayed one (both CRCs checked) into the same events."""
    path = tmp_path / "run.jsonl"
    messages = [{"role": "user", "content": [{"text": "echo hello there, world"}]}]
    with Tape(path, mode="record") as tape, tracetape.patch_sdks(tape):
        stream = bedrock_client(bedrock.base_url).converse_stream(modelId=MODEL, messages=messages)
        recorded = list(stream["stream"])
    (rec,) = read_cassette(path).records
    assert rec.out["framing"] == "aws" and "complete" not in rec.out
    assert [e["headers"][":event-type"] for e in rec.out["events"]] == [
        "messageStart", "contentBlockDelta", "contentBlockDelta", "contentBlockDelta",
        "contentBlockStop", "messageStop", "metadata",
    ]  # fmt: skip
    bedrock.stop()
    with replaying(path, "sdk", monkeypatch):
        stream = bedrock_client(bedrock.base_url).converse_stream(modelId=MODEL, messages=messages)
        assert list(stream["stream"]) == recorded


def test_a_stream_failing_midway_replays_to_the_same_error(
    tmp_path: Path, bedrock: FakeBedrock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Converse stream that ends in an exception message is whole: the replay yields the
    same events, then botocore raises the same ``EventStreamError``."""
    path = tmp_path / "run.jsonl"
    messages = [{"role": "user", "content": [{"text": "break it"}]}]

    def read() -> tuple[list[Any], Any]:
        stream = bedrock_client(bedrock.base_url).converse_stream(modelId=MODEL, messages=messages)
        events: list[Any] = []
        with pytest.raises(botocore.exceptions.EventStreamError) as info:
            events.extend(stream["stream"])
        return events, info.value.response["Error"]

    with Tape(path, mode="record") as tape, tracetape.patch_sdks(tape):
        recorded = read()
    (rec,) = read_cassette(path).records
    assert "complete" not in rec.out
    assert recorded[1]["Code"] == "modelStreamErrorException"
    bedrock.stop()
    with replaying(path, "sdk", monkeypatch):
        assert read() == recorded


def test_a_stream_left_half_read_replays_as_far_as_it_was_read(
    tmp_path: Path, bedrock: FakeBedrock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Converse stream the agent stopped reading is recorded up to there: the replay gives
    those events, and reading past them is a miss that says so."""
    path = tmp_path / "run.jsonl"
    messages = [{"role": "user", "content": [{"text": "echo one two three four"}]}]

    def first_two() -> tuple[Any, list[Any]]:
        stream = bedrock_client(bedrock.base_url).converse_stream(modelId=MODEL, messages=messages)
        events = iter(stream["stream"])
        return events, [next(events), next(events)]

    with Tape(path, mode="record") as tape, tracetape.patch_sdks(tape):
        _, recorded = first_two()
    (rec,) = read_cassette(path).records
    assert (rec.out["complete"], len(rec.out["events"])) == (False, 2)
    bedrock.stop()
    with replaying(path, "sdk", monkeypatch):
        rest, replayed = first_two()
        assert replayed == recorded
        with pytest.raises(ReplayMiss, match="stopped reading this stream"):
            next(rest)


def test_an_invoke_stream_reads_usage_and_asks_from_its_chunks(
    tmp_path: Path, bedrock: FakeBedrock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``invoke_model_with_response_stream`` of an Anthropic model: usage and the tool call
    come from the base64 chunks, and the replay yields the same chunks."""
    path = tmp_path / "run.jsonl"
    body = json.dumps(
        {
            "anthropic_version": "bedrock-2023-05-31",
            "max_tokens": 64,
            "messages": [{"role": "user", "content": TASK}],
        }
    )

    def chunks() -> list[bytes]:
        client = bedrock_client(bedrock.base_url)
        answer = client.invoke_model_with_response_stream(modelId=MODEL, body=body)
        return [event["chunk"]["bytes"] for event in answer["body"]]

    with Tape(path, mode="record") as tape, tracetape.patch_sdks(tape):
        recorded = chunks()
    (rec,) = read_cassette(path).records
    assert (rec.api, rec.usage, rec.tokens) == (
        "bedrock.invoke-with-response-stream",
        {"input": 1, "output": 1},
        2,
    )
    assert provider("bedrock").asks(rec.out) == [("add", {"a": 0, "b": 1})]
    bedrock.stop()
    with replaying(path, "sdk", monkeypatch):
        assert chunks() == recorded


@pytest.mark.parametrize(
    ("route", "field"),
    [
        pytest.param("converse", "messages[0].content[0].text", id="converse"),
        pytest.param("converse-stream", "messages[0].content[0].text", id="converse-stream"),
        pytest.param("invoke", "messages[0].content", id="invoke-anthropic"),
    ],
)
def test_a_one_word_edit_misses_naming_the_field(
    tmp_path: Path, bedrock: FakeBedrock, monkeypatch: pytest.MonkeyPatch, route: str, field: str
) -> None:
    """Replaying with one word of the task changed raises ``ReplayMiss`` (not a botocore
    error, not retried) at step 1, naming the changed field with both words."""
    path, agent = tmp_path / "run.jsonl", AGENTS[route]
    with Tape(path, mode="record") as tape, tracetape.patch_sdks(tape):
        agent(bedrock_client(bedrock.base_url), TASK)
    bedrock.stop()
    with (
        pytest.raises(ReplayMiss),
        replaying(path, "sdk", monkeypatch) as tape,
        pytest.raises(ReplayMiss) as info,
    ):
        agent(bedrock_client(bedrock.base_url), TASK.replace("carefully", "quickly"))
    miss = info.value
    assert not isinstance(miss, botocore.exceptions.BotoCoreError | botocore.exceptions.ClientError)
    assert (miss.step, miss.matched, miss.changes) == (1, 0, [field])
    assert "carefully" in str(miss) and "quickly" in str(miss)
    assert len(tape.misses) == 1  # botocore did not retry it


def call_route(client: Any, route: str, model: str) -> Any:
    """One call of ``route`` to ``model``, its answer read whole."""
    messages = [{"role": "user", "content": [{"text": "echo hi"}]}]
    if route == "converse":
        return client.converse(modelId=model, messages=messages)
    if route == "converse-stream":
        return list(client.converse_stream(modelId=model, messages=messages)["stream"])
    body = {"anthropic_version": "bedrock-2023-05-31", "max_tokens": 8, "messages": messages}
    return json.loads(client.invoke_model(modelId=model, body=json.dumps(body))["body"].read())


@pytest.mark.parametrize("route", ["converse", "converse-stream", "invoke"])
def test_an_error_status_replays_as_the_same_client_error(
    tmp_path: Path, bedrock: FakeBedrock, monkeypatch: pytest.MonkeyPatch, route: str
) -> None:
    """A 400 answered with ``x-amzn-ErrorType: ValidationException`` replays as the same
    ``ClientError``: code, message and status (the header is stored with the answer)."""
    path = tmp_path / "run.jsonl"
    with (
        Tape(path, mode="record") as tape,
        tracetape.patch_sdks(tape),
        pytest.raises(botocore.exceptions.ClientError) as recorded,
    ):
        call_route(bedrock_client(bedrock.base_url), route, "no-such-model")
    (rec,) = read_cassette(path).records
    assert rec.out["status"] == 400 and rec.out["headers"]["x-amzn-errortype"].startswith(
        "ValidationException:"
    )
    bedrock.stop()
    with (
        replaying(path, "sdk", monkeypatch),
        pytest.raises(botocore.exceptions.ClientError) as replayed,
    ):
        call_route(bedrock_client(bedrock.base_url), route, "no-such-model")
    for error in (recorded.value, replayed.value):
        assert error.response["Error"] == {
            "Code": "ValidationException",
            "Message": "The provided model identifier is invalid.",
        }
        assert error.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert replayed.value.response["ResponseMetadata"]["RequestId"] == REQUEST_ID


@pytest.mark.parametrize(
    ("out", "usage"),
    [
        pytest.param(
            {"body": {"usage": {"inputTokens": 4, "outputTokens": 8, "totalTokens": 1042,
                                "cacheReadInputTokens": 1000, "cacheWriteInputTokens": 30}}},
            Usage(1034, 8, 1000),
            id="converse-cached",
        ),
        pytest.param(
            {"framing": "aws", "events": [
                {"headers": {":event-type": "messageStop"}, "data": {"stopReason": "end_turn"}},
                {"headers": {":event-type": "metadata"},
                 "data": {"usage": {"inputTokens": 5, "outputTokens": 6}}},
            ]},
            Usage(5, 6, None),
            id="converse-stream-metadata",
        ),
        pytest.param(
            {"body": {"type": "message", "usage": {"input_tokens": 7, "output_tokens": 2,
                                                   "cache_read_input_tokens": 3}}},
            Usage(10, 2, 3),
            id="invoke-anthropic",
        ),
        pytest.param({"body": {"message": "The provided model identifier is invalid."}}, None,
                     id="error"),
    ],
)  # fmt: skip
def test_usage_is_read_where_each_route_puts_it(out: dict[str, Any], usage: Usage | None) -> None:
    """Converse's usage counts its cache reads and writes as input (Bedrock counts them
    apart), a stream's comes from ``metadata``, an Anthropic body's as Anthropic's; an error
    reports none."""
    assert provider("bedrock").usage(out) == usage


def test_streamed_tool_uses_are_assembled_by_block() -> None:
    """A streamed Converse answer asks for the tool calls its ``contentBlockStart`` and
    ``contentBlockDelta`` events assemble, block by block."""

    def event(kind: str, data: dict[str, Any]) -> dict[str, Any]:
        return {"headers": {":event-type": kind}, "data": data}

    def start(index: int, name: str) -> dict[str, Any]:
        use = {"toolUseId": f"t{index}", "name": name}
        return event("contentBlockStart", {"contentBlockIndex": index, "start": {"toolUse": use}})

    def piece(index: int, text: str) -> dict[str, Any]:
        delta = {"toolUse": {"input": text}}
        return event("contentBlockDelta", {"contentBlockIndex": index, "delta": delta})

    events = [
        event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Let me add."}}),
        start(1, "add"),
        start(2, "mul"),
        piece(1, '{"a": '),
        piece(2, '{"x": 2}'),
        piece(1, "1}"),
        event("metadata", {"usage": {"inputTokens": 1, "outputTokens": 1}}),
    ]
    bedrock = provider("bedrock")
    assert bedrock.asks({"events": events}) == [("add", {"a": 1}), ("mul", {"x": 2})]
    assert bedrock.terminal(events[-1]) and not bedrock.terminal(events[0])


SCRIPT = """\
import os, sys
import boto3

client = boto3.client("bedrock-runtime", endpoint_url=os.environ["FAKE_BEDROCK"],
                      region_name="us-east-1")
TOOLS = {"tools": [{"toolSpec": {"name": "add", "inputSchema": {"json": {"type": "object"}}}}]}
messages = [{"role": "user", "content": [{"text": sys.argv[1]}]}]
while True:
    message = client.converse(modelId=sys.argv[2], messages=messages,
                              toolConfig=TOOLS)["output"]["message"]
    messages.append(message)
    uses = [b["toolUse"] for b in message["content"] if "toolUse" in b]
    if not uses:
        break
    messages.append({"role": "user", "content": [
        {"toolResult": {"toolUseId": u["toolUseId"],
                        "content": [{"text": str(u["input"]["a"] + u["input"]["b"])}]}}
        for u in uses]})
print(message["content"][0]["text"])
"""


def _tracetape_run(cwd: Path, mode: str, task: str, env: dict[str, str]) -> Any:
    command = [str(Path(sys.executable).with_name("tracetape")), "run", "--tape", "run.jsonl"]
    return subprocess.run(
        [*command, "--mode", mode, "--", sys.executable, "agent.py", task, MODEL],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_tracetape_run_tapes_an_unmodified_boto3_script(
    tmp_path: Path, bedrock: FakeBedrock
) -> None:
    """Under ``tracetape run`` (``--hook auto``), an unmodified boto3 agent records with the
    credentials of its environment, replays with the server stopped and none in its
    environment, and a one-word edit of its task exits 3 naming both words."""
    (tmp_path / "agent.py").write_text(SCRIPT)
    base = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    base.pop("PYTHONPATH", None)
    base |= {
        "FAKE_BEDROCK": bedrock.base_url,
        "HOME": str(tmp_path),
        "AWS_CONFIG_FILE": str(tmp_path / "no-config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "no-credentials"),
    }
    keys = {
        "AWS_ACCESS_KEY_ID": KEY_ID,
        "AWS_SECRET_ACCESS_KEY": SECRET,
        "AWS_SESSION_TOKEN": TOKEN,
    }
    recorded = _tracetape_run(tmp_path, "record", TASK, base | keys)
    assert recorded.returncode == 0, recorded.stderr
    assert recorded.stdout == "The total is 6.\n"
    assert [r.step for r in read_cassette(tmp_path / "run.jsonl").records] == [1, 2, 3, 4]
    assert_no_credentials(tmp_path / "run.jsonl")
    sent = len(bedrock.requests)
    bedrock.stop()
    replayed = _tracetape_run(tmp_path, "replay", TASK, base)
    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stdout == recorded.stdout
    missed = _tracetape_run(tmp_path, "replay", TASK.replace("carefully", "quickly"), base)
    assert missed.returncode == EXIT_REPLAY_MISS, missed.stderr
    assert "carefully" in missed.stderr and "quickly" in missed.stderr
    assert missed.stdout == ""
    assert len(bedrock.requests) == sent


def test_the_answer_text_is_read_from_converse_its_stream_or_an_anthropic_body() -> None:
    bedrock = provider("bedrock")
    converse = {"output": {"message": {"content": [{"text": "Sunny"}, {"toolUse": {}}]}}}
    assert bedrock.text({"body": converse}) == "Sunny"
    delta = {"headers": {":event-type": "contentBlockDelta"},
             "data": {"contentBlockIndex": 0, "delta": {"text": "Sun"}}}  # fmt: skip
    more = {"headers": {":event-type": "contentBlockDelta"},
            "data": {"contentBlockIndex": 0, "delta": {"text": "ny"}}}  # fmt: skip
    assert bedrock.text({"events": [delta, more]}) == "Sunny"
    invoke = {"type": "message", "content": [{"type": "text", "text": "Sunny"}]}
    assert bedrock.text({"body": invoke}) == "Sunny"
