"""The SDK-level fast path of the Stainless SDKs (openai, anthropic): a call keyed before the SDK
builds its request, a replay answered in the SDK's own types without a socket, and warmed up and
rehearsed as replay starts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx2
import pytest
from fakeserver import FakeServer
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from sdk_clients import SYNC, TASK, openai_client, run_agent

import tracetape
from tracetape import ReplayMiss, Tape

pytestmark = pytest.mark.usefixtures("no_leftover_patch")


def test_sdk_replay_miss_opens_no_socket(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An SDK-level replay miss is raised before the SDK builds a request or opens a socket."""
    path = tmp_path / "run.jsonl"
    Tape(path, mode="record").close()

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the network was touched")

    monkeypatch.setattr(httpx2.HTTPTransport, "handle_request", refuse)
    with pytest.raises(ReplayMiss), Tape(path, mode="replay") as tape, tracetape.patch_sdks(tape):
        openai_client("http://127.0.0.1:9").chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}]
        )


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
        live = calls(openai_client(server.base_url))
    server.stop()
    with Tape(path, mode="replay") as tape, tracetape.patch_sdks(tape):
        replayed = calls(openai_client(server.base_url))
    assert isinstance(replayed[0], ChatCompletion)
    assert all(isinstance(c, ChatCompletionChunk) for c in replayed[1])
    assert [c.model_dump() for c in replayed[1]] == [c.model_dump() for c in live[1]]
    assert replayed[0].model_dump() == live[0].model_dump()
    assert replayed[2].model_dump() == live[2].model_dump()
    assert replayed[3] == 200
    assert replayed[4].choices[0].message.tool_calls == live[4].choices[0].message.tool_calls


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


@pytest.mark.slow
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
    run_agent(path, "record", sdk, "sdk", stream=False, base=server.base_url)

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
    expected = run_agent(path, "record", sdk, "sdk", stream=False, base=server.base_url)
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


def _streamed(sdk: str, client: Any) -> Any:
    messages = [{"role": "user", "content": "sum 1 to 2"}]
    if sdk == "openai":
        return client.chat.completions.create(model="m", messages=messages, stream=True)
    if sdk == "responses":
        return client.responses.create(model="m", input="sum 1 to 2", stream=True)
    return client.messages.create(model="m", max_tokens=5, messages=messages, stream=True)


@pytest.mark.parametrize("aio", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("sdk", ["openai", "responses", "anthropic"])
def test_a_recorded_stream_replays_as_the_sdks_own_stream_without_a_request(
    tmp_path: Path, server: FakeServer, sdk: str, aio: bool
) -> None:
    """A streamed call replays as the SDK's ``Stream`` (``AsyncStream``) of its event type,
    its events those the recorded run read, and no response reaches the SDK's HTTP client
    (its hooks see none: the SDK built no request, which is what cost a streamed replay
    milliseconds per call)."""
    import asyncio

    import anthropic
    import openai
    from sdk_clients import anthropic_client

    package = anthropic if sdk == "anthropic" else openai
    make = anthropic_client if sdk == "anthropic" else openai_client
    path = tmp_path / "run.jsonl"

    def events(seen: list[Any]) -> tuple[Any, list[dict[str, Any]]]:
        hooks = {"response": [seen.append]}
        if aio:

            async def hook(request: Any) -> None:
                seen.append(request)

            async def read() -> tuple[Any, list[dict[str, Any]]]:
                http = package.DefaultAsyncHttpxClient(event_hooks={"response": [hook]})
                client = make(server.base_url, aio=True, http_client=http)
                stream = await _streamed(sdk, client)
                return stream, [e.model_dump() async for e in stream]

            return asyncio.run(read())
        client = make(server.base_url, http_client=package.DefaultHttpxClient(event_hooks=hooks))
        stream = _streamed(sdk, client)
        return stream, [e.model_dump() for e in stream]

    with Tape(path, mode="record") as tape, tracetape.patch_sdks(tape):
        _, live = events([])
    server.stop()
    responses: list[Any] = []
    with Tape(path, mode="replay") as tape, tracetape.patch_sdks(tape):
        stream, replayed = events(responses)
    assert type(stream) is (package.AsyncStream if aio else package.Stream)
    assert replayed == live and len(live) > 1
    assert responses == []
