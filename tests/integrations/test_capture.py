"""The mechanism the transports share: the transport flavors, and a miss typed as the SDKs'
errors."""

from __future__ import annotations

from pathlib import Path

import openai
import pytest

import tracetape
from tracetape import ReplayMiss, Tape
from tracetape.integrations.capture import sdk_compatible_miss


def test_unknown_transport_flavor_is_refused(tmp_path: Path) -> None:
    """An unknown HTTP library is refused with the valid choices named."""
    with (
        Tape(tmp_path / "t.jsonl", mode="record", harness_sha="x") as tape,
        pytest.raises(ValueError, match="use 'httpx2' or 'httpx'"),
    ):
        tracetape.http_transport(tape, flavor="requests")


def test_a_miss_typed_as_an_sdks_error_is_the_same_miss() -> None:
    """The copy of a miss raised as the SDKs' error names the miss it copies, so either is the
    same miss and no other exception is."""

    def new() -> ReplayMiss:
        return ReplayMiss(
            "llm:1", kind="llm", step=1, matched=0, recorded=1, expected=None, changes=[]
        )

    miss = new()
    copy = sdk_compatible_miss(miss)
    assert isinstance(copy, openai.OpenAIError) and copy is not miss
    assert copy.copy_of is miss and miss.copy_of is None
    assert miss.same(copy) and copy.same(miss) and sdk_compatible_miss(copy).copy_of is miss
    assert not miss.same(new()) and not miss.same(None)
