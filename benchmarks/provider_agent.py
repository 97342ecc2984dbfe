"""The agent program ``bench_providers.py`` runs in fresh processes: one tool-using conversation
of ``BENCH_STEPS`` model calls through the official SDK of ``BENCH_PROVIDER``, against the
server at ``BENCH_URL`` (a fake of ``tests/integrations/providers``; under ``tracetape run
--mode replay`` the server is stopped and the tape answers).

The conversation is the same for every provider: the task "sum 1 to ``BENCH_STEPS - 1``",
which the fakes answer with one ``add`` tool call per number and then the total. After each
answer the program appends the model's turn, the tool's result and a ``BENCH_SIZE``-character
observation (a user message, or a text part beside the tool result where the provider puts
results in a user turn), so the conversation grows every step, as an agent's does.

It times each SDK call (``create``, ``generate_content``, ``converse``, ``chat``...) with
``time.perf_counter`` around the call alone, and writes the times and each answer in short
(``add(a=0, b=1)`` or the text) as JSON to ``BENCH_OUT``. The program is unchanged between
record and replay: the tape comes from ``tracetape run``.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

KEY = "bench-not-a-key-0123456789abcdefghijklmnop"
ADD_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    "required": ["a", "b"],
}
# the ``add`` tool as a function tool: the shape openai, groq, mistral, cohere and ollama take
FUNCTION_TOOLS = [
    {
        "type": "function",
        "function": {"name": "add", "description": "Add two integers.", "parameters": ADD_SCHEMA},
    }
]

# An agent: (base URL, steps, observation size) -> (answers in short, seconds per call).
Agent = Callable[[str, int, int], tuple[list[str], list[float]]]


def task(steps: int) -> str:
    """The task: ``steps - 1`` tool calls, then the answer."""
    return f"sum 1 to {steps - 1}, carefully"


def observation(i: int, size: int) -> str:
    return (f"observation {i}: " + "log line " * (size // 9 + 1))[:size]


def asked(a: Any, b: Any) -> str:
    return f"add(a={int(a)}, b={int(b)})"


def chat_loop(create: Callable[..., Any], model: str, steps: int, size: int) -> Any:
    """The loop of an OpenAI-style chat SDK (openai, groq): ``create`` is the bound method."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": task(steps)}]
    answers, times = [], []
    for i in range(steps):
        start = time.perf_counter()
        reply = create(model=model, messages=messages, tools=FUNCTION_TOOLS)
        times.append(time.perf_counter() - start)
        message = reply.choices[0].message
        calls = message.tool_calls or []
        if not calls:
            answers.append(str(message.content))
        turn = message.model_dump(include={"role", "content", "tool_calls"}, exclude_none=True)
        messages.append(turn)
        for call in calls:
            args = json.loads(call.function.arguments)
            answers.append(asked(args["a"], args["b"]))
            result = str(args["a"] + args["b"])
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
        messages.append({"role": "user", "content": observation(i, size)})
    return answers, times


def openai_agent(url: str, steps: int, size: int) -> Any:
    import openai

    client = openai.OpenAI(base_url=url + "/v1", api_key=KEY, max_retries=0)
    return chat_loop(client.chat.completions.create, "gpt-4o-mini", steps, size)


def groq_agent(url: str, steps: int, size: int) -> Any:
    import groq

    client = groq.Groq(base_url=url, api_key=KEY, max_retries=0)
    return chat_loop(client.chat.completions.create, "llama-3.3-70b-versatile", steps, size)


def anthropic_agent(url: str, steps: int, size: int) -> Any:
    import anthropic

    client: Any = anthropic.Anthropic(base_url=url, api_key=KEY, max_retries=0)
    tools = [{"name": "add", "description": "Add two integers.", "input_schema": ADD_SCHEMA}]
    messages: list[dict[str, Any]] = [{"role": "user", "content": task(steps)}]
    answers, times = [], []
    for i in range(steps):
        start = time.perf_counter()
        reply = client.messages.create(
            model="claude-sonnet-5", max_tokens=256, messages=messages, tools=tools
        )
        times.append(time.perf_counter() - start)
        messages.append({"role": "assistant", "content": [b.model_dump() for b in reply.content]})
        results: list[dict[str, Any]] = []
        for block in reply.content:
            if block.type == "tool_use":
                args: Any = block.input
                answers.append(asked(args["a"], args["b"]))
                result = str(args["a"] + args["b"])
                results.append({"type": "tool_result", "tool_use_id": block.id, "content": result})
            elif block.type == "text":
                answers.append(block.text)
        results.append({"type": "text", "text": observation(i, size)})
        messages.append({"role": "user", "content": results})
    return answers, times


