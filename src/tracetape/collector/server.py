"""Running the collector: settings from the environment, under uvicorn.

``tracetape serve`` puts its options in the environment (``TRACETAPE_DB``,
``TRACETAPE_TOKEN``, ``TRACETAPE_MAX_BODY``, ``TRACETAPE_MAX_LINES``, ``TRACETAPE_BIND``,
``TRACETAPE_ALLOWED_HOSTS``, ``TRACETAPE_MAX_ANALYSES``, ``TRACETAPE_ANALYSIS_QUEUE``) and runs
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
from .app import create_app
from .security import MIN_TOKEN, clean_token
from .service import MAX_BODY, MAX_LINES, Settings

__all__ = ["MIN_TOKEN", "app_from_env", "check_binding", "clean_token", "is_loopback"]


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


def check_binding(host: str, token: str | None) -> str | None:
    """The token to serve with (stripped), or ``ConfigError``: beyond loopback a token is
    required, and it must be at least ``MIN_TOKEN`` characters."""
    token = clean_token(token)
    if not is_loopback(host) and not token:
        raise ConfigError(
            f"refusing to listen on {host} without a token: anyone who can reach it could "
            "read and write traces; set TRACETAPE_TOKEN (or --token), or bind to 127.0.0.1"
        )
    if not is_loopback(host) and token is not None and len(token) < MIN_TOKEN:
        raise ConfigError(
            f"the token is {len(token)} characters; beyond loopback it must be at least "
            f"{MIN_TOKEN} (for example: python -c 'import secrets; print(secrets.token_urlsafe())')"
        )
    return token


def _int(name: str, default: int, least: int = 1) -> int:
    value = os.environ.get(name)
    if value is None:
        return default
    if not value.isdigit() or int(value) < least:
        kind = "a positive integer" if least else "a whole number"
        raise ConfigError(f"{name} must be {kind}, not {value!r}")
    return int(value)


def app_from_env() -> FastAPI:
    """The collector app as ``tracetape serve`` configures it (uvicorn's app factory)."""
    token = clean_token(os.environ.get("TRACETAPE_TOKEN") or None)
    db = Database.open(os.environ.get("TRACETAPE_DB") or DEFAULT_URL)
    hosts = os.environ.get("TRACETAPE_ALLOWED_HOSTS", "")
    settings = Settings(
        token=token,
        max_body=_int("TRACETAPE_MAX_BODY", MAX_BODY),
        max_lines=_int("TRACETAPE_MAX_LINES", MAX_LINES),
        bind=os.environ.get("TRACETAPE_BIND") or "127.0.0.1",
        allowed_hosts=tuple(h for h in hosts.split(",") if h.strip()),
    )
    if os.environ.get("TRACETAPE_MAX_ANALYSES"):
        settings.max_analyses = _int("TRACETAPE_MAX_ANALYSES", settings.max_analyses)
    if os.environ.get("TRACETAPE_ANALYSIS_QUEUE"):
        settings.analysis_queue = _int("TRACETAPE_ANALYSIS_QUEUE", 0, least=0)
    return create_app(db, settings)
