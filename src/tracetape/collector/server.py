"""Running the collector: settings from the environment, under uvicorn.

``tracetape serve`` puts its options in the environment (``TRACETAPE_DB``,
``TRACETAPE_TOKEN``, ``TRACETAPE_MAX_BODY``, ``TRACETAPE_MAX_LINES``) and runs
``app_from_env`` as uvicorn's app factory, so every worker process (``--workers N``) builds
the same app; the collector keeps no state of its own, so workers and hosts share one
PostgreSQL database. A host that is not loopback needs a token: ``check_binding`` refuses
to start without one.
"""

from __future__ import annotations

import ipaddress
import os

from fastapi import FastAPI

from ..errors import ConfigError
from ..stores.database import DEFAULT_URL, Database
from .app import MAX_BODY, MAX_LINES, Settings, create_app

__all__ = ["app_from_env", "check_binding", "is_loopback"]


def is_loopback(host: str) -> bool:
    """Whether ``host`` only listens on this machine.

    >>> is_loopback("127.0.0.1"), is_loopback("localhost"), is_loopback("0.0.0.0")
    (True, True, False)
    """
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_binding(host: str, token: str | None) -> None:
    """Refuse to serve beyond loopback without a token (``ConfigError``)."""
    if not is_loopback(host) and not token:
        raise ConfigError(
            f"refusing to listen on {host} without a token: anyone who can reach it could "
            "read and write traces; set TRACETAPE_TOKEN (or --token), or bind to 127.0.0.1"
        )


def _int(name: str, default: int) -> int:
    value = os.environ.get(name)
    if value is None:
        return default
    if not value.isdigit() or int(value) <= 0:
        raise ConfigError(f"{name} must be a positive integer, not {value!r}")
    return int(value)


def app_from_env() -> FastAPI:
    """The collector app as ``tracetape serve`` configures it (uvicorn's app factory)."""
    token = os.environ.get("TRACETAPE_TOKEN") or None
    db = Database.open(os.environ.get("TRACETAPE_DB") or DEFAULT_URL)
    settings = Settings(
        token=token,
        max_body=_int("TRACETAPE_MAX_BODY", MAX_BODY),
        max_lines=_int("TRACETAPE_MAX_LINES", MAX_LINES),
    )
    return create_app(db, settings)
