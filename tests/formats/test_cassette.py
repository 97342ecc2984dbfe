"""The cassette file format: header, records, torn lines, corruption, versions, concurrency."""

from __future__ import annotations

import json
import re
import threading
import warnings
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracetape import CassetteError, CassetteNotFoundError, CassetteVersionError, Tape, TapeWarning
from tracetape.formats import TraceFormat, detect_format, read_records
from tracetape.formats.cassette import FORMAT_VERSION, new_header, read_cassette, verify_seal
from tracetape.record import call_args
from tracetape.stores.file import CassetteWriter

from ..cli.test_show import EDITS, _sub
from .helpers import read_all, recorded_cassette

RECORD = {"key": "tool:0123456789abcdef", "kind": "tool", "ms": 1.0, "effect": "read", "out": 1}


def write_lines(path: Path, *lines: str, end: str = "\n") -> Path:
    path.write_text("\n".join(lines) + end, encoding="utf-8")
    return path


def header_line(**extra: object) -> str:
    return json.dumps({"tracetape": FORMAT_VERSION, "version": "0.1.0", **extra})


def test_writer_writes_a_header_then_numbered_records(tmp_path: Path) -> None:
    """Records get increasing sequence numbers after a format-2 header."""
    writer = CassetteWriter(tmp_path / "c.jsonl", new_header(harness_sha="abc"))
    writer.write(dict(RECORD))
    writer.write(dict(RECORD))
    writer.close()
    cassette = read_cassette(tmp_path / "c.jsonl")
    assert cassette.format == 2 and cassette.header is not None
    assert cassette.header["harness_sha"] == "abc"
    assert [r.seq for r in cassette] == [1, 2]


def test_writer_leaves_only_the_partial_file_until_closed(tmp_path: Path) -> None:
    """PATH appears only on close; until then records are flushed to PATH.partial."""
    path = tmp_path / "c.jsonl"
    writer = CassetteWriter(path, new_header())
    writer.write(dict(RECORD))
    assert not path.exists()
    assert len(read_cassette(writer.partial)) == 1
    writer.close()
    assert path.exists() and not writer.partial.exists()


def test_seed_cassettes_read_as_format_zero(tmp_path: Path) -> None:
    """Lines of {key, kind, ms, out} with no header are the seed's format."""
    path = write_lines(
        tmp_path / "seed.jsonl", json.dumps({"key": "llm:1", "kind": "llm", "ms": 3, "out": {}})
    )
    cassette = read_cassette(path)
    assert cassette.format == 0 and cassette.header is None and len(cassette) == 1


def test_torn_last_line_is_skipped_with_a_warning(tmp_path: Path) -> None:
    """A killed writer's half line at the end is dropped, the records before it kept."""
    path = write_lines(
        tmp_path / "c.jsonl", header_line(), json.dumps(RECORD), '{"key": "tool:1", "ki', end=""
    )
    with pytest.warns(TapeWarning, match=r"c.jsonl:3: skipped a torn last line"):
        cassette = read_cassette(path)
    assert len(cassette) == 1 and cassette.skipped == 1


@pytest.mark.parametrize(
    ("lines", "line", "message"),
    [
        pytest.param(
            [header_line(), "{not json", json.dumps(RECORD)],
            2,
            "not valid JSON",
            id="corrupt-middle-line",
        ),
        pytest.param(
            [header_line(), json.dumps(RECORD), "{broken"],
            3,
            "not valid JSON",
            id="corrupt-last-line-with-newline",
        ),
        pytest.param([header_line(), "[1, 2]"], 2, "JSON list, not a record", id="not-an-object"),
        pytest.param(
            [header_line(), json.dumps({"kind": "tool", "out": 1})], 2, "'key'", id="missing-key"
        ),
        pytest.param(
            [header_line(), json.dumps({"key": "k", "out": 1})], 2, "'kind'", id="missing-kind"
        ),
        pytest.param(
            [header_line(), json.dumps({"key": "k", "kind": "t"})], 2, "'out'", id="missing-out"
        ),
        pytest.param(
            [json.dumps({"tracetape": "one"})], 1, "must be an integer", id="bad-version-type"
        ),
    ],
)
def test_corrupt_cassettes_name_the_line_and_field(
    tmp_path: Path, lines: list[str], line: int, message: str
) -> None:
    """A corrupt line is an error naming the file, the line and what is wrong."""
    path = write_lines(tmp_path / "bad.jsonl", *lines)
    with pytest.raises(CassetteError, match=message) as info:
        read_cassette(path)
    assert info.value.line == line
    assert str(info.value).startswith(f"{path}:{line}: ")


@pytest.mark.parametrize(("version", "advice"), [(3, "upgrade tracetape"), (0, "re-record")])
def test_unknown_format_versions_say_how_to_migrate(
    tmp_path: Path, version: int, advice: str
) -> None:
    """A header from another format version says which way to go."""
    path = write_lines(tmp_path / "v.jsonl", json.dumps({"tracetape": version, "version": "9.9"}))
    with pytest.raises(CassetteVersionError, match=advice):
        read_cassette(path)


