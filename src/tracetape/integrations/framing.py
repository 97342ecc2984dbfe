"""How streamed responses are framed on the wire, parsed into events and written back.

A streamed model response is stored as its events (``{"status": 200, "events": [...]}``), so
redaction reads the JSON the events carry and a replay writes each event back as one chunk,
byte for byte as the server framed it. Three framings cover the providers:

* ``sse``: server-sent events (``text/event-stream``): OpenAI, Anthropic, Gemini, Mistral,
  Cohere, Groq. An event is ``{"event"?: name, "id"?: id, "retry"?: ms, "data": <JSON>}``, or
  ``"text"`` instead of ``"data"`` when the data is not JSON (``[DONE]``); a stream whose lines
  end in CRLF (Gemini's) is stored with ``"eol": "crlf"`` and written back the same way.
* ``ndjson``: one JSON value per line (``application/x-ndjson``): Ollama. An event is
  ``{"data": <JSON>}``.
* ``aws``: the AWS event stream (``application/vnd.amazon.eventstream``): Bedrock's
  ``converse-stream``. Binary messages, each a prelude (total and header lengths, CRC32), typed
  headers, a payload and a CRC32 of the whole message; botocore checks both CRCs. An event is
  ``{"headers": {":event-type": "contentBlockDelta", ...}, "data": <JSON payload>}`` (a header
  that is not a string is stored as ``{"type": T, "value": V}``; a payload that is not JSON as
  ``"base64"``), and is written back with both CRCs computed anew.

The parsers are incremental (fed the byte chunks a consumer reads, in any cut) and our own: the
SDKs' decoders are private, and each must give back exactly the bytes it parsed. A stored
output names its framing in ``"framing"`` (absent: ``sse``, as cassettes before it were).

    >>> p = SSE.parser()
    >>> p.feed(b'event: ping\\ndata: {"a": 1}\\n\\ndata: [DO')
    [{'event': 'ping', 'data': {'a': 1}}]
    >>> p.feed(b'NE]\\n\\n')
    [{'text': '[DONE]'}]
"""

from __future__ import annotations

import base64
import binascii
import json
import struct
import uuid
from collections.abc import Mapping
from typing import Any, NamedTuple, Protocol

__all__ = [
    "AWS",
    "FRAMINGS",
    "NDJSON",
    "SSE",
    "Framing",
    "Parser",
    "SSEParser",
    "content_type_of",
    "framing_for",
    "framing_of",
    "sse_encode",
]


class Parser(Protocol):
    """An incremental parser: ``feed`` a chunk, get the events it completed."""

    def feed(self, chunk: bytes) -> list[dict[str, Any]]: ...

    def close(self) -> list[dict[str, Any]]: ...


def _json_or_text(text: str) -> dict[str, Any]:
    try:
        return {"data": json.loads(text)}
    except ValueError:
        return {"text": text}


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


# -- server-sent events ----------------------------------------------------------------------------


class SSEParser:
    """Server-sent events, fed in byte chunks (see the module doc for the event form).

    ``crlf`` tells, once a line ended, whether the stream ends its lines with CRLF.
    """

    def __init__(self) -> None:
        self._buf = b""
        self._fields: dict[str, Any] = {}
        self._data: list[str] = []
        self.crlf: bool | None = None

    def feed(self, chunk: bytes) -> list[dict[str, Any]]:
        """Parse ``chunk`` and return the events it completed."""
        self._buf += chunk
        lines = self._buf.splitlines(keepends=True)
        if (lines and not lines[-1].endswith((b"\n", b"\r"))) or (
            lines and lines[-1].endswith(b"\r") and not lines[-1].endswith(b"\r\n")
        ):
            # an unterminated line, or a "\r" whose "\n" may still come
            self._buf = lines.pop()
        else:
            self._buf = b""
        out: list[dict[str, Any]] = []
        for raw in lines:
            if self.crlf is None:
                self.crlf = raw.endswith(b"\r\n")
            line = raw.rstrip(b"\r\n").decode("utf-8", "replace")
            if not line:
                event = self._dispatch()
                if event is not None:
                    out.append(event)
                continue
            if line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if name == "data":
                self._data.append(value)
            elif name == "event":
                self._fields["event"] = value
            elif name == "id":
                self._fields["id"] = value
            elif name == "retry" and value.isdigit():
                self._fields["retry"] = int(value)
        return out

    def _dispatch(self) -> dict[str, Any] | None:
        if not self._data and not self._fields:
            return None
        event = self._fields
        self._fields = {}
        event.update(_json_or_text("\n".join(self._data)))
        self._data = []
        return event

    def close(self) -> list[dict[str, Any]]:
        """Finish the stream: an event left without its blank line is dispatched."""
        crlf = self.crlf
        out = self.feed(b"\n\n") if self._buf or self._data or self._fields else []
        self.crlf = crlf
        return out


