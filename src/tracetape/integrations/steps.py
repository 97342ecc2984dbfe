"""Steps: a model call's step is the agent's turn, read from the conversation it sends.

A model request carries its conversation, so its step is ``1 +`` the number of model turns
in it (``providers.turns``, with the provider's rule of what a model item is), plus the step
of the earlier answer it continues when the provider keeps the conversation server-side
(OpenAI Responses' ``previous_response_id``). A request that carries no conversation (a
one-shot completion, an embedding) is step 1. So a sequential agent's model calls are steps
1..n whatever threads or asyncio tasks a framework runs them in, and concurrent agents each
count their own. A tape reads only the items a conversation added since the last request
that sent it (``Turns``), so a step costs what the conversation grew by, not its length.

Some frameworks flatten a flow's history into one user message (dspy's ReAct sends
``[system, user]`` every time, the user message carrying the trajectory so far). A request
that would so be step 1 (no model turn in its conversation, no stored answer continued) but
whose last user message quotes answers to earlier such requests continues the latest of
them: its step is that answer's plus 1 (``quotes`` tells which answer a message quotes). A
flow that keeps its history as model turns is counted by them, and only its first answer is
kept.

A tool call belongs to the step of the model call that asked for it: each answer's tool calls
(``Provider.asks``) wait here with their step, and a taped tool called with that name (and
those arguments, where several wait) takes it. A tool no answer asked for, and an
environment read, take the step of the latest model call of their thread or task, else of
the tape's latest.

Cassettes recorded before steps were read from the conversation (no ``"keys"`` in their
header) counted steps per thread and task: ``migrate`` re-keys their model and tool records
the same way, from the inputs they stored, when a hooked replay loads them. Cassettes of
``"keys": 2`` were recorded before the quotes were read: ``migrate(records, since=2)``
re-steps only their requests of no model turn keyed 1 that quote an earlier answer (and the
tool calls that follow them).
"""

from __future__ import annotations

import functools
import sys
import threading
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..canonical import canonical_json, common_prefix, field_digests, key_of
from ..formats.cassette import KEYS_VERSION
from ..record import Record
from .providers import (
    Ask,
    Match,
    Provider,
    provider_of,
    providers,
    turns,
    user_turn,
)
from .quotes import Quotes, answer_text, args_text, quotable, user_text

__all__ = [
    "KEYS_VERSION",
    "Quotes",
    "StepBook",
    "Turns",
    "conversation_step",
    "migrate",
    "quotable",
]

_MAX_WAITING = 4096  # asks waiting per tool name; the oldest go first
_MAX_PENDING = 256  # requests of no model turn awaiting their answers; the oldest go first
_MAX_UNREAD = 256  # answers noted and not read yet; more are read at once
_MAX_KEPT = 8  # conversations whose items are kept to count the next request's turns from


def _owner() -> object:
    """The running asyncio task, else the running thread."""
    aio = sys.modules.get("asyncio")  # a program that never imported asyncio runs no task
    loop = aio._get_running_loop() if aio is not None else None
    task = aio.current_task(loop) if loop is not None else None  # type: ignore[union-attr]
    return task if task is not None else threading.current_thread()


def conversation_step(provider: Provider, conversation: Any, continued: int = 0) -> int:
    """The step of a request whose conversation is ``conversation`` and which continues an
    answer of step ``continued`` (0: none).

    >>> from tracetape.integrations.providers import provider
    >>> conversation_step(provider("openai"), [{"role": "user"}, {"role": "assistant"},
    ...                                         {"role": "tool"}])
    2
    """
    return continued + turns(conversation, provider.turn) + 1


