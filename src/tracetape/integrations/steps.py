"""Steps: a model call's step is the agent's turn, read from the conversation it sends.

A model request carries its conversation, so its step is ``1 +`` the number of model turns
in it (``providers.turns``, with the provider's rule of what a model item is), plus the step
of the earlier answer it continues when the provider keeps the conversation server-side
(OpenAI Responses' ``previous_response_id``). A request that carries no conversation (a
one-shot completion, an embedding) is step 1. So a sequential agent's model calls are steps
1..n whatever threads or asyncio tasks a framework runs them in, and concurrent agents each
count their own.

A tool call belongs to the step of the model call that asked for it: each answer's tool calls
(``Provider.asks``) wait here with their step, and a taped tool called with that name (and
those arguments, where several wait) takes it. A tool no answer asked for, and an
environment read, take the step of the latest model call of their thread or task, else of
the tape's latest.

Cassettes recorded before steps were read from the conversation (no ``"keys": 2`` in their
header) counted steps per thread and task: ``migrate`` re-keys their model and tool records
the same way, from the inputs they stored, when a hooked replay loads them.
"""

from __future__ import annotations

import contextlib
import json
import sys
import threading
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..canonical import canonical_json, field_digests, key_of
from ..formats.cassette import KEYS_VERSION
from ..record import Record
from .providers import Ask, Match, Provider, providers, turns

__all__ = ["KEYS_VERSION", "StepBook", "conversation_step", "migrate"]

_MAX_WAITING = 4096  # asks waiting per tool name; the oldest go first


def _owner() -> object:
    """The running asyncio task, else the running thread."""
    aio = sys.modules.get("asyncio")  # a program that never imported asyncio runs no task
    loop = aio._get_running_loop() if aio is not None else None
    task = aio.current_task(loop) if loop is not None else None  # type: ignore[union-attr]
    return task if task is not None else threading.current_thread()


def _args_text(args: Any) -> str:
    return json.dumps(args, sort_keys=True, default=str, separators=(",", ":"))


def conversation_step(provider: Provider, conversation: Any, continued: int = 0) -> int:
    """The step of a request whose conversation is ``conversation`` and which continues an
    answer of step ``continued`` (0: none).

    >>> from tracetape.integrations.providers import provider
    >>> conversation_step(provider("openai"), [{"role": "user"}, {"role": "assistant"},
    ...                                         {"role": "tool"}])
    2
    """
    return continued + turns(conversation, provider.turn) + 1


