"""``call`` and ``acall``: record a plain function's result under its payload's key, replay
it without running the function, and never run an irreversible one for real by accident."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tracetape import Tape
from tracetape.errors import IrreversibleEffectError
from tracetape.formats.cassette import read_cassette


def test_a_call_is_recorded_then_replayed_without_running(tmp_path: Path) -> None:
    """Recording runs ``do`` and writes what it returned, with its effect; replay returns
    it and runs nothing."""
    path = tmp_path / "run.jsonl"
    with Tape(path, mode="record") as tape:
        assert tape.call("tool", {"name": "add", "step": 1}, lambda: 3, effect="write") == 3
    assert [(r.out, r.effect) for r in read_cassette(path).records] == [(3, "write")]
    with Tape(path, mode="replay") as tape:
        assert tape.call("tool", {"name": "add", "step": 1}, lambda: 1 / 0) == 3


def test_an_irreversible_call_runs_its_stub_while_recording(tmp_path: Path) -> None:
    """Recording an irreversible call with no stub refuses to run it for real (unless
    allowed); with a stub it records the stub's result."""
    ran: list[str] = []
    with Tape(tmp_path / "a.jsonl", mode="record") as tape:
        with pytest.raises(IrreversibleEffectError, match="stub="):
            tape.call("tool", {"name": "pay", "step": 1}, lambda: ran.append("paid"),
                      effect="irreversible")  # fmt: skip
        stubbed = tape.call("tool", {"name": "pay", "step": 2}, lambda: ran.append("paid"),
                            effect="irreversible", stub=lambda: "stubbed")  # fmt: skip
    assert stubbed == "stubbed" and ran == []
    with Tape(tmp_path / "b.jsonl", mode="record", allow_irreversible=True) as tape:
        tape.call("tool", {"name": "pay", "step": 1}, lambda: ran.append("paid"),
                  effect="irreversible")  # fmt: skip
    assert ran == ["paid"]


def test_the_async_twin_records_and_replays(tmp_path: Path) -> None:
    """``acall`` awaits ``do`` while recording and returns the recorded result in replay."""
    path = tmp_path / "run.jsonl"

    async def fetch() -> str:
        return "fetched"

    async def fail() -> str:
        raise AssertionError("replay ran the call")

    async def run(mode: str, do: object) -> str:
        with Tape(path, mode=mode) as tape:
            return await tape.acall("tool", {"name": "fetch", "step": 1}, do)  # type: ignore[arg-type]

    assert asyncio.run(run("record", fetch)) == "fetched"
    assert asyncio.run(run("replay", fail)) == "fetched"