class _Kept:
    """One conversation as its last request sent it: a copy of each item as it was read
    (``shadows``), whether the turn rule said it is the model's (``flags``, a byte each), and
    where the items are that only the rule can read (``live``: not a dict nor a string)."""

    __slots__ = ("flags", "live", "model", "shadows")

    def __init__(self, model: Callable[[Any], bool], shadows: list[Any], flags: bytearray):
        self.model = model
        self.shadows = shadows
        self.flags = flags
        self.live = [i for i, item in enumerate(shadows) if not _still(item)]

    def update(self, items: list[Any], same: int) -> int:
        """Read ``items``, whose first ``same`` items equal the kept ones; their turns."""
        shadows, flags, model, live = self.shadows, self.flags, self.model, self.live
        if same < len(shadows):
            del shadows[same:], flags[same:]
            live[:] = [i for i in live if i < same]
        for i in live:
            flags[i] = bool(model(items[i]))
        for i in range(same, len(items)):
            item = items[i]
            kind = type(item)
            if kind is dict:
                shadows.append(item.copy())
            else:
                shadows.append(item)
                if kind is not str:
                    live.append(i)
            flags.append(bool(model(item)))
        # a turn is a run of model items: each starts the list or follows another item
        return flags.count(b"\x00\x01") + flags.startswith(b"\x01")


def _still(item: Any) -> bool:
    """Whether an item's copy tells whether the rule's verdict on it may have changed: a
    dict's (a turn rule reads its fields, which the copy keeps) or a string's."""
    return type(item) is dict or type(item) is str


class Turns:
    """The model turns of the conversations a tape's requests send, read incrementally: the
    count of ``providers.turns`` (property-tested against it), at a cost that follows what
    changed since the conversation was last sent.

    The last ``_MAX_KEPT`` conversations are kept, each as a shallow copy of its items and
    the rule's verdict on each. A request's conversation continues the longest kept one it
    starts with, item for item equal to the copies (one list comparison, in C): a program
    that appends reads only the new items. Equality is what makes it exact: an item edited
    in place (its role changed), replaced, removed or inserted no longer equals its copy,
    and the items from there on are read again, from the longest kept conversation it
    shares a beginning with (the start of a new one). So a list object reused for another
    conversation, two conversations sent in turn (threads, tasks, an agent and its
    sub-agent) and branches of one beginning are each counted right. What only the rule
    can read (an SDK's message object, not a dict) is read again on every request. A turn
    rule reads an item's own fields (its ``role``, its ``type``), which the copy keeps:
    every provider's does.

    >>> from tracetape.integrations.providers import provider
    >>> turns, rule = Turns(), provider("openai").turn
    >>> conversation = [{"role": "user"}, {"role": "assistant"}, {"role": "tool"}]
    >>> turns.count(conversation, rule)
    1
    >>> conversation += [{"role": "assistant"}]
    >>> turns.count(conversation, rule)
    2
    >>> conversation[1]["role"] = "user"
    >>> turns.count(conversation, rule)
    1
    """

    __slots__ = ("_kept",)

    def __init__(self) -> None:
        self._kept: list[_Kept] = []  # the latest sent first

    def count(self, items: Any, model: Callable[[Any], bool]) -> int:
        """``providers.turns(items, model)``."""
        if type(items) is not list:
            return turns(items, model)
        kept = self._kept
        found: _Kept | None = None
        try:
            found, same = self._continued(items, model)
            if found is None:
                found, same = self._nearest(items, model)
            else:
                kept.remove(found)
            kept.insert(0, found)
            del kept[_MAX_KEPT:]
            return found.update(items, same)
        except Exception:  # a comparison that raises (an array's), or a rule: start over
            self._kept = [k for k in kept if k is not found]
            return turns(items, model)

    def _continued(
        self, items: list[Any], model: Callable[[Any], bool]
    ) -> tuple[_Kept | None, int]:
        """The longest kept conversation that ``items`` starts with, and its length (None:
        none)."""
        found: _Kept | None = None
        size = -1
        for kept in self._kept:
            n = len(kept.shadows)
            if kept.model is model and size < n <= len(items) and items[:n] == kept.shadows:
                found, size = kept, n
        return found, size

    def _nearest(self, items: list[Any], model: Callable[[Any], bool]) -> tuple[_Kept, int]:
        """A new kept conversation, holding the longest beginning ``items`` shares with a
        kept one (edited, cut or branched from it), and that beginning's length."""
        best: _Kept | None = None
        size = 0
        for kept in self._kept:
            if kept.model is model:
                same = common_prefix(items, kept.shadows)
                if same > size:
                    best, size = kept, same
        if best is None:
            return _Kept(model, [], bytearray()), 0
        return _Kept(model, best.shadows[:size], best.flags[:size]), size


