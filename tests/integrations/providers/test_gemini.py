"""The Gemini provider against the real ``google-genai`` SDK and a fake Gemini API: sync
(``httpx2``) and async (``client.aio``, ``aiohttp``), whole and streamed, with function
calling; recorded, then replayed with the server stopped and the network blocked."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import httpx2
import pytest
from google import genai
from google.genai import errors, types

import tracetape
from tests.integrations.frameworks.conftest import record_replay_miss
from tests.integrations.providers.fake_gemini import FakeGemini, signature
from tracetape import ReplayMiss, Tape, read_cassette
from tracetape.integrations import unpatch_all
from tracetape.integrations.network import block_network
from tracetape.integrations.providers import Ask, Usage, match_route, provider

KEY = "AIzaSyD-gemini0123456789abcdefghijklmno"
TASK = "sum 1 to 3, carefully"
ANSWER = "The total is 6."
MODEL = "gemini-2.5-flash"
ADD = types.Tool(
    function_declarations=[
        types.FunctionDeclaration(
            name="add",
            description="Add two integers.",
            parameters_json_schema={
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "required": ["a", "b"],
            },
        )
    ]
)
CONFIG = types.GenerateContentConfig(tools=[ADD])


@pytest.fixture
def gemini() -> Iterator[FakeGemini]:
    srv = FakeGemini().start()
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture(autouse=True)
def _no_leftover_patch() -> Iterator[None]:
    yield
    unpatch_all()


def _client(base: str) -> genai.Client:
    return genai.Client(api_key=KEY, http_options=types.HttpOptions(base_url=base))


def _answer(responses: list[types.GenerateContentResponse]) -> tuple[types.Content, str]:
    """The model's turn (every part, signatures included) and its text, from one answer or
    a stream's chunks."""
    parts = [
        part
        for r in responses
        for c in r.candidates or ()
        for part in (c.content.parts if c.content else None) or ()
    ]
    return types.Content(role="model", parts=parts), "".join(p.text or "" for p in parts)


def add(args: dict[str, Any] | None) -> int:
    """The tool the model calls."""
    assert args is not None
    return int(args["a"]) + int(args["b"])


def _next_turn(contents: list[types.Content], model_turn: types.Content) -> bool:
    """Append the model's turn and the results of the calls it asked for; False when it
    asked for none."""
    calls = [p.function_call for p in model_turn.parts or () if p.function_call]
    if not calls:
        return False
    contents.append(model_turn)
    results = [
        types.Part.from_function_response(name=str(call.name), response={"result": add(call.args)})
        for call in calls
    ]
    contents.append(types.Content(role="user", parts=results))
    return True


def agent(client: genai.Client, task: str, *, stream: bool) -> str:
    """A manual function-calling loop on the sync client."""
    contents = [types.Content(role="user", parts=[types.Part(text=task)])]
    while True:
        if stream:
            chunks = list(
                client.models.generate_content_stream(model=MODEL, contents=contents, config=CONFIG)
            )
        else:
            chunks = [client.models.generate_content(model=MODEL, contents=contents, config=CONFIG)]
        turn, text = _answer(chunks)
        if not _next_turn(contents, turn):
            return text


async def agent_async(client: genai.Client, task: str, *, stream: bool) -> str:
    """The same loop on ``client.aio`` (over aiohttp)."""
    contents = [types.Content(role="user", parts=[types.Part(text=task)])]
    while True:
        if stream:
            answer = await client.aio.models.generate_content_stream(
                model=MODEL, contents=contents, config=CONFIG
            )
            chunks = [chunk async for chunk in answer]
        else:
            one = await client.aio.models.generate_content(
                model=MODEL, contents=contents, config=CONFIG
            )
            chunks = [one]
        turn, text = _answer(chunks)
        if not _next_turn(contents, turn):
            return text


