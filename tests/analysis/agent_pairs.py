"""Pairs of runs of one small openai-SDK agent, recorded through ``tracetape run``, each pair
differing by one known cause (or two), for the tests of a diff's origin.

The agent reads an environment value (``tracetape.env``), asks the model (``gpt-4o-mini``, a
scripted fake on 127.0.0.1) what to pack, runs the ``get_weather`` tool it asks for (a
``@tracetape.tool``), and prints the model's final answer: calls #1 env, #2 model (step 1),
#3 tool (step 1), #4 model (step 2). Every variant is an environment variable of the agent,
or the fake model's ``mode``:

* ``AGENT_WEATHER``: the tool's temperature (cause ``tool``);
* ``AGENT_REGION``: the environment value read (``env``);
* ``AGENT_TASK``, ``AGENT_SYSTEM``, ``AGENT_TEMPERATURE``: the user message, the system
  instructions, the first request's temperature (``input``, ``prompt``, ``config``);
* ``AGENT_LATER_TEMPERATURE``: the second request's temperature (an independent ``config``);
* ``AGENT_UPPER``: the agent passes the city upper-cased to the tool (``code``);
* ``AGENT_CRASH``: the agent raises before running the tool (``ending``: failed);
* mode ``impatient``: the model answers the first request at once (``model``); mode
  ``fresh-ids``: every answer and tool call gets a new id, as a real provider gives them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

TRACETAPE = str(Path(sys.executable).with_name("tracetape"))

AGENT = """
import json, os
import openai
import tracetape

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}}}}]


@tracetape.tool
def get_weather(city):
    return {"city": city, "temp_c": int(os.environ.get("AGENT_WEATHER", "9"))}


client = openai.OpenAI(base_url=os.environ["AGENT_BASE_URL"], api_key="sk-test", max_retries=0)
region = tracetape.env("AGENT_REGION")
system = os.environ.get("AGENT_SYSTEM", "You are a helpful travel assistant.")
task = os.environ.get("AGENT_TASK", "What should I pack for Paris?")
messages = [{"role": "system", "content": system},
            {"role": "user", "content": f"{task} (region {region})"}]
for step in range(1, 6):
    name = "AGENT_TEMPERATURE" if step == 1 else "AGENT_LATER_TEMPERATURE"
    reply = client.chat.completions.create(
        model="gpt-4o-mini", messages=messages, tools=TOOLS,
        temperature=float(os.environ.get(name, "0")))
    message = reply.choices[0].message
    if not message.tool_calls:
        print(message.content)
        break
    messages.append(message.model_dump(exclude_none=True))
    for call in message.tool_calls:
        args = json.loads(call.function.arguments)
        if os.environ.get("AGENT_UPPER"):
            args["city"] = args["city"].upper()
        if os.environ.get("AGENT_CRASH"):
            raise RuntimeError("the weather service is down")
        result = get_weather(**args)
        messages.append({"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)})
"""


def _answer(body: dict[str, Any], mode: str) -> dict[str, Any]:
    """The scripted model: ask for the weather, then answer from the tool's result (mode
    ``impatient``: answer at once)."""
    messages = body["messages"]
    results = [json.loads(m["content"]) for m in messages if m.get("role") == "tool"]
    usage = {"prompt_tokens": len(json.dumps(messages)) // 4, "completion_tokens": 12}
    if results:
        temp = results[-1]["temp_c"]
        text = f"Pack a {'light jacket' if temp < 15 else 'T-shirt'}: {temp}°C in Paris."
        message: dict[str, Any] = {"role": "assistant", "content": text}
    elif mode == "impatient":
        message = {"role": "assistant", "content": "Pack a light jacket, it is spring."}
    else:
        call = {
            "id": f"call_{uuid.uuid4().hex[:12]}" if mode == "fresh-ids" else "call_1",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
        }
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
    finish = "tool_calls" if message.get("tool_calls") else "stop"
    usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}" if mode == "fresh-ids" else "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": body["model"],
        "choices": [{"index": 0, "finish_reason": finish, "message": message}],
        "usage": usage,
    }


class _Model(BaseHTTPRequestHandler):
    mode = "normal"

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        mode = self.path.split("/")[1]  # /<mode>/v1/chat/completions
        data = json.dumps(_answer(body, mode)).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def scripted_model() -> Iterator[str]:
    """The fake model's address: ``http://127.0.0.1:PORT``, a mode a path (``/normal/v1``)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Model)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def record(
    folder: Path, name: str, base: str, *, mode: str = "normal", **env: str
) -> subprocess.Popen[str]:
    """Start recording the agent into ``folder/NAME.jsonl`` through ``tracetape run`` (wait
    on the process returned), its variant given as ``AGENT_*`` values."""
    script = folder / "agent.py"
    if not script.exists():
        script.write_text(AGENT)
    full = {**os.environ, "AGENT_REGION": "eu", "AGENT_BASE_URL": f"{base}/{mode}/v1"}
    full.pop("PYTHONPATH", None)
    full.update({f"AGENT_{k.upper()}": v for k, v in env.items()})
    return subprocess.Popen(
        [TRACETAPE, "run", "--tape", f"{name}.jsonl", "--mode", "record", "--",
         sys.executable, str(script)],
        cwd=folder,
        env=full,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip


# Every variant the tests diff against the baseline: name -> (mode, AGENT_* values).
VARIANTS: dict[str, tuple[str, dict[str, str]]] = {
    "base": ("normal", {}),
    "model": ("impatient", {}),
    "tool": ("normal", {"weather": "21"}),
    "env": ("normal", {"region": "us"}),
    "input": ("normal", {"task": "What should I pack for Rome?"}),
    "prompt": ("normal", {"system": "You are a terse travel assistant."}),
    "config": ("normal", {"temperature": "0.7"}),
    "code": ("normal", {"upper": "1"}),
    "ending": ("normal", {"crash": "1"}),
    "tool+later-config": ("normal", {"weather": "21", "later_temperature": "0.5"}),
    # as a real provider answers: new ids for every answer and tool call, nothing else changed
    "ids": ("fresh-ids", {}),
    "ids+tool": ("fresh-ids", {"weather": "21"}),
}


def record_all(folder: Path) -> dict[str, Path]:
    """Record every variant at once (each in its own process); the cassettes by name."""
    with scripted_model() as base:
        started = {
            name: record(folder, name, base, mode=mode, **env)
            for name, (mode, env) in VARIANTS.items()
        }
        for name, proc in started.items():
            out, err = proc.communicate(timeout=120)
            expected = 1 if name == "ending" else 0
            assert proc.returncode == expected, f"{name}: {proc.returncode}\n{out}\n{err}"
    return {name: folder / f"{name}.jsonl" for name in VARIANTS}