class StepBook:
    """One tape's steps: the answers a request may continue, the tool calls answers asked for,
    and each thread's or task's latest model step."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._chains: dict[str, int] = {}
        self._asks: dict[str, deque[tuple[Any, str, int]]] = {}
        self._latest: weakref.WeakKeyDictionary[object, int] = weakref.WeakKeyDictionary()
        self._quotes = Quotes()
        # a request of no model turn (its answer may be quoted), by id (the body held, so the
        # id stays its own) until its answer is noted, with the answer it quoted
        self._flat: dict[int, tuple[object, int | None]] = {}
        self._turns = Turns()
        # answers not read yet, oldest first: provider, the chain of the request, step, output
        self._unread: deque[tuple[Provider, str | None, int, Any]] = deque()
        self.last = 0

    def model_step(self, match: Match, body: Mapping[str, Any]) -> int:
        """The step of a model request of route ``match`` with JSON ``body``; it becomes the
        latest step of the calling thread or task."""
        conversation = body.get(match.route.conversation) if match.route.conversation else None
        chain = match.provider.chain(body)
        owner = _owner()
        with self._lock:
            if chain is None:
                continued = 0
            else:
                self._read()
                continued = self._chains.get(chain, 0)
            step = continued + self._turns.count(conversation, match.provider.turn) + 1
            if step > 1:
                self._saw(owner, step)
                return step
        lines = quotable(user_text(conversation, match.provider.user)) if self._quotes else None
        with self._lock:
            found = self._quotes.quoted(lines) if lines else None
            if found is not None:
                step = found[0] + 1
            self._flat[id(body)] = (body, None if found is None else found[1])
            if len(self._flat) > _MAX_PENDING:  # requests never answered (a miss)
                del self._flat[next(iter(self._flat))]
            self._saw(owner, step)
        return step

    def saw(self, step: int) -> None:
        """A model call of ``step`` was made in this thread or task."""
        owner = _owner()
        with self._lock:
            self._saw(owner, step)

    def _saw(self, owner: object, step: int) -> None:
        self.last = step
        try:
            self._latest[owner] = step
        except TypeError:  # an owner without weak references: the tape's latest only
            return

    def answered(self, match: Match, body: Any, step: int, out: Mapping[str, Any]) -> None:
        """Note what the answer of a step-``step`` request says: the tool calls it asks for,
        and its id (and conversation) for a request that continues it. They are read when a
        request that continues an answer, or a tool call, first needs them (``_read``), in
        the order the answers came: most programs make neither."""
        chain = match.provider.chain(body) if isinstance(body, Mapping) else None
        with self._lock:
            flat = self._flat.pop(id(body), None)
            if flat is not None and flat[0] is body:  # a request a later one may quote
                self._read()
                asked = self._note(match.provider, chain, step, out)
                said = functools.partial(answer_text, (match.provider,), out, asked)
                self._quotes.note(step, said, flat[1])
                return
            self._unread.append((match.provider, chain, step, out))
            if len(self._unread) > _MAX_UNREAD:
                self._read()

    def _read(self) -> None:
        """Read the answers noted and not read yet (under the lock)."""
        unread = self._unread
        while unread:
            self._note(*unread.popleft())

    def _note(self, provider: Provider, chain: str | None, step: int, out: Any) -> list[Ask]:
        """Read what an answer says (under the lock); the tool calls it asks for."""
        try:
            asked = provider.asks(out)
            answer = provider.answer_id(out)
        except Exception:  # an answer of an unexpected shape asks for nothing
            asked, answer = [], None
        if answer is not None:
            self._chains[answer] = step
        if chain is not None and chain.startswith("conversation:"):
            self._chains[chain] = step
        for ask in asked:
            self._wait(ask, step)
        return asked

    def _wait(self, ask: Ask, step: int) -> None:
        waiting = self._asks.setdefault(ask.name, deque(maxlen=_MAX_WAITING))
        waiting.append((ask.args, args_text(ask.args), step))

    def tool_step(self, name: str, args: Any) -> int:
        """The step of a tool call: the step of the answer that asked for ``name`` with these
        ``args`` (or, where none did, the oldest that asked for ``name`` with arguments these
        include), else ``current_step``."""
        text = args_text(args)
        with self._lock:
            self._read()
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
    return all(k in args and args_text(args[k]) == args_text(v) for k, v in asked.items())


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


def migrate(records: Iterable[Record], since: int = 1) -> list[Record]:
    """The records of a cassette keyed under keys ``since`` (its header's ``keys``), re-keyed
    as they would be now, from the inputs the records stored.

    Keys 1 counted steps per thread: every hooked model call's step is read from its
    conversation (or the earlier answer its one user message quotes), a tool call's from the
    answer that asked for it (else the latest model call before it). Keys 2 read steps from
    the conversation but knew no quotes: only a model call it keyed 1 whose conversation holds
    no model turn is re-stepped by the answer it quotes, and a tool call follows the answer
    that asked for it (else the latest model call before it) where that one was re-stepped;
    every other record keeps its key (a Responses request continuing a stored answer knows
    its step, which its conversation does not say). A record whose input was not stored keeps
    its key.

    >>> old = Record(kind="llm", key="llm:x", step=4, input={"messages": [{"role": "user"}],
    ...              "tools": [], "params": {}, "step": 4})
    >>> migrate([old])[0].step
    1
    >>> migrate([old], since=2)[0].step
    4
    """
    model = _rule()
    # a tool's name -> what answers asked for it: the arguments, the step recorded, the step now
    book: dict[str, deque[tuple[str, int, int]]] = {}
    quotes = Quotes()
    latest = (0, 0)  # the latest model call's step recorded, and now
    out: list[Record] = []
    for rec in records:
        data = rec.input
        if rec.kind == "llm" and type(data) is dict and data.keys() == _HOOK_PAYLOAD:
            was = data["step"]
            step = turns(data["messages"], model) + 1
            if since >= 2:
                if type(was) is not int:
                    out.append(rec)
                    continue
                flat, step = step == 1 and was == 1, was
            else:
                flat = step == 1
            parent = None
            known = provider_of(rec.api)
            if flat and quotes:
                user = known.user if known is not None else user_turn
                lines = quotable(user_text(data["messages"], user))
                found = quotes.quoted(lines) if lines else None
                if found is not None:
                    step, parent = found[0] + 1, found[1]
            latest = (was if type(was) is int else 0, step)
            out.append(_rekeyed(rec, data, step))
            asked: list[Ask] = []
            for prov in providers():
                asked = _asked(prov, rec.out)
                if asked:
                    for ask in asked:
                        book.setdefault(ask.name, deque()).append((args_text(ask.args), *latest))
                    break
            if flat:
                provs = (known,) if known is not None else providers()
                quotes.note(step, functools.partial(answer_text, provs, rec.out, asked), parent)
            continue
        if rec.kind == "tool" and type(data) is dict and type(data.get("step")) is int:
            waiting = book.get(str(data.get("name")))
            was, step = latest
            if waiting:
                text = args_text(data.get("args"))
                chosen = next((w for w in waiting if w[0] == text), waiting[0])
                waiting.remove(chosen)
                was, step = chosen[1], chosen[2]
            if since >= 2 and was == step:  # asked by an answer that kept its step
                step = data["step"]
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
