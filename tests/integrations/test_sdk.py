"""The SDK and HTTP hooks against the real openai and anthropic SDKs and a fake local server."""

from __future__ import annotations

import asyncio
import functools
import json
import threading
import warnings
from pathlib import Path
from typing import Any

import anthropic
import httpx
import httpx2
import openai
import pytest
from fakeserver import FakeServer
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from sdk_agents import (
    REMINDER,
    anthropic_agent,
    anthropic_agent_async,
    openai_agent,
    openai_agent_async,
)

import tracetape
from tracetape import ReplayMiss, Tape, read_cassette
from tracetape.integrations import unpatch_all

OPENAI_KEY = "sk-proj-abcdefghijklmnopqrstuvwxyz012345"
ANTHROPIC_KEY = "sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123"
TASK = "sum 1 to 12"
ANSWER = "The total is 78."


@pytest.fixture(autouse=True)
def _no_leftover_patch() -> Any:
    yield
    unpatch_all()


def _openai(base: str, aio: bool = False, **kw: Any) -> Any:
    cls = openai.AsyncOpenAI if aio else openai.OpenAI
    return cls(base_url=base + "/v1", api_key=OPENAI_KEY, max_retries=0, **kw)


def _anthropic(base: str, aio: bool = False, **kw: Any) -> Any:
    cls = anthropic.AsyncAnthropic if aio else anthropic.Anthropic
    return cls(base_url=base, api_key=ANTHROPIC_KEY, max_retries=0, **kw)


SYNC = {"openai": (_openai, openai_agent), "anthropic": (_anthropic, anthropic_agent)}
ASYNC = {"openai": (_openai, openai_agent_async), "anthropic": (_anthropic, anthropic_agent_async)}
CASES = [
    pytest.param(sdk, level, stream, id=f"{sdk}-{level}-{'stream' if stream else 'json'}")
    for sdk in ("openai", "anthropic")
    for level in ("sdk", "http")
    for stream in (False, True)
]


def _run(path: Path, mode: str, sdk: str, level: str, *, stream: bool, base: str, **kw: Any) -> str:
    make, agent = SYNC[sdk]
    with Tape(path, mode=mode) as tape:
        if level == "sdk":
            with tracetape.patch_sdks(tape):
                return str(agent(make(base), TASK, stream=stream, **kw))
        client = make(base)  # built before the hook: its requests are taped all the same
        with tracetape.patch_http(tape):
            return str(agent(client, TASK, stream=stream, **kw))


async def _arun(path: Path, mode: str, sdk: str, level: str, *, stream: bool, base: str) -> str:
    make, agent = ASYNC[sdk]
    async with Tape(path, mode=mode) as tape:
        if level == "sdk":
            with tracetape.patch_sdks(tape):
                sdk_client = make(base, aio=True)
                try:
                    return str(await agent(sdk_client, TASK, stream=stream))
                finally:
                    await sdk_client.close()
        if stream:  # streamed cases use patch_http, the others an explicit transport
            client = make(base, aio=True)
            try:
                with tracetape.patch_http(tape):
                    return str(await agent(client, TASK, stream=stream))
            finally:
                await client.close()
        transport = tracetape.async_http_transport(tape)
        client = make(base, aio=True, http_client=httpx2.AsyncClient(transport=transport))
        try:
            with tracetape.patch_http(tape):  # a client with a tape transport is not taped twice
                return str(await agent(client, TASK, stream=stream))
        finally:
            await client.close()


@pytest.mark.parametrize(("sdk", "level", "stream"), CASES)
def test_agent_replays_with_server_stopped(
    tmp_path: Path, server: FakeServer, sdk: str, level: str, stream: bool
) -> None:
    """A 13-step tool-using agent recorded at a hook level replays to the same answer offline."""
    path = tmp_path / "run.jsonl"
    assert _run(path, "record", sdk, level, stream=stream, base=server.base_url) == ANSWER
    assert len(server.requests) == 13
    server.stop()
    assert _run(path, "replay", sdk, level, stream=stream, base=server.base_url) == ANSWER
    records = read_cassette(path).records
    assert [r.step for r in records] == list(range(1, 14))
    assert all(r.kind == "llm" for r in records)


@pytest.mark.parametrize(("sdk", "level", "stream"), CASES)
def test_async_agent_replays_with_server_stopped(
    tmp_path: Path, server: FakeServer, sdk: str, level: str, stream: bool
) -> None:
    """The async clients record and replay the same way, streamed or not."""
    path = tmp_path / "run.jsonl"
    assert (
        asyncio.run(_arun(path, "record", sdk, level, stream=stream, base=server.base_url))
        == ANSWER
    )
    server.stop()
    assert (
        asyncio.run(_arun(path, "replay", sdk, level, stream=stream, base=server.base_url))
        == ANSWER
    )