def test_missing_cassette_is_a_file_not_found_error(tmp_path: Path) -> None:
    """Reading a missing cassette raises CassetteNotFoundError, a FileNotFoundError."""
    with pytest.raises(FileNotFoundError) as info:
        read_cassette(tmp_path / "nope.jsonl")
    assert isinstance(info.value, CassetteNotFoundError)


@pytest.mark.parametrize("content", [b"", b"\n  \n"], ids=["empty", "blank"])
def test_an_empty_file_is_not_a_cassette(tmp_path: Path, content: bytes) -> None:
    """An empty or blank file is an error naming it, not a cassette of no records (a cassette
    of no decisions still has its header)."""
    (tmp_path / "e.jsonl").write_bytes(content)
    with pytest.raises(CassetteError, match="the file is empty"):
        read_cassette(tmp_path / "e.jsonl")


def test_unserializable_output_is_a_clear_error(tmp_path: Path) -> None:
    """An output that is not JSON data names the decision and writes nothing."""
    writer = CassetteWriter(tmp_path / "c.jsonl", new_header())
    with pytest.raises(CassetteError, match="tool:0123456789abcdef cannot be stored"):
        writer.write({**RECORD, "out": object()})
    writer.write(dict(RECORD))
    writer.close()
    assert [r.seq for r in read_cassette(tmp_path / "c.jsonl")] == [1]


def test_threads_never_interleave_or_lose_records(tmp_path: Path) -> None:
    """Eight threads writing 200 large records each leave 1,600 whole, uniquely numbered lines."""
    writer = CassetteWriter(tmp_path / "c.jsonl", new_header())

    def work(n: int) -> None:
        for i in range(200):
            writer.write({**RECORD, "out": {"thread": n, "i": i, "pad": "x" * 5000}})

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    writer.close()
    records = read_cassette(tmp_path / "c.jsonl").records
    assert sorted(r.seq for r in records) == list(range(1, 1601))
    assert {(r.out["thread"], r.out["i"]) for r in records} == {
        (n, i) for n in range(8) for i in range(200)
    }


json_data = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=15,
)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["llm", "tool", "env"]), json_data), max_size=12))
def test_records_round_trip_through_the_file(
    tmp_path_factory: pytest.TempPathFactory, items: list[tuple[str, Any]]
) -> None:
    """Whatever JSON data a record holds, reading the cassette gives it back unchanged."""
    path = tmp_path_factory.mktemp("rt") / "c.jsonl"
    writer = CassetteWriter(path, new_header())
    for i, (kind, out) in enumerate(items):
        writer.write(
            {"key": f"{kind}:{i:016x}", "kind": kind, "ms": 0.0, "effect": "read", "out": out}
        )
    writer.close()
    assert [(r.kind, r.out) for r in read_cassette(path)] == items


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=200))
def test_arbitrary_bytes_never_crash_the_reader(
    tmp_path_factory: pytest.TempPathFactory, data: bytes
) -> None:
    """Any file content either reads or raises CassetteError; nothing else escapes."""
    path = tmp_path_factory.mktemp("fuzz") / "c.jsonl"
    path.write_bytes(data)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            read_cassette(path)
    except CassetteError:
        pass


def test_the_streaming_reader_can_report_and_skip_bad_lines(tmp_path: Path) -> None:
    """With on_error, bad lines are reported with their line numbers and the rest is read."""
    from tracetape.formats.cassette import CassetteReader

    path = write_lines(
        tmp_path / "c.jsonl", header_line(), json.dumps(RECORD), "{bad", "[]", json.dumps(RECORD)
    )
    errors: list[CassetteError] = []
    with path.open("rb") as fh:
        reader = CassetteReader(fh, path, on_error=errors.append)
        records = list(reader)
    assert len(records) == 2 and reader.header is not None
    assert [e.line for e in errors] == [3, 4]


def test_integers_beyond_64_bits_round_trip_exactly(tmp_path: Path) -> None:
    """A huge integer in an output is stored and read back exactly, not as a float."""
    writer = CassetteWriter(tmp_path / "c.jsonl", new_header())
    writer.write({**RECORD, "out": {"id": 2**70 + 1, "s": "é"}})
    writer.write(dict(RECORD))
    writer.close()
    records = read_cassette(tmp_path / "c.jsonl").records
    assert records[0].out == {"id": 2**70 + 1, "s": "é"}
    assert records[1].out == 1


def test_cassettes_of_both_formats_are_read(tmp_path: Path) -> None:
    """A tracetape cassette and a seed reference cassette (format 0) both yield events."""
    path = recorded_cassette(tmp_path / "run_1.jsonl", write=True)
    events = read_all(path)
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
    (old,) = read_all(seed)
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
        read_all(path)


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
    events = read_all(path)
    assert [len(call_args(e)["messages"]) for e in events] == [1, 2, 3, 4]
    assert call_args(events[-1])["messages"] == messages


# -- the seal, walked as the file is read ------------------------------------------------------


