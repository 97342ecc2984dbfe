"""``Span``: one tool call, its recorded result, and the model decision that asked for it.

A span is the unit span replay works on. Its JSON is the seed's span record, extended::

    {"span_id": "7f3c", "run_id": "r1", "step": 3, "effect": "read",
     "tool_call": {"argv": ["git", "diff", "--stat"], "timeout_s": 30, "cwd": "/repo",
                   "env_digest": "sha256:9a1e..."},
     "tool_result": {"exit_code": 0, "stdout": " 3 files changed", "stderr": ""},
     "model_decision": {"tool_name": "git_diff_stat", "args": {}, "model_id": "gpt-x",
                        "messages": [...], "tools": [...], "params": {...}}}

``tool_call`` holds either an ``argv`` (a command, run live as a subprocess) or the
``name``/``args`` of a Python tool recorded through the tape (run live only through a callable
the user names). ``read_spans`` makes spans of any trace ``formats`` reads that keeps tool
results: the seed's span JSONL as it is; a tracetape cassette, where each ``tool`` record is a
span whose model decision is the run's preceding ``llm`` record (its prompt, tool schema and
reply) and whose ``tool_call.env`` holds the header's environment digests; OTLP/JSON, where
each ``execute_tool`` span is one and its decision the preceding ``chat`` span. The seed's
JSONL trace keeps only an output digest, not the result, so it has no spans.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import orjson

from .._enums import EFFECT_NAMES, EFFECTS, WRITES
from ..errors import SpanError
from ..formats import TraceFormat, detect_format, read_records
from ..formats.cassette import read_cassette
from ..record import Record, call_args

__all__ = ["Span", "emitted_calls", "find_span", "load_span", "read_spans", "span_of_trace"]


@dataclass(frozen=True)
class Span:
    """One tool call of a run, its recorded result and the model decision behind it.

    >>> s = Span.from_dict({"span_id": "7f3c", "tool_call": {"argv": ["ls"]}, "tool_result": 0})
    >>> s.span_id, s.tool, s.argv
    ('7f3c', 'ls', ['ls'])
    """

    span_id: str
    tool: str
    tool_call: dict[str, Any]
    tool_result: Any = None
    model_decision: dict[str, Any] | None = None
    run: str | None = None
    step: int | None = None
    effect: str | None = None
    source: str = ""
    line: int = 0
    position: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def argv(self) -> list[str] | None:
        """The recorded command, when the tool is one (else ``None``: a Python tool)."""
        argv = self.tool_call.get("argv")
        return [str(a) for a in argv] if isinstance(argv, list) and argv else None

    @property
    def args(self) -> Any:
        """The arguments a Python tool was called with (``tool_call.args``)."""
        return self.tool_call.get("args")

    @property
    def exit_code(self) -> int | None:
        """The recorded exit code, when the result holds one."""
        result = self.tool_result
        code = result.get("exit_code") if isinstance(result, dict) else None
        return code if type(code) is int else None

    @property
    def writes(self) -> bool:
        """Whether the span's effect is ``write`` or ``irreversible`` (never run live)."""
        return self.effect in WRITES

    def to_dict(self) -> dict[str, Any]:
        """The span as JSON data, in the seed's span schema (``from_dict`` reads it back)."""
        data: dict[str, Any] = {"span_id": self.span_id, "tool": self.tool}
        if self.run is not None:
            data["run_id"] = self.run
        if self.step is not None:
            data["step"] = self.step
        if self.effect is not None:
            data["effect"] = self.effect
        data["tool_call"] = self.tool_call
        data["tool_result"] = self.tool_result
        if self.model_decision is not None:
            data["model_decision"] = self.model_decision
        data.update(self.extra)
        if self.source:
            data["source"] = f"{self.source}:{self.line}" if self.line else self.source
        return data

    @classmethod
    def from_dict(cls, data: Any, where: str = "the span") -> Span:
        """Read a span from JSON data; raise ``SpanError`` naming ``where`` and the field."""
        if not isinstance(data, dict):
            raise SpanError(f"{where}: a span is a JSON object, found {type(data).__name__}")
        span_id = data.get("span_id")
        if not isinstance(span_id, str | int) or isinstance(span_id, bool):
            raise SpanError(f"{where}: field span_id: missing (a span needs a span_id)")
        call = data.get("tool_call")
        if not isinstance(call, dict):
            raise SpanError(f"{where}: field tool_call: missing, or not an object")
        _check_call(call, where)
        decision = data.get("model_decision")
        if decision is not None and not isinstance(decision, dict):
            raise SpanError(f"{where}: field model_decision: must be an object")
        step, effect = data.get("step"), data.get("effect")
        if step is not None and type(step) is not int:
            raise SpanError(f"{where}: field step: must be an integer, not {step!r}")
        if effect is not None and effect not in EFFECTS:
            raise SpanError(f"{where}: field effect: must be one of {EFFECT_NAMES}, not {effect!r}")
        known = {"span_id", "tool", "tool_call", "tool_result", "model_decision", "step"}
        known |= {"effect", "run_id", "trace_id", "source"}
        argv = call.get("argv")
        name = data.get("tool") or (decision or {}).get("tool_name") or call.get("name")
        if not name and isinstance(argv, list) and argv:
            name = Path(str(argv[0])).name
        run = data.get("run_id") or data.get("trace_id")
        return cls(
            span_id=str(span_id),
            tool=str(name or "tool"),
            tool_call=call,
            tool_result=data.get("tool_result"),
            model_decision=decision,
            run=None if run is None else str(run),
            step=step,
            effect=effect,
            source=str(data.get("source") or ""),
            extra={k: v for k, v in data.items() if k not in known},
        )


