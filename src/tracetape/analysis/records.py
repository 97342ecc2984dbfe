"""The records behind an analysis's calls: the few the report shows (a diff's origin, the
summary of the runs it compares) read back whole from where they came.

The engine keeps a row a call; a row holds a call's arguments and the digest of its output,
not its output. ``records_at`` gives the records of chosen calls: from a store's texts or a
list of records the analysis was given (``Calls.kept``), or, for a file read by the Python
readers, from its records kept as read (up to ``load.KEEP_BYTES``) or read again, once. The
seed's JSONL and Parquet hold nothing beyond their rows: none. ``brief=True`` decodes a
store's text without its input and output (``Brief``: timing, tokens, the model, the api).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable
from typing import Any

import msgspec

from ..formats import TraceFormat, read_records
from ..formats.cassette import fill_steps
from ..record import Record, decode_record
from .engine import ROW_BITS, Calls

__all__ = ["Brief", "records_at"]


class Brief(msgspec.Struct, frozen=True, gc=False):
    """What a record says of its call but its input and output: decoded from a store's text
    skipping those (the summary of a run reads every call's timing and tokens)."""

    kind: str
    name: str | None = None
    api: str | None = None
    ms: float | None = None
    usage: dict[str, int] | None = None
    tokens: int | None = None


_decode_brief = msgspec.json.Decoder(Brief).decode


def records_at(calls: Calls, ords: Iterable[int], *, brief: bool = False) -> dict[int, Any]:
    """The records of the calls at ``ords``, where an input holds more than its row (a
    cassette, span or OTLP file, a store's texts; not the seed's JSONL nor Parquet, whose
    rows are all they hold). A file not kept as read is read again, once. ``brief``: a
    store's texts are decoded without their input and output (``Brief``)."""
    decode: Callable[[bytes], Any] = _decode_brief if brief else decode_record
    mask = (1 << ROW_BITS) - 1
    found: dict[int, Any] = {}
    for o in sorted(set(ords)):
        index = o >> ROW_BITS
        start = calls.starts.get(index)
        if start is None:
            continue
        kept = calls.kept.get(index)
        if kept is None:
            kept = calls.kept[index] = _read_again(calls, index)
        k = (o & mask) - start
        if 0 <= k < len(kept):
            item = kept[k]
            found[o] = decode(item) if isinstance(item, bytes) else item
    return found


def _read_again(calls: Calls, index: int) -> list[Record]:
    inp = calls.inputs[index]
    if inp.fmt is TraceFormat.JSONL:  # its records hold what its rows do
        return []
    with warnings.catch_warnings():  # said when it was read first
        warnings.simplefilter("ignore")
        records = read_records(
            inp.path,
            inp.fmt,
            normalizer=calls.config.normalizer,
            skip_bad_lines=calls.skip_bad_lines,
        )
        if inp.fmt is TraceFormat.CASSETTE:
            records = fill_steps(records)
        return list(records)