def sealed_cassette(path: Path) -> Path:
    """A sealed cassette of six lines: its header, four records (``{"n": i}``), its trailer."""
    with Tape(path, mode="record") as tape:
        for i in range(4):
            tape.call("tool", {"name": "f", "args": {"i": i}, "step": 1}, lambda i=i: {"n": i})
    return path


@pytest.mark.parametrize(("edit", "line", "reason"), EDITS)
def test_reading_finds_each_hand_edit_where_verify_does(
    tmp_path: Path, edit, line: int, reason: str
) -> None:  # type: ignore[no-untyped-def]
    """``read_cassette`` walks the chain on the bytes it reads: each hand edit ``verify``
    finds is found at the same line for the same reason, and the records still read."""
    path = sealed_cassette(tmp_path / "c.jsonl")
    path.write_text("\n".join(edit(path.read_text().splitlines())) + "\n")
    cassette = read_cassette(path)
    seal, verified = cassette.seal, verify_seal(path)
    assert seal is not None and seal.state == "broken" and seal.reason.startswith(reason)
    assert (seal.line, seal.reason) == (verified.line, verified.reason) == (line, seal.reason)
    assert seal.faults[0] == (line, seal.reason) and len(cassette.records) >= 3


@pytest.mark.parametrize(
    ("edit", "lines"),
    [
        pytest.param(lambda ls: [*ls[:2], _sub(ls[2], '"n":1', '"n":7'), *ls[3:]], [3],
                     id="one-changed"),
        pytest.param(lambda ls: [ls[0], _sub(ls[1], '"n":0', '"n":5'), *ls[2:4],
                                 _sub(ls[4], '"n":3', '"n":6'), ls[5]], [2, 5], id="two-changed"),
        pytest.param(lambda ls: [*ls[:2], *ls[3:]], [3, 5], id="deleted"),
        pytest.param(lambda ls: [*ls[:2], ls[3], ls[2], *ls[4:]], [3, 4, 5], id="swapped"),
        pytest.param(lambda ls: [*ls, ls[2]], [7], id="appended-after-the-trailer"),
        pytest.param(lambda ls: [*ls[:5], '{"seq":5,"key":"tool:1","kind":"tool","out":1}', ls[5]],
                     [6], id="inserted-without-a-digest"),
    ],
)  # fmt: skip
def test_reading_names_every_line_at_fault(tmp_path: Path, edit, lines: list[int]) -> None:  # type: ignore[no-untyped-def]
    """The walk goes on past a fault from the digest the line holds, so each edit names its
    own lines (a deletion: the record after it and the trailer's count), not every line after
    the first."""
    path = sealed_cassette(tmp_path / "c.jsonl")
    path.write_text("\n".join(edit(path.read_text().splitlines())) + "\n")
    seal = read_cassette(path).seal
    assert seal is not None and seal.state == "broken"
    assert [line for line, _ in seal.faults] == lines


def test_a_torn_line_after_the_trailer_is_an_addition_not_a_cut(tmp_path: Path) -> None:
    """A piece of a line after the trailer was added to a closed recording: broken there."""
    path = sealed_cassette(tmp_path / "c.jsonl")
    path.write_bytes(path.read_bytes() + b'{"seq":5,"key":"tool:')
    with pytest.warns(TapeWarning, match="torn last line"):
        seal = read_cassette(path).seal
    assert seal is not None and seal.faults == ((7, "lines were added after the trailer"),)
    assert (verify_seal(path).state, verify_seal(path).line) == ("broken", 7)


def test_a_cut_recording_and_a_cassette_without_digests_are_not_broken(tmp_path: Path) -> None:
    """A recording that never closed (no trailer, or a torn last line) is unfinished; a
    format-1 cassette, and a format-2 one whose records carry no digest at all (written by
    hand or by a tool), unsealed: none is an edit."""
    path = sealed_cassette(tmp_path / "c.jsonl")
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:-1]))
    assert read_cassette(path).seal == verify_seal(path)
    assert verify_seal(path).state == "unfinished"
    path.write_text("".join(lines[:-1]) + lines[-1][:20])
    with pytest.warns(TapeWarning, match="torn last line"):
        seal = read_cassette(path).seal
    assert seal is not None and seal.state == "unfinished" and seal.faults == ()
    unsealed = [line.split(',"chain"')[0] + "}\n" for line in lines[1:-1]]
    path.write_text(lines[0] + "".join(unsealed))
    assert read_cassette(path).seal == verify_seal(path)
    assert verify_seal(path).state == "unsealed"
    path.write_text(lines[0].replace('"tracetape":2', '"tracetape":1') + "".join(unsealed))
    seal = read_cassette(path).seal
    assert seal is not None and seal.state == "unsealed"


def test_the_analysis_reads_edited_cassettes_as_they_are(tmp_path: Path) -> None:
    """The analysis's reader walks no chain: an edited cassette reads with its edits."""
    path = sealed_cassette(tmp_path / "c.jsonl")
    lines = path.read_text().splitlines()
    path.write_text("\n".join([*lines[:2], _sub(lines[2], '"n":1', '"n":7'), *lines[3:]]) + "\n")
    assert [r.out for r in read_records(path)] == [{"n": 0}, {"n": 7}, {"n": 2}, {"n": 3}]
