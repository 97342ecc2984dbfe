"""The collector service: store every trace line, serve run-to-run diffs.

``tracetape serve`` runs ``create_app`` (FastAPI, under uvicorn) over a ``Database``
(SQLite by default, PostgreSQL for teams); ``tracetape push`` ships a trace to it in
batches. FastAPI, uvicorn, SQLAlchemy and Alembic are the ``[server]`` extra, imported on
first use of ``create_app``: a client (``stores.client``) needs only ``httpx`` (the
``[push]`` extra).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_attributes

if TYPE_CHECKING:
    from .app import Settings, create_app

__all__ = ["Settings", "create_app"]

__getattr__ = lazy_attributes(__name__, {"Settings": ".app", "create_app": ".app"}, globals())
