from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from fakeserver import FakeServer

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