@pytest.mark.parametrize(
    ("sdk", "stream", "recorded_at", "replayed_at"),
    [
        pytest.param(sdk, stream, a, b, id=f"{sdk}-{'stream' if stream else 'json'}-{a}-to-{b}")
        for sdk in ("openai", "anthropic")
        for stream in (False, True)
        for a, b in (("sdk", "http"), ("http", "sdk"))
    ],
)
def test_one_cassette_serves_both_levels(  # noqa: PLR0917 - parametrized
    tmp_path: Path, server: FakeServer, sdk: str, stream: bool, recorded_at: str, replayed_at: str
) -> None:
    """A cassette recorded at the SDK level replays at the HTTP level and the other way round."""
    path = tmp_path / "run.jsonl"
    _run(path, "record", sdk, recorded_at, stream=stream, base=server.base_url)
    server.stop()
    assert _run(path, "replay", sdk, replayed_at, stream=stream, base=server.base_url) == ANSWER


@pytest.mark.parametrize(
    ("sdk", "level"),
    [
        pytest.param(s, lv, id=f"{s}-{lv}")
        for s in ("openai", "anthropic")
        for lv in ("sdk", "http")
    ],
)
def test_one_word_edit_at_step_10_names_only_that_message(
    tmp_path: Path, server: FakeServer, sdk: str, level: str
) -> None:
    """Editing one word of the step-10 prompt raises ReplayMiss naming exactly that message."""
    path = tmp_path / "run.jsonl"
    _run(path, "record", sdk, level, stream=False, base=server.base_url)
    server.stop()
    edited = REMINDER.replace("carefully", "quickly")
    with pytest.raises(ReplayMiss) as info:
        _run(path, "replay", sdk, level, stream=False, base=server.base_url, reminder=edited)
    miss = info.value
    assert type(miss).__name__ == "ReplayMiss"
    assert miss.step == 10
    assert miss.matched == 9
    # the task, nine (assistant, tool result) pairs, then the edited reminder
    assert miss.changes == ["messages[19].content"]
    assert "carefully" in str(miss)
    assert "quickly" in str(miss)


@pytest.mark.parametrize("sdk", ["openai", "anthropic"])
def test_miss_surfaces_unwrapped_without_retries(
    tmp_path: Path, server: FakeServer, sdk: str
) -> None:
    """At the HTTP level a miss is a ReplayMiss, not the SDK's connection error after retries."""
    path = tmp_path / "run.jsonl"
    Tape(path, mode="record").close()
    server.stop()
    messages = [{"role": "user", "content": "hi"}]
    with pytest.raises(ReplayMiss) as again, Tape(path, mode="replay") as tape:
        http_client = httpx2.Client(transport=tracetape.http_transport(tape))
        if sdk == "openai":
            client = _openai(server.base_url, http_client=http_client).with_options(max_retries=5)
            call = functools.partial(client.chat.completions.create, model="m", messages=messages)
        else:
            client = _anthropic(server.base_url, http_client=http_client).with_options(
                max_retries=5
            )
            call = functools.partial(
                client.messages.create, model="m", max_tokens=5, messages=messages
            )
        with pytest.raises(ReplayMiss) as info:
            call()
    assert again.value.key == info.value.key  # caught in the block: raised again at close
    assert len(tape.misses) == 1  # one attempt: the SDK did not retry it
    assert not isinstance(info.value, openai.APIConnectionError | anthropic.APIConnectionError)
    # typed as both SDKs' base errors, which every SDK version re-raises as they are
    assert isinstance(info.value, openai.OpenAIError | anthropic.AnthropicError)
    assert info.value.__cause__ is None


