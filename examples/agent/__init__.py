"""The seed's example agent: a bounded tool loop whose model and tools go through a tape.

Run it as ``python -m examples.agent --task "..." --tape runs/x.jsonl --mode record|replay``.
The model is a bundled deterministic script (no endpoint, no network), so the example works
offline; it still costs "time" (a short sleep per call) to show what replay saves.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tracetape import Tape

# The tracker and repository the tools read; a test points it elsewhere to make the world drift.
DATA = Path(os.environ.get("EXAMPLE_AGENT_DATA") or Path(__file__).parent / "data")
PARAMS = {"model": "scripted-1", "temperature": 0}


class ScriptedModel:
    """A deterministic stand-in for a chat model: search, read, comment, answer.

    ``calls`` counts the requests it served, so a replay can prove it made none.
    """

    def __init__(self, latency_s: float = 0.05) -> None:
        self.latency_s = latency_s
        self.calls = 0

    def chat(self, messages: list[dict[str, Any]], tools: list[str]) -> dict[str, Any]:
        self.calls += 1
        time.sleep(self.latency_s)
        results = [json.loads(m["content"]) for m in messages if m["role"] == "tool"]
        task = messages[0]["content"]
        if not results:
            words = [w for w in re.findall(r"[a-z]+", task.lower()) if len(w) > 4]
            return {
                "content": "Searching the tracker.",
                "tool": "search_issues",
                "args": {"q": " ".join(words[:3])},
            }
        if len(results) == 1:
            hits = results[0]["hits"]
            if not hits:
                return {"content": "Nothing matches that task.", "tool": None, "args": None}
            return {
                "content": f"Reading the file behind #{hits[0]['id']}.",
                "tool": "read_file",
                "args": {"path": hits[0]["file"]},
            }
        if len(results) == 2:
            issue = results[0]["hits"][0]["id"]
            return {
                "content": "Posting the diagnosis.",
                "tool": "post_comment",
                "args": {"issue": issue, "body": "split_rows() drops the last row: rows[:-1]."},
            }
        issue = results[0]["hits"][0]["id"]
        return {
            "content": f"#{issue}: split_rows() returns rows[:-1], dropping the last row.",
            "tool": None,
            "args": None,
        }


def search_issues(q: str) -> dict[str, Any]:
    """Return the tracker issues whose title or body mention every word of ``q``."""
    issues = json.loads((DATA / "issues.json").read_text())
    words = q.lower().split()
    hits = [i for i in issues if any(w in (i["title"] + i["body"]).lower() for w in words)]
    return {"hits": hits[:2]}


def read_file(path: str) -> dict[str, Any]:
    """Return a file of the bundled repository."""
    return {"path": path, "text": (DATA / "repo" / path).read_text()}


def post_comment(issue: int, body: str) -> dict[str, Any]:
    """Would post a comment on the tracker: irreversible, so recording stubs it."""
    raise RuntimeError("the example never posts for real")


TOOLS: dict[str, tuple[Callable[..., Any], str]] = {
    "search_issues": (search_issues, "read"),
    "read_file": (read_file, "read"),
    "post_comment": (post_comment, "irreversible"),
}


def _schema(name: str, description: str, **params: str) -> dict[str, Any]:
    """An OpenAI function-tool schema (what ``tracetape span decide`` sends to a model)."""
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {p: {"type": t} for p, t in params.items()},
                "required": list(params),
            },
        },
    }


SCHEMAS = [
    _schema("post_comment", "Post a comment on a tracker issue.", issue="integer", body="string"),
    _schema("read_file", "Read a file of the repository.", path="string"),
    _schema("search_issues", "Search the tracker's issues.", q="string"),
]


def run(task: str, tape: Tape, model: ScriptedModel, max_steps: int = 12) -> str:
    """The seed's loop: one model decision per step, then the tool it asked for."""
    msgs: list[dict[str, Any]] = [{"role": "user", "content": task}]
    for step in range(1, max_steps + 1):
        decision = tape.call(
            "llm",
            {"messages": msgs, "tools": SCHEMAS, "params": PARAMS, "step": step},
            lambda: model.chat(messages=msgs, tools=sorted(TOOLS)),
        )
        if decision["tool"] is None:
            return str(decision["content"])
        name, args = decision["tool"], decision["args"]
        fn, effect = TOOLS[name]
        result = tape.call(
            "tool",
            {"name": name, "args": args, "step": step},
            lambda: fn(**args),
            effect=effect,
            stub=(lambda: {"posted": False, "dry_run": True, "issue": args["issue"]})
            if effect == "irreversible"
            else None,
        )
        msgs = [
            *msgs,
            {"role": "assistant", "content": decision["content"]},
            {"role": "tool", "name": name, "content": json.dumps(result)},
        ]
    raise RuntimeError("step budget exhausted")