def _check_call(call: dict[str, Any], where: str) -> None:
    """The fields of a tool call that live execution uses, checked before anything runs."""

    def bad(name: str, must: str) -> SpanError:
        return SpanError(f"{where}: field tool_call.{name}: {must}, not {call[name]!r}"[:400])

    argv = call.get("argv")
    if "argv" in call and not (
        isinstance(argv, list)
        and argv
        and all(isinstance(a, str) and "\0" not in a for a in argv)
        and argv[0]
    ):
        raise bad("argv", "must be a non-empty list of strings (the command and its arguments)")
    timeout = call.get("timeout_s")
    if timeout is not None and not (
        isinstance(timeout, int | float) and type(timeout) is not bool and timeout > 0
    ):
        raise bad("timeout_s", "must be a positive number of seconds")
    if call.get("cwd") is not None and not isinstance(call["cwd"], str):
        raise bad("cwd", "must be a folder path")
    env = call.get("env")
    if env is not None and not (
        isinstance(env, dict) and all(v is None or isinstance(v, str) for v in env.values())
    ):
        raise bad("env", "must map variable names to their recorded digests")
    if call.get("env_digest") is not None and not isinstance(call["env_digest"], str):
        raise bad("env_digest", "must be a string")
    names = call.get("env_names")
    if names is not None and not (
        isinstance(names, list) and all(isinstance(n, str) for n in names)
    ):
        raise bad("env_names", "must be a list of variable names")


def load_span(path: str | os.PathLike[str]) -> Span:
    """Read one span from a JSON file (what ``tracetape span extract -o`` writes).

    Raises ``SpanError`` for a missing file, bad JSON or a field of the wrong shape.
    """
    path = Path(path)
    try:
        data = orjson.loads(path.read_bytes())
    except FileNotFoundError:
        raise SpanError(f"{path}: no such span file") from None
    except OSError as exc:
        raise SpanError(f"{path}: cannot read: {exc.strerror}") from None
    except orjson.JSONDecodeError as exc:
        raise SpanError(
            f"{path}: not one JSON span ({exc}); a trace of many spans takes --id "
            "(tracetape span list shows them)"
        ) from None
    return Span.from_dict(data, str(path))


def read_spans(
    trace: str | os.PathLike[str],
    fmt: str | TraceFormat = TraceFormat.AUTO,
    *,
    skip_bad_lines: bool = False,
) -> list[Span]:
    """The spans of a trace file: span JSONL, a tracetape cassette or OTLP/JSON
    (``skip_bad_lines`` passes over the malformed lines of the last two).

    Raises ``TraceError`` (file, line, field) for bad input and ``SpanError`` for a seed
    JSONL trace, which keeps no tool results.
    """
    path = Path(trace)
    kind = TraceFormat.parse(fmt)
    if kind is TraceFormat.AUTO:
        kind = detect_format(path, skip_bad_lines=skip_bad_lines)
    header: Mapping[str, Any] = {}
    if kind is TraceFormat.CASSETTE:
        cassette = read_cassette(path)
        records: Iterable[Record] = cassette.records
        header = cassette.header or {}
    elif kind is TraceFormat.JSONL:
        raise SpanError(
            f"{path}: a seed JSONL trace keeps only a digest of each tool's output, not the "
            "result a span replay compares; replay spans of a cassette, span records or OTLP"
        )
    else:
        records = read_records(path, kind, skip_bad_lines=skip_bad_lines)
    return list(_spans(records, header, kind))