def test_sdk_replay_miss_opens_no_socket(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An SDK-level replay miss is raised before the SDK builds a request or opens a socket."""
    path = tmp_path / "run.jsonl"
    Tape(path, mode="record").close()

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the network was touched")

    monkeypatch.setattr(httpx2.HTTPTransport, "handle_request", refuse)
    with pytest.raises(ReplayMiss), Tape(path, mode="replay") as tape, tracetape.patch_sdks(tape):
        _openai("http://127.0.0.1:9").chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}]
        )


@pytest.mark.parametrize(
    ("sdk", "level"),
    [
        pytest.param(s, lv, id=f"{s}-{lv}")
        for s in ("openai", "anthropic")
        for lv in ("sdk", "http")
    ],
)
def test_secrets_never_reach_the_cassette(
    tmp_path: Path, server: FakeServer, monkeypatch: pytest.MonkeyPatch, sdk: str, level: str
) -> None:
    """The auth header and an API key taken from the environment are never in the bytes."""
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_KEY)

    def make() -> Any:
        if sdk == "openai":
            return openai.OpenAI(base_url=server.base_url + "/v1", max_retries=0)
        return anthropic.Anthropic(base_url=server.base_url, max_retries=0)

    agent = openai_agent if sdk == "openai" else anthropic_agent
    path = tmp_path / "run.jsonl"
    with Tape(path, mode="record") as tape:
        if level == "sdk":
            with tracetape.patch_sdks(tape):
                agent(make(), "sum 1 to 3")
        else:
            with tracetape.patch_http(tape):
                agent(make(), "sum 1 to 3")
    headers = {k.lower(): v for k, v in server.requests[0]["headers"].items()}
    key = OPENAI_KEY if sdk == "openai" else ANTHROPIC_KEY
    assert key in (headers.get("x-api-key"), headers["authorization"].removeprefix("Bearer "))
    data = path.read_bytes()
    assert len(read_cassette(path).records) == 4
    for secret in (OPENAI_KEY, ANTHROPIC_KEY, "Bearer", "authorization", "x-api-key"):
        assert secret.lower().encode() not in data.lower()
    assert server.base_url.encode() not in data


def test_threads_with_their_own_tapes_never_mix(tmp_path: Path, server: FakeServer) -> None:
    """Two threads, each with its own tape, record only their own calls."""
    barrier = threading.Barrier(2)
    results: dict[str, str] = {}

    def worker(name: str, task: str) -> None:
        client = _openai(server.base_url)
        with Tape(tmp_path / f"{name}.jsonl", mode="record") as tape, tracetape.patch_sdks(tape):
            barrier.wait()
            results[name] = openai_agent(client, task)

    threads = [
        threading.Thread(target=worker, args=("a", "sum 1 to 4")),
        threading.Thread(target=worker, args=("b", "sum 1 to 6")),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {"a": "The total is 10.", "b": "The total is 21."}
    for name, task, steps in (("a", "sum 1 to 4", 5), ("b", "sum 1 to 6", 7)):
        records = read_cassette(tmp_path / f"{name}.jsonl").records
        assert [r.step for r in records] == list(range(1, steps + 1))
        assert all(r.input["messages"][0]["content"] == task for r in records)


def test_replay_returns_the_sdk_types(tmp_path: Path, server: FakeServer) -> None:
    """Replay returns ChatCompletion, a Stream of ChatCompletionChunk, and raw responses."""
    path = tmp_path / "run.jsonl"
    messages = [{"role": "user", "content": "sum 1 to 1"}]

    def calls(client: Any) -> list[Any]:
        plain = client.chat.completions.create(model="m", messages=messages)
        streamed = list(client.chat.completions.create(model="m", messages=messages, stream=True))
        raw = client.chat.completions.with_raw_response.create(model="m", messages=messages)
        with client.chat.completions.stream(model="m", messages=messages) as events:
            final = events.get_final_completion()
        return [plain, streamed, raw.parse(), raw.status_code, final]

    with Tape(path, mode="record") as tape, tracetape.patch_sdks(tape):
        live = calls(_openai(server.base_url))
    server.stop()
    with Tape(path, mode="replay") as tape, tracetape.patch_sdks(tape):
        replayed = calls(_openai(server.base_url))
    assert isinstance(replayed[0], ChatCompletion)
    assert all(isinstance(c, ChatCompletionChunk) for c in replayed[1])
    assert [c.model_dump() for c in replayed[1]] == [c.model_dump() for c in live[1]]
    assert replayed[0].model_dump() == live[0].model_dump()
    assert replayed[2].model_dump() == live[2].model_dump()
    assert replayed[3] == 200
    assert replayed[4].choices[0].message.tool_calls == live[4].choices[0].message.tool_calls


def test_other_endpoints_round_trip(tmp_path: Path, server: FakeServer) -> None:
    """responses, completions and embeddings (base64 decoded back to floats) replay as recorded."""
    path = tmp_path / "run.jsonl"

    def calls(client: Any) -> list[Any]:
        resp = client.responses.create(model="m", input="hello")
        events = [e.type for e in client.responses.create(model="m", input="hi", stream=True)]
        comp = client.completions.create(model="m", prompt="say ok")
        emb = client.embeddings.create(model="e", input="text")
        return [resp.output_text, events, comp.choices[0].text, emb.data[0].embedding]

    with Tape(path, mode="record") as tape, tracetape.patch_sdks(tape):
        live = calls(_openai(server.base_url))
    assert live[3] == [0.5, -0.25, 0.125]
    server.stop()
    with Tape(path, mode="replay") as tape, tracetape.patch_sdks(tape):
        assert calls(_openai(server.base_url)) == live
    assert [r.input["params"].get("encoding_format") for r in read_cassette(path)][3] == "base64"


def test_abandoned_stream_is_recorded_as_far_as_read(tmp_path: Path, server: FakeServer) -> None:
    """A stream left half-read is recorded up to where it was read, in its own cassette only."""
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    messages = [{"role": "user", "content": "sum 1 to 1"}]
    with Tape(first, mode="record") as tape, tracetape.patch_sdks(tape):
        stream = _openai(server.base_url).chat.completions.create(
            model="m", messages=messages, stream=True
        )
        head = next(iter(stream))
    with Tape(second, mode="record") as tape, tracetape.patch_sdks(tape):
        _openai(server.base_url).chat.completions.create(model="m", messages=messages)
    (rec,) = read_cassette(first).records
    assert rec.out["complete"] is False
    assert rec.out["events"][0]["data"] == head.model_dump(mode="json", exclude_unset=True)
    (other,) = read_cassette(second).records
    assert "events" not in other.out
    server.stop()
    with Tape(first, mode="replay") as tape, tracetape.patch_sdks(tape):
        stream = _openai(server.base_url).chat.completions.create(
            model="m", messages=messages, stream=True
        )
        assert next(iter(stream)).model_dump() == head.model_dump()
        with pytest.raises(ReplayMiss, match="stopped reading this stream"):
            list(stream)  # reading past where the recorded run stopped is a divergence


def test_stored_bodies_are_json_and_tools_sorted(tmp_path: Path, server: FakeServer) -> None:
    """Non-streamed bodies are stored as JSON objects and tool schemas are keyed sorted by name."""
    path = tmp_path / "run.jsonl"
    _run(path, "record", "anthropic", "sdk", stream=False, base=server.base_url)
    rec = read_cassette(path).records[0]
    assert rec.out["body"]["type"] == "message"
    assert [t["name"] for t in rec.input["tools"]] == ["add", "noop"]
    assert rec.input["params"] == {
        "max_tokens": 256,
        "model": "claude-test",
        "system": "You add numbers.",
    }
    assert set(rec.input) == {"messages", "tools", "params", "step"}


def test_messages_are_copied_at_call_time(tmp_path: Path, server: FakeServer) -> None:
    """Each recorded request holds the conversation as it was then, not the final list."""
    path = tmp_path / "run.jsonl"
    _run(path, "record", "openai", "sdk", stream=False, base=server.base_url)
    lengths = [len(r.input["messages"]) for r in read_cassette(path).records]
    assert lengths == sorted(set(lengths))
    assert lengths[0] == 1


def test_plain_http_requests_are_keyed_without_secret_params(
    tmp_path: Path, server: FakeServer
) -> None:
    """Other requests are kind http, keyed on method, URL minus secret params, and body."""
    path = tmp_path / "run.jsonl"
    url = server.base_url + "/echo?q=1&api_key=hunter2hunter2"
    with (
        Tape(path, mode="record") as tape,
        httpx2.Client(transport=tracetape.http_transport(tape)) as client,
    ):
        live = client.post(url, json={"x": 1}, headers={"Authorization": "Bearer abc"}).json()
    (rec,) = read_cassette(path).records
    assert rec.kind == "http"
    assert rec.input == {
        "method": "POST",
        "url": server.base_url + "/echo?q=1",
        "body": {"x": 1},
    }
    assert b"hunter2" not in path.read_bytes()
    server.stop()
    with (
        Tape(path, mode="replay") as tape,
        httpx2.Client(transport=tracetape.http_transport(tape)) as client,
    ):
        assert client.post(url.replace("hunter2", "other"), json={"x": 1}).json() == live


def test_process_wide_patch_reaches_other_threads(tmp_path: Path, server: FakeServer) -> None:
    """tracetape.patch(tape) tapes calls from threads that bound no tape of their own."""
    path = tmp_path / "run.jsonl"
    tape = Tape(path, mode="record")
    handle = tracetape.patch(tape)
    try:
        thread = threading.Thread(
            target=openai_agent, args=(_openai(server.base_url), "sum 1 to 2")
        )
        thread.start()
        thread.join()
    finally:
        handle.stop()
        tape.close()
    assert [r.step for r in read_cassette(path).records] == [1, 2, 3]


def test_status_errors_replay_as_the_sdk_error(tmp_path: Path, server: FakeServer) -> None:
    """A recorded 404 replays as the SDK's NotFoundError."""
    path = tmp_path / "run.jsonl"
    client_kw = {"base_url": server.base_url + "/nowhere"}

    def call() -> None:
        client = openai.OpenAI(api_key=OPENAI_KEY, max_retries=0, **client_kw)
        client.embeddings.create(model="m", input="x", extra_body={"fail": True})

    with (
        Tape(path, mode="record") as tape,
        tracetape.patch_sdks(tape),
        pytest.raises(openai.NotFoundError),
    ):
        call()
    server.stop()
    with (
        Tape(path, mode="replay") as tape,
        tracetape.patch_sdks(tape),
        pytest.raises(openai.NotFoundError),
    ):
        call()
    assert json.loads(path.read_text().splitlines()[1])["out"]["status"] == 404


def test_helpers_and_raw_responses_replay(tmp_path: Path, server: FakeServer) -> None:
    """with_streaming_response, Anthropic's with_raw_response and the .stream helpers replay."""
    path = tmp_path / "run.jsonl"
    messages = [{"role": "user", "content": "sum 1 to 1"}]

    def calls() -> list[Any]:
        out: list[Any] = []
        oai, ant = _openai(server.base_url), _anthropic(server.base_url)
        with oai.chat.completions.with_streaming_response.create(
            model="m", messages=messages
        ) as response:
            out.append(response.parse().choices[0].message.tool_calls[0].function.arguments)
        raw = ant.messages.with_raw_response.create(model="m", max_tokens=5, messages=messages)
        out.append(raw.parse().content[0].input)
        with oai.responses.stream(model="m", input="hey") as stream:
            out.append(stream.get_final_response().output_text)
        with ant.messages.stream(model="m", max_tokens=5, messages=messages) as events:
            out.append([e.type for e in events])
        return out

    with Tape(path, mode="record") as tape, tracetape.patch_sdks(tape):
        live = calls()
    assert live[2] == "echo: hey"
    assert "input_json" in live[3]
    server.stop()
    with Tape(path, mode="replay") as tape, tracetape.patch_sdks(tape):
        assert calls() == live


def test_plain_httpx_client_and_half_read_http_stream(tmp_path: Path, server: FakeServer) -> None:
    """The httpx flavor tapes too, and a half-read stream is kept as far as it was read."""
    path = tmp_path / "run.jsonl"
    body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "sum 1 to 1"}]}
    url = server.base_url + "/v1/chat/completions"
    with (
        Tape(path, mode="record") as tape,
        httpx.Client(transport=tracetape.http_transport(tape, flavor="httpx")) as client,
        client.stream("POST", url, json=body) as response,
    ):
        first = next(response.iter_lines())
    (rec,) = read_cassette(path).records
    assert rec.kind == "llm"
    assert rec.out["complete"] is False
    assert json.loads(first.removeprefix("data: ")) == rec.out["events"][0]["data"]
    server.stop()
    with (
        Tape(path, mode="replay") as tape,
        httpx.Client(transport=tracetape.http_transport(tape, flavor="httpx")) as client,
        client.stream("POST", url, json=body) as response,
    ):
        assert json.loads(next(response.iter_lines())[6:]) == rec.out["events"][0]["data"]