class StepBook:
    """One tape's steps: the answers a request may continue, the tool calls answers asked for,
    and each thread's or task's latest model step."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._chains: dict[str, int] = {}
        self._asks: dict[str, deque[tuple[Any, str, int]]] = {}
        self._latest: weakref.WeakKeyDictionary[object, int] = weakref.WeakKeyDictionary()
        self.last = 0

    def model_step(self, match: Match, body: Mapping[str, Any]) -> int:
        """The step of a model request of route ``match`` with JSON ``body``; it becomes the
        latest step of the calling thread or task."""
        conversation = body.get(match.route.conversation) if match.route.conversation else None
        chain = match.provider.chain(body)
        with self._lock:
            continued = self._chains.get(chain, 0) if chain is not None else 0
        step = conversation_step(match.provider, conversation, continued)
        self.saw(step)
        return step

    def saw(self, step: int) -> None:
        """A model call of ``step`` was made in this thread or task."""
        with self._lock:
            # an owner without weak references: the tape's latest only
            with contextlib.suppress(TypeError):
                self._latest[_owner()] = step
            self.last = step

    def answered(self, match: Match, body: Any, step: int, out: Mapping[str, Any]) -> None:
        """Note what the answer of a step-``step`` request says: the tool calls it asks for,
        and its id (and conversation) for a request that continues it."""
        try:
            asked = match.provider.asks(out)
            answer = match.provider.answer_id(out)
        except Exception:  # an answer of an unexpected shape asks for nothing
            asked, answer = [], None
        chain = match.provider.chain(body) if isinstance(body, Mapping) else None
        with self._lock:
            if answer is not None:
                self._chains[answer] = step
            if chain is not None and chain.startswith("conversation:"):
                self._chains[chain] = step
            for ask in asked:
                self._wait(ask, step)

    def _wait(self, ask: Ask, step: int) -> None:
        waiting = self._asks.setdefault(ask.name, deque(maxlen=_MAX_WAITING))
        waiting.append((ask.args, _args_text(ask.args), step))

    def tool_step(self, name: str, args: Any) -> int:
        """The step of a tool call: the step of the answer that asked for ``name`` with these
        ``args`` (or, where none did, the oldest that asked for ``name`` with arguments these
        include), else ``current_step``."""
        text = _args_text(args)
        with self._lock:
            waiting = self._asks.get(name)
            if waiting:
                chosen = next((w for w in waiting if w[1] == text), None)
                if chosen is None and isinstance(args, Mapping):
                    chosen = next((w for w in waiting if _within(w[0], args)), None)
                if chosen is None:
                    chosen = waiting[0]
                waiting.remove(chosen)
                return chosen[2]
        return self.current_step()

    def current_step(self) -> int:
        """The latest model step of this thread or task, else of the tape (0: none yet)."""
        with self._lock:
            try:
                own = self._latest.get(_owner())
            except TypeError:
                own = None
            return own if own is not None else self.last


def _within(asked: Any, args: Mapping[str, Any]) -> bool:
    """Whether the arguments a model sent are among a tool's bound arguments (which add the
    defaults it left out)."""
    if not isinstance(asked, Mapping):
        return False
    return all(k in args and _args_text(args[k]) == _args_text(v) for k, v in asked.items())


# -- cassettes keyed before steps were read from the conversation ----------------------------------

_HOOK_PAYLOAD = frozenset({"messages", "tools", "params", "step"})


def _rule() -> Callable[[Any], bool]:
    """A model item of any provider's conversation: a record keeps no provider."""
    rules = [p.turn for p in providers()]
    return lambda item: any(rule(item) for rule in rules)


def _rekeyed(rec: Record, data: dict[str, Any], step: int) -> Record:
    if rec.step == step and data.get("step") == step:
        return rec
    data = {**data, "step": step}
    return Record(
        **{
            **{f: getattr(rec, f) for f in rec.__struct_fields__},
            "key": key_of(rec.kind, canonical_json(data)),
            "step": step,
            "input": data,
            "digests": field_digests(data),
        }
    )


def migrate(records: Iterable[Record]) -> list[Record]:
    """The records of a cassette keyed before ``KEYS_VERSION`` 2, re-keyed as they would be now: a
    hooked model call's step from its conversation, a tool call's from the answer that asked
    for it (else the latest model call before it), from the inputs the records stored. A
    record whose input was not stored keeps its key.

    >>> old = Record(kind="llm", key="llm:x", step=4, input={"messages": [{"role": "user"}],
    ...              "tools": [], "params": {}, "step": 4})
    >>> migrate([old])[0].step
    1
    """
    model = _rule()
    book: dict[str, deque[tuple[str, int]]] = {}
    latest = 0
    out: list[Record] = []
    for rec in records:
        data = rec.input
        if rec.kind == "llm" and type(data) is dict and data.keys() == _HOOK_PAYLOAD:
            latest = turns(data["messages"], model) + 1
            out.append(_rekeyed(rec, data, latest))
            for prov in providers():
                asked = _asked(prov, rec.out)
                if asked:
                    for ask in asked:
                        book.setdefault(ask.name, deque()).append((_args_text(ask.args), latest))
                    break
            continue
        if rec.kind == "tool" and type(data) is dict and type(data.get("step")) is int:
            waiting = book.get(str(data.get("name")))
            step = latest
            if waiting:
                text = _args_text(data.get("args"))
                chosen = next((w for w in waiting if w[0] == text), waiting[0])
                waiting.remove(chosen)
                step = chosen[1]
            out.append(_rekeyed(rec, data, step))
            continue
        out.append(rec)
    return out


def _asked(prov: Provider, out: Any) -> list[Ask]:
    if not isinstance(out, Mapping):
        return []
    try:
        return prov.asks(out)
    except Exception:  # an answer of another provider's shape
        return []