def sse_encode(event: Mapping[str, Any], eol: str = "\n") -> bytes:
    """Serialize one stored event back to its SSE wire form.

    >>> sse_encode({"event": "ping", "data": {"a": 1}})
    b'event: ping\\ndata: {"a":1}\\n\\n'
    """
    parts = []
    if "event" in event:
        parts.append(f"event: {event['event']}")
    if "id" in event:
        parts.append(f"id: {event['id']}")
    if "retry" in event:
        parts.append(f"retry: {event['retry']}")
    text = _dumps(event["data"]) if "data" in event else str(event.get("text", ""))
    parts += [f"data: {line}" for line in text.split("\n")]
    return (eol.join(parts) + eol + eol).encode()


# -- newline-delimited JSON ------------------------------------------------------------------------


class NDJSONParser:
    """One JSON value per line, fed in byte chunks."""

    def __init__(self) -> None:
        self._buf = b""

    def feed(self, chunk: bytes) -> list[dict[str, Any]]:
        """Parse ``chunk`` and return the lines it completed."""
        self._buf += chunk
        *lines, self._buf = self._buf.split(b"\n")
        return [_json_or_text(line.decode("utf-8", "replace")) for line in lines if line.strip()]

    def close(self) -> list[dict[str, Any]]:
        """Finish the stream: a last line without its newline is an event too."""
        rest, self._buf = self._buf, b""
        return [_json_or_text(rest.decode("utf-8", "replace"))] if rest.strip() else []


def _ndjson_encode(event: Mapping[str, Any], eol: str = "\n") -> bytes:
    text = _dumps(event["data"]) if "data" in event else str(event.get("text", ""))
    return (text + "\n").encode()


# -- the AWS event stream --------------------------------------------------------------------------

_PRELUDE = struct.Struct(">II")  # total length, headers length; then the prelude's CRC32
_STRING, _BYTES, _TIMESTAMP, _UUID = 7, 6, 8, 9
# header value type -> struct format of a fixed-size value (0 and 1 are true and false)
_FIXED = {2: ">b", 3: ">h", 4: ">i", 5: ">q", _TIMESTAMP: ">q"}


class AWSEventStreamParser:
    """AWS event-stream messages (``application/vnd.amazon.eventstream``), fed in byte
    chunks. A message whose CRC does not check raises ``ValueError``: a stream botocore
    would refuse is not stored as if it were whole."""

    def __init__(self) -> None:
        self._buf = b""

    def feed(self, chunk: bytes) -> list[dict[str, Any]]:
        """Parse ``chunk`` and return the messages it completed."""
        self._buf += chunk
        out = []
        while len(self._buf) >= 12:
            total, header_length = _PRELUDE.unpack_from(self._buf)
            if len(self._buf) < total:
                break
            message, self._buf = self._buf[:total], self._buf[total:]
            out.append(_aws_decode(message, header_length))
        return out

    def close(self) -> list[dict[str, Any]]:
        """Finish the stream (a cut-off message is dropped: it never reached the consumer
        whole)."""
        self._buf = b""
        return []


