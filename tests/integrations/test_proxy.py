"""The proxy: the official openai and anthropic SDKs (and curl) pointed at it by base URL,
recording through it against the local fake provider, then replaying with the fake stopped
and no key, and missing on a changed prompt with the diagnosis in the answer."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import boto3
import botocore.exceptions
import openai
import pytest
from fakeserver import FakeServer
from h2_front import H2Front, self_signed
from sdk_agents import anthropic_agent, openai_agent

import tracetape
from tracetape import Tape, read_cassette
from tracetape.integrations.proxied import listen, serving
from tracetape.integrations.proxy import UPSTREAMS, ProxyApp, client_env, parse_upstreams, regional

from .providers.fake_bedrock import FakeBedrock
from .providers.test_bedrock import KEY_ID, MODEL, SECRET, TASK, TOKEN, converse_loop

KEY = "sk-proj-proxy0123456789abcdefghijklmnopqr"


@pytest.fixture
def proxy_of() -> Iterator[Any]:
    """Serve a ``ProxyApp`` of a tape for the block: ``with proxy_of(tape, upstream) as url``."""
    apps: list[ProxyApp] = []

    def start(tape: Tape, upstream: str = "http://127.0.0.1:9") -> Any:
        app = ProxyApp(
            tape, upstreams=parse_upstreams([f"openai={upstream}", f"anthropic={upstream}"])
        )
        apps.append(app)
        return serving(app, listen("127.0.0.1", 0))

    yield start


def _openai(url: str, key: str = KEY) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_openai_records_through_the_proxy_and_replays_offline(
    tmp_path: Path, server: FakeServer, proxy_of: Any, stream: bool
) -> None:
    path = tmp_path / "run.jsonl"
    with proxy_of(tape := Tape(path, mode="record"), server.base_url) as url:
        live = openai_agent(_openai(url), "sum 1 to 3", stream=stream)
    tape.close()
    records = read_cassette(path).records
    assert [r.kind for r in records] == ["llm"] * 4 and [r.step for r in records] == [1, 2, 3, 4]
    assert KEY not in path.read_text(), "the client's credential is never stored"
    assert all(r.tokens for r in records) or stream
    asked = len(server.requests)
    server.stop()
    with proxy_of(tape := Tape(path, mode="replay")) as url:
        assert openai_agent(_openai(url, key="none"), "sum 1 to 3", stream=stream) == live
    tape.close()
    assert len(server.requests) == asked


def test_anthropic_streaming_with_tool_use_replays(
    tmp_path: Path, server: FakeServer, proxy_of: Any
) -> None:
    path = tmp_path / "run.jsonl"

    def client(url: str, key: str) -> anthropic.Anthropic:
        return anthropic.Anthropic(base_url=url, api_key=key, max_retries=0)

    with proxy_of(tape := Tape(path, mode="record"), server.base_url) as url:
        live = anthropic_agent(client(url, KEY), "sum 1 to 2", stream=True)
    tape.close()
    assert [r.step for r in read_cassette(path).records] == [1, 2, 3]
    server.stop()
    with proxy_of(tape := Tape(path, mode="replay")) as url:
        assert anthropic_agent(client(url, "none"), "sum 1 to 2", stream=True) == live
    tape.close()


def test_a_miss_is_a_400_the_sdk_raises_at_once_with_the_diagnosis(
    tmp_path: Path, server: FakeServer, proxy_of: Any
) -> None:
    path = tmp_path / "run.jsonl"
    with proxy_of(tape := Tape(path, mode="record"), server.base_url) as url:
        openai_agent(_openai(url), "sum 1 to 2")
    tape.close()
    server.stop()
    tape = Tape(path, mode="replay")
    with proxy_of(tape) as url:
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="none")  # retries on: none taken
        with pytest.raises(openai.BadRequestError) as error:
            openai_agent(client, "sum 1 to 2 please")
        # the proxy keeps serving after a miss: the recorded run still replays
        openai_agent(_openai(url, key="none"), "sum 1 to 2")
    message = str(error.value)
    assert "tracetape replay miss" in message and "messages[0].content" in message
    assert len(tape.misses) == 1, "answered once: the SDK did not retry the 400"
    tape.close(failed=True)


def test_curl_records_and_replays_a_hand_written_request(
    tmp_path: Path, server: FakeServer, proxy_of: Any
) -> None:
    path = tmp_path / "run.jsonl"
    body = json.dumps(
        {"model": "gpt-test", "messages": [{"role": "user", "content": "sum 1 to 1"}]}
    )

    def curl(url: str) -> dict[str, Any]:
        done = subprocess.run(
            ["curl", "-sS", "-H", "content-type: application/json", "-H",
             f"authorization: Bearer {KEY}", "-d", body, f"{url}/v1/chat/completions"],
            capture_output=True, text=True, check=True, timeout=30,
        )  # fmt: skip
        return dict(json.loads(done.stdout))

    with proxy_of(tape := Tape(path, mode="record"), server.base_url) as url:
        live = curl(url)
    tape.close()
    server.stop()
    with proxy_of(tape := Tape(path, mode="replay")) as url:
        assert curl(url) == live
    tape.close()


def test_a_cassette_of_the_in_process_hook_replays_through_the_proxy(
    tmp_path: Path, server: FakeServer, no_leftover_patch: None, proxy_of: Any
) -> None:
    """One mechanism: what the openai SDK asks keys the same whichever way it is taped."""
    path = tmp_path / "run.jsonl"
    with Tape(path, mode="record") as tape, tracetape.patch_sdks(tape):
        live = openai_agent(_openai(server.base_url), "sum 1 to 3", stream=True)
    hooked = [(r.key, r.step) for r in read_cassette(path).records]
    server.stop()
    with proxy_of(tape := Tape(path, mode="replay")) as url:
        assert openai_agent(_openai(url, key="none"), "sum 1 to 3", stream=True) == live
    tape.close()
    assert not tape.unplayed and len(hooked) == 4


def test_malformed_and_unknown_requests_get_a_one_line_answer(
    tmp_path: Path, proxy_of: Any
) -> None:
    import httpx

    with proxy_of(tape := Tape(tmp_path / "run.jsonl", mode="record")) as url:
        unknown = httpx.post(f"{url}/nowhere", content=b"{}")
        broken = httpx.post(f"{url}/v1/chat/completions", content=b"{not json")
    tape.close()
    assert unknown.status_code == 404 and "no provider answers /nowhere" in unknown.text
    assert broken.status_code == 502, "sent upstream as it is: the upstream is unreachable"
    assert "the upstream http://127.0.0.1:9/v1/chat/completions failed" in broken.text


def test_a_body_over_the_bound_is_a_413_and_one_at_the_bound_goes_through(
    tmp_path: Path, server: FakeServer
) -> None:
    import httpx

    body = json.dumps(
        {"model": "gpt-test", "messages": [{"role": "user", "content": "sum 1 to 1"}]}
    )
    tape = Tape(tmp_path / "run.jsonl", mode="record")
    app = ProxyApp(tape, upstreams=parse_upstreams([f"openai={server.base_url}"]))
    app.max_body = len(body)
    with serving(app, listen("127.0.0.1", 0)) as url:
        at = httpx.post(f"{url}/v1/chat/completions", content=body.encode())
        over = httpx.post(f"{url}/v1/chat/completions", content=body.encode() + b" ")
    tape.close()
    assert at.status_code == 200
    assert over.status_code == 413
    assert f"request body over {len(body)} bytes" in over.json()["error"]["message"]


def test_a_token_guards_every_request(tmp_path: Path, server: FakeServer) -> None:
    import httpx

    token = "t0ken-of-sixteen-chars"
    tape = Tape(tmp_path / "run.jsonl", mode="record")
    app = ProxyApp(tape, upstreams=parse_upstreams([f"openai={server.base_url}"]), token=token)
    body = {"model": "gpt-test", "messages": [{"role": "user", "content": "sum 1 to 1"}]}
    with serving(app, listen("127.0.0.1", 0)) as url:
        bare = httpx.post(f"{url}/v1/chat/completions", json=body)
        wrong = httpx.post(
            f"{url}/v1/chat/completions", json=body, headers={"x-tracetape-token": token[:-1]}
        )
        right = httpx.post(
            f"{url}/v1/chat/completions", json=body, headers={"x-tracetape-token": token}
        )
    tape.close()
    assert (bare.status_code, wrong.status_code, right.status_code) == (401, 401, 200)
    assert bare.json()["error"]["message"] == "tracetape proxy: a token is needed"
    assert token not in (tmp_path / "run.jsonl").read_text()


def test_clients_in_parallel_record_and_replay(
    tmp_path: Path, server: FakeServer, proxy_of: Any
) -> None:
    """Eight clients at once: each conversation keeps its own steps, the cassette holds the
    answers in the order they were sent, and they replay in parallel with the fake stopped."""
    from concurrent.futures import ThreadPoolExecutor

    path = tmp_path / "run.jsonl"
    tasks = [f"sum 1 to {n}" for n in range(1, 9)]

    def run_all(url: str, key: str) -> list[str]:
        with ThreadPoolExecutor(8) as pool:
            return list(pool.map(lambda task: openai_agent(_openai(url, key), task), tasks))

    with proxy_of(tape := Tape(path, mode="record"), server.base_url) as url:
        live = run_all(url, KEY)
    tape.close()
    records = read_cassette(path).records
    assert len(records) == sum(n + 1 for n in range(1, 9))
    assert [r.seq for r in records] == sorted(r.seq for r in records)
    server.stop()
    with proxy_of(tape := Tape(path, mode="replay")) as url:
        assert run_all(url, "none") == live
    tape.close()
    assert not tape.unplayed


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_an_http2_upstream_over_tls_records_the_cassette_http11_records(
    tmp_path: Path, server: FakeServer, proxy_of: Any, stream: bool, monkeypatch: Any
) -> None:
    """The proxy reaches an upstream that offers HTTP/2 (ALPN over TLS) in HTTP/2, trusting
    the certificate ``SSL_CERT_FILE`` names; the answers, streamed ones included, and the
    cassette are the same as through HTTP/1.1."""
    cert, key = self_signed(tmp_path)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    front = H2Front(server.base_url, cert, key).start()
    try:
        with proxy_of(tape := Tape(tmp_path / "h2.jsonl", mode="record"), front.url) as url:
            through_h2 = openai_agent(_openai(url), "sum 1 to 3", stream=stream)
        tape.close()
    finally:
        front.stop()
    assert front.protocols == ["h2"], "one connection, in HTTP/2"
    with proxy_of(tape := Tape(tmp_path / "h1.jsonl", mode="record"), server.base_url) as url:
        through_h1 = openai_agent(_openai(url), "sum 1 to 3", stream=stream)
    tape.close()
    assert through_h2 == through_h1

    def taped(name: str) -> list[tuple[Any, ...]]:
        records = read_cassette(tmp_path / name).records
        return [(r.kind, r.key, r.step, r.input, r.out) for r in records]

    assert len(taped("h2.jsonl")) == 4 and taped("h2.jsonl") == taped("h1.jsonl")


def test_an_anthropic_route_beyond_messages_goes_to_anthropic(
    tmp_path: Path, proxy_of: Any
) -> None:
    """``/v1/messages/count_tokens`` (Claude Code may ask it) is no model route: asked by an
    Anthropic client (``anthropic-version``) it goes to Anthropic's upstream, not to OpenAI's
    by the ``/v1`` fallback, and is taped as a plain HTTP decision that replays offline."""
    anthropic_up, openai_up = FakeServer(), FakeServer()
    anthropic_up.start()
    openai_up.start()
    path = tmp_path / "run.jsonl"
    upstreams = parse_upstreams(
        [f"anthropic={anthropic_up.base_url}", f"openai={openai_up.base_url}"]
    )
    body = {"model": "claude-test", "messages": [{"role": "user", "content": "count me"}]}
    try:
        with serving(
            ProxyApp(tape := Tape(path, mode="record"), upstreams=upstreams), listen("127.0.0.1", 0)
        ) as url:
            client = anthropic.Anthropic(base_url=url, api_key=KEY, max_retries=0)
            with pytest.raises(anthropic.NotFoundError):  # the fake has no count_tokens
                client.messages.count_tokens(**body)
        tape.close()
    finally:
        anthropic_up.stop()
        openai_up.stop()
    assert [r["path"] for r in anthropic_up.requests] == ["/v1/messages/count_tokens"]
    assert openai_up.requests == []
    (record,) = read_cassette(path).records
    assert record.kind == "http" and KEY not in path.read_text()
    with serving(
        ProxyApp(tape := Tape(path, mode="replay"), upstreams=upstreams), listen("127.0.0.1", 0)
    ) as url:
        client = anthropic.Anthropic(base_url=url, api_key="none", max_retries=0)
        with pytest.raises(anthropic.NotFoundError, match="not found"):
            client.messages.count_tokens(**body)
    tape.close()
    with Tape(tmp_path / "other.jsonl", mode="record") as other:
        app = ProxyApp(other)
    assert app.route("/v1/models", {"anthropic-version": "2023-06-01"}) == (
        "anthropic",
        "/v1/models",
    )
    assert app.route("/v1/models", {}) == ("openai", "/v1/models")


def test_a_websocket_upgrade_is_refused_with_a_404_saying_why(
    tmp_path: Path, proxy_of: Any
) -> None:
    """The proxy speaks HTTP: a WebSocket upgrade (Codex tries the Responses API's first) is
    answered 404 with a one-line reason, on which Codex falls back to HTTP."""
    with proxy_of(tape := Tape(tmp_path / "run.jsonl", mode="record")) as url:
        host, port = url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            sock.sendall(
                b"GET /v1/responses HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
                b"Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
                b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
            )
            answer = b""
            while b"WebSocket" not in answer and (chunk := sock.recv(4096)):
                answer += chunk
    tape.close()
    assert answer.startswith(b"HTTP/1.1 404")
    assert b"/v1/responses is served over HTTP, not WebSocket" in answer


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Any:
    """No AWS setting but a region; ``aws(url, **keys)`` is a boto3 ``bedrock-runtime``
    client pointed at the proxy at ``url`` by the variable the proxy sets, with ``keys``."""
    for name in [n for n in os.environ if n.startswith("AWS_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")

    def client(url: str, **keys: str) -> Any:
        endpoint = client_env(url)["AWS_ENDPOINT_URL_BEDROCK_RUNTIME"]
        monkeypatch.setenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", endpoint)
        return boto3.session.Session(**keys).client("bedrock-runtime")

    return client


AWS_KEYS = {
    "aws_access_key_id": KEY_ID,
    "aws_secret_access_key": SECRET,
    "aws_session_token": TOKEN,
}
PLACEHOLDER = {"aws_access_key_id": "placeholder", "aws_secret_access_key": "placeholder"}


def _signatures(fake: FakeBedrock) -> set[str]:
    """The SigV4 signatures of the requests ``fake`` took."""
    return {re.sub(r".*Signature=", "", _authorization(request)) for request in fake.requests}


def _authorization(request: dict[str, Any]) -> str:
    """The ``Authorization`` header a fake took (the proxy sends header names lower-case)."""
    return next(v for k, v in request["headers"].items() if k.lower() == "authorization")


@pytest.mark.parametrize("stream", [False, True], ids=["converse", "converse-stream"])
def test_boto3_bedrock_records_through_the_proxy_replays_and_misses_at_once(
    tmp_path: Path, bedrock: FakeBedrock, aws: Any, stream: bool
) -> None:
    """boto3's ``bedrock-runtime`` client pointed at the proxy by
    ``AWS_ENDPOINT_URL_BEDROCK_RUNTIME`` records a tool loop against a fake Bedrock (the
    path's ``/bedrock`` taken off), keeping no credential, key id, session token or
    signature; replays it with the fake stopped and placeholder credentials; and a changed
    prompt is a ``ValidationException`` botocore raises at once with the diagnosis (and the
    proxy serves on)."""
    path, said = tmp_path / "run.jsonl", []
    upstreams = parse_upstreams([f"bedrock={bedrock.base_url}"])
    tape = Tape(path, mode="record")
    with serving(ProxyApp(tape, upstreams, say=said.append), listen("127.0.0.1", 0)) as url:
        live = converse_loop(aws(url, **AWS_KEYS), TASK, stream=stream)
    tape.close()
    assert live == "The total is 6."
    records = read_cassette(path).records
    route = "converse-stream" if stream else "converse"
    assert [(r.api, r.step) for r in records] == [(f"bedrock.{route}", n) for n in (1, 2, 3, 4)]
    assert all(r["path"].startswith("/model/arn%3Aaws%3Abedrock%3A") for r in bedrock.requests)
    secrets = {KEY_ID, SECRET, TOKEN, *_signatures(bedrock)}
    asked = len(bedrock.requests)
    bedrock.stop()
    tape = Tape(path, mode="replay")
    with serving(ProxyApp(tape, upstreams, say=said.append), listen("127.0.0.1", 0)) as url:
        with pytest.raises(botocore.exceptions.ClientError) as error:  # retries on: none taken
            converse_loop(
                aws(url, **PLACEHOLDER), TASK.replace("carefully", "quickly"), stream=stream
            )
        assert converse_loop(aws(url, **PLACEHOLDER), TASK, stream=stream) == live
    tape.close(failed=True)
    assert len(bedrock.requests) == asked and len(tape.misses) == 1
    assert error.value.response["Error"]["Code"] == "ValidationException"
    message = error.value.response["Error"]["Message"]
    assert message.startswith("tracetape replay miss") and "messages[0].content[0].text" in message
    assert "carefully" in message and "quickly" in message
    printed = "\n".join(said)
    assert "quickly" in printed
    for secret in secrets:
        assert secret not in path.read_text() and secret not in printed


def test_a_converse_stream_replays_through_the_proxy_event_for_event(
    tmp_path: Path, bedrock: FakeBedrock, aws: Any
) -> None:
    """A ConverseStream answer (cut across event boundaries by the fake) replays through the
    proxy as the same AWS event stream: botocore checks both CRCs of every message."""
    path = tmp_path / "run.jsonl"
    upstreams = parse_upstreams([f"bedrock={bedrock.base_url}"])
    messages = [{"role": "user", "content": [{"text": "echo hello there, world"}]}]

    def events(url: str, keys: dict[str, str]) -> list[Any]:
        client = aws(url, **keys)
        return list(client.converse_stream(modelId=MODEL, messages=messages)["stream"])

    with serving(
        ProxyApp(tape := Tape(path, mode="record"), upstreams), listen("127.0.0.1", 0)
    ) as url:
        recorded = events(url, AWS_KEYS)
    tape.close()
    bedrock.stop()
    with serving(
        ProxyApp(tape := Tape(path, mode="replay"), upstreams), listen("127.0.0.1", 0)
    ) as url:
        assert events(url, PLACEHOLDER) == recorded
    tape.close()
    assert len(recorded) == 7 and recorded[-1]["metadata"]["usage"]["inputTokens"] == 1


def test_bedrock_goes_to_the_region_of_the_environment_and_never_with_a_sigv4_signature(
    tmp_path: Path, aws: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bedrock's host is the region's (``AWS_REGION``, else ``AWS_DEFAULT_REGION``); with no
    region, recording to it is refused saying what to set. A SigV4-signed request is refused
    before it is sent to AWS, which would reject a signature made for the proxy's host:
    botocore raises the one-line reason at once, and nothing is recorded."""
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    path, said = tmp_path / "run.jsonl", []
    with serving(
        ProxyApp(tape := Tape(path, mode="record"), say=said.append), listen("127.0.0.1", 0)
    ) as url:
        monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")  # the client's, not the proxy's
        with pytest.raises(botocore.exceptions.ClientError, match="set AWS_REGION"):
            converse_loop(aws(url, **AWS_KEYS), TASK)
    monkeypatch.setenv("AWS_REGION", "eu-west-3")
    app = ProxyApp(tape, say=said.append)
    assert app.upstreams["bedrock"] == "https://bedrock-runtime.eu-west-3.amazonaws.com"
    with (
        serving(app, listen("127.0.0.1", 0)) as url,
        pytest.raises(botocore.exceptions.ClientError) as error,
    ):
        converse_loop(aws(url, **AWS_KEYS), TASK)
    tape.close()
    message = error.value.response["Error"]["Message"]
    assert error.value.response["Error"]["Code"] == "ValidationException"
    assert "cannot record this request to AWS: a SigV4 signature is bound to the host" in message
    assert "record in-process (tracetape run without --proxy)" in message
    assert len(said) == 2 and said[1] == message and "\n" not in message
    assert read_cassette(path).records == []


def test_an_upstream_refusing_the_signature_is_explained(
    tmp_path: Path, bedrock: FakeBedrock, aws: Any
) -> None:
    """An upstream that is not AWS but checks signatures (a gateway) answers 403
    ``InvalidSignatureException``: the client gets that answer, and the proxy says why."""
    said: list[str] = []
    upstreams = parse_upstreams([f"bedrock={bedrock.base_url}"])
    app = ProxyApp(tape := Tape(tmp_path / "run.jsonl", mode="record"), upstreams, say=said.append)
    with serving(app, listen("127.0.0.1", 0)) as url:
        messages = [{"role": "user", "content": [{"text": "echo hi"}]}]
        with pytest.raises(botocore.exceptions.ClientError) as error:
            aws(url, **AWS_KEYS).converse(modelId="signed-elsewhere", messages=messages)
    tape.close()
    assert error.value.response["Error"]["Code"] == "InvalidSignatureException"
    assert len(bedrock.requests) == 1, "botocore does not retry a 403"
    (line,) = said
    assert "refused the signature: a SigV4 signature is bound to the host" in line


def test_a_bedrock_api_key_is_forwarded_and_never_stored(
    tmp_path: Path, bedrock: FakeBedrock
) -> None:
    """A Bedrock API key (``Authorization: Bearer``, bound to no host) goes upstream as the
    client sent it and is never stored, even where the answer echoes it."""
    import httpx

    key = "ABSKQmVkcm9ja0FQSUtleS10cmFjZXRhcGUwMTIzNDU2Nzg5"
    path = tmp_path / "run.jsonl"
    body = {"messages": [{"role": "user", "content": [{"text": "show header authorization"}]}]}
    upstreams = parse_upstreams([f"bedrock={bedrock.base_url}"])
    with serving(
        ProxyApp(tape := Tape(path, mode="record"), upstreams), listen("127.0.0.1", 0)
    ) as url:
        answer = httpx.post(
            f"{url}/bedrock/model/{MODEL.replace(':', '%3A').replace('/', '%2F')}/converse",
            json=body,
            headers={"authorization": f"Bearer {key}"},
        )
    tape.close()
    assert answer.status_code == 200
    assert _authorization(bedrock.requests[0]) == f"Bearer {key}"
    assert key not in path.read_text()


def test_a_bedrock_cassette_recorded_in_process_replays_through_the_proxy(
    tmp_path: Path, bedrock: FakeBedrock, aws: Any, no_leftover_patch: None
) -> None:
    """What records Bedrock against AWS (the hooks, boto3 signing for AWS's own host) keys as
    the proxy does: its cassette replays through the proxy with placeholder credentials."""
    path = tmp_path / "run.jsonl"
    with Tape(path, mode="record") as tape, tracetape.patch_sdks(tape):
        client = boto3.session.Session(**AWS_KEYS).client(
            "bedrock-runtime", endpoint_url=bedrock.base_url
        )
        live = converse_loop(client, TASK, stream=True)
    bedrock.stop()
    with serving(ProxyApp(tape := Tape(path, mode="replay")), listen("127.0.0.1", 0)) as url:
        assert converse_loop(aws(url, **PLACEHOLDER), TASK, stream=True) == live
    with pytest.warns(tracetape.TapeWarning, match="3 recorded decision"):
        tape.close()
    # every model call played; the tool calls the hooks taped are the program's, not the proxy's
    assert [r.kind for r in tape.unplayed] == ["tool"] * 3 and len(tape.records) == 7


@pytest.mark.parametrize(
    ("region", "host"),
    [
        pytest.param("us-east-1", "bedrock-runtime.us-east-1.amazonaws.com", id="us-east-1"),
        pytest.param(
            " ap-southeast-2 ", "bedrock-runtime.ap-southeast-2.amazonaws.com", id="spaced"
        ),
        pytest.param("us-gov-west-1", "bedrock-runtime.us-gov-west-1.amazonaws.com", id="gov"),
        pytest.param("us-east-1.evil.example", None, id="a-host-behind"),
        pytest.param("evil.example/#", None, id="a-path"),
        pytest.param("US-EAST-1", None, id="upper-case"),
        pytest.param("us-east-", None, id="no-number"),
        pytest.param("", None, id="empty"),
    ],
)
def test_a_bedrock_host_is_built_from_a_region_name_and_nothing_else(
    region: str, host: str | None
) -> None:
    """The region fills Bedrock's host only where it names a region; anything else leaves
    ``{region}`` in place, and recording to it is refused saying what to set."""
    built = regional(UPSTREAMS["bedrock"], {"AWS_REGION": region})
    assert built == (f"https://{host}" if host else UPSTREAMS["bedrock"])


def test_noise_through_the_proxy_is_stored_redacted_and_never_keyed(
    tmp_path: Path, server: FakeServer, proxy_of: Any
) -> None:
    """A request's noise (OpenAI's ``user``, ``metadata``) carrying secrets of several shapes
    is stored redacted under ``unkeyed``; a replay sending other noise plays the recording."""
    path = tmp_path / "run.jsonl"
    secrets = [
        "ghp_" + "aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3fG5",
        "sk-proj-Tq8Wm2Xr5Lp9Zc3Vb7Nd1Kf4Hs6Jg0Ay",
    ]
    body = {"model": "gpt-test", "messages": [{"role": "user", "content": "sum 1 to 1"}]}

    def ask(url: str, key: str, user: str, note: str) -> Any:
        client = _openai(url, key)
        return (
            client.chat.completions.create(  # type: ignore[call-overload]
                **body, user=user, metadata={"note": note, "password": "hunter2-7fq"}
            )
            .choices[0]
            .message.content
        )

    with proxy_of(tape := Tape(path, mode="record"), server.base_url) as url:
        live = ask(url, KEY, secrets[0], f"key {secrets[1]}")
    tape.close()
    text = path.read_text()
    assert all(s not in text for s in [*secrets, "hunter2-7fq", KEY])
    stored = read_cassette(path).records[0].input
    assert set(stored["unkeyed"]) == {"user", "metadata"}
    server.stop()
    with proxy_of(tape := Tape(path, mode="replay")) as url:
        assert ask(url, "none", "another-user", "another note") == live
    tape.close()
