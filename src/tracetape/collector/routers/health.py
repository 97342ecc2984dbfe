"""``GET /healthz``: the collector and its database answer; how many analyses run and wait."""

from __future__ import annotations

import asyncio
from typing import Any

import sqlalchemy as sa
from fastapi import APIRouter, HTTPException

from ...stores.migrations import HEAD
from ..deps import Service

__all__ = ["router"]

router = APIRouter(tags=["service"])


@router.get("/healthz")
async def healthz(c: Service) -> dict[str, Any]:
    """Whether the collector and its database answer (503 when the database does not
    within 5 s), and the analyses running and waiting for a slot; it never waits behind
    analyses (they run in worker processes, and its threads are its own)."""

    def ping() -> None:
        with c.db.engine.connect() as conn:
            conn.execute(sa.text("SELECT 1"))

    loop = asyncio.get_running_loop()
    try:
        await asyncio.wait_for(loop.run_in_executor(c.health_pool, ping), timeout=5)
    except TimeoutError:
        raise HTTPException(503, "the database did not answer within 5 s") from None
    running, waiting = c.gate.counts()
    return {
        "ok": True,
        "database": c.db.engine.dialect.name,
        "schema": HEAD,
        "analyses": {"running": running, "waiting": waiting, "slots": c.gate.slots,
                     "queue": c.gate.queue},
    }  # fmt: skip
