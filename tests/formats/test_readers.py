"""The readers: every trace format becomes the same records; bad input is named precisely."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracetape import Record, Tape, read_cassette
from tracetape.canonical import canonical_json, key_of
from tracetape.errors import CassetteVersionError, TapeWarning, TraceError
from tracetape.formats import TraceFormat, detect_format, read_records
from tracetape.record import call_args

from ..analysis.helpers import SEED_A, SEED_B, call, write_jsonl


def _events(path: Path, **kw: object) -> list[Record]:
    return list(read_records(path, **kw))  # type: ignore[arg-type]


def test_seed_jsonl_lines_become_tool_events(tmp_path: Path) -> None:
    """Each seed-schema line becomes one tool event carrying its run, step, args and output."""
    path = write_jsonl(tmp_path / "t.jsonl", SEED_A)
    events = _events(path)
    assert [(e.run, e.step, e.kind, e.name, e.out_digest, e.tokens, e.line) for e in events] == [
        ("run_0042", 1, "tool", "search_issues", "a1b2c3", 812, 1),
        ("run_0042", 2, "tool", "search_issues", "a1b2c3", 812, 2),
    ]
    assert call_args(events[0]) == {"q": "broken:true", "page": 1}
    assert detect_format(path) is TraceFormat.JSONL


def test_optional_seed_fields_are_honoured(tmp_path: Path) -> None:
    """effect, span_id, parent_id and ms are read when a line has them."""
    rec = call(
        "r",
        1,
        "write_file",
        {"path": "a"},
        "x",
        effect="write",
        span_id="s1",
        parent_id="p0",
        ms=3.5,
    )
    (event,) = _events(write_jsonl(tmp_path / "t.jsonl", [rec]))
    assert (event.effect, event.span_id, event.parent_id, event.ms) == ("write", "s1", "p0", 3.5)


def _cassette(path: Path, *, write: bool = False) -> Path:
    """A recorded cassette: a model call and a read (and, with ``write``, a write at step 2)."""
    with Tape(path, mode="record", harness_sha="h") as tape:
        tape.call(
            "llm",
            {"messages": [{"role": "user", "content": "hi"}], "params": {"model": "m1"}, "step": 1},
            lambda: {"text": "ok", "usage": {"total_tokens": 9}},
        )
        tape.call(
            "tool", {"name": "ls", "args": {"path": "/"}, "step": 1}, lambda: ["a"], effect="read"
        )
        if write:
            rm = {"name": "rm", "args": {"path": "/a"}, "step": 2}
            tape.call("tool", rm, lambda: True, effect="write")
    return path


def test_cassettes_of_both_formats_are_read(tmp_path: Path) -> None:
    """A tracetape cassette and a seed reference cassette (format 0) both yield events."""
    path = _cassette(tmp_path / "run_1.jsonl", write=True)
    events = _events(path)
    assert detect_format(path) is TraceFormat.CASSETTE
    # a cassette's run is its header's unique id: its name and 12 hex digits
    assert all(re.fullmatch(r"run_1@[0-9a-f]{12}", e.run or "") for e in events)
    assert [("run_1", e.step, e.kind, e.name, e.effect) for e in events] == [
        ("run_1", 1, "llm", "m1", "read"),
        ("run_1", 1, "tool", "ls", "read"),
        ("run_1", 2, "tool", "rm", "write"),
    ]
    assert call_args(events[1]) == {"path": "/"}
    assert events[0].tokens == 9
    seed = tmp_path / "seed.jsonl"
    seed.write_text('{"key": "tool:abc", "kind": "tool", "ms": 1.0, "out": 1}\n')
    (old,) = _events(seed)
    assert (old.run, old.kind, call_args(old), old.effect) == (
        "seed",
        "tool",
        {"key": "tool:abc"},
        None,
    )


def test_a_newer_cassette_format_is_refused(tmp_path: Path) -> None:
    """A cassette header of an unknown format raises a version error naming line 1."""
    path = tmp_path / "c.jsonl"
    path.write_text('{"tracetape": 9, "version": "9.0"}\n')
    with pytest.raises(CassetteVersionError, match=r"c\.jsonl:1: .*format 9"):
        _events(path)


def test_span_records_are_read(tmp_path: Path) -> None:
    """Span records become tool events named by the model decision, compared on tool_call."""
    span = {
        "span_id": "7f3c",
        "tool_call": {
            "argv": ["git", "diff", "--stat"],
            "env_digest": "sha256:9a1e",
            "timeout_s": 30,
        },
        "tool_result": {"exit_code": 0, "stdout": " 3 files changed", "stderr": ""},
        "model_decision": {"tool_name": "git_diff_stat", "args": {}, "model_id": "<redacted>"},
    }
    path = write_jsonl(tmp_path / "spans.jsonl", [span, {**span, "span_id": "8a00"}])
    events = _events(path)
    assert detect_format(path) is TraceFormat.SPANS
    assert [(e.name, e.step, e.span_id) for e in events] == [
        ("git_diff_stat", 1, "7f3c"),
        ("git_diff_stat", 2, "8a00"),
    ]
    assert call_args(events[0])["argv"] == ["git", "diff", "--stat"]
    assert events[0].out_digest == events[1].out_digest


@pytest.mark.parametrize("effect", [["write"], {"w": 1}, 5])
def test_a_span_record_with_an_effect_of_another_type_names_the_field(
    tmp_path: Path, effect: object
) -> None:
    """An effect that is a list, an object or a number is a bad line, named, not a crash."""
    span = {"span_id": "7f3c", "model_decision": {"tool_name": "ls", "args": {}}}
    path = write_jsonl(tmp_path / "spans.jsonl", [span, {**span, "effect": effect}])
    with pytest.raises(TraceError, match="'read', 'write'") as info:
        _events(path)
    assert (info.value.line, info.value.field) == (2, "effect")


def _kv(key: str, value: object) -> dict[str, object]:
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    return {"key": key, "value": {"stringValue": value}}


def otlp_doc() -> dict[str, object]:
    """A small OTLP/JSON trace: an agent span, a chat span and a tool span (GenAI conventions)."""
    trace = "5b8efff798038103d269b633813fc60c"
    spans = [
        {
            "traceId": trace,
            "spanId": "aaaaaaaaaaaaaaaa",
            "name": "invoke_agent",
            "startTimeUnixNano": "1000",
            "endTimeUnixNano": "9000",
            "attributes": [_kv("gen_ai.operation.name", "invoke_agent")],
        },
        {
            "traceId": trace,
            "spanId": "cccccccccccccccc",
            "parentSpanId": "aaaaaaaaaaaaaaaa",
            "name": "execute_tool search",
            "startTimeUnixNano": "3000000",
            "endTimeUnixNano": "5000000",
            "attributes": [
                _kv("gen_ai.operation.name", "execute_tool"),
                _kv("gen_ai.tool.name", "search"),
                _kv("gen_ai.tool.call.arguments", '{"q": "x"}'),
                _kv("gen_ai.tool.call.result", '{"hits": 2}'),
            ],
        },
        {
            "traceId": trace,
            "spanId": "bbbbbbbbbbbbbbbb",
            "parentSpanId": "aaaaaaaaaaaaaaaa",
            "name": "chat gpt-x",
            "startTimeUnixNano": "2000",
            "endTimeUnixNano": "2500000",
            "attributes": [
                _kv("gen_ai.operation.name", "chat"),
                _kv("gen_ai.request.model", "gpt-x"),
                _kv(
                    "gen_ai.input.messages",
                    '[{"role": "user", "parts": [{"type": "text", "content": "hi"}]}]',
                ),
                _kv("gen_ai.output.messages", '[{"role": "assistant", "parts": []}]'),
                _kv("gen_ai.usage.input_tokens", 10),
                _kv("gen_ai.usage.output_tokens", 5),
            ],
        },
    ]
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": []},
                "scopeSpans": [{"scope": {"name": "t"}, "spans": spans}],
            }
        ]
    }


@pytest.mark.parametrize(
    "layout",
    [pytest.param("document", id="pretty-document"), pytest.param("jsonl", id="one-per-line")],
)
def test_otlp_json_is_read_with_genai_conventions(tmp_path: Path, layout: str) -> None:
    """OTLP/JSON spans become chat and tool events in start-time order, with tokens, parents."""
    path = tmp_path / "otlp.json"
    doc = otlp_doc()
    path.write_bytes(
        orjson.dumps(doc, option=orjson.OPT_INDENT_2)
        if layout == "document"
        else orjson.dumps(doc) + b"\n"
    )
    assert detect_format(path) is TraceFormat.OTLP
    events = _events(path)
    assert [(e.kind, e.name, e.step, e.tokens, e.parent_id) for e in events] == [
        ("llm", "gpt-x", 1, 15, "aaaaaaaaaaaaaaaa"),
        ("tool", "search", 1, None, "aaaaaaaaaaaaaaaa"),
    ]
    assert call_args(events[1]) == {"q": "x"}
    assert events[1].ms == pytest.approx(2.0)


@pytest.mark.parametrize(
    ("value", "effect"),
    [
        ({"stringValue": "write"}, "write"),
        ({"stringValue": "delete"}, None),
        ({"arrayValue": {"values": [{"stringValue": "write"}]}}, None),
        ({"kvlistValue": {"values": [{"key": "w", "value": {"intValue": "1"}}]}}, None),
    ],
)
def test_an_otlp_effect_is_kept_only_where_it_is_one_of_the_three(
    tmp_path: Path, value: dict[str, object], effect: str | None
) -> None:
    """A span's ``tracetape.effect`` of another value or type is dropped, not a crash."""
    doc: Any = otlp_doc()
    tool = doc["resourceSpans"][0]["scopeSpans"][0]["spans"][1]
    tool["attributes"].append({"key": "tracetape.effect", "value": value})
    path = tmp_path / "otlp.json"
    path.write_bytes(orjson.dumps(doc))
    assert [e.effect for e in _events(path) if e.kind == "tool"] == [effect]