@contextlib.contextmanager
def taped(path: Path, mode: str, level: str = "sdk") -> Iterator[Tape]:
    """A tape under the SDK (or HTTP) hooks; a replay runs with the network blocked and must
    not have tried to reach it."""
    hook = tracetape.patch_sdks if level == "sdk" else tracetape.patch_http
    with contextlib.ExitStack() as stack:
        guard = stack.enter_context(block_network()) if mode == "replay" else None
        with Tape(path, mode=mode) as tape, hook(tape):
            yield tape
    assert guard is None or guard.attempts == []


def run(
    path: Path,
    mode: str,
    base: str,
    *,
    aio: bool,
    stream: bool,
    level: str = "sdk",
    task: str = TASK,
) -> str:
    """The agent, sync or async, recorded or replayed."""
    with taped(path, mode, level):
        client = _client(base)
        if aio:
            return asyncio.run(agent_async(client, task, stream=stream))
        return agent(client, task, stream=stream)


CASES = [
    pytest.param(
        aio,
        stream,
        level,
        id=f"{'async' if aio else 'sync'}-{'stream' if stream else 'json'}-{level}",
    )
    for aio in (False, True)
    for stream in (False, True)
    for level in ("sdk", "http")
]


@pytest.mark.parametrize(("aio", "stream", "level"), CASES)
def test_a_function_calling_agent_replays_offline(
    tmp_path: Path, gemini: FakeGemini, aio: bool, stream: bool, level: str
) -> None:
    """A 4-step function-calling agent is recorded (steps 1..4, usage, route, signatures
    sent back byte for byte) and replays to the same answer with the server stopped."""
    path = tmp_path / "run.jsonl"
    assert run(path, "record", gemini.base_url, aio=aio, stream=stream, level=level) == ANSWER
    assert len(gemini.requests) == 4
    gemini.stop()
    assert run(path, "replay", gemini.base_url, aio=aio, stream=stream, level=level) == ANSWER
    assert len(gemini.requests) == 4
    records = read_cassette(path).records
    assert [r.step for r in records] == [1, 2, 3, 4]
    assert {r.api for r in records} == {"gemini.generate_content"}
    method = "streamGenerateContent" if stream else "generateContent"
    assert {(r.input["params"]["model"], r.input["params"]["method"]) for r in records} == {
        (MODEL, method)
    }
    # the answer's text is streamed word by word: candidatesTokenCount is the words so far
    words = 4 if stream else 1
    assert [r.usage for r in records] == [
        {"input": 1, "output": 3},
        {"input": 3, "output": 3},
        {"input": 5, "output": 3},
        {"input": 7, "output": 2 + words},
    ]
    assert [r.tokens for r in records] == [4, 6, 8, 9 + words]
    second = records[1].input["messages"][1]["parts"][0]
    assert second["thoughtSignature"] == signature(1)
    if stream:
        assert all(r.out["eol"] == "crlf" and "complete" not in r.out for r in records)
        assert len(records[-1].out["events"]) == 4


@pytest.mark.parametrize(
    ("aio", "stream"),
    [
        pytest.param(
            aio, stream, id=f"{'async' if aio else 'sync'}-{'stream' if stream else 'json'}"
        )
        for aio in (False, True)
        for stream in (False, True)
    ],
)
def test_a_one_word_change_names_the_changed_part(
    tmp_path: Path, gemini: FakeGemini, aio: bool, stream: bool
) -> None:
    """Replaying with one word of the prompt changed raises ``ReplayMiss`` at step 1, naming
    the part's text with both words."""
    path = tmp_path / "run.jsonl"
    run(path, "record", gemini.base_url, aio=aio, stream=stream)
    gemini.stop()
    with pytest.raises(ReplayMiss) as info:
        run(
            path,
            "replay",
            gemini.base_url,
            aio=aio,
            stream=stream,
            task=TASK.replace("carefully", "quickly"),
        )
    miss = info.value
    assert (type(miss).__name__, miss.step, miss.changes) == (
        "ReplayMiss",
        1,
        ["messages[0].parts[0].text"],
    )
    assert "carefully" in str(miss) and "quickly" in str(miss)


