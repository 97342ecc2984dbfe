"""The services some tests need and cannot bring themselves (a PostgreSQL server, Chromium).

Where one cannot start, a test skips and says why; under CI (``CI=true`` or ``CI=1``, as
``.ci/run`` and the usual CI systems set it) it fails instead, with the same reason, so that
a CI run is never green with every test that needs a service skipped. A limit of the machine
that is not a service (no root to mount a tmpfs, root writing into a read-only folder) still
skips everywhere.
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def in_ci() -> bool:
    """Whether the tests run under CI: ``CI`` is ``true`` or ``1``, in any case."""
    return os.environ.get("CI", "").strip().lower() in ("true", "1")


def skip_or_fail(reason: str) -> NoReturn:
    """Skip the test for ``reason``, or fail it for the same reason under CI."""
    if in_ci():
        pytest.fail(f"{reason} (CI=true: a test that needs this service may not skip)")
    pytest.skip(reason)
