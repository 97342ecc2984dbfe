"""``Record``: the one shape of a decision, from the tape to every format, store and report.

A record is one decision of one run (a model request, a tool call, an environment read) with
what it returned. The tape writes them, the cassette and trace readers yield them, the stores
keep them, the analysis and the OTLP export read them, and ``ReplayMiss.expected`` is one. A
format that does not hold a field leaves it ``None`` (the seed's JSONL trace stores only the
output's digest, so its ``out`` is ``None`` and its ``out_digest`` is set).

``Decision`` is a record before it has an output: a boundary input, canonicalized, redacted
and keyed. ``Tape.prepare`` makes one, ``Tape.play`` looks it up and ``Tape.record`` turns it
into a ``Record``.

This module imports nothing of tracetape's.
"""

from __future__ import annotations

import builtins
import functools
import importlib
import json
import re
from collections.abc import Mapping
from typing import Annotated, Any, NamedTuple, get_type_hints

import msgspec

__all__ = [
    "INT64_MAX",
    "RAISED",
    "UNKEYED",
    "Decision",
    "Record",
    "RecordTexts",
    "Unkeyed",
    "call_args",
    "call_text",
    "decode_record",
    "keyed_input",
    "raised_record",
    "record_problem",
    "reraise",
]

INT64_MAX = (1 << 63) - 1
# What a store's columns hold: 64-bit numbers, counts that are not negative, a short kind.
Int64 = Annotated[int, msgspec.Meta(ge=-INT64_MAX - 1, le=INT64_MAX)]
Count = Annotated[int, msgspec.Meta(ge=0, le=INT64_MAX)]
Kind = Annotated[str, msgspec.Meta(min_length=1, max_length=32)]


class Record(msgspec.Struct, frozen=True, kw_only=True, gc=False, omit_defaults=True):
    """One decision of one run and its output, whatever file, store or hook it came from.

    ``kind`` is ``"llm"``, ``"tool"``, ``"env"``... and ``key`` the decision key
    (``kind:<16 hex>``) when the source has or allows one. ``name`` is the tool or model,
    ``input`` the redacted copy of the decision's input (``None`` when not stored), ``out``
    the output and ``out_digest`` its digest (the normalized fingerprint, or the trace's own
    ``output_sha``). ``seq`` is the record's number as the source gives it (``None`` where the
    format numbers nothing), ``digests`` the per-field digests of the input
    (``canonical.field_digests``), ``extra`` whatever fields of the source line have no place
    here (a span's ``model_decision``), and ``source``/``line`` where it was read from.
    Encoded as JSON (how a store keeps it), a field at its default is left out. Every field
    is typed (numbers are 64-bit, counts not negative, ``kind`` at most 32 characters):
    ``record_problem`` says which field of a record built by a reader is not, so what a store
    keeps can always be decoded again.

    >>> rec = Record(kind="tool", key="tool:7d66ff5c9b68eeda", name="search", step=1,
    ...              input={"name": "search", "args": {"q": "x"}, "step": 1}, out=["#12"])
    >>> rec.name, rec.out, call_args(rec)
    ('search', ['#12'], {'q': 'x'})
    """

    kind: Kind
    key: str | None = None
    seq: Int64 | None = None
    run: str | None = None
    name: str | None = None
    step: Int64 | None = None
    input: Any = None
    out: Any = None
    out_digest: str | None = None
    effect: str | None = None
    tokens: Count | None = None
    usage: dict[str, Count] | None = None
    api: str | None = None
    ms: float | None = None
    ts: str | None = None
    span_id: str | None = None
    parent_id: str | None = None
    digests: dict[str, Any] | None = None
    extra: dict[str, Any] | None = None
    source: str = ""
    line: Count = 0


@functools.cache
def _decoder() -> msgspec.json.Decoder[Record]:
    return msgspec.json.Decoder(Record)


def decode_record(text: bytes | str) -> Record:
    """A record from its JSON text (``msgspec.json.encode``'s, as a store keeps it). The
    decoder is built on first use: every process that starts pays for what it imports."""
    return _decoder().decode(text)


_PROBLEM = re.compile(r"(?P<what>.*?)(?: - at `\$\[(?P<index>\d+)\](?P<rest>[^`]*)`)?")


@functools.cache
def _typed() -> Any:
    """The record's fields as an array (``astuple``), typed alike: converting a tuple checks
    every field in about half the time a mapping takes (built on first use)."""
    hints = get_type_hints(Record, include_extras=True)
    fields = [(name, hints[name]) for name in Record.__struct_fields__]
    return msgspec.defstruct("_TypedRecord", fields, array_like=True)


def record_problem(rec: Record) -> tuple[str, str] | None:
    """The first field of ``rec`` whose value is not of its declared type, as (field path,
    what it must be), or None: the types are checked, never the values echoed (a refused
    value may be a secret).

    >>> record_problem(Record(kind="tool", ts=1764780000))
    ('ts', 'must be `str | null`, found `int`')
    >>> record_problem(Record(kind="tool", step=1 << 63))
    ('step', 'must be `int` <= 9223372036854775807')
    >>> record_problem(Record(kind="tool", usage={"input": -3}))
    ('usage', 'must be `int` >= 0')
    >>> record_problem(Record(kind="tool", usage={"input": 3}, ms=12))
    """
    try:
        msgspec.convert(msgspec.structs.astuple(rec), _typed())
    except msgspec.ValidationError as exc:
        found = _PROBLEM.fullmatch(str(exc))
        path, what = "", str(exc)
        if found:
            what = found["what"]
            if found["index"] is not None:
                # a mapping's value is ``[...]`` in msgspec's path: the field names it
                path = Record.__struct_fields__[int(found["index"])]
                path += found["rest"].replace("[...]", "")
        what = re.sub(r"^Expected (.*?), got (`[^`]*`)$", r"must be \1, found \2", what)
        return path, re.sub(r"^Expected ", "must be ", what)
    return None


