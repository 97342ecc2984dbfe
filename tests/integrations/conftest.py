from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from fakeserver import FakeServer

from tests.integrations.providers.fake_bedrock import FakeBedrock
from tracetape.integrations import unpatch_all


@pytest.fixture
def server() -> Iterator[FakeServer]:
    srv = FakeServer().start()
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture
def no_leftover_patch() -> Iterator[None]:
    """Every hook removed after the test, whatever it left installed."""
    yield
    unpatch_all()


@pytest.fixture
def bedrock() -> Iterator[FakeBedrock]:
    """A fake Bedrock Runtime on 127.0.0.1 (``providers/fake_bedrock.py``)."""
    fake = FakeBedrock().start()
    try:
        yield fake
    finally:
        fake.stop()