async def _rest_aiohttp(url: str, body: dict[str, Any]) -> dict[str, Any]:
    async with aiohttp.ClientSession() as session, session.post(url, json=body) as resp:
        return dict(await resp.json())


@pytest.mark.parametrize("form", ["sdk-header", "httpx2-query", "aiohttp-query"])
def test_the_api_key_never_reaches_the_cassette(
    tmp_path: Path, gemini: FakeGemini, form: str
) -> None:
    """The key, sent in ``x-goog-api-key`` (the SDK) or ``?key=`` (a REST client), is neither
    keyed nor stored, even when the answer quotes it back."""
    path = tmp_path / "run.jsonl"
    body = {"contents": [{"role": "user", "parts": [{"text": "show key"}]}]}
    url = f"{gemini.base_url}/v1beta/models/{MODEL}:generateContent?key={KEY}"
    with taped(path, "record"):
        if form == "sdk-header":
            client = _client(gemini.base_url)  # kept: a collected Client closes its transport
            text = client.models.generate_content(model=MODEL, contents="show key").text
        elif form == "httpx2-query":
            text = httpx2.post(url, json=body).json()["candidates"][0]["content"]["parts"][0][
                "text"
            ]
        else:
            answer = asyncio.run(_rest_aiohttp(url, body))
            text = answer["candidates"][0]["content"]["parts"][0]["text"]
    assert text == f"you sent {KEY}"
    sent = gemini.requests[0]
    assert KEY in (sent["headers"].get("x-goog-api-key"), sent["query"].get("key"))
    (rec,) = read_cassette(path).records
    assert (rec.kind, rec.api) == ("llm", "gemini.generate_content")
    data = path.read_text()
    assert KEY not in data and "[REDACTED:" in data


@pytest.mark.parametrize("aio", [pytest.param(False, id="sync"), pytest.param(True, id="async")])
def test_an_http_error_replays_as_the_sdk_error(
    tmp_path: Path, gemini: FakeGemini, aio: bool
) -> None:
    """A 404 is recorded as a decision and replays as the SDK's own ``ClientError``."""
    path = tmp_path / "run.jsonl"

    def call() -> None:
        client = _client(gemini.base_url)
        if aio:
            asyncio.run(client.aio.models.generate_content(model="missing", contents="hi"))
        else:
            client.models.generate_content(model="missing", contents="hi")

    with taped(path, "record"), pytest.raises(errors.ClientError) as recorded:
        call()
    gemini.stop()
    with taped(path, "replay"), pytest.raises(errors.ClientError) as replayed:
        call()
    assert (
        (replayed.value.code, replayed.value.status)
        == (recorded.value.code, recorded.value.status)
        == (404, "NOT_FOUND")
    )
    assert replayed.value.message == recorded.value.message
    (rec,) = read_cassette(path).records
    assert (rec.out["status"], rec.step) == (404, 1)


def _first_chunk(client: genai.Client, aio: bool, *, more: bool = False) -> str:
    """The first chunk of a stream (``more``: then read on)."""
    if not aio:
        stream = client.models.generate_content_stream(model=MODEL, contents="hold on there")
        first = next(stream).text or ""
        if more:
            list(stream)
        return first

    async def go() -> str:
        stream = await client.aio.models.generate_content_stream(
            model=MODEL, contents="hold on there"
        )
        first = (await anext(stream)).text or ""
        if more:
            _ = [chunk async for chunk in stream]
        return first

    return asyncio.run(go())


