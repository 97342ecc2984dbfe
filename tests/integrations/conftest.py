from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from fakeserver import FakeServer


@pytest.fixture
def server() -> Iterator[FakeServer]:
    srv = FakeServer().start()
    try:
        yield srv
    finally:
        srv.stop()