def gemini_agent(url: str, steps: int, size: int) -> Any:
    from google import genai
    from google.genai import types

    client: Any = genai.Client(api_key=KEY, http_options=types.HttpOptions(base_url=url))
    add = types.FunctionDeclaration(
        name="add", description="Add two integers.", parameters_json_schema=ADD_SCHEMA
    )
    config = types.GenerateContentConfig(tools=[types.Tool(function_declarations=[add])])
    contents: list[Any] = [types.Content(role="user", parts=[types.Part(text=task(steps))])]
    answers, times = [], []
    for i in range(steps):
        start = time.perf_counter()
        reply = client.models.generate_content(
            model="gemini-2.5-flash", contents=contents, config=config
        )
        times.append(time.perf_counter() - start)
        calls = reply.function_calls or []
        if not calls:
            answers.append(str(reply.text))
        contents.append(reply.candidates[0].content)  # its thought signatures with it
        parts = []
        for call in calls:
            args: Any = call.args
            answers.append(asked(args["a"], args["b"]))
            total = int(args["a"]) + int(args["b"])
            parts.append(types.Part.from_function_response(name="add", response={"result": total}))
        parts.append(types.Part(text=observation(i, size)))
        contents.append(types.Content(role="user", parts=parts))
    return answers, times


def bedrock_agent(url: str, steps: int, size: int) -> Any:
    import boto3

    client: Any = boto3.client(
        "bedrock-runtime",
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id="AKIABENCH0NOTAKEY000",
        aws_secret_access_key="bench/NotASecretAccessKey0123456789abcdef",
    )
    tools = {
        "tools": [
            {
                "toolSpec": {
                    "name": "add",
                    "description": "Add two integers.",
                    "inputSchema": {"json": ADD_SCHEMA},
                }
            }
        ]
    }
    messages: list[dict[str, Any]] = [{"role": "user", "content": [{"text": task(steps)}]}]
    answers, times = [], []
    for i in range(steps):
        start = time.perf_counter()
        reply = client.converse(
            modelId="anthropic.claude-sonnet-4-5-v1:0", messages=messages, toolConfig=tools
        )
        times.append(time.perf_counter() - start)
        message = reply["output"]["message"]
        messages.append(message)
        content: list[dict[str, Any]] = []
        for block in message["content"]:
            if "toolUse" in block:
                use = block["toolUse"]
                answers.append(asked(use["input"]["a"], use["input"]["b"]))
                result = str(use["input"]["a"] + use["input"]["b"])
                content.append(
                    {"toolResult": {"toolUseId": use["toolUseId"], "content": [{"text": result}]}}
                )
            elif "text" in block:
                answers.append(block["text"])
        content.append({"text": observation(i, size)})
        messages.append({"role": "user", "content": content})
    return answers, times


def mistral_agent(url: str, steps: int, size: int) -> Any:
    import httpx2
    from mistralai.client import Mistral

    # The client talks to api.mistral.ai, as in production (the host names the provider: on
    # another host the same path is OpenAI's); its transport sends the requests to the fake.
    # A replay answers at ``Client.send``, above the transport, and never reaches it.
    target = httpx2.URL(url)

    class ToFake(httpx2.HTTPTransport):
        def handle_request(self, request: Any) -> Any:
            request.url = request.url.copy_with(
                scheme=target.scheme, host=target.host, port=target.port
            )
            return super().handle_request(request)

    client: Any = Mistral(api_key=KEY, client=httpx2.Client(transport=ToFake()))
    messages: list[dict[str, Any]] = [{"role": "user", "content": task(steps)}]
    answers, times = [], []
    for i in range(steps):
        start = time.perf_counter()
        reply = client.chat.complete(
            model="mistral-medium-latest", messages=messages, tools=FUNCTION_TOOLS
        )
        times.append(time.perf_counter() - start)
        message = reply.choices[0].message
        calls = message.tool_calls or []
        if not calls:
            answers.append(str(message.content))
        tool_calls = [
            {"id": c.id, "type": "function", "function": c.function.model_dump()} for c in calls
        ]
        messages.append({"role": "assistant", "content": message.content, "tool_calls": tool_calls})
        for call in calls:
            raw = call.function.arguments
            args = raw if isinstance(raw, dict) else json.loads(raw)
            answers.append(asked(args["a"], args["b"]))
            result = str(args["a"] + args["b"])
            messages.append(
                {"role": "tool", "tool_call_id": call.id, "name": "add", "content": result}
            )
        messages.append({"role": "user", "content": observation(i, size)})
    return answers, times