@pytest.mark.parametrize(
    ("text", "match"),
    [
        pytest.param("", "empty", id="empty-file"),
        pytest.param("\n\n", "empty", id="blank-lines-only"),
        pytest.param("{'span_id': '7f3c'}\n", "Python dict repr", id="python-repr"),
        pytest.param("not json\n", "not valid JSON", id="not-json"),
        pytest.param('{"hello": 1}\n', "cannot tell the trace format.*hello", id="unknown-schema"),
    ],
)
def test_unreadable_files_are_named(tmp_path: Path, text: str, match: str) -> None:
    """A file whose format cannot be told raises a TraceError naming the file."""
    path = tmp_path / "bad.jsonl"
    path.write_text(text)
    with pytest.raises(TraceError, match=match) as info:
        _events(path)
    assert "bad.jsonl" in str(info.value)


def test_missing_file_is_named(tmp_path: Path) -> None:
    """A trace that does not exist raises a TraceError naming it."""
    with pytest.raises(TraceError, match="no such trace file"):
        _events(tmp_path / "nope.jsonl")


@pytest.mark.parametrize(
    ("bad_line", "field", "match"),
    [
        pytest.param(b"{not json}\n", None, "not valid JSON", id="malformed-line"),
        pytest.param(
            b'{"run_id": "r", "step": 3, "tool": "t", "args": {}}\n',
            "output_sha",
            "missing",
            id="missing-field",
        ),
        pytest.param(
            b'{"run_id": "r", "step": "3", "tool": "t", "args": {}, "output_sha": "x"}\n',
            "step",
            "integer",
            id="wrong-type",
        ),
        pytest.param(
            b'{"run_id": "r", "step": 3, "tool": "t", "args": {}, "output_sha": "x", '
            b'"effect": "delete"}\n',
            "effect",
            "'read', 'write'",
            id="bad-effect",
        ),
        *(
            pytest.param(
                b'{"run_id": "r", "step": 3, "tool": "t", "args": {}, "output_sha": "x", '
                b'"effect": %b}\n' % effect,
                "effect",
                "'read', 'write'",
                id=name,
            )
            for effect, name in [(b'["write"]', "list-effect"), (b'{"w": 1}', "object-effect")]
        ),
        pytest.param(
            b'{"key": "tool:1", "kind": "tool", "out": 1}\n',
            "run_id",
            "mixed schemas",
            id="mixed-schemas",
        ),
        pytest.param(b"[1, 2]\n", None, "list", id="array-line"),
        pytest.param(
            b'{"run_id": "r", "step": 3, "tool": "t", "output_sha": "x", "args": '
            + b"[" * 202
            + b"]" * 202
            + b"}\n",
            "args",
            "nested deeper than the 200 levels",
            id="args-too-deep",
        ),
    ],
)
def test_bad_lines_name_file_line_and_field(
    tmp_path: Path, bad_line: bytes, field: str | None, match: str
) -> None:
    """A bad line raises a TraceError with the file, the line number and the field at fault."""
    good = orjson.dumps(SEED_A[0]) + b"\n"
    path = tmp_path / "t.jsonl"
    path.write_bytes(good + bad_line + good)
    with pytest.raises(TraceError, match=match) as info:
        _events(path)
    assert info.value.line == 2
    assert info.value.field == field
    assert str(info.value).startswith(f"{path}:2: ")
    assert "--skip-bad-lines" in str(info.value)


