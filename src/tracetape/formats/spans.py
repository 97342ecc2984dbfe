"""Span records: one tool span a line, the span-replay schema.

::

    {"span_id": "7f3c", "tool_call": {"argv": [...], "timeout_s": 30, "env_digest": "..."},
     "tool_result": {...}, "model_decision": {"tool_name": "...", "args": {...}}}

with optional ``run_id``/``trace_id``, ``step``, ``effect``, ``tokens``, ``ms``, ``ts`` and
``parent_id``. A line becomes one ``tool`` record: its name is the model decision's
``tool_name`` (else the first word of ``tool_call.argv``), its input the tool call as the tape
keys one (``{"name", "args": <tool_call>, "step"}``, with its key), its ``out`` the full
``tool_result`` (``out_digest`` its normalized fingerprint), and the fields the record has no
place for, the ``model_decision`` first of all, are kept whole in ``extra``. A span names its
run by ``run_id`` or ``trace_id``; a file with neither is one run named after the source.
"""

from __future__ import annotations

from collections.abc import Iterator

import orjson

from ..canonical import fingerprint
from ..record import Record
from ._source import TraceFormat, TraceSource
from .schemas import TOO_DEEP, fmt_of, is_effect, keyed, not_an_effect, readable, schema_of

__all__ = ["read_records"]

_SPAN_FIELDS = frozenset(
    {"span_id", "tool_call", "tool_result", "run_id", "step", "effect", "tokens", "ms", "ts"}
    | {"parent_id"}
)


def read_records(src: TraceSource) -> Iterator[Record]:
    """Read span records ``{"span_id","tool_call","tool_result","model_decision"}``.

    >>> from tracetape.formats import read_records
    >>> line = '{"span_id": "7f3c", "tool_call": {"argv": ["ls", "-a"]}, "tool_result": "ok"}'
    >>> [(r.name, r.step, r.out, r.span_id) for r in read_records([line])]
    [('ls', 1, 'ok', '7f3c')]
    """
    norm = src.normalizer
    counters: dict[str, int] = {}
    for lineno, raw in src.lines():
        try:
            c = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            if raw.strip():
                src.bad(f"line is not valid JSON ({exc})", lineno)
            continue
        if type(c) is not dict:
            src.bad(f"line holds {schema_of(c)}, not a span record", lineno)
            continue
        span_id = c.get("span_id")
        if not isinstance(span_id, str | int):
            hint = ""
            if fmt_of(c) not in (None, TraceFormat.SPANS):
                hint = f"; this line is {schema_of(c)} in a span file (mixed schemas)"
            src.bad(f"missing (a span record needs span_id and tool_call){hint}", lineno, "span_id")
            continue
        if not readable(c):
            src.bad(TOO_DEEP, lineno)
            continue
        call, decision = c.get("tool_call"), c.get("model_decision")
        if not isinstance(call, dict) and not isinstance(decision, dict):
            src.bad("missing: a span record needs a tool_call object", lineno, "tool_call")
            continue
        decision = decision if isinstance(decision, dict) else {}
        call = call if isinstance(call, dict) else {"args": decision.get("args")}
        name = decision.get("tool_name") or call.get("name")
        argv = call.get("argv")
        if not name and isinstance(argv, list) and argv:
            name = str(argv[0])
        run = str(c.get("run_id") or c.get("trace_id") or src.stem)
        step = c.get("step")
        if type(step) is not int:
            step = counters[run] = counters.get(run, 0) + 1
        effect = c.get("effect")
        if effect is not None and not is_effect(effect):
            src.bad(not_an_effect(effect), lineno, "effect")
            continue
        result = c.get("tool_result")
        tokens = c.get("tokens")
        tool = str(name or "tool")
        extra = {k: v for k, v in c.items() if k not in _SPAN_FIELDS}
        yield keyed(
            "tool",
            {"name": tool, "args": call, "step": step},
            seq=lineno,
            run=run,
            name=tool,
            out=result,
            out_digest=None if result is None else fingerprint(result, norm),
            effect=effect,
            tokens=tokens if type(tokens) is int else None,
            ms=c.get("ms"),
            ts=c.get("ts"),
            span_id=str(span_id),
            parent_id=c.get("parent_id"),
            extra=extra or None,
            source=src.name,
            line=lineno,
        )