def test_asyncio_tasks_with_their_own_tapes_never_mix(tmp_path: Path, server: FakeServer) -> None:
    """Concurrent asyncio tasks, each with its own tape, record only their own calls."""

    async def worker(name: str, task: str) -> str:
        client = _openai(server.base_url, aio=True)
        async with Tape(tmp_path / f"{name}.jsonl", mode="record") as tape:
            with tracetape.patch_sdks(tape):
                return await openai_agent_async(client, task)

    async def main() -> list[str]:
        return list(await asyncio.gather(worker("a", "sum 1 to 3"), worker("b", "sum 1 to 5")))

    assert asyncio.run(main()) == ["The total is 6.", "The total is 15."]
    for name, task, steps in (("a", "sum 1 to 3", 4), ("b", "sum 1 to 5", 6)):
        records = read_cassette(tmp_path / f"{name}.jsonl").records
        assert [r.step for r in records] == list(range(1, steps + 1))
        assert {r.input["messages"][0]["content"] for r in records} == {task}


def test_patch_is_removed_on_exit(tmp_path: Path) -> None:
    """Leaving the last patch block restores the SDK methods and httpx send untouched."""
    chat = openai.resources.chat.completions.Completions
    before = (chat.create, anthropic.resources.messages.Messages.stream, httpx2.Client.send)
    with Tape(tmp_path / "a.jsonl") as tape, tracetape.patch_sdks(tape):
        with tracetape.patch_sdks(tape):
            assert chat.create is not before[0]
        assert chat.create is not before[0]
        with tracetape.patch_http(tape):
            assert httpx2.Client.send is not before[2]
        assert httpx2.Client.send is not before[2]  # the SDK level's safety net
    with Tape(tmp_path / "b.jsonl") as tape, tracetape.patch_http(tape):
        assert httpx2.Client.send is not before[2]
        assert chat.create is before[0]  # the HTTP level alone leaves the SDKs alone
    after = (chat.create, anthropic.resources.messages.Messages.stream, httpx2.Client.send)
    assert after == before