@pytest.mark.parametrize("aio", [pytest.param(False, id="sync"), pytest.param(True, id="async")])
def test_an_abandoned_stream_is_recorded_incomplete(
    tmp_path: Path, gemini: FakeGemini, aio: bool
) -> None:
    """A stream left after its first chunk is stored as far as it was read
    (``"complete": false``); a replay that reads further raises the truncated-stream miss."""
    path = tmp_path / "run.jsonl"
    with taped(path, "record"):
        assert _first_chunk(_client(gemini.base_url), aio) == "on "
    gemini.stop()
    (rec,) = read_cassette(path).records
    assert rec.out["complete"] is False and len(rec.out["events"]) == 1
    with taped(path, "replay"):
        assert _first_chunk(_client(gemini.base_url), aio) == "on "
    with pytest.raises(ReplayMiss, match="stopped reading this stream"), taped(path, "replay"):
        _first_chunk(_client(gemini.base_url), aio, more=True)


SCRIPT = """
import asyncio, sys
from google import genai
from google.genai import types

base, task = sys.argv[1], sys.argv[2]
client = genai.Client(http_options=types.HttpOptions(base_url=base))
tool = types.Tool(function_declarations=[types.FunctionDeclaration(
    name="add", parameters_json_schema={"type": "object", "properties": {
        "a": {"type": "integer"}, "b": {"type": "integer"}}})])
config = types.GenerateContentConfig(tools=[tool])

async def main():
    contents = [types.Content(role="user", parts=[types.Part(text=task)])]
    while True:
        answer = await client.aio.models.generate_content(
            model="gemini-2.5-flash", contents=contents, config=config)
        calls = answer.function_calls
        if not calls:
            return answer.text
        contents.append(answer.candidates[0].content)
        contents.append(types.Content(role="user", parts=[types.Part.from_function_response(
            name=c.name, response={"result": c.args["a"] + c.args["b"]}) for c in calls]))

answer = asyncio.run(main())
echo = "".join(c.text for c in client.models.generate_content_stream(
    model="gemini-2.5-flash", contents="echo and so on"))
print(answer, echo)
"""


@pytest.mark.slow
def test_an_unmodified_script_under_tracetape_run(tmp_path: Path, gemini: FakeGemini) -> None:
    """``tracetape run`` with the default hook tapes an unmodified google-genai script (the
    async client over aiohttp, the sync client's stream over httpx2): it records, replays with
    the server stopped, and a one-word change exits 3."""
    (tmp_path / "agent.py").write_text(SCRIPT)
    record_replay_miss(
        tmp_path,
        gemini,
        lambda task: ["agent.py", gemini.base_url, task],
        f"{ANSWER} and so on\n",
        env={"GEMINI_API_KEY": KEY},
    )
    records = read_cassette(tmp_path / "run.jsonl").records
    assert [(r.api, r.step) for r in records] == [
        ("gemini.generate_content", s) for s in (1, 2, 3, 4, 1)
    ]
    assert KEY not in (tmp_path / "run.jsonl").read_text()


