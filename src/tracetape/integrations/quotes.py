"""Quotes: the answers a request continues when a framework flattens a flow's history into
one user message.

Some frameworks do (dspy's ReAct sends ``[system, user]`` every time, the user message
carrying the trajectory so far). A request that would so be step 1 (no model turn in its
conversation, no stored answer continued) but whose last user message quotes answers to
earlier such requests continues the latest of them (``steps``). The message quotes an answer
when it holds the answer's longest distinctive line and at least half of its distinctive
lines (``quotable``: the lines of its text and of the tool calls it asks for, as dspy writes
them again); where answers of several flows say the same, the one whose own predecessor is
quoted too wins, so flows run side by side stay apart. Answers are indexed by their longest
line and read only when a request could quote them (``Quotes``).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .providers import Ask, Provider, item_field, parts_text, user_turn

__all__ = ["Quotes", "answer_text", "args_text", "quotable", "user_text"]

_MAX_QUOTED = 4096  # answers a request may quote; the oldest go first


def args_text(args: Any) -> str:
    """A tool call's arguments as one canonical line.

    >>> args_text({"b": 1, "a": [2]})
    '{"a":[2],"b":1}'
    """
    return json.dumps(args, sort_keys=True, default=str, separators=(",", ":"))


# dspy's field markers ("[[ ## next_thought ## ]]", also ahead of a value on its line) frame
# the values a framework quotes: each ends a line
_MARKER = re.compile(r"\[\[ ## \w+ ## \]\]")
_JSON_START = re.compile(r"^[ \t]*[{\[]", re.MULTILINE)  # a line that may open a JSON value
_DECODER = json.JSONDecoder()
_MIN_LINE = 12  # a shorter line ("finish", "Paris", "{}") says too little to tell flows apart
_MAX_LINES = 32  # the longest lines of an answer that are checked (its memory stays bounded)
_MAX_CACHED = 1024  # JSON lines up to this length are parsed once


def quotable(text: str | None) -> frozenset[str]:
    """The distinctive lines of ``text``, as a later request may quote them: its lines,
    without the white space at their ends, dspy's field markers as line breaks; a JSON value
    that opens a line and ends one (on one line or over several) as the lines of its string
    values (dspy writes a tool's arguments again as JSON of its own); lines shorter than 12
    characters left out.

    >>> answer = '''[[ ## next_thought ## ]]
    ... I should look up the capital of France.
    ...
    ... [[ ## next_tool_name ## ]] search
    ...
    ... [[ ## next_tool_args ## ]]
    ... {"query":"capital of France"}'''
    >>> sorted(quotable(answer))
    ['I should look up the capital of France.', 'capital of France']
    """
    if not text:
        return frozenset()
    if "[[ ## " in text:
        text = _MARKER.sub("\n", text)
    lines = set(map(str.strip, text.splitlines()))
    found = {line for line in lines if len(line) >= _MIN_LINE}
    spread = "{" in lines or "[" in lines  # a JSON value over several lines
    for line in [line for line in found if line[:1] in ("{", "[")]:
        values = _json_values(line)
        if values is None:
            spread = True  # the start of a JSON value over several lines, or "[1] a footnote"
        else:
            found.discard(line)
            found |= values
    if spread:
        values, inside = _spread_json(text)
        found -= inside
        found |= values
    return frozenset(found)


def _spread_json(text: str) -> tuple[frozenset[str], set[str]]:
    """The lines of the string values of the JSON values in ``text`` that open a line and end
    another, and the lines they are written over."""
    values: frozenset[str] = frozenset()
    inside: set[str] = set()
    done = 0
    for opened in _JSON_START.finditer(text):
        start = opened.end() - 1
        if start < done:
            continue  # inside a value read already
        try:
            value, end = _DECODER.raw_decode(text, start)
        except (ValueError, RecursionError):
            continue
        eol = text.find("\n", end)
        written = text[start:end]
        if text[end : len(text) if eol < 0 else eol].strip() or "\n" not in written:
            continue  # followed by text on its line, or on one line (read as a line)
        values |= _string_lines(value)
        inside.update(map(str.strip, written.splitlines()))
        done = end
    return values, inside


def _add_line(line: str, found: set[str]) -> None:
    line = line.strip()
    if len(line) < _MIN_LINE:
        return
    values = _json_values(line) if line[0] in "{[" else None
    if values is None:
        found.add(line)
    else:
        found |= values


def _json_values(line: str) -> frozenset[str] | None:
    """The distinctive lines of the strings of a JSON line (None: not JSON)."""
    return _short_json_values(line) if len(line) <= _MAX_CACHED else _parsed_values(line)


def _parsed_values(text: str) -> frozenset[str] | None:
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return _string_lines(value)


# a flow's requests quote the same tool arguments again: each is parsed once
_short_json_values = functools.lru_cache(maxsize=4096)(_parsed_values)


def _string_lines(value: Any) -> frozenset[str]:
    """The distinctive lines of the strings in a JSON value."""
    found: set[str] = set()
    stack = [value]
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            for line in value.splitlines():
                _add_line(line, found)
        elif isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return frozenset(found)


def user_text(conversation: Any, user: Callable[[Any], bool] = user_turn) -> str | None:
    """The text of the last message of ``conversation`` that ``user`` says is the user's own
    (a message, not a bare string: an embedding's inputs quote nothing); None if none.

    >>> user_text([{"role": "system", "content": "s"}, {"role": "user", "content": "q"}])
    'q'
    """
    if not isinstance(conversation, list):
        return None
    for item in reversed(conversation):
        if not isinstance(item, str) and user(item):
            content = item_field(item, "content")
            return parts_text(content if content is not None else item_field(item, "parts"))
    return None


def answer_text(provs: Iterable[Provider], out: Any, asked: list[Ask]) -> str | None:
    """What an answer says that a request may quote: its text (by the first of ``provs`` that
    finds one), and each tool call's name and arguments."""
    text = None
    for prov in provs if isinstance(out, Mapping) else ():
        try:
            text = prov.text(out)
        except Exception:  # an answer of another provider's shape
            continue
        if text is not None:
            break
    calls = [f"{ask.name}\n\n{args_text(ask.args)}" for ask in asked]
    return "\n\n".join([text, *calls] if text else calls) or None


@dataclass(slots=True)
class _Answer:
    step: int
    parent: int | None  # the answer its request quoted
    said: Callable[[], str | None] | None  # read when a request may first quote it
    lines: frozenset[str] = frozenset()


class Quotes:
    """The answers of one tape that a later request may quote, indexed by their longest
    distinctive line (``quotable``). An answer's text is read the first time a request could
    quote it, so a tape whose requests all chain by their conversation never reads one.

    >>> quotes = Quotes()
    >>> quotes.note(1, lambda: "I should look up the capital of France.")
    0
    >>> quotes.quoted(quotable("Trajectory:\\nI should look up the capital of France."))
    (1, 0)
    """

    def __init__(self) -> None:
        self._answers: dict[int, _Answer] = {}  # by number, oldest first
        self._unread: list[int] = []
        self._by_anchor: dict[str, list[int]] = {}  # a longest line -> the answers it is of
        self._count = 0

    def __bool__(self) -> bool:
        return bool(self._answers)

    def note(self, step: int, said: Callable[[], str | None], parent: int | None = None) -> int:
        """Note an answer of ``step`` that says ``said()``, whose request continued answer
        ``parent``; its number."""
        number = self._count
        self._count += 1
        self._answers[number] = _Answer(step, parent, said)
        self._unread.append(number)
        if len(self._answers) > _MAX_QUOTED:
            self._forget(next(iter(self._answers)))
        return number

    def _forget(self, number: int) -> None:
        answer = self._answers.pop(number)
        if answer.lines:
            holders = self._by_anchor[_anchor(answer.lines)]
            holders.remove(number)
            if not holders:
                del self._by_anchor[_anchor(answer.lines)]

    def _read(self) -> None:
        for number in self._unread:
            answer = self._answers.get(number)
            if answer is None or answer.said is None:
                continue
            try:
                lines = quotable(answer.said())
            except Exception:  # an answer of an unexpected shape says nothing
                lines = frozenset()
            answer.said = None
            if not lines:  # nothing can quote it: nothing to keep
                del self._answers[number]
                continue
            if len(lines) > _MAX_LINES:
                lines = frozenset(sorted(lines, key=_longest)[-_MAX_LINES:])
            answer.lines = lines
            self._by_anchor.setdefault(_anchor(lines), []).append(number)
        self._unread.clear()

    def quoted(self, lines: frozenset[str]) -> tuple[int, int] | None:
        """The step and number of the answer a message of ``lines`` (``quotable``) continues,
        None if it quotes none. It quotes an answer whose longest line it holds, and at least
        half of its lines (a tool's name, shared by flows, is not enough); of those, it
        continues the one of the highest step whose own predecessor it quotes too (else of the
        highest step), the latest of equals."""
        self._read()
        quoted = {
            number
            for line in self._by_anchor.keys() & lines
            for number in self._by_anchor[line]
            if 2 * len(self._answers[number].lines & lines) >= len(self._answers[number].lines)
        }
        if not quoted:
            return None

        def rank(number: int) -> tuple[bool, int, int]:
            answer = self._answers[number]
            return answer.parent is None or answer.parent in quoted, answer.step, number

        best = max(quoted, key=rank)
        return self._answers[best].step, best


def _longest(line: str) -> tuple[int, str]:
    """Lines in order of length, then of text: not in a set's order, which a process's hash
    seed sets (record and replay must pick the same)."""
    return len(line), line


def _anchor(lines: frozenset[str]) -> str:
    """The longest line, the last in text order of equals."""
    return max(lines, key=_longest)