def test_structured_output_parse_replays(tmp_path: Path, server: FakeServer) -> None:
    """chat.completions.parse replays the parsed object at both levels, keyed on the schema."""
    from pydantic import BaseModel

    class Answer(BaseModel):
        answer: int

    path = tmp_path / "run.jsonl"
    messages = [{"role": "user", "content": "what is it?"}]

    def call() -> Any:
        completion = _openai(server.base_url).chat.completions.parse(
            model="m", messages=messages, response_format=Answer
        )
        return completion.choices[0].message.parsed

    with Tape(path, mode="record") as tape, tracetape.patch_sdks(tape):
        assert call() == Answer(answer=42)
    server.stop()
    with Tape(path, mode="replay") as tape, tracetape.patch_sdks(tape):
        assert call() == Answer(answer=42)
    with Tape(path, mode="replay") as tape, tracetape.patch_http(tape):
        assert call() == Answer(answer=42)  # the HTTP level sends the same body
    params = read_cassette(path).records[0].input["params"]
    assert params["stream"] is False
    assert params["response_format"]["json_schema"]["name"] == "Answer"


def test_multipart_uploads_replay_despite_random_boundaries(
    tmp_path: Path, server: FakeServer
) -> None:
    """A multipart body is keyed without its per-request random boundary."""
    path = tmp_path / "run.jsonl"
    url = server.base_url + "/echo"

    def upload(tape: Tape) -> int:
        with httpx2.Client(transport=tracetape.http_transport(tape)) as client:
            return client.post(url, files={"f": ("a.txt", b"hello")}).status_code

    with Tape(path, mode="record") as tape:
        assert upload(tape) == 200
    server.stop()
    with Tape(path, mode="replay") as tape:
        assert upload(tape) == 200
    assert "BOUNDARY" in read_cassette(path).records[0].input["body"]