def test_args_as_deep_as_the_limit_are_read_and_brackets_in_strings_cost_nothing(
    tmp_path: Path,
) -> None:
    """Arguments nested 200 levels deep are read; a line whose strings hold many brackets is
    walked for its depth and read too (the bracket count only decides whether to walk)."""
    deep = {"run_id": "r", "step": 1, "tool": "t", "output_sha": "x", "args": {"q": "[{" * 300}}
    nested: Any = 0
    for _ in range(199):
        nested = [nested]
    path = write_jsonl(tmp_path / "t.jsonl", [deep, {**deep, "args": {"a": nested}}])
    assert [e.input["args"] for e in _events(path)] == [deep["args"], {"a": nested}]


def test_skip_bad_lines_counts_what_it_skipped(tmp_path: Path) -> None:
    """With skip_bad_lines the good lines are read and the bad ones counted."""
    good = orjson.dumps(SEED_A[0]) + b"\n"
    path = tmp_path / "t.jsonl"
    path.write_bytes(good + b"{oops\n" + good + b'{"run_id": "r"}\n')
    sources: list = []
    events = list(read_records(path, skip_bad_lines=True, sources=sources))
    assert len(events) == 2
    assert sources[0].skipped == 2
    assert "t.jsonl:2:" in sources[0].first_skipped[0]