class RecordTexts(NamedTuple):
    """Records as the JSON texts (UTF-8) ``msgspec.json.encode`` gives for them, the way a
    store keeps them: the analysis reads them in bulk (``analysis.diff_records``) without
    decoding each.

    >>> texts = RecordTexts([msgspec.json.encode(Record(kind="tool", name="ls"))])
    >>> [rec.name for rec in texts.records()]
    ['ls']
    """

    texts: list[bytes]

    def records(self) -> list[Record]:
        """The records, decoded."""
        return [decode_record(text) for text in self.texts]


def call_args(rec: Record) -> Any:
    """The call's arguments, for comparing calls: ``input["args"]``, else the input without
    its ``step`` and what was never keyed (``UNKEYED``); a record whose input was not stored
    is compared by its key.

    >>> call_args(Record(kind="llm", key="llm:1", input={"messages": [], "step": 2,
    ...     "unkeyed": {"user": "u-1"}}))
    {'messages': []}
    >>> call_args(Record(kind="llm", key="llm:1"))
    {'key': 'llm:1'}
    """
    data = rec.input
    if data is None:
        return {"key": rec.key}
    if isinstance(data, dict):
        if "args" in data:
            return data["args"]
        return {k: v for k, v in keyed_input(data).items() if k != "step"}
    return data


def call_text(name: str, args: Any) -> str:
    """A tool call as it reads: ``get_weather(city="Paris", days=2)``.

    >>> call_text("get_weather", {"city": "Paris", "days": 2}), call_text("now", None)
    ('get_weather(city="Paris", days=2)', 'now()')
    """
    if args is None or args == {}:
        return f"{name}()"
    if isinstance(args, Mapping):
        inner = ", ".join(
            f"{k}={json.dumps(v, ensure_ascii=False, default=str)}" for k, v in args.items()
        )
    else:
        inner = json.dumps(args, ensure_ascii=False, default=str)
    return f"{name}({inner})"


# The field of a stored input that holds what was stored but never keyed: a model request's
# fields that never reach the model (a provider's noise: Anthropic's ``metadata``, OpenAI's
# ``user``, ``store``, ``prompt_cache_key``...). A key is the input's without it.
UNKEYED = "unkeyed"
Unkeyed = Any  # what a decision stores there, any JSON value (None: nothing)


def keyed_input(data: Any) -> Any:
    """A stored input as its key saw it: without its ``UNKEYED`` field (the same object when
    it has none).

    >>> keyed_input({"messages": [], "step": 1, "unkeyed": {"user": "u-1"}})
    {'messages': [], 'step': 1}
    """
    if type(data) is dict and UNKEYED in data:
        return {k: v for k, v in data.items() if k != UNKEYED}
    return data


class Decision(NamedTuple):
    """A boundary input, keyed: what ``Tape.prepare`` returns and ``play``/``record`` take.

    ``text`` is the redacted canonical JSON text the key was hashed from: a ``str``, or its
    ASCII bytes where replay keyed it without decoding (``blob`` is always the ``str``).
    ``payload`` is the whole input where match rules keyed less of it (replay: a miss names
    what the rules left out of the comparison).
    """

    kind: str
    key: str
    text: str | bytes
    step: int | None
    payload: Any = None

    @property
    def blob(self) -> str:
        """The redacted canonical JSON text, as ``str``."""
        text = self.text
        return text.decode() if isinstance(text, bytes) else text

    def input(self) -> Any:
        """The redacted input as plain JSON data."""
        return json.loads(self.text)


# The output a record holds in place of a result when the call raised (a tool's exception, an
# HTTP request's connection error or timeout): ``{RAISED: {"type", "args", "message"}}``.
RAISED = "tracetape:raised"


def raised_record(exc: Exception) -> dict[str, Any]:
    """The output recorded in place of a tool's result when the tool raised ``exc``."""
    cls = type(exc)
    raw = list(exc.args)
    if isinstance(exc, OSError) and exc.filename is not None and len(raw) == 2:
        raw.append(exc.filename)  # OSError keeps the filename out of args; its constructor takes it
    args = [a if isinstance(a, str | int | float | bool | None) else str(a) for a in raw]
    return {
        RAISED: {"type": f"{cls.__module__}.{cls.__qualname__}", "args": args, "message": str(exc)}
    }


def reraise(out: Any) -> Any:
    """Return a replayed output, or raise the exception recorded in its place (by
    ``raised_record``: a tool's, or an HTTP request's connection error or timeout)."""
    if not (isinstance(out, dict) and len(out) == 1 and RAISED in out):
        return out
    info = out[RAISED]
    module, _, qualname = str(info.get("type", "")).rpartition(".")
    exc: BaseException | None = None
    try:
        target: Any = builtins if module == "builtins" else importlib.import_module(module)
        for part in qualname.split("."):
            target = getattr(target, part)
        if isinstance(target, type) and issubclass(target, Exception):
            exc = target(*info.get("args", []))
    except Exception:  # any failure to rebuild falls back to a RuntimeError
        exc = None
    if exc is None:
        exc = RuntimeError(f"{info.get('type')}: {info.get('message')} (replayed tool error)")
    raise exc