@pytest.mark.parametrize("aio", [pytest.param(False, id="sync"), pytest.param(True, id="async")])
def test_anthropic_stream_helper_keys_the_body_it_sends(
    tmp_path: Path, server: FakeServer, aio: bool
) -> None:
    """messages.stream(output_format=...) is keyed on the body sent, so the HTTP level agrees."""
    from pydantic import BaseModel

    class Answer(BaseModel):
        total: int

    path = tmp_path / "run.jsonl"
    messages = [{"role": "user", "content": "sum 1 to 1"}]

    async def call_async() -> list[str]:
        client = _anthropic(server.base_url, aio=True)
        async with client.messages.stream(
            model="m", max_tokens=5, messages=iter(messages), output_format=Answer
        ) as events:
            return [e.type async for e in events]

    def call() -> list[str]:
        if aio:
            return asyncio.run(call_async())
        with _anthropic(server.base_url).messages.stream(
            model="m", max_tokens=5, messages=iter(messages), output_format=Answer
        ) as events:
            return [e.type for e in events]

    with Tape(path, mode="record") as tape, tracetape.patch_sdks(tape):
        live = call()
    assert len(server.requests) == 1
    assert server.requests[0]["body"]["messages"] == messages
    server.stop()
    with Tape(path, mode="replay") as tape, tracetape.patch_http(tape):
        assert call() == live
    params = read_cassette(path).records[0].input["params"]
    assert params["output_config"]["format"]["type"] == "json_schema"
    assert params["stream"] is True


IMPORT_LATER = """
import sys, json, tempfile, pathlib
import tracetape

tape = tracetape.Tape(pathlib.Path(tempfile.mkdtemp()) / "t.jsonl", harness_sha="x")
report = {}
with tape, tracetape.patch_sdks(tape):
    report["imported_by_patch"] = sorted(
        m for m in ("openai", "anthropic", "httpx", "httpx2", "pydantic") if m in sys.modules
    )
    import openai
    from openai.resources.chat.completions import AsyncCompletions, Completions
    import anthropic
    from anthropic.resources.messages import Messages

    def patched(cls, name="create"):
        return "__tracetape_original__" in getattr(cls.__dict__[name], "__dict__", {})

    report["patched_on_import"] = [
        patched(Completions), patched(AsyncCompletions), patched(Messages),
        patched(sys.modules["httpx2"].Client, "send"),
    ]
report["restored"] = not any(
    patched(c) for c in (Completions, AsyncCompletions, Messages)
)
report["finder_left"] = [f for f in map(repr, sys.meta_path) if "PatchOnImport" in f]
print(json.dumps(report))
"""


def test_the_hooks_patch_sdks_when_imported_and_never_import_them(tmp_path: Path) -> None:
    """Installing the SDK hooks imports no SDK; an SDK imported later is patched as it loads,
    and leaving the patch restores it and removes the import hook."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", IMPORT_LATER], capture_output=True, text=True, check=True,
        cwd=tmp_path,
    )  # fmt: skip
    report = json.loads(done.stdout)
    assert report == {
        "imported_by_patch": [],
        "patched_on_import": [True, True, True, True],
        "restored": True,
        "finder_left": [],
    }


WARM_UP = """
import json, sys
import tracetape
from tracetape.integrations.sdk import patch

tape = tracetape.Tape(sys.argv[1], mode=sys.argv[2])
handle = patch(tape)
import openai, anthropic  # the hooks warm replay up as the SDKs load
from openai.types.chat import ChatCompletion
from anthropic.types import Message

