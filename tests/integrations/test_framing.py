"""Stream framings: every event parses back from its bytes however they are cut, and is
written back byte for byte (SSE with LF or CRLF lines, NDJSON, the AWS event stream)."""

from __future__ import annotations

import binascii
import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracetape.integrations.framing import (
    AWS,
    NDJSON,
    SSE,
    SSEParser,
    framing_for,
    sse_encode,
)

json_scalars = st.none() | st.booleans() | st.integers() | st.text(max_size=20)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)

sse_events = st.lists(
    st.fixed_dictionaries(
        {"data": st.dictionaries(st.text(max_size=5), json_scalars, max_size=3)},
        optional={"event": st.from_regex(r"[a-z_.]{1,12}", fullmatch=True)},
    )
    | st.builds(lambda t: {"text": t}, st.from_regex(r"\[DONE\]|[a-z ]{1,10}", fullmatch=True)),
    max_size=6,
)


def _parse(framing: Any, wire: bytes, cuts: list[int]) -> list[dict[str, Any]]:
    parser, out, pos = framing.parser(), [], 0
    for cut in cuts:
        out += parser.feed(wire[pos : pos + cut])
        pos += cut
    return out + parser.feed(wire[pos:]) + parser.close()


@given(sse_events, st.lists(st.integers(1, 40), max_size=8), st.booleans())
def test_sse_round_trip_any_chunking(
    recorded: list[dict[str, Any]], cuts: list[int], crlf: bool
) -> None:
    """Encoded SSE events parse back to the same events however the bytes are split, and a
    stream of CRLF lines is told as one and written back the same way."""
    out = {"events": recorded, **({"eol": "crlf"} if crlf else {})}
    wire = b"".join(SSE.encode(out))
    parser = SSEParser()
    assert _parse(SSE, wire, cuts) == recorded
    parser.feed(wire)
    assert parser.crlf is (crlf if recorded else None)


def test_sse_encode_is_what_servers_send() -> None:
    """One event, one chunk, in the form the SDKs read (and Gemini's CRLF lines)."""
    assert sse_encode({"event": "ping", "data": {"a": 1}}) == b'event: ping\ndata: {"a":1}\n\n'
    assert sse_encode({"data": {"a": 1}}, "\r\n") == b'data: {"a":1}\r\n\r\n'


@given(
    st.lists(json_values.map(lambda v: {"data": v}), max_size=6),
    st.lists(st.integers(1, 30), max_size=8),
)
def test_ndjson_round_trip_any_chunking(recorded: list[dict[str, Any]], cuts: list[int]) -> None:
    """NDJSON lines parse back to the same values however the bytes are split."""
    wire = b"".join(NDJSON.encode({"events": recorded}))
    assert _parse(NDJSON, wire, cuts) == recorded


aws_headers = st.dictionaries(
    st.from_regex(r":?[a-z-]{1,12}", fullmatch=True),
    st.text(max_size=12)
    | st.builds(lambda v: {"type": 4, "value": v}, st.integers(-(2**31), 2**31 - 1))
    | st.builds(lambda v: {"type": 0 if v else 1, "value": v}, st.booleans()),
    max_size=4,
)


@settings(max_examples=60)
@given(
    st.lists(st.fixed_dictionaries({"headers": aws_headers, "data": json_values}), max_size=5),
    st.lists(st.integers(1, 50), max_size=8),
)
def test_aws_event_stream_round_trip_any_chunking(
    recorded: list[dict[str, Any]], cuts: list[int]
) -> None:
    """AWS event-stream messages parse back to the same headers and payloads however the
    bytes are split, and are written back with both CRCs as botocore checks them."""
    chunks = AWS.encode({"events": recorded})
    for chunk in chunks:
        assert binascii.crc32(chunk[:8]) == struct.unpack_from(">I", chunk, 8)[0]
        assert binascii.crc32(chunk[:-4]) == struct.unpack_from(">I", chunk, len(chunk) - 4)[0]
    assert _parse(AWS, b"".join(chunks), cuts) == recorded


def test_a_corrupt_aws_message_is_refused() -> None:
    """A message whose CRC does not check is not taken for a whole event."""
    (chunk,) = AWS.encode({"events": [{"headers": {":event-type": "x"}, "data": {"a": 1}}]})
    broken = chunk[:-6] + b"!" + chunk[-5:]
    with pytest.raises(ValueError, match="CRC"):
        AWS.parser().feed(broken)


@pytest.mark.parametrize(
    ("content_type", "name"),
    [
        pytest.param("text/event-stream; charset=utf-8", "sse", id="sse"),
        pytest.param("application/x-ndjson", "ndjson", id="ndjson"),
        pytest.param("application/vnd.amazon.eventstream", "aws", id="aws"),
        pytest.param("application/json", None, id="json"),
    ],
)
def test_the_content_type_names_the_framing(content_type: str, name: str | None) -> None:
    """A response's content type tells how its body is framed (none: a whole body)."""
    found = framing_for(content_type)
    assert (found.name if found else None) == name


sse_full_events = st.lists(
    st.fixed_dictionaries(
        {"data": st.dictionaries(st.text(max_size=5), json_scalars, max_size=3)},
        optional={
            "event": st.from_regex(r"[a-z_.]{1,12}", fullmatch=True),
            "id": st.from_regex(r"[a-z0-9-]{0,12}", fullmatch=True),
            "retry": st.integers(0, 10_000),
        },
    )
    | st.builds(
        lambda t: {"text": t},
        st.from_regex(r"\[DONE\]|[a-z ]{1,10}(\n[a-z ]{0,10}){0,3}", fullmatch=True),
    ),
    min_size=1,
    max_size=6,
)


@given(sse_full_events, st.booleans(), st.data())
def test_sse_cut_between_cr_and_lf_is_written_back_byte_for_byte(
    recorded: list[dict[str, Any]], crlf: bool, data: st.DataObject
) -> None:
    """Events with ``id:``, ``retry:`` and multi-line ``data:``, their stream cut right after
    a ``\\r`` (before its ``\\n``): they parse back whole, and written back they are the
    bytes the server sent, CRLF and all."""
    out = {"events": recorded, **({"eol": "crlf"} if crlf else {})}
    wire = b"".join(SSE.encode(out))
    after_cr = [i + 1 for i, byte in enumerate(wire) if byte == ord("\r")]
    picked = data.draw(st.lists(st.sampled_from(after_cr), max_size=4)) if after_cr else []
    parser, got, pos = SSEParser(), [], 0
    for cut in sorted(set(picked)):
        got += parser.feed(wire[pos:cut])
        pos = cut
    got += parser.feed(wire[pos:]) + parser.close()
    assert got == recorded
    again = {"events": got, **({"eol": "crlf"} if parser.crlf else {})}
    assert b"".join(SSE.encode(again)) == wire


def test_sse_id_retry_and_multi_line_data_are_pinned() -> None:
    """The wire form of an event with every field, as a server writes it, parses to one
    event and is written back the same."""
    wire = b"event: delta\r\nid: 7\r\nretry: 1500\r\ndata: line one\r\ndata: line two\r\n\r\n"
    parser = SSEParser()
    events = parser.feed(wire[:5]) + parser.feed(wire[5:21]) + parser.feed(wire[21:])
    assert events == [{"event": "delta", "id": "7", "retry": 1500, "text": "line one\nline two"}]
    assert parser.crlf is True and sse_encode(events[0], "\r\n") == wire