def _aws_decode(message: bytes, header_length: int) -> dict[str, Any]:
    if binascii.crc32(message[:8]) != struct.unpack_from(">I", message, 8)[0]:
        raise ValueError("an AWS event-stream message's prelude CRC does not match")
    if binascii.crc32(message[:-4]) != struct.unpack_from(">I", message, len(message) - 4)[0]:
        raise ValueError("an AWS event-stream message's CRC does not match")
    headers: dict[str, Any] = {}
    pos, end = 12, 12 + header_length
    while pos < end:
        size = message[pos]
        name = message[pos + 1 : pos + 1 + size].decode()
        pos += 1 + size
        kind = message[pos]
        pos += 1
        value: Any
        if kind in (0, 1):
            value = kind == 0
        elif kind in _FIXED:
            fmt = struct.Struct(_FIXED[kind])
            (value,) = fmt.unpack_from(message, pos)
            pos += fmt.size
        elif kind in (_STRING, _BYTES):
            (length,) = struct.unpack_from(">H", message, pos)
            raw = message[pos + 2 : pos + 2 + length]
            pos += 2 + length
            value = raw.decode() if kind == _STRING else base64.b64encode(raw).decode()
        elif kind == _UUID:
            value = str(uuid.UUID(bytes=message[pos : pos + 16]))
            pos += 16
        else:
            raise ValueError(f"an AWS event-stream header of unknown type {kind}")
        headers[name] = value if kind == _STRING else {"type": kind, "value": value}
    payload = message[end:-4]
    event: dict[str, Any] = {"headers": headers}
    try:
        event["data"] = json.loads(payload) if payload else None
    except ValueError:
        event["base64"] = base64.b64encode(payload).decode()
    return event


def _aws_header(name: str, value: Any) -> bytes:
    head = bytes([len(name.encode())]) + name.encode()
    if not isinstance(value, Mapping):
        raw = str(value).encode()
        return head + bytes([_STRING]) + struct.pack(">H", len(raw)) + raw
    kind, inner = int(value["type"]), value["value"]
    if kind in (0, 1):
        return head + bytes([kind])
    if kind in _FIXED:
        return head + bytes([kind]) + struct.pack(_FIXED[kind], inner)
    if kind == _BYTES:
        raw = base64.b64decode(inner)
        return head + bytes([kind]) + struct.pack(">H", len(raw)) + raw
    if kind == _UUID:
        return head + bytes([kind]) + uuid.UUID(str(inner)).bytes
    raise ValueError(f"an AWS event-stream header of unknown type {kind}")


def _aws_encode(event: Mapping[str, Any], eol: str = "\n") -> bytes:
    headers = b"".join(_aws_header(k, v) for k, v in (event.get("headers") or {}).items())
    if "base64" in event:
        payload = base64.b64decode(event["base64"])
    elif event.get("data") is None:
        payload = b""
    else:
        payload = _dumps(event["data"]).encode()
    total = 12 + len(headers) + len(payload) + 4
    prelude = _PRELUDE.pack(total, len(headers))
    prelude += struct.pack(">I", binascii.crc32(prelude))
    body = prelude + headers + payload
    return body + struct.pack(">I", binascii.crc32(body))


# -- the table -------------------------------------------------------------------------------------


class Framing(NamedTuple):
    """One way of framing a stream: its name, the content types that announce it, an
    incremental parser and the writer of one event."""

    name: str
    content_types: tuple[str, ...]
    parser: Any  # () -> Parser
    write: Any  # (event, eol) -> bytes

    def encode(self, out: Mapping[str, Any]) -> list[bytes]:
        """The chunks a stored stream output is replayed as, one per event."""
        eol = "\r\n" if out.get("eol") == "crlf" else "\n"
        return [self.write(event, eol) for event in out.get("events") or ()]


SSE = Framing("sse", ("text/event-stream",), SSEParser, sse_encode)
NDJSON = Framing(
    "ndjson", ("application/x-ndjson", "application/jsonl"), NDJSONParser, _ndjson_encode
)
AWS = Framing("aws", ("application/vnd.amazon.eventstream",), AWSEventStreamParser, _aws_encode)
FRAMINGS = {f.name: f for f in (SSE, NDJSON, AWS)}


def framing_for(content_type: str) -> Framing | None:
    """The framing a response's content type announces, or None for a whole body.

    >>> framing_for("text/event-stream; charset=utf-8").name, framing_for("application/json")
    ('sse', None)
    """
    ctype = content_type.split(";", 1)[0].strip().lower()
    for framing in FRAMINGS.values():
        if ctype in framing.content_types:
            return framing
    return None


def framing_of(out: Mapping[str, Any]) -> Framing:
    """The framing a stored stream output was recorded in (``sse`` when it names none)."""
    return FRAMINGS.get(str(out.get("framing", "sse")), SSE)


def content_type_of(out: Mapping[str, Any]) -> str:
    """The content type a stored stream output is replayed with."""
    framing = framing_of(out)
    if framing is SSE:
        return "text/event-stream; charset=utf-8"
    return framing.content_types[0]
