"""Chromium for the pages' browser tests: Debian's, headless, with no background network."""

from __future__ import annotations

import shutil

from tests.services import skip_or_fail

# What the machine's closed network needs (no background connections) and root needs.
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip


def chromium() -> str:
    """The Chromium executable; the test skips (fails under CI) where none is installed."""
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        skip_or_fail("Chromium is not installed here (Debian: apt-get install chromium)")
    return path
