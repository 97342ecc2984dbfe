"""The capture flow every transport adapter rides on, with a transport of plain values: the
flow keys, replays, records, learns credentials, records a failure and taps, and each
adapter supplies only its own parts."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tracetape import ReplayMiss, Tape
from tracetape.integrations.capture import Capture, capture_var, sending
from tracetape.integrations.flow import Parts, aexchange, begin, exchange, recording
from tracetape.integrations.keying import Keyed
from tracetape.record import RAISED

SECRET = "velvet-harbor-9931"  # no shape a redaction rule knows: only learning finds it


@dataclass
class Request:
    url: str = "https://tools.example/v1/lookup"
    body: bytes = b'{"q": "weather"}'
    headers: dict[str, str] = field(default_factory=lambda: {"x-api-key": SECRET})


@dataclass
class Response:
    status: int
    body: bytes
    replayed: bool = False


class Plain:
    """An adapter of plain values, the way http, aiohttp and the proxy write theirs."""

    def parts(self, request: Request) -> Parts:
        return Parts(
            "POST",
            ("https", "tools.example", "/v1/lookup", ""),
            "application/json",
            request.headers,
        )

    def identity(self, request: Request) -> None:
        request.headers["accept-encoding"] = "identity"

    def answer(
        self,
        request: Request,
        out: Mapping[str, Any],
        headers: Mapping[str, str],
        beyond: Callable[[], BaseException] | None,
    ) -> Response:
        return Response(out["status"], json.dumps(out["body"]).encode(), replayed=True)

    def raised(self, request: Request, out: Mapping[str, Any]) -> BaseException:
        return ConnectionError(f"replayed: {out[RAISED]['message']}")

    def tapped(self, request: Request, response: Response, capture: Capture) -> Response:
        tap = capture.new_tap(response.status, "application/json")
        tap.feed(response.body)
        tap.finish(complete=True)
        return response


def _send(answer: bytes) -> Callable[[Request], Response]:
    def send(request: Request) -> Response:
        assert sending.get(), "a request being sent is marked, so no inner transport takes it"
        assert request.headers["accept-encoding"] == "identity"
        return Response(200, answer)

    return send


def test_a_request_is_recorded_then_answered_from_the_tape(tmp_path: Path) -> None:
    path = tmp_path / "flow.jsonl"
    with Tape(path, mode="record") as tape:
        live = exchange(Plain(), tape, Request(), Request().body, _send(b'{"sky": "clear"}'))
    assert live == Response(200, b'{"sky": "clear"}')
    assert not sending.get()
    (rec,) = Tape(path, mode="replay").records
    assert rec.kind == "http" and rec.out == {"status": 200, "body": {"sky": "clear"}}
    with Tape(path, mode="replay") as tape:
        replayed = exchange(Plain(), tape, Request(), Request().body, _send(b"never sent"))
    assert replayed == Response(200, b'{"sky": "clear"}', replayed=True)


def test_a_changed_request_misses_in_replay(tmp_path: Path) -> None:
    path = tmp_path / "flow.jsonl"
    with Tape(path, mode="record") as tape:
        exchange(Plain(), tape, Request(), Request().body, _send(b"{}"))
    tape = Tape(path, mode="replay")
    with pytest.raises(ReplayMiss) as miss, tape:
        exchange(Plain(), tape, Request(), b'{"q": "rain"}', _send(b"never sent"))
    assert "body.q" in str(miss.value)


def test_credentials_are_learned_so_an_echo_is_redacted(tmp_path: Path) -> None:
    path = tmp_path / "flow.jsonl"
    echo = json.dumps({"you_sent": SECRET}).encode()
    with Tape(path, mode="record") as tape:
        exchange(Plain(), tape, Request(), Request().body, _send(echo))
    assert SECRET not in path.read_text()


def test_a_failure_to_send_is_recorded_and_raised_again_in_replay(tmp_path: Path) -> None:
    path = tmp_path / "flow.jsonl"

    def refused(request: Request) -> Response:
        raise ConnectionRefusedError("connection refused")

    with Tape(path, mode="record") as tape, pytest.raises(ConnectionRefusedError):
        exchange(Plain(), tape, Request(), Request().body, refused)
    assert not sending.get(), "the mark is taken back when the send fails"
    tape = Tape(path, mode="replay")
    with tape, pytest.raises(ConnectionError, match="replayed: connection refused"):
        exchange(Plain(), tape, Request(), Request().body, _send(b"never sent"))


def test_the_async_flow_records_and_replays_alike(tmp_path: Path) -> None:
    path = tmp_path / "flow.jsonl"

    async def send(request: Request) -> Response:
        return _send(b'{"n": 1}')(request)

    async def run(tape: Tape) -> Response:
        return await aexchange(Plain(), tape, Request(), Request().body, send)

    with Tape(path, mode="record") as tape:
        assert asyncio.run(run(tape)) == Response(200, b'{"n": 1}')
    with Tape(path, mode="replay") as tape:
        assert asyncio.run(run(tape)).replayed


def test_an_sdk_recording_is_tapped_not_keyed_again(tmp_path: Path) -> None:
    """Under ``recording`` (the SDK fast path), the transport taps the call's capture: one
    decision, keyed by the SDK's arguments, answered by what the transport read."""
    path = tmp_path / "flow.jsonl"
    with Tape(path, mode="record") as tape:
        keyed = Keyed(tape.prepare("tool", {"name": "lookup", "args": {}, "step": 1}))
        with recording(tape, keyed) as capture:
            assert capture_var.get() is capture
            taken = begin(Plain(), capture, Request(), b"")
            assert taken is capture
            exchange(Plain(), capture, Request(), b"", _send(b'{"from": "transport"}'))
        assert capture_var.get() is None
    (rec,) = Tape(path, mode="replay").records
    assert rec.kind == "tool" and rec.out["body"] == {"from": "transport"}
