"""A run as a debugging engineer reads it: each decision as what happened, not as JSON.

``read_steps(records)`` turns a run's records into ``StepView`` s:

* a model call: the messages new since the run's previous model call (the user's text, the
  tool results fed back; the model's own turns are its earlier answers), then its answer: the
  text in full, each tool call as ``name(arg=value, …)``, its tokens and cost. The provider
  envelope is reduced to what the provider table says is the answer (``Provider.text``,
  ``asks``, ``usage``);
* a tool call: its name, arguments and result; an environment read: its name and value.

Messages of every provider's conversation read alike (chat messages, Responses items,
Anthropic and Bedrock content blocks, Gemini parts). ``word_diff`` marks the words that
changed between two texts; ``cost`` prices a model call from a maintained table
(``genai-prices``, the server extra), or says it does not know.

The pages of the collector and ``tracetape show --view conversation`` render these.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from .integrations.providers import answer_of, provider_of
from .prices import cost
from .record import Record, call_args, call_text

__all__ = ["Said", "StepView", "call_text", "cost", "final_answer", "read_steps", "word_diff"]

_ASSISTANT = frozenset({"assistant", "model", "chatbot"})
_NOT_SAID = frozenset({"function_call", "reasoning", "tool_use", "functionCall", "toolUse"})


@dataclass(frozen=True)
class Said:
    """One message fed to the model: who (``user``, ``system``, ``tool``) and its text."""

    role: str
    text: str


@dataclass
class StepView:
    """One decision, readable: see the module doc. ``raw_in``/``raw_out`` are the record's
    input and output as stored; ``cost`` is in US dollars (None: not priced, ``priced``
    says why)."""

    index: int
    kind: str
    name: str
    step: int | None
    ms: float | None
    effect: str | None
    said: list[Said] = field(default_factory=list)
    answer: str | None = None
    calls: list[str] = field(default_factory=list)
    result: str | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost: Decimal | None = None
    priced: str = "unknown"
    raw_in: Any = None
    raw_out: Any = None
    spent: int | None = None  # tokens a record says with no in/out split (a seed line's)

    @property
    def tokens(self) -> int | None:
        """Input and output tokens, where the answer said them (else the record's own)."""
        if self.tokens_in is None and self.tokens_out is None:
            return self.spent
        return (self.tokens_in or 0) + (self.tokens_out or 0)

    def texts(self) -> list[tuple[str, str]]:
        """The step's readable parts as (label, text), in order: what a diff compares."""
        parts = [(f"said ({s.role})", s.text) for s in self.said]
        if self.answer is not None:
            parts.append(("answer", self.answer))
        parts += [("call", c) for c in self.calls]
        if self.result is not None:
            parts.append(("result", self.result))
        return parts


def _short(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def _flatten(content: Any) -> tuple[str, bool]:
    """The text of a message's content (a string, parts, blocks), and whether it is a tool's
    result (Anthropic ``tool_result``, Gemini ``functionResponse``, Bedrock ``toolResult``)."""
    if content is None:
        return "", False
    if isinstance(content, str):
        return content, False
    if isinstance(content, list):
        pieces = [_flatten(part) for part in content]
        texts = [t for t, _ in pieces if t]
        return "\n".join(texts), any(tool for _, tool in pieces)
    if isinstance(content, Mapping):
        kind = content.get("type")
        if (isinstance(kind, str) and kind in _NOT_SAID) or any(k in content for k in _NOT_SAID):
            return "", False
        if content.get("type") == "tool_result":
            return _flatten(content.get("content"))[0], True
        if "toolResult" in content:
            inner = content["toolResult"]
            return _flatten(inner.get("content") if isinstance(inner, Mapping) else inner)[0], True
        if "functionResponse" in content:
            answer = content["functionResponse"]
            return _short(answer.get("response") if isinstance(answer, Mapping) else answer), True
        for key in ("text", "output", "json", "content"):
            if key in content:
                return _flatten(content[key])[0] if key != "json" else _short(content[key]), False
        return _short(content), False
    return _short(content), False


def _said(item: Any) -> Said | None:
    """What one conversation item says, or None for the model's own turns."""
    if isinstance(item, str):
        return Said("user", item)
    if not isinstance(item, Mapping):
        return None
    kind, role = item.get("type"), item.get("role")
    kind = kind if isinstance(kind, str) else None  # a trace may hold anything here
    role = role if isinstance(role, str) else None
    if role in _ASSISTANT or kind in _NOT_SAID:
        return None
    if kind == "function_call_output":
        return Said("tool", _flatten(item.get("output"))[0])
    content = next((item[k] for k in ("content", "parts", "message", "text") if k in item), None)
    text, tool = _flatten(content)
    if not text:
        return None
    return Said("tool" if tool or role in ("tool", "function") else str(role or "user"), text)


def _messages(rec: Record) -> list[Any] | None:
    data = rec.input
    if isinstance(data, Mapping):
        found = data.get("messages")
        if isinstance(found, list):
            return found
        if isinstance(found, str):
            return [found]
    return None


def read_steps(records: Sequence[Record]) -> list[StepView]:
    """The records of one run, in order, as ``StepView`` s (see the module doc)."""
    views = []
    previous: list[Any] | None = None
    for index, rec in enumerate(records, 1):
        view = StepView(
            index,
            rec.kind,
            rec.name or "",
            rec.step,
            rec.ms,
            rec.effect,
            raw_in=rec.input,
            raw_out=rec.out,
        )
        if rec.kind == "llm":
            messages = _messages(rec)
            if messages is not None:
                fresh = messages
                if previous is not None and messages[: len(previous)] == previous:
                    fresh = messages[len(previous) :]
                view.said = [s for s in map(_said, fresh) if s is not None]
                previous = messages
            prov = provider_of(rec.api)
            view.answer, view.calls = answer_of(rec.out, rec.api)
            usage = rec.usage or {}
            view.tokens_in, view.tokens_out = usage.get("input"), usage.get("output")
            if not usage and rec.tokens is not None:
                view.tokens_in = rec.tokens
            view.cost, view.priced = cost(
                rec.name, view.tokens_in, view.tokens_out, prov.name if prov else None
            )
        else:
            args = call_args(rec)
            view.calls = [call_text(view.name or rec.kind, args)] if rec.kind == "tool" else []
            if rec.kind != "tool" and view.name:
                view.calls = [view.name]
            out = rec.out if rec.out is not None else rec.out_digest
            view.result = None if out is None else _short(out)
            view.spent = rec.tokens
        views.append(view)
    return views


def final_answer(views: Sequence[StepView] | None) -> str | None:
    """A run's last model answer (its text, else the calls it asked for): what a diff's
    summary compares.

    >>> final_answer([StepView(1, "llm", "m", 1, None, None, answer="Done.")])
    'Done.'
    """
    last = next((v for v in reversed(views or ()) if v.kind == "llm"), None)
    if last is None:
        return None
    return last.answer if last.answer is not None else "; ".join(last.calls)


_WORD = re.compile(r"\s+|\w+|[^\w\s]")
_MATCHED_WORDS = 250_000  # words x words matched one by one at most (about 500 each side)


def word_diff(before: str, after: str) -> list[tuple[str, str]]:
    """The words of two texts as ``("=", text)``, ``("-", removed)`` and ``("+", added)`` runs
    (word-level: never half a word).

    >>> word_diff("weather in Paris today", "weather in Rome today")
    [('=', 'weather in '), ('-', 'Paris'), ('+', 'Rome'), ('=', ' today')]
    """
    a, b = _WORD.findall(before), _WORD.findall(after)
    runs: list[tuple[str, str]] = []

    def add(op: str, words: Sequence[str]) -> None:
        text = "".join(words)
        if not text:
            return
        if runs and runs[-1][0] == op:
            runs[-1] = (op, runs[-1][1] + text)
        else:
            runs.append((op, text))

    # The words both texts start and end with are kept as they are (one pass each); the
    # middle is matched word by word while that stays cheap (difflib is quadratic in the
    # worst case), else marked removed and added whole.
    head = 0
    while head < min(len(a), len(b)) and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < min(len(a), len(b)) - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    add("=", a[:head])
    middle_a, middle_b = a[head : len(a) - tail], b[head : len(b) - tail]
    if len(middle_a) * len(middle_b) > _MATCHED_WORDS:
        add("-", middle_a)
        add("+", middle_b)
    else:
        matcher = difflib.SequenceMatcher(None, middle_a, middle_b, autojunk=False)
        for op, i1, i2, j1, j2 in matcher.get_opcodes():
            if op == "equal":
                add("=", middle_a[i1:i2])
            else:
                add("-", middle_a[i1:i2])
                add("+", middle_b[j1:j2])
    add("=", a[len(a) - tail :])
    return runs
