"""Clients of the real openai and anthropic SDKs for the fake server, and the agent of
``sdk_agents`` run under a tape at either hook level."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from sdk_agents import anthropic_agent, anthropic_agent_async, openai_agent, openai_agent_async

import tracetape
from tracetape import Tape

OPENAI_KEY = "sk-proj-abcdefghijklmnopqrstuvwxyz012345"
ANTHROPIC_KEY = "sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123"
TASK = "sum 1 to 12"
ANSWER = "The total is 78."


def openai_client(base: str, aio: bool = False, **kw: Any) -> Any:
    """An openai client of the fake server at ``base``, which never retries."""
    cls = openai.AsyncOpenAI if aio else openai.OpenAI
    return cls(base_url=base + "/v1", api_key=OPENAI_KEY, max_retries=0, **kw)


def anthropic_client(base: str, aio: bool = False, **kw: Any) -> Any:
    """An anthropic client of the fake server at ``base``, which never retries."""
    cls = anthropic.AsyncAnthropic if aio else anthropic.Anthropic
    return cls(base_url=base, api_key=ANTHROPIC_KEY, max_retries=0, **kw)


SYNC = {"openai": (openai_client, openai_agent), "anthropic": (anthropic_client, anthropic_agent)}
ASYNC = {
    "openai": (openai_client, openai_agent_async),
    "anthropic": (anthropic_client, anthropic_agent_async),
}
CASES = [
    pytest.param(sdk, level, stream, id=f"{sdk}-{level}-{'stream' if stream else 'json'}")
    for sdk in ("openai", "anthropic")
    for level in ("sdk", "http")
    for stream in (False, True)
]


def run_agent(
    path: Path, mode: str, sdk: str, level: str, *, stream: bool, base: str, **kw: Any
) -> str:
    """The agent of ``sdk`` on ``TASK`` under a tape at ``path``, hooked at ``level``."""
    make, agent = SYNC[sdk]
    with Tape(path, mode=mode) as tape:
        if level == "sdk":
            with tracetape.patch_sdks(tape):
                return str(agent(make(base), TASK, stream=stream, **kw))
        client = make(base)  # built before the hook: its requests are taped all the same
        with tracetape.patch_http(tape):
            return str(agent(client, TASK, stream=stream, **kw))