def cohere_agent(url: str, steps: int, size: int) -> Any:
    import cohere

    client: Any = cohere.ClientV2(api_key=KEY, base_url=url)
    messages: list[Any] = [{"role": "user", "content": task(steps)}]
    answers, times = [], []
    for i in range(steps):
        start = time.perf_counter()
        reply = client.chat(model="command-a-03-2025", messages=messages, tools=FUNCTION_TOOLS)
        times.append(time.perf_counter() - start)
        message = reply.message
        calls = message.tool_calls or []
        if not calls:
            text = "".join(c.text for c in message.content or ())
            answers.append(text)
            messages.append({"role": "assistant", "content": text})
        else:
            tool_calls = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.function.name, "arguments": c.function.arguments},
                }
                for c in calls
            ]
            plan = message.tool_plan
            messages.append({"role": "assistant", "tool_plan": plan, "tool_calls": tool_calls})
        for call in calls:
            args = json.loads(call.function.arguments)
            answers.append(asked(args["a"], args["b"]))
            result = str(args["a"] + args["b"])
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
        messages.append({"role": "user", "content": observation(i, size)})
    return answers, times


def ollama_agent(url: str, steps: int, size: int) -> Any:
    import ollama

    client: Any = ollama.Client(host=url)
    messages: list[dict[str, Any]] = [{"role": "user", "content": task(steps)}]
    answers, times = [], []
    for i in range(steps):
        start = time.perf_counter()
        reply = client.chat(model="llama3.2", messages=messages, tools=FUNCTION_TOOLS)
        times.append(time.perf_counter() - start)
        message = reply.message
        calls = message.tool_calls or []
        if not calls:
            answers.append(str(message.content))
        tool_calls = [{"function": c.function.model_dump()} for c in calls]
        messages.append({"role": "assistant", "content": message.content, "tool_calls": tool_calls})
        for call in calls:
            args = call.function.arguments
            answers.append(asked(args["a"], args["b"]))
            messages.append(
                {"role": "tool", "content": str(args["a"] + args["b"]), "tool_name": "add"}
            )
        messages.append({"role": "user", "content": observation(i, size)})
    return answers, times


AGENTS: dict[str, Agent] = {
    "openai": openai_agent,
    "anthropic": anthropic_agent,
    "gemini": gemini_agent,
    "bedrock": bedrock_agent,
    "mistral": mistral_agent,
    "cohere": cohere_agent,
    "ollama": ollama_agent,
    "groq": groq_agent,
}


# the providers replayed by an SDK fast path: the whole call is tracetape's
FAST_PATHS = ("openai", "anthropic", "groq")
# the botocore event handlers tracetape registers on a client (looked up when it is created)
BOTOCORE_HANDLERS = (
    "_before_call",
    "_choose_signer",
    "_before_send",
    "_before_parse",
    "_received",
    "_needs_retry",
    "_after_call",
)


def time_the_tape(provider: str) -> list[float] | None:
    """Time tracetape's own part of each call where ``provider`` is taped at a transport: the
    hooked ``send`` of the httpx and httpx2 clients, or the botocore handlers. The seconds
    accumulate in the list returned; None for a fast-path provider."""
    if provider in FAST_PATHS:
        return None
    spent = [0.0]

    def timer(function: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                spent[0] += time.perf_counter() - start

        return timed

    if provider == "bedrock":
        import botocore.session  # noqa: F401 - tracetape hooks create_client on this import

        from tracetape.integrations import botocore_events

        for name in BOTOCORE_HANDLERS:
            setattr(botocore_events, name, timer(getattr(botocore_events, name)))
    else:
        import httpx  # tracetape patches both clients' send on their import
        import httpx2

        for module in (httpx, httpx2):
            module.Client.send = timer(module.Client.send)
    return spent


def main() -> None:
    steps, size = int(os.environ["BENCH_STEPS"]), int(os.environ["BENCH_SIZE"])
    name = os.environ["BENCH_PROVIDER"]
    spent = time_the_tape(name) if os.environ.get("BENCH_TIME_TAPE") else None
    answers, times = AGENTS[name](os.environ["BENCH_URL"], steps, size)
    result: dict[str, Any] = {"answers": answers, "times": times}
    if spent is not None:
        result["tape_s"] = spent[0]
    Path(os.environ["BENCH_OUT"]).write_text(json.dumps(result))


if __name__ == "__main__":
    main()