@pytest.mark.parametrize(
    ("out", "usage"),
    [
        pytest.param(
            {"body": {"usageMetadata": {"promptTokenCount": 9, "candidatesTokenCount": 3,
                                        "thoughtsTokenCount": 5, "cachedContentTokenCount": 4}}},
            Usage(9, 8, 4),
            id="thoughts-and-cache",
        ),
        pytest.param(
            {"body": {"usageMetadata": {"promptTokenCount": 9, "toolUsePromptTokenCount": 2,
                                        "candidatesTokenCount": 1}}},
            Usage(11, 1, None),
            id="tool-use-prompt",
        ),
        pytest.param(
            {"events": [
                {"data": {"usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 1}}},
                {"data": {"candidates": []}},
                {"data": {"usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 7}}},
            ]},
            Usage(5, 7, None),
            id="stream-last-wins",
        ),
        pytest.param({"body": {"candidates": []}}, None, id="none"),
    ],
)  # fmt: skip
def test_usage_is_read_from_usage_metadata(out: dict[str, Any], usage: Usage | None) -> None:
    """``usageMetadata`` gives the counts (thoughts are output, tool-use prompts input);
    an answer without it reports none."""
    assert provider("gemini").usage(out) == usage


def test_function_calls_are_the_answers_asks() -> None:
    """Every ``functionCall`` part of every candidate is asked for, whole or streamed."""
    call = {"functionCall": {"name": "add", "args": {"a": 1}}, "thoughtSignature": "c2ln"}
    answer = {"candidates": [{"content": {"role": "model", "parts": [{"text": "x"}, call]}}]}
    events = [{"data": {"candidates": [{"content": {"parts": [{"text": "x"}]}}]}}, {"data": answer}]
    gemini = provider("gemini")
    assert (
        gemini.asks({"body": answer}) == gemini.asks({"events": events}) == [Ask("add", {"a": 1})]
    )


@pytest.mark.parametrize(
    ("path", "api", "fields"),
    [
        pytest.param("/v1beta/models/gemini-2.5-flash:generateContent", "gemini.generate_content",
                     {"model": "gemini-2.5-flash", "method": "generateContent"}, id="gemini-api"),
        pytest.param("/v1/models/gemini-2.5-flash:streamGenerateContent", "gemini.generate_content",
                     {"model": "gemini-2.5-flash", "method": "streamGenerateContent"}, id="stream"),
        pytest.param("/v1beta/tunedModels/my-model:generateContent", "gemini.generate_content",
                     {"model": "tunedModels/my-model", "method": "generateContent"}, id="tuned"),
        pytest.param("/v1beta1/projects/p/locations/us-central1/publishers/google/models/"
                     "gemini-2.5-pro:generateContent", "gemini.generate_content",
                     {"model": "gemini-2.5-pro", "method": "generateContent"}, id="vertex"),
        pytest.param("/v1/projects/p/locations/l/endpoints/123:streamGenerateContent",
                     "gemini.generate_content",
                     {"model": "endpoints/123", "method": "streamGenerateContent"}, id="endpoint"),
        pytest.param("/v1beta/models/gemini-2.5-flash:countTokens", "gemini.count_tokens",
                     {"model": "gemini-2.5-flash", "method": "countTokens"}, id="count-tokens"),
        pytest.param("/v1beta/models/text-embedding-004:batchEmbedContents", "gemini.embed_content",
                     {"model": "text-embedding-004", "method": "batchEmbedContents"}, id="embed"),
    ],
)  # fmt: skip
def test_routes_name_the_model_and_method(path: str, api: str, fields: dict[str, str]) -> None:
    """The model and the method in the path are recognised and become keyed params."""
    found = match_route("POST", "generativelanguage.googleapis.com", path)
    assert found is not None and (found.api, found.fields) == (api, fields)


@pytest.mark.parametrize(
    ("event", "last"),
    [
        pytest.param({"data": {"candidates": [{"finishReason": "STOP"}]}}, True, id="finished"),
        pytest.param({"data": {"candidates": [{"index": 0}]}}, False, id="more-to-come"),
        pytest.param({"data": {"promptFeedback": {"blockReason": "SAFETY"}}}, True, id="blocked"),
        pytest.param({"data": {"error": {"code": 500}}}, True, id="error"),
    ],
)
def test_a_stream_ends_with_its_finished_candidates(event: dict[str, Any], last: bool) -> None:
    """A Gemini stream has no ``[DONE]``: its last event is the one whose candidates finished."""
    assert provider("gemini").terminal(event) is last


def test_the_answer_text_is_its_text_parts_not_its_thoughts() -> None:
    parts = [{"text": "thinking", "thought": True}, {"text": "Sunny"},
             {"functionCall": {"name": "add", "args": {}}}]  # fmt: skip
    answer = {"candidates": [{"content": {"role": "model", "parts": parts}}]}
    events = [{"data": {"candidates": [{"content": {"parts": [{"text": "Sun"}]}}]}},
              {"data": {"candidates": [{"content": {"parts": [{"text": "ny"}]}}]}}]  # fmt: skip
    gemini = provider("gemini")
    assert gemini.text({"body": answer}) == "Sunny"
    assert gemini.text({"events": events}) == "Sunny"
    assert gemini.text({"body": {"candidates": []}}) is None
