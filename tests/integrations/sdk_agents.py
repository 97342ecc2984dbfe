"""A small tool-using agent loop written against the real openai and anthropic SDKs."""

from __future__ import annotations

import json
from typing import Any

REMINDER = "Reminder: keep adding the numbers carefully."

OPENAI_TOOLS: list[dict[str, Any]] = [
    {"type": "function", "function": {"name": "noop", "parameters": {"type": "object"}}},
    {
        "type": "function",
        "function": {
            "name": "add",
            "parameters": {
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            },
        },
    },
]
ANTHROPIC_TOOLS: list[dict[str, Any]] = [
    {"name": "noop", "input_schema": {"type": "object"}},
    {
        "name": "add",
        "input_schema": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        },
    },
]


def add(a: int, b: int) -> int:
    return a + b


def _openai_stream_result(stream: Any) -> tuple[str | None, list[dict[str, Any]]]:
    text, calls = "", {}
    for chunk in stream:
        for choice in chunk.choices:
            delta = choice.delta
            if delta.content:
                text += delta.content
            for tc in delta.tool_calls or []:
                call = calls.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
                call["id"] = tc.id or call["id"]
                if tc.function is not None:
                    call["name"] = tc.function.name or call["name"]
                    call["arguments"] += tc.function.arguments or ""
    tool_calls = [
        {
            "id": c["id"],
            "type": "function",
            "function": {"name": c["name"], "arguments": c["arguments"]},
        }
        for _, c in sorted(calls.items())
    ]
    return (text or None), tool_calls


def openai_agent(
    client: Any, task: str, *, stream: bool = False, reminder: str = REMINDER, max_steps: int = 30
) -> str:
    """Run the loop with ``client.chat.completions.create``; returns the final answer."""
    messages: list[Any] = [{"role": "user", "content": task}]
    for step in range(1, max_steps + 1):
        if step == 10:
            messages.append({"role": "user", "content": reminder})
        kwargs: dict[str, Any] = {
            "model": "gpt-test",
            "messages": messages,
            "tools": OPENAI_TOOLS,
            "temperature": 0,
        }
        if stream:
            text, tool_calls = _openai_stream_result(
                client.chat.completions.create(**kwargs, stream=True)
            )
            messages.append(
                {
                    "role": "assistant",
                    "content": text,
                    **({"tool_calls": tool_calls} if tool_calls else {}),
                }
            )
        else:
            message = client.chat.completions.create(**kwargs).choices[0].message
            messages.append(message)  # the SDK's own model, as agents often do
            text = message.content
            tool_calls = [tc.model_dump() for tc in message.tool_calls or []]
        if not tool_calls:
            return str(text)
        for call in tool_calls:
            args = json.loads(call["function"]["arguments"])
            messages.append(
                {"role": "tool", "tool_call_id": call["id"], "content": str(add(**args))}
            )
    raise RuntimeError("step budget exhausted")


async def openai_agent_async(
    client: Any, task: str, *, stream: bool = False, reminder: str = REMINDER, max_steps: int = 30
) -> str:
    """The async twin of ``openai_agent`` for ``AsyncOpenAI``."""
    messages: list[Any] = [{"role": "user", "content": task}]
    for step in range(1, max_steps + 1):
        if step == 10:
            messages.append({"role": "user", "content": reminder})
        kwargs: dict[str, Any] = {
            "model": "gpt-test",
            "messages": messages,
            "tools": OPENAI_TOOLS,
            "temperature": 0,
        }
        if stream:
            chunks = [c async for c in await client.chat.completions.create(**kwargs, stream=True)]
            text, tool_calls = _openai_stream_result(chunks)
        else:
            message = (await client.chat.completions.create(**kwargs)).choices[0].message
            text = message.content
            tool_calls = [tc.model_dump() for tc in message.tool_calls or []]
        messages.append(
            {
                "role": "assistant",
                "content": text,
                **({"tool_calls": tool_calls} if tool_calls else {}),
            }
        )
        if not tool_calls:
            return str(text)
        for call in tool_calls:
            args = json.loads(call["function"]["arguments"])
            messages.append(
                {"role": "tool", "tool_call_id": call["id"], "content": str(add(**args))}
            )
    raise RuntimeError("step budget exhausted")


def _anthropic_step(messages: list[Any], content: list[Any]) -> str | None:
    """Append the assistant turn and tool results; returns the final text or None."""
    messages.append({"role": "assistant", "content": content})
    uses = [b for b in content if getattr(b, "type", None) == "tool_use"]
    if not uses:
        return "".join(getattr(b, "text", "") for b in content)
    messages.append(
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": b.id, "content": str(add(**b.input))}
                for b in uses
            ],
        }
    )
    return None


def anthropic_agent(
    client: Any, task: str, *, stream: bool = False, reminder: str = REMINDER, max_steps: int = 30
) -> str:
    """Run the loop with ``client.messages.create`` (or ``.stream``); returns the final answer."""
    messages: list[Any] = [{"role": "user", "content": task}]
    for step in range(1, max_steps + 1):
        if step == 10:
            messages.append({"role": "user", "content": reminder})
        kwargs: dict[str, Any] = {
            "model": "claude-test",
            "max_tokens": 256,
            "messages": messages,
            "tools": ANTHROPIC_TOOLS,
            "system": "You add numbers.",
        }
        if stream:
            with client.messages.stream(**kwargs) as events:
                content = events.get_final_message().content
        else:
            content = client.messages.create(**kwargs).content
        final = _anthropic_step(messages, content)
        if final is not None:
            return final
    raise RuntimeError("step budget exhausted")


async def anthropic_agent_async(
    client: Any, task: str, *, stream: bool = False, reminder: str = REMINDER, max_steps: int = 30
) -> str:
    """The async twin of ``anthropic_agent`` for ``AsyncAnthropic``."""
    messages: list[Any] = [{"role": "user", "content": task}]
    for step in range(1, max_steps + 1):
        if step == 10:
            messages.append({"role": "user", "content": reminder})
        kwargs: dict[str, Any] = {
            "model": "claude-test",
            "max_tokens": 256,
            "messages": messages,
            "tools": ANTHROPIC_TOOLS,
            "system": "You add numbers.",
        }
        if stream:
            async with client.messages.stream(**kwargs) as events:
                content = (await events.get_final_message()).content
        else:
            content = (await client.messages.create(**kwargs)).content
        final = _anthropic_step(messages, content)
        if final is not None:
            return final
    raise RuntimeError("step budget exhausted")