def _spans(records: Iterable[Record], header: Mapping[str, Any], kind: TraceFormat) -> Any:
    env = header.get("env")
    last_llm: dict[str | None, Record] = {}
    seen: dict[str, int] = {}
    positions: dict[str | None, int] = {}
    for rec in records:
        position = positions[rec.run] = positions.get(rec.run, 0) + 1
        if rec.kind == "llm":
            last_llm[rec.run] = rec
            continue
        if rec.kind != "tool":
            continue
        where = f"{rec.source}:{rec.line}" if rec.line else rec.source
        extra = dict(rec.extra or {})
        if kind is TraceFormat.SPANS:
            data = {**extra, "span_id": rec.span_id, "tool_call": call_args(rec)}
            data.update(tool_result=rec.out, step=rec.step, effect=rec.effect, run_id=rec.run)
            for name in ("ms", "ts", "parent_id", "tokens"):
                value = getattr(rec, name)
                if value is not None:
                    data[name] = value
            span = Span.from_dict(data, where)
            yield replace(span, source=rec.source, line=rec.line, position=position)
            continue
        call: dict[str, Any] = {"name": rec.name, "args": call_args(rec)}
        if isinstance(env, dict) and env:
            call["env"] = env
        llm = last_llm.pop(rec.run, None)
        span_id = rec.span_id
        if span_id is None:  # a cassette: the key names the call, a number tells repeats apart
            hexed = (rec.key or "tool:").split(":", 1)[1]
            seen[hexed] = seen.get(hexed, 0) + 1
            span_id = hexed if seen[hexed] == 1 else f"{hexed}.{seen[hexed]}"
        yield Span(
            span_id=span_id,
            tool=rec.name or "tool",
            tool_call=call,
            tool_result=rec.out,
            model_decision=None if llm is None else decision_of(llm, rec),
            run=rec.run,
            step=rec.step,
            effect=rec.effect,
            source=rec.source,
            line=rec.line,
            position=position,
        )


def decision_of(llm: Record, tool: Record) -> dict[str, Any]:
    """The model decision behind ``tool``: the call the model emitted (from its recorded reply,
    else the tool record's own name and arguments), its prompt, tool schema and parameters."""
    data = llm.input if isinstance(llm.input, dict) else {}
    params = data.get("params")
    params = params if isinstance(params, dict) else {}
    calls = emitted_calls(llm.out)
    name, args = next(((n, a) for n, a in calls if n == tool.name), (tool.name, call_args(tool)))
    decision: dict[str, Any] = {"tool_name": name, "args": args}
    decision["model_id"] = params.get("model") or llm.name
    for part in ("messages", "system", "tools"):
        if data.get(part) is not None:
            decision[part] = data[part]
    if params:
        decision["params"] = params
    decision["output"] = llm.out
    decision["key"] = llm.key
    return decision


def _arguments(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def emitted_calls(out: Any) -> list[tuple[str, Any]]:
    """The tool calls (name, arguments) in a model reply: OpenAI Chat Completions and
    Responses, Anthropic Messages, OTLP GenAI output messages, or ``{"tool", "args"}``.

    >>> emitted_calls({"choices": [{"message": {"tool_calls": [
    ...     {"function": {"name": "add", "arguments": "{\\"a\\": 1}"}}]}}]})
    [('add', {'a': 1})]
    >>> emitted_calls({"content": [{"type": "tool_use", "name": "add", "input": {"a": 1}}]})
    [('add', {'a': 1})]
    """
    found: list[tuple[str, Any]] = []
    if isinstance(out, dict):
        for choice in out.get("choices") or []:
            message = choice.get("message") if isinstance(choice, dict) else None
            for call in (message or {}).get("tool_calls") or []:
                fn = call.get("function") if isinstance(call, dict) else None
                if isinstance(fn, dict) and fn.get("name"):
                    found.append((str(fn["name"]), _arguments(fn.get("arguments"))))
        for item in out.get("output") or [] if isinstance(out.get("output"), list) else []:
            if isinstance(item, dict) and item.get("type") == "function_call":
                found.append((str(item.get("name")), _arguments(item.get("arguments"))))
        content = out.get("content")
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and block.get("type") == "tool_use":
                found.append((str(block.get("name")), block.get("input")))
        tool = out.get("tool") or out.get("tool_name")
        if isinstance(tool, str) and not found:
            found.append((tool, out.get("args")))
    elif isinstance(out, list):  # OTLP GenAI output messages
        for message in out:
            parts = message.get("parts") if isinstance(message, dict) else None
            for part in parts or []:
                if isinstance(part, dict) and part.get("type") == "tool_call":
                    found.append((str(part.get("name")), _arguments(part.get("arguments"))))
    return found


def find_span(spans: list[Span], span_id: str, where: str) -> Span:
    """The span ``span_id`` names: an exact id, else the one id it is a prefix of."""
    exact = [s for s in spans if s.span_id == span_id]
    if len(exact) == 1:
        return exact[0]
    if len(exact) > 1:
        runs = ", ".join(str(s.run) for s in exact)
        raise SpanError(
            f"{where}: span {span_id!r} is in several runs ({runs}); extract it from one"
        )
    found = [s for s in spans if s.span_id.startswith(span_id)]
    if len(found) == 1:
        return found[0]
    if not found:
        known = ", ".join(s.span_id for s in spans[:8]) + (" ..." if len(spans) > 8 else "")
        raise SpanError(
            f"{where}: no span {span_id!r} (spans: {known or 'none'}; tracetape span list)"
        )
    ids = ", ".join(s.span_id for s in found[:8])
    raise SpanError(f"{where}: {span_id!r} is the start of several span ids ({ids}); say more")


def span_of_trace(trace: str | os.PathLike[str], span_id: str | None) -> Span:
    """A span file, or the span ``span_id`` of a trace (the CLI's way in)."""
    if span_id is None:
        return load_span(trace)
    return find_span(read_spans(trace), span_id, str(trace))
