"""OpenAI-compatible servers (vLLM, LM Studio, OpenRouter...) through the ``openai`` SDK with
``base_url`` pointing at them: recognised by path under any prefix and on any host, as
``openai.*``, recorded and replayed like OpenAI itself. The server is
``tests/integrations/fakeserver.py``'s, which answers ``/chat/completions`` under any prefix
(its usage: one input token a message, one output token)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import openai
import pytest
from fakeserver import FakeServer

from tracetape.integrations.providers import match_route

from .agent_checks import chat_agent, check_agent, check_miss

KEY = "sk-or-v1-0123456789abcdef0123456789abcdef0123456789abcdef"
# what a stream reports its usage with, on the servers that do (vLLM, OpenRouter)
OPTIONS: dict[str, Any] = {"stream_options": {"include_usage": True}}


def _agent(base: str) -> Any:
    def make(aio: bool) -> Any:
        return (openai.AsyncOpenAI if aio else openai.OpenAI)(base_url=base, api_key=KEY)

    return chat_agent(make, "meta-llama/llama-3.3-70b-instruct", **OPTIONS)


@pytest.mark.parametrize(
    ("prefix", "aio", "stream"),
    [
        pytest.param("/v1", False, False, id="vllm-sync-json"),
        pytest.param("/v1", True, True, id="lmstudio-async-stream"),
        pytest.param("/api/v1", False, True, id="openrouter-sync-stream"),
        pytest.param("/api/v1", True, False, id="openrouter-async-json"),
    ],
)
def test_agent_records_and_replays_offline(
    tmp_path: Path, server: FakeServer, prefix: str, aio: bool, stream: bool
) -> None:
    """A tool loop against a server under ``prefix`` replays offline, as
    ``openai.chat.completions``: steps 1..4, tools at their asking step, usage, no key."""
    agent = _agent(server.base_url + prefix)
    check_agent(
        tmp_path / "run.jsonl",
        server,
        agent,
        aio=aio,
        stream=stream,
        api="openai.chat.completions",
        key=KEY,
        usage=lambda messages: (messages, 1),
    )


def test_one_word_edit_is_a_replay_miss(tmp_path: Path, server: FakeServer) -> None:
    """Changing one word of the task misses at step 1, naming the message and both words."""
    agent = _agent(server.base_url + "/api/v1")
    path = tmp_path / "run.jsonl"
    check_miss(path, server, agent, "messages[0].content", aio=False, stream=True)


@pytest.mark.parametrize(
    ("host", "path", "api"),
    [
        ("openrouter.ai", "/api/v1/chat/completions", "openai.chat.completions"),
        ("localhost", "/v1/chat/completions", "openai.chat.completions"),
        ("vllm.internal", "/v1/completions", "openai.completions"),
        ("localhost", "/v1/embeddings", "openai.embeddings"),
        ("myresource.openai.azure.com", "/openai/deployments/d/chat/completions",
         "openai.chat.completions"),
    ],
)  # fmt: skip
def test_any_host_and_prefix_is_openai(host: str, path: str, api: str) -> None:
    """The OpenAI paths are recognised on any host, behind any prefix."""
    found = match_route("POST", host, path)
    assert found is not None and found.api == api
