"""The SDK and HTTP hooks against the real openai and anthropic SDKs and a fake local server."""

from __future__ import annotations

import asyncio
import json
import threading
import warnings
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import openai
import pytest
from fakeserver import FakeServer
from sdk_agents import REMINDER, anthropic_agent, openai_agent, openai_agent_async
from sdk_clients import (
    ANSWER,
    ANTHROPIC_KEY,
    ASYNC,
    CASES,
    OPENAI_KEY,
    TASK,
    anthropic_client,
    openai_client,
    run_agent,
)

import tracetape
from tracetape import ReplayMiss, Tape, read_cassette

pytestmark = pytest.mark.usefixtures("no_leftover_patch")


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
    assert run_agent(path, "record", sdk, level, stream=stream, base=server.base_url) == ANSWER
    assert len(server.requests) == 13
    server.stop()
    assert run_agent(path, "replay", sdk, level, stream=stream, base=server.base_url) == ANSWER
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
    run_agent(path, "record", sdk, recorded_at, stream=stream, base=server.base_url)
    server.stop()
    assert (
        run_agent(path, "replay", sdk, replayed_at, stream=stream, base=server.base_url) == ANSWER
    )


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
    run_agent(path, "record", sdk, level, stream=False, base=server.base_url)
    server.stop()
    edited = REMINDER.replace("carefully", "quickly")
    with pytest.raises(ReplayMiss) as info:
        run_agent(path, "replay", sdk, level, stream=False, base=server.base_url, reminder=edited)
    miss = info.value
    assert type(miss).__name__ == "ReplayMiss"
    assert miss.step == 10
    assert miss.matched == 9
    # the task, nine (assistant, tool result) pairs, then the edited reminder
    assert miss.changes == ["messages[19].content"]
    assert "carefully" in str(miss)
    assert "quickly" in str(miss)


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
        live = calls(openai_client(server.base_url))
    assert live[3] == [0.5, -0.25, 0.125]
    server.stop()
    with Tape(path, mode="replay") as tape, tracetape.patch_sdks(tape):
        assert calls(openai_client(server.base_url)) == live
    assert [r.input["params"].get("encoding_format") for r in read_cassette(path)][3] == "base64"


def test_abandoned_stream_is_recorded_as_far_as_read(tmp_path: Path, server: FakeServer) -> None:
    """A stream left half-read is recorded up to where it was read, in its own cassette only."""
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    messages = [{"role": "user", "content": "sum 1 to 1"}]
    with Tape(first, mode="record") as tape, tracetape.patch_sdks(tape):
        stream = openai_client(server.base_url).chat.completions.create(
            model="m", messages=messages, stream=True
        )
        head = next(iter(stream))
    with Tape(second, mode="record") as tape, tracetape.patch_sdks(tape):
        openai_client(server.base_url).chat.completions.create(model="m", messages=messages)
    (rec,) = read_cassette(first).records
    assert rec.out["complete"] is False
    assert rec.out["events"][0]["data"] == head.model_dump(mode="json", exclude_unset=True)
    (other,) = read_cassette(second).records
    assert "events" not in other.out
    server.stop()
    with Tape(first, mode="replay") as tape, tracetape.patch_sdks(tape):
        stream = openai_client(server.base_url).chat.completions.create(
            model="m", messages=messages, stream=True
        )
        assert next(iter(stream)).model_dump() == head.model_dump()
        with pytest.raises(ReplayMiss, match="stopped reading this stream"):
            list(stream)  # reading past where the recorded run stopped is a divergence


def test_stored_bodies_are_json_and_tools_sorted(tmp_path: Path, server: FakeServer) -> None:
    """Non-streamed bodies are stored as JSON objects and tool schemas are keyed sorted by name."""
    path = tmp_path / "run.jsonl"
    run_agent(path, "record", "anthropic", "sdk", stream=False, base=server.base_url)
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
    run_agent(path, "record", "openai", "sdk", stream=False, base=server.base_url)
    lengths = [len(r.input["messages"]) for r in read_cassette(path).records]
    assert lengths == sorted(set(lengths))
    assert lengths[0] == 1


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
        oai, ant = openai_client(server.base_url), anthropic_client(server.base_url)
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


def test_structured_output_parse_replays(tmp_path: Path, server: FakeServer) -> None:
    """chat.completions.parse replays the parsed object at both levels, keyed on the schema."""
    from pydantic import BaseModel

    class Answer(BaseModel):
        answer: int

    path = tmp_path / "run.jsonl"
    messages = [{"role": "user", "content": "what is it?"}]

    def call() -> Any:
        completion = openai_client(server.base_url).chat.completions.parse(
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
        client = anthropic_client(server.base_url, aio=True)
        async with client.messages.stream(
            model="m", max_tokens=5, messages=iter(messages), output_format=Answer
        ) as events:
            return [e.type async for e in events]

    def call() -> list[str]:
        if aio:
            return asyncio.run(call_async())
        with anthropic_client(server.base_url).messages.stream(
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


def test_threads_sharing_one_tape_replay_in_any_order(tmp_path: Path, server: FakeServer) -> None:
    """Two agents in two threads make SDK calls on one process-wide tape: each thread counts
    its own steps, so the run replays whatever order the calls arrive in."""
    path = tmp_path / "run.jsonl"
    tasks = ("sum 1 to 4", "sum 1 to 6")

    def run(mode: str) -> list[str]:
        answers = ["", ""]
        client = openai_client(server.base_url)
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
        client = openai_client(server.base_url, aio=True)
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
            stream = openai_client(server.base_url).chat.completions.create(
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
