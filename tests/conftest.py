"""Fixtures shared by the whole suite."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.span.helpers import Decider


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB tmpfs (skipped where this test may not mount one)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs to fill (needs root): {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=False)


@pytest.fixture
def decider() -> Iterator[Decider]:
    """A second model (an OpenAI-compatible chat endpoint) on 127.0.0.1; set its ``reply``."""
    server = Decider()
    server._thread.start()
    try:
        yield server
    finally:
        server._server.shutdown()
        server._server.server_close()