def test_a_torn_last_cassette_line_is_skipped(tmp_path: Path) -> None:
    """A cassette whose last line was cut mid-write yields the records before it."""
    path = tmp_path / "c.jsonl"
    with Tape(path, mode="record", harness_sha="h") as tape:
        tape.call("tool", {"name": "ls", "args": {}, "step": 1}, lambda: 1)
    path.write_bytes(path.read_bytes() + b'{"seq": 2, "key": "tool:')
    sources: list = []
    with pytest.warns(TapeWarning, match="torn last line"):
        assert len(list(read_records(path, sources=sources))) == 1
    assert sources[0].skipped == 1


def test_cassette_records_sharing_a_prefix_read_in_full(tmp_path: Path) -> None:
    """A growing conversation stored as shared-prefix records reads back as full messages."""
    path = tmp_path / "chat.jsonl"
    messages: list[dict[str, str]] = []
    with Tape(path, mode="record", harness_sha="h") as tape:
        for step in range(1, 5):
            messages.append({"role": "user", "content": f"turn {step} " + "x" * 200})
            payload = {"messages": list(messages), "params": {"model": "m"}, "step": step}
            tape.call("llm", payload, lambda: {"text": "ok"})
    assert b'"base"' in path.read_bytes()  # the core stored the shared prefixes once
    events = _events(path)
    assert [len(call_args(e)["messages"]) for e in events] == [1, 2, 3, 4]
    assert call_args(events[-1])["messages"] == messages


_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=60, deadline=None)
@given(
    records=st.lists(
        st.fixed_dictionaries(
            {
                "run_id": _text,
                "step": st.integers(0, 10**6),
                "tool": _text,
                "args": _json,
                "output_sha": _text,
            },
            optional={
                "tokens": st.integers(0, 10**9),
                "effect": st.sampled_from(["read", "write", "irreversible"]),
            },
        ),
        min_size=1,
        max_size=8,
    )
)
def test_jsonl_reader_round_trips_any_valid_record(
    tmp_path_factory: pytest.TempPathFactory, records: list[dict[str, object]]
) -> None:
    """Any valid seed-schema record is read back with the same run, step, tool, args and output."""
    path = write_jsonl(tmp_path_factory.mktemp("rt") / "t.jsonl", records)
    events = list(read_records(path, TraceFormat.JSONL))
    assert [
        (e.run, e.step, e.name, call_args(e), e.out_digest, e.tokens, e.effect) for e in events
    ] == [
        (
            r["run_id"],
            r["step"],
            r["tool"],
            r["args"],
            r["output_sha"],
            r.get("tokens"),
            r.get("effect"),
        )
        for r in records
    ]


def test_skip_bad_lines_also_passes_over_a_bad_first_line(tmp_path: Path) -> None:
    """With skip_bad_lines, a malformed first line does not stop format detection."""
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"{torn\n" + orjson.dumps(SEED_A[0]) + b"\n")
    assert detect_format(path, skip_bad_lines=True) is TraceFormat.JSONL
    sources: list = []
    assert len(list(read_records(path, skip_bad_lines=True, sources=sources))) == 1
    assert sources[0].skipped == 1
    with pytest.raises(TraceError, match="not valid JSON"):
        detect_format(path)