print(json.dumps({
    "openai_type_built": ChatCompletion.__pydantic_complete__,
    "openai_resource_imported": "openai.resources.chat.chat" in sys.modules,
    "anthropic_type_built": Message.__pydantic_complete__,
}))
"""


@pytest.mark.parametrize("sdk", ["openai", "anthropic"])
def test_replay_warms_up_what_the_cassette_answers(
    tmp_path: Path, server: FakeServer, sdk: str
) -> None:
    """When replay starts, the response types the cassette holds are built and openai's lazy
    resource module is imported, so the first replayed call costs what the others do; a
    recording tape, and an SDK the cassette never answers, are left as they are."""
    import subprocess
    import sys

    path = tmp_path / "run.jsonl"
    _run(path, "record", sdk, "sdk", stream=False, base=server.base_url)

    def report(mode: str, tape: Path) -> dict[str, bool]:
        done = subprocess.run(
            [sys.executable, "-c", WARM_UP, str(tape), mode],
            capture_output=True, text=True, check=True, cwd=tmp_path,
        )  # fmt: skip
        return dict(json.loads(done.stdout))

    warmed = sdk == "openai"
    assert report("replay", path) == {
        "openai_type_built": warmed,
        "openai_resource_imported": warmed,
        "anthropic_type_built": not warmed,
    }
    assert not any(report("record", tmp_path / "new.jsonl").values())


@pytest.mark.parametrize("sdk", ["openai", "anthropic"])
def test_replay_rehearses_its_first_call_and_leaves_no_trace(
    tmp_path: Path, server: FakeServer, sdk: str
) -> None:
    """When replay starts, and when the first client is built, the first recorded call is
    replayed through the hook REHEARSALS times, each on a shadow of the tape (the interpreter
    specializes the code before the program's first call), and the tape is left as it was:
    nothing played, no miss; the run then replays whole, strict."""
    from tracetape.integrations import stainless
    from tracetape.integrations.state import state_of

    path = tmp_path / "run.jsonl"
    expected = _run(path, "record", sdk, "sdk", stream=False, base=server.base_url)
    runs = []
    original = Tape.shadow

    def counted(self: Tape, key: str) -> Tape | None:
        runs.append(key)
        return original(self, key)

    make, agent = SYNC[sdk]
    with Tape(path, mode="replay", strict=True) as tape:
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(Tape, "shadow", counted)
            with tracetape.patch_sdks(tape):
                assert list(state_of(tape).rehearsed.values()) == [True]
                assert runs == [tape.records[0].key] * stainless.REHEARSALS
                assert (tape.matched, tape.misses) == (0, [])
                assert len(tape.unplayed) == len(tape.records)
                # The first client built rehearses again (building one runs other code); each
                # client gets the resources the cassette answers built, as replay starts.
                client, other = make(server.base_url), make(server.base_url)
                assert len(runs) == 2 * stainless.REHEARSALS
                resource = "chat" if sdk == "openai" else "messages"
                assert resource in vars(client) and resource in vars(other)
                assert str(agent(client, TASK, stream=False)) == expected
        assert tape.matched == len(tape.records)


def test_threads_sharing_one_tape_replay_in_any_order(tmp_path: Path, server: FakeServer) -> None:
    """Two agents in two threads make SDK calls on one process-wide tape: each thread counts
    its own steps, so the run replays whatever order the calls arrive in."""
    path = tmp_path / "run.jsonl"
    tasks = ("sum 1 to 4", "sum 1 to 6")

    def run(mode: str) -> list[str]:
        answers = ["", ""]
        client = _openai(server.base_url)
        tape = Tape(path, mode=mode)
        handle = tracetape.patch(tape)
        try:
            go = threading.Barrier(2)

            def work(i: int) -> None:
                go.wait()
                answers[i] = openai_agent(client, tasks[i])

            threads = [threading.Thread(target=work, args=(i,)) for i in (0, 1)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        finally:
            handle.stop()
            tape.close()
        return answers

    recorded = run("record")
    assert recorded == ["The total is 10.", "The total is 21."]
    server.stop()
    for _ in range(3):
        assert run("replay") == recorded


def test_concurrent_asyncio_agents_on_one_tape_replay(tmp_path: Path, server: FakeServer) -> None:
    """asyncio.gather of two agents under one tape: each task counts from its parent's count
    at creation, so an unchanged program replays."""
    path = tmp_path / "run.jsonl"

    async def both(mode: str) -> list[str]:
        client = _openai(server.base_url, aio=True)
        async with Tape(path, mode=mode) as tape:
            with tracetape.patch_sdks(tape):
                answers = await asyncio.gather(
                    openai_agent_async(client, "sum 1 to 3"),
                    openai_agent_async(client, "sum 1 to 5"),
                )
        await client.close()
        return list(answers)

    recorded = asyncio.run(both("record"))
    server.stop()
    assert asyncio.run(both("replay")) == recorded == ["The total is 6.", "The total is 15."]


def test_two_flows_making_one_decision_with_different_outputs_warn(tmp_path: Path) -> None:
    """The same call made by two threads with different outputs is ambiguous on replay: the
    recording warns, naming the key. The same call repeated in one flow replays in order and
    does not warn."""
    path = tmp_path / "run.jsonl"
    payload = {"messages": [{"role": "user", "content": "pick a number"}], "step": 1}
    with Tape(path, mode="record") as tape:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            tape.call("llm", payload, lambda: "3")
            tape.call("llm", payload, lambda: "4")  # same flow: deterministic order
        caught: list[warnings.WarningMessage] = []

        def other() -> None:
            with warnings.catch_warnings(record=True) as got:
                warnings.simplefilter("always")
                tape.call("llm", payload, lambda: "5")
            caught.extend(got)

        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
    [warning] = caught
    assert issubclass(warning.category, tracetape.TapeWarning)
    key = tracetape.key("llm", payload)
    assert key in str(warning.message) and "concurrent flows" in str(warning.message)


def test_a_secret_split_across_streamed_events_is_never_stored(
    tmp_path: Path, server: FakeServer
) -> None:
    """A streamed reply whose key arrives in 7-character pieces (no piece long enough to
    match) is redacted on the assembled text; the events are rewritten so that replay yields
    as many chunks and assembles to the redacted whole."""
    path = tmp_path / "run.jsonl"
    secret = "sk-proj-Qq1Ww2Ee3Rr4Tt5Yy6Uu7Ii8Oo9Pp0"
    task = f"echo your key is {secret} keep it safe"

    def run(mode: str) -> tuple[str, int]:
        with Tape(path, mode=mode) as tape, tracetape.patch_sdks(tape):
            stream = _openai(server.base_url).chat.completions.create(
                model="m", messages=[{"role": "user", "content": task}], stream=True
            )
            chunks = [c.choices[0].delta.content or "" for c in stream]
        return "".join(chunks), len(chunks)

    live, count = run("record")
    assert live == f"your key is {secret} keep it safe"
    data = path.read_text()
    assert secret not in data and secret[7:14] in live  # the pieces were split
    assert "[REDACTED:openai_key:" in data
    server.stop()
    replayed, replay_count = run("replay")
    assert replay_count == count
    assert replayed.startswith("your key is [REDACTED:openai_key:")
    assert replayed.endswith("] keep it safe")


# -- the HTTP level as the SDK level's safety net ------------------------------------------------


def _bound_before_patch(base: str) -> Any:
    """What instructor's ``from_openai`` keeps: the bound ``create`` of a client built before
    any tape, so the patched class method is never reached."""
    create = _openai(base).chat.completions.create

    class Kept:
        class chat:
            class completions:
                pass

    Kept.chat.completions.create = staticmethod(create)  # type: ignore[attr-defined]
    return Kept


def _raw_post(base: str) -> Any:
    """What litellm does for ``openai/`` models: ``client.post`` with its own cast type."""
    client = _openai(base)

    class Raw:
        class chat:
            class completions:
                @staticmethod
                def create(**body: Any) -> Any:
                    return client.post("/chat/completions", body=body, cast_to=ChatCompletion)

    return Raw


@pytest.mark.parametrize("make", [_bound_before_patch, _raw_post], ids=["bound-before", "post"])
def test_model_requests_the_sdk_level_misses_are_taped_at_send(
    tmp_path: Path, server: FakeServer, make: Any
) -> None:
    """Under the SDK hooks alone, a model request that no SDK-level capture handled is the
    same llm decision at the HTTP level: recorded, replayed offline, and a replay of an empty
    cassette misses instead of silently going live."""
    path = tmp_path / "run.jsonl"
    client = make(server.base_url)
    with Tape(path, mode="record") as tape, tracetape.patch_sdks(tape):
        assert openai_agent(client, "sum 1 to 3") == "The total is 6."
    records = read_cassette(path).records
    assert [(r.kind, r.step) for r in records] == [("llm", n) for n in (1, 2, 3, 4)]
    assert records[0].input["messages"] == [{"role": "user", "content": "sum 1 to 3"}]
    assert OPENAI_KEY not in path.read_text()  # the key went in a header: never stored
    live = len(server.requests)
    with Tape(path, mode="replay") as tape, tracetape.patch_sdks(tape):
        assert openai_agent(client, "sum 1 to 3") == "The total is 6."
    empty = tmp_path / "empty.jsonl"
    Tape(empty, mode="record").close()
    with pytest.raises(ReplayMiss), Tape(empty, mode="replay") as tape, tracetape.patch_sdks(tape):
        openai_agent(client, "sum 1 to 3")
    assert len(server.requests) == live


def test_anthropic_beta_messages_are_taped_under_the_sdk_hooks(
    tmp_path: Path, server: FakeServer
) -> None:
    """pydantic-ai's Anthropic model calls ``client.beta.messages``: taped all the same."""
    path = tmp_path / "run.jsonl"

    def ask() -> str:
        client = _anthropic(server.base_url)
        reply = client.beta.messages.create(
            model="m", max_tokens=10, messages=[{"role": "user", "content": "sum 1 to 0"}]
        )
        return str(reply.content[0].text)

    with Tape(path, mode="record") as tape, tracetape.patch_sdks(tape):
        assert ask() == "The total is 0."
    (rec,) = read_cassette(path).records
    assert rec.kind == "llm" and rec.step == 1
    server.stop()
    with Tape(path, mode="replay") as tape, tracetape.patch_sdks(tape):
        assert ask() == "The total is 0."


def test_the_safety_net_leaves_other_requests_alone(tmp_path: Path, server: FakeServer) -> None:
    """Under the SDK hooks alone only model requests are taped: a program's other HTTP
    traffic (here a POST to /echo) goes out untouched, in record and in replay."""
    path = tmp_path / "run.jsonl"
    with Tape(path, mode="record") as tape, tracetape.patch_sdks(tape):
        reply = httpx2.post(server.base_url + "/echo", json={"a": 1})
    assert reply.json() == {"echo": {"a": 1}}
    assert read_cassette(path).records == []


def test_the_safety_net_redacts_before_writing(tmp_path: Path, server: FakeServer) -> None:
    """A secret in a request the safety net tapes (here in the prompt of a raw
    ``client.post``) never reaches the cassette, as at either hook level."""
    path = tmp_path / "run.jsonl"
    secret = "AKIAIOSFODNN7EXAMPLE"
    client = _raw_post(server.base_url)
    with Tape(path, mode="record") as tape, tracetape.patch_sdks(tape):
        reply = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": f"sum 1 to 0, key {secret}"}]
        )
    assert reply.choices[0].message.content == "The total is 0."
    text = path.read_text()
    assert secret not in text and OPENAI_KEY not in text
    assert "REDACTED" in text.upper()
