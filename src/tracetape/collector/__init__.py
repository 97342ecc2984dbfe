"""The collector service: store every trace line, serve run-to-run diffs.

``tracetape serve`` runs ``create_app`` (FastAPI, under uvicorn) over a ``Database``
(SQLite by default, PostgreSQL for teams); ``tracetape push`` ships a trace to it in
batches. FastAPI, uvicorn, SQLAlchemy and Alembic are the ``[server]`` extra.
"""

from __future__ import annotations

from .app import Settings, create_app

__all__ = ["Settings", "create_app"]