SPAN = {
    "span_id": "7f3c",
    "tool_call": {"argv": ["git", "diff", "--stat"], "env_digest": "sha256:9a1e", "timeout_s": 30},
    "tool_result": {"exit_code": 0, "stdout": " 3 files changed", "stderr": ""},
    "model_decision": {"tool_name": "git_diff_stat", "args": {}, "model_id": "<redacted>"},
}


def _trace_files(tmp_path: Path) -> dict[TraceFormat, Path]:
    """One small trace of each format, of several records (the OTLP one pretty-printed)."""
    cassette = _cassette(tmp_path / "run_1.jsonl")
    otlp = tmp_path / "otlp.json"
    otlp.write_bytes(orjson.dumps(otlp_doc(), option=orjson.OPT_INDENT_2))
    return {
        TraceFormat.CASSETTE: cassette,
        TraceFormat.JSONL: write_jsonl(tmp_path / "seed.jsonl", SEED_A + SEED_B),
        TraceFormat.SPANS: write_jsonl(tmp_path / "spans.jsonl", [SPAN, {**SPAN, "span_id": "8a"}]),
        TraceFormat.OTLP: otlp,
    }


# Each kind of source read_records takes, made from a trace file (files are closed by `stack`).
SOURCES: dict[str, Callable[[Path, ExitStack], Any]] = {
    "path": lambda path, stack: path,
    "binary-file": lambda path, stack: stack.enter_context(path.open("rb")),
    "text-file": lambda path, stack: stack.enter_context(path.open(encoding="utf-8")),
    "bytes": lambda path, stack: path.read_bytes(),
    "str-lines-without-newlines": lambda path, stack: path.read_text("utf-8").splitlines(),
    "bytes-lines-generator": lambda path, stack: (
        line for line in path.read_bytes().splitlines(keepends=True)
    ),
}


@pytest.mark.parametrize("fmt", [f for f in TraceFormat if f is not TraceFormat.AUTO], ids=str)
@pytest.mark.parametrize("kind", list(SOURCES))
def test_every_kind_of_source_reads_the_same_records(
    tmp_path: Path, fmt: TraceFormat, kind: str
) -> None:
    """A path, a binary or text file, bytes, str lines and a generator of bytes lines read alike."""
    path = _trace_files(tmp_path)[fmt]
    expected = list(read_records(path))
    assert len(expected) >= 2 and all(r.key for r in expected)
    with ExitStack() as stack:
        source = SOURCES[kind](path, stack)
        # A file names itself; other sources are named like the path (a cassette's run is its
        # source's name), so that the records are equal field for field.
        name = None if kind in ("path", "binary-file", "text-file") else str(path)
        assert detect_format(SOURCES[kind](path, stack), name=name) is fmt
        got = list(read_records(source, name=name))
    assert [(r.run, r.step, r.out_digest, r.key) for r in got] == [
        (r.run, r.step, r.out_digest, r.key) for r in expected
    ]
    assert got == expected
    assert {r.source for r in got} == {str(path)}


@pytest.mark.parametrize(
    "lines",
    [
        pytest.param(lambda good: [good, "{not json", good], id="str-lines"),
        pytest.param(
            lambda good: (line.encode() + b"\n" for line in [good, "{not json", good]),
            id="bytes-generator",
        ),
    ],
)
def test_a_bad_line_of_a_named_source_is_named_in_the_error(
    lines: Callable[[str], Any],
) -> None:
    """A malformed line of an iterable source raises a TraceError starting with its name, line."""
    good = orjson.dumps(SEED_A[0]).decode()
    with pytest.raises(TraceError, match="not valid JSON") as info:
        list(read_records(lines(good), name="db-rows"))
    assert str(info.value).startswith("db-rows:2: ")
    assert (info.value.path, info.value.line) == ("db-rows", 2)
    sources: list[Any] = []
    records = list(read_records(lines(good), name="db-rows", skip_bad_lines=True, sources=sources))
    assert [r.line for r in records] == [1, 3]
    assert sources[0].skipped == 1
    assert sources[0].first_skipped[0].startswith("db-rows:2: ")


class _UnseekableRaw(io.RawIOBase):
    """A raw byte stream that cannot seek, as a pipe or a socket."""

    def __init__(self, data: bytes):
        self._data = io.BytesIO(data)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        return self._data.readinto(buffer)


