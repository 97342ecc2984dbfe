"""Causes: why two runs part at a call, named from a fixed vocabulary.

Where two runs first differ (their *origin*), either the call asked something else (the
*input* side), or it asked the same and got another answer (the *output* side), or one run
ended where the other went on. The cause, by these rules (``CAUSES`` in this order):

=========  ======  ===========================================================================
cause      side    when
=========  ======  ===========================================================================
model      output  the same model request got another answer
tool       output  the same tool call (name and arguments) returned another result
env        output  the same environment read (or HTTP request) returned another value
input      input   a model request's user message(s) differ
prompt     input   its system / developer instructions differ
config     input   other request fields differ: model, temperature, tools, tool_choice, ...
code       input   a tool or env call's arguments differ, or a model request's earlier turns
                   differ, although every earlier answer and result matched
ending     ending  one run ends (or ends failed, interrupted) where the other goes on
=========  ======  ===========================================================================

A model request is split into those parts (``request_parts``) by the provider table's
knowledge (``Provider.instructions``, ``instruction_roles``, ``user``) of the record's
provider; a record whose provider is unknown is read with every provider's declarations.
``answer_changes`` says how two answers to the same request differ, as a person reads them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..canonical import Normalizer, changed_paths, digest, excerpt, normalize
from ..integrations.providers import Provider, answer_of, provider_of, providers
from ..record import Record
from ..redact import redacted

__all__ = [
    "CALL_IDS",
    "CAUSES",
    "PART_CAUSE",
    "Cause",
    "answer_changes",
    "answer_digest",
    "brief_value",
    "change_row",
    "input_causes",
    "json_text",
    "output_cause",
    "part_of",
    "request_parts",
    "same_answer",
]


@dataclass(frozen=True)
class Cause:
    """One cause: its ``side``, what the verdict says of it (``says``, of the call's kind and
    name) and what to do about it (``fix``)."""

    name: str
    side: str
    says: str
    fix: str


CAUSES: dict[str, Cause] = {
    c.name: c
    for c in (
        Cause(
            "model",
            "output",
            "the model answered the same request differently",
            "The model is not deterministic on this request: pin temperature and seed where "
            "the API allows, make the agent robust to either answer, or re-record the "
            "baseline if the new answer is right",
        ),
        Cause(
            "tool",
            "output",
            "the tool {name} returned another result for the same call",
            "Replay the span live (tracetape span replay) to tell a flaky tool from a world "
            "that changed; add freshness checks to context if its data is live",
        ),
        Cause(
            "env",
            "output",
            "the environment read {name} returned another value for the same request",
            "Pin the value the run reads (config, clock, endpoint) or accept the drift and "
            "re-record the baseline",
        ),
        Cause(
            "input",
            "input",
            "the user's input to the model changed",
            "A different task gives a different run: compare runs of the same input, or "
            "re-record the baseline for the new one",
        ),
        Cause(
            "prompt",
            "input",
            "the system instructions changed",
            "Review the prompt change; if the new behaviour is intended, re-record the baseline",
        ),
        Cause(
            "config",
            "input",
            "the request's settings changed (model, temperature, tools, ...)",
            "Review the settings change; if it is intended, re-record the baseline",
        ),
        Cause(
            "code",
            "input",
            "the agent sent another {kind} call although every earlier answer and result matched",
            "The harness changed what it sends: review the code change between the runs "
            "(the changed fields name where)",
        ),
        Cause(
            "ending",
            "ending",
            "one run ended where the other went on",
            "Look at how the shorter run ended (its last call, its error); re-record the "
            "baseline only if the new ending is right",
        ),
    )
}

# A model request's parts, and the cause a difference in each names.
PART_CAUSE = {"user": "input", "prompt": "prompt", "config": "config", "history": "code"}
_OUTPUT_CAUSE = {"llm": "model", "env": "env", "http": "env"}


# The ids an SDK or a provider gives each tool call (OpenAI ``id`` and ``tool_call_id``,
# Responses ``call_id``, Anthropic ``tool_use_id``, Bedrock ``toolUseId``): new on every run,
# they say nothing of what a request asks.
CALL_IDS = frozenset({"id", "tool_call_id", "call_id", "tool_use_id", "toolUseId"})


def output_cause(kind: str | None) -> str:
    """The cause of another answer to the same call of ``kind``.

    >>> output_cause("llm"), output_cause("tool"), output_cause("http")
    ('model', 'tool', 'env')
    """
    return _OUTPUT_CAUSE.get(kind or "", "tool")


def _declared(api: str | None) -> Sequence[Provider]:
    prov = provider_of(api)
    return (prov,) if prov is not None else providers()


def request_parts(args: Any, api: str | None = None) -> dict[str, Any]:
    """A model request's arguments (``{"messages", "tools", "params"}``) in the parts a
    cause names: ``prompt`` (the system instructions, in body fields or conversation items),
    ``user`` (the user's turns), ``history`` (the model's turns and the tool results fed back,
    in order) and ``config`` (every other field, the tools among them).

    >>> parts = request_parts({"messages": [{"role": "system", "content": "Be brief."},
    ...     {"role": "user", "content": "hi"}], "tools": [], "params": {"model": "m"}},
    ...     "openai.chat.completions")
    >>> parts["prompt"], parts["user"]
    ([{'role': 'system', 'content': 'Be brief.'}], [{'role': 'user', 'content': 'hi'}])
    >>> parts["config"]
    {'params': {'model': 'm'}, 'tools': []}
    """
    declared = _declared(api)
    if not isinstance(args, Mapping):
        return {"prompt": [], "user": [], "history": [], "config": args}
    fields = {f for p in declared for f in p.instructions}
    params = args.get("params")
    params = dict(params) if isinstance(params, Mapping) else {}
    parts: dict[str, list[Any]] = {"prompt": [], "user": [], "history": []}
    parts["prompt"] += [{f: params.pop(f)} for f in sorted(fields) if f in params]
    for item in _items(args):
        parts[_item_part(item, declared)].append(item)
    rest = {k: v for k, v in args.items() if k not in ("messages", "params", "tools")}
    config = {"params": params, "tools": args.get("tools"), **rest}
    return {**parts, "config": config}


def _items(args: Mapping[str, Any]) -> list[Any]:
    messages = args.get("messages")
    items = [messages] if isinstance(messages, str) else messages
    return items if isinstance(items, list) else []


def _item_part(item: Any, declared: Sequence[Provider]) -> str:
    """The part a conversation item belongs to: ``prompt``, ``user`` or ``history``."""
    role = item.get("role") if isinstance(item, Mapping) else None
    if isinstance(role, str) and any(role.lower() in p.instruction_roles for p in declared):
        return "prompt"
    if any(p.user(item) for p in declared):
        return "user"
    return "history"


_ITEM = re.compile(r"messages\[(\d+)\]")


def part_of(path: str, args: Any, api: str | None = None) -> str:
    """The part of a model request (``request_parts``) a changed path of its arguments lies
    in: ``prompt``, ``user``, ``history`` or ``config``.

    >>> args = {"messages": [{"role": "system", "content": "x"}, {"role": "user",
    ...     "content": "y"}], "params": {"temperature": 0}}
    >>> [part_of(p, args, "openai.chat") for p in ("messages[0].content", "messages[1]",
    ...     "params.temperature", "name")]
    ['prompt', 'user', 'config', 'config']
    """
    declared = _declared(api)
    head = path.split(".", 1)
    if head[0] == "params" and len(head) > 1:
        field = re.split(r"[.\[]", head[1], maxsplit=1)[0]
        return "prompt" if any(field in p.instructions for p in declared) else "config"
    found = _ITEM.match(path)
    if found and isinstance(args, Mapping):
        items = _items(args)
        index = int(found[1])
        if index < len(items):
            return _item_part(items[index], declared)
        return "history"
    if path == "messages" and isinstance(args, Mapping) and isinstance(args.get("messages"), str):
        return "user"
    return "config"


def input_causes(
    a: tuple[str, str, Any, str | None], b: tuple[str, str, Any, str | None]
) -> list[str]:
    """The causes of two calls at one position that asked different things: each is
    (kind, name, normalized arguments, api). Model requests name the parts that differ
    (``request_parts``); a tool or env call whose arguments differ, or a call of another
    kind or tool, names ``code``. In ``CAUSES`` order.

    >>> input_causes(("tool", "ls", {"p": 1}, None), ("tool", "ls", {"p": 2}, None))
    ['code']
    """
    kind_a, name_a, args_a, api_a = a
    kind_b, name_b, args_b, api_b = b
    if kind_a != "llm" or kind_b != "llm":
        return ["code"]
    parts_a, parts_b = request_parts(args_a, api_a), request_parts(args_b, api_b or api_a)
    found = {PART_CAUSE[p] for p in parts_a if parts_a[p] != parts_b[p]}
    if name_a != name_b:
        found.add("config")  # the model asked
    return [c for c in CAUSES if c in found] or ["code"]


def json_text(value: Any) -> str:
    """A value as text: a string as it is, anything else as JSON.

    >>> json_text("eu"), json_text(21), json_text({"b": 1, "a": [2]})
    ('eu', '21', '{"a": [2], "b": 1}')
    """
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def brief_value(value: Any, width: int = 120) -> str | None:
    """A value as a short text for a change's before/after (None stays None), redacted
    before it is cut (a secret cut short is no longer found).

    >>> brief_value("x " * 54 + "sk-proj-" + "Q1w2E3r4T5y6U7i8O9p0A1s2D3f4")[-14:]
    'x [REDACTED:o…'
    """
    if value is None:
        return None
    text: str = redacted(json_text(value))
    return text if len(text) <= width else text[: width - 1] + "…"


def answer_changes(
    kind: str,
    a: Record | None,
    b: Record | None,
    digests: tuple[str | None, str | None],
    norm: Normalizer | None = None,
) -> list[dict[str, Any]]:
    """How two answers to the same call differ, as ``{"path", "before", "after"}`` rows of
    short texts. A model's answers by what they say (``answer.calls``: the tool calls asked
    for, ``answer.text``), other outputs by their changed paths; where the records are not
    at hand (the seed's JSONL holds the output's digest only), the digests.

    >>> a = Record(kind="tool", name="w", out={"temp_c": 9})
    >>> answer_changes("tool", a, Record(kind="tool", name="w", out={"temp_c": 21}), ("1", "2"))
    [{'path': 'temp_c', 'before': '9', 'after': '21'}]
    """
    if a is None or b is None or (a.out is None and b.out is None):
        return [{"path": "output_sha", "before": digests[0], "after": digests[1]}]
    if kind == "llm":
        text_a, calls_a = answer_of(a.out, a.api)
        text_b, calls_b = answer_of(b.out, b.api or a.api)
        rows = []
        if calls_a != calls_b:
            rows.append(change_row("answer.calls", _calls(calls_a), _calls(calls_b)))
        if text_a != text_b:
            rows.append(change_row("answer.text", text_a, text_b))
        if rows:
            return rows
    changes = changed_paths(normalize(a.out, norm), normalize(b.out, norm), limit=20)
    return [change_row(c.path.lstrip("$") or "output", c.before, c.after) for c in changes]


def answer_digest(
    out: Any, api: str | None, norm: Callable[[Any], Any] | None = None
) -> str | None:
    """The digest of what a provider's answer says (its text and the tool calls it asks
    for, not its envelope's ids), for an output recorded at a provider's boundary (``api``);
    None for any other output (its digest stays its whole output's). ``norm``: a
    ``Normalizer``, or one that gives the same values (``normalize.MemoNormalizer``).

    >>> body = {"choices": [{"message": {"content": "hi"}}]}
    >>> a = answer_digest({"status": 200, "body": {"id": "chatcmpl-1", **body}}, "openai.chat")
    >>> a == answer_digest({"status": 200, "body": {"id": "chatcmpl-2", **body}}, "openai.chat")
    True
    >>> answer_digest({"content": "hi"}, None) is None
    True
    """
    if out is None or provider_of(api) is None:
        return None
    return digest((norm or normalize)(list(answer_of(out, api))))


def same_answer(a: Record, b: Record) -> bool:
    """Whether two model answers say the same: the same text and the same tool calls (the
    envelope's ids, timestamps and usage aside)."""
    return answer_of(a.out, a.api) == answer_of(b.out, b.api or a.api)


def _calls(calls: Iterable[str]) -> str | None:
    found = list(calls)
    return "; ".join(found) if found else None


def change_row(path: str, before: Any, after: Any, width: int = 120) -> dict[str, Any]:
    """One changed path as the report keeps it: two long texts cut to where they differ,
    with context around; other values as short texts.

    >>> text = ("fine " * 30) + "the weather in {} " + "and more " * 30
    >>> row = change_row("q", text.format("Paris"), text.format("Rome"))
    >>> row["before"]
    '…fine fine fine fine fine the weather in Paris and more and more and more and more and…'
    >>> row["after"]
    '…fine fine fine fine fine the weather in Rome and more and more and more and more and…'
    """
    if isinstance(before, str) and isinstance(after, str) and max(len(before), len(after)) > width:
        # redacted whole first: an excerpt cut through a secret would no longer be found
        before, after = excerpt(redacted(before), redacted(after), (width - 40) // 2)
    return {"path": path, "before": brief_value(before, width), "after": brief_value(after, width)}
