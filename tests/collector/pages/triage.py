"""Two runs of a CI-triage agent as a debugging engineer meets them, for the pages' tests: a
6-step agent with a 3.2 KB system prompt and five tools, recorded as the SDK hooks record
an OpenAI chat call; the second run reads another file at step 3 and ends with another
answer whose change sits deep in a long text. And a seed-format pair (tool lines with
``tokens`` and ``ts``, no model)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tracetape import Tape

SYSTEM = (
    "You are a CI triage agent. For each failing job you find the failing test, read its "
    "log, locate the code under test and say in a short report what broke and why.\n"
) + "".join(
    f"Rule {i}: keep the report factual, quote the failing assertion, name the file and "
    f"line, and never guess a cause the log does not show ({i}).\n"
    for i in range(1, 24)
)
TOOLS = ["list_failures", "read_log", "read_file", "search_code", "git_blame"]
PYTEST_LOG = (
    "============================= test session starts ==============================\n"
    "collected 214 items\n\n"
    "tests/test_csv.py ........F.....                                         [  7%]\n"
    "tests/test_export.py ..........                                          [ 12%]\n\n"
    "=================================== FAILURES ===================================\n"
    "________________________ test_last_row_is_kept ________________________________\n"
    "    def test_last_row_is_kept():\n"
    ">       assert len(rows) == 3\n"
    "E       assert 2 == 3\n"
)


def _answer(variant: str) -> str:
    lines = [f"Report line {i}: the export job ran its 214 tests as usual." for i in range(60)]
    lines[47] = (
        "Cause: csv_parser.py drops the last row when the file has no trailing newline."
        if variant == "a"
        else "Cause: dashboard.py filters the last row out before the export is written."
    )
    return "\n".join(lines)


def record_triage(path: Path, variant: str) -> Path:
    """One run of the triage agent (``variant`` "a" or "b") recorded into ``path``."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Job 412 failed: triage it."},
    ]
    plan = [
        ("list_failures", {"job": 412}, "tests/test_csv.py::test_last_row_is_kept"),
        ("read_log", {"job": 412}, PYTEST_LOG),
        ("read_file", {"path": "csv_parser.py" if variant == "a" else "dashboard.py"},
         "def parse(text):\n    rows = text.split('\\n')\n    return rows[:-1]\n"),
        ("search_code", {"q": "rows[:-1]"}, "csv_parser.py:3"),
        ("git_blame", {"path": "csv_parser.py", "line": 3}, "a1b2c3 (dev 2026-11-30) rows"),
    ]  # fmt: skip
    with Tape(path, mode="record", harness_sha="triage") as tape:
        for step, (tool, args, result) in enumerate(plan, 1):
            call_id = f"call_{variant}{step}"
            text = f"Step {step}: I will call {tool}."
            _model(tape, messages, step, text, [(call_id, tool, args)], 900 + step * 40)
            tape.call(
                "tool",
                {"name": tool, "args": args, "step": step},
                lambda result=result: result,
                effect="read",
            )
            messages.append({"role": "tool", "tool_call_id": call_id, "content": result})
        _model(tape, messages, 6, _answer(variant), [], 1400 + (variant == "b") * 530)
    return path


def _model(  # noqa: PLR0917 - one model call of the script
    tape: Tape,
    messages: list[dict[str, Any]],
    step: int,
    text: str,
    calls: list[tuple[str, str, dict[str, Any]]],
    ms: float,
) -> None:
    payload = {
        "messages": list(messages),
        "tools": [{"type": "function", "function": {"name": t}} for t in TOOLS],
        "params": {"model": "gpt-4o-mini"},
        "step": step,
    }
    asked = [
        {"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
        for i, n, a in calls
    ]
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if asked:
        message["tool_calls"] = asked
    usage = {"input": 1200 + 150 * step, "output": 40 + len(text) // 4}
    said = {"prompt_tokens": usage["input"], "completion_tokens": usage["output"]}
    out = {"status": 200, "body": {"choices": [{"message": message}], "usage": said}}
    decision = tape.prepare("llm", payload)
    tape.record(decision, out, ms=ms, usage=usage, api="openai.chat.completions")
    messages.append(message)


def seed_pair(folder: Path) -> tuple[Path, Path]:
    """Two seed-format runs (tool lines with ``tokens`` and ``ts``; no model, no price):
    the second reads another file at step 2."""
    paths = []
    for run, other in (("seed-a", "README.md"), ("seed-b", "CHANGELOG.md")):
        lines = [
            {"run_id": run, "step": 1, "tool": "list_dir", "args": {"path": "."},
             "output_sha": "d1", "tokens": 812, "ts": "2026-08-31T09:12:04Z", "ms": 40},
            {"run_id": run, "step": 2, "tool": "read_file", "args": {"path": other},
             "output_sha": f"o-{other}", "tokens": 4300, "ts": "2026-08-31T09:12:09Z", "ms": 55},
            {"run_id": run, "step": 3, "tool": "write_file", "args": {"path": "NOTES.md"},
             "output_sha": "w1", "tokens": 2100, "ts": "2026-08-31T09:12:15Z",
             "effect": "write", "ms": 30},
        ]  # fmt: skip
        path = folder / f"{run}.jsonl"
        path.write_text("".join(json.dumps(line) + "\n" for line in lines))
        paths.append(path)
    return paths[0], paths[1]