class _ReadOnly:
    """A stream with only read, readline and line iteration (no seek, tell, close)."""

    def __init__(self, data: bytes):
        self._data = io.BytesIO(data)

    def read(self, size: int = -1) -> bytes:
        return self._data.read(size)

    def readline(self, size: int = -1) -> bytes:
        return self._data.readline(size)

    def __iter__(self) -> Iterator[bytes]:
        return iter(self._data)


@pytest.mark.parametrize("fmt", [f for f in TraceFormat if f is not TraceFormat.AUTO], ids=str)
@pytest.mark.parametrize(
    "stream",
    [
        pytest.param(lambda data: io.BufferedReader(_UnseekableRaw(data)), id="unseekable-io"),
        pytest.param(_ReadOnly, id="read-readline-iter-only"),
    ],
)
def test_formats_are_sniffed_on_a_non_seekable_stream(
    tmp_path: Path, fmt: TraceFormat, stream: Callable[[bytes], Any]
) -> None:
    """The format is told from a stream that cannot seek back, and the records are all read."""
    path = _trace_files(tmp_path)[fmt]
    data = path.read_bytes()
    if fmt is TraceFormat.OTLP:
        assert data.count(b"\n") > 10  # a multi-line, pretty-printed document
    assert not io.BufferedReader(_UnseekableRaw(data)).seekable()
    assert detect_format(stream(data)) is fmt
    assert list(read_records(stream(data), name=str(path))) == list(read_records(path))


def test_span_records_keep_the_whole_result_and_the_model_decision(tmp_path: Path) -> None:
    """A span's tool_result is its record's out, its model_decision in extra, its key the tape's."""
    path = write_jsonl(tmp_path / "spans.jsonl", [SPAN, {**SPAN, "span_id": "8a00"}])
    records = list(read_records(path))
    assert [r.out for r in records] == [SPAN["tool_result"], SPAN["tool_result"]]
    assert [r.extra for r in records] == [{"model_decision": SPAN["model_decision"]}] * 2
    for step, rec in enumerate(records, 1):
        payload = {"name": "git_diff_stat", "args": SPAN["tool_call"], "step": step}
        assert rec.input == payload
        assert rec.key == key_of("tool", canonical_json(payload))
    assert records[0].key != records[1].key  # the step is part of the call


@pytest.mark.parametrize(
    ("tool", "args", "step"),
    [
        pytest.param("search_issues", {"q": "broken:true", "page": 1}, 1, id="flat"),
        pytest.param(
            "edit", {"z": [1, {"b": None, "a": "é"}], "a": {"y": 2.5, "x": True}}, 7, id="nested"
        ),
        pytest.param("ping", [], 3, id="list-args"),
    ],
)
def test_a_jsonl_record_is_keyed_as_the_tape_keys_the_call(
    tmp_path: Path, tool: str, args: Any, step: int
) -> None:
    """A seed-JSONL line's key is the key Tape.call records for the same call (no secret in it)."""
    cassette = tmp_path / "c.jsonl"
    with Tape(cassette, mode="record", harness_sha="h") as tape:
        tape.call("tool", {"name": tool, "args": args, "step": step}, lambda: "ok")
    (taped,) = read_cassette(cassette).records
    (line,) = read_records([orjson.dumps(call("r", step, tool, args, "ab"))])
    assert line.key == taped.key
    assert line.input == taped.input


def test_a_file_read_part_way_is_read_from_where_the_caller_left_it(tmp_path: Path) -> None:
    """An open file already read past its first line gives the same records whether the
    format is sniffed or named: sniffing rewinds to where reading began, not to the start."""
    path = tmp_path / "t.jsonl"
    lines = [
        json.dumps({"run_id": f"r{i}", "step": 1, "tool": "ls", "args": {}, "output_sha": "a"})
        for i in range(3)
    ]
    path.write_text("\n".join(lines) + "\n")
    runs = []
    for fmt in (TraceFormat.AUTO, TraceFormat.JSONL):
        with path.open("rb") as fh:
            fh.readline()
            runs.append([r.run for r in read_records(fh, fmt)])
    assert runs == [["r1", "r2"], ["r1", "r2"]]


def test_a_source_that_is_no_source_is_a_clear_type_error() -> None:
    """Something that is neither a path, a file, bytes nor lines says what would do."""
    with pytest.raises(TypeError, match="pass a path, an open file, bytes, or an iterable"):
        list(read_records(42))  # type: ignore[arg-type]
