"""The JSON API over what is stored: ``GET /v1/runs`` (newest first, paginated, filtered by
time and tool), ``GET /v1/runs/{run_id}`` (its events in order), ``GET
/v1/runs/{run_id}/check`` (``tracetape check``'s JSON) and ``GET /v1/diff?a=RUN&b=RUN``
(exactly the JSON ``tracetape diff --format json`` gives). The check and the diff read the
runs in a thread and are computed in a worker process (``jobs``); the event loop only
awaits them."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from fastapi import APIRouter, HTTPException, Query
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import Response

from ...record import INT64_MAX, RecordTexts
from .. import jobs
from ..deps import AUTH, BUSY, Pool, RunId, Service, cursor, ended_key, known, stored

__all__ = ["router"]

router = APIRouter(dependencies=AUTH)


def _json(text: str) -> Response:
    return Response(text, media_type="application/json")


def _plain(rec: Any) -> dict[str, Any]:
    """A record as an event of the API: every field that is not None (a 0 and an empty
    string too, which the stored form leaves out as defaults)."""
    return {k: v for k, v in msgspec.structs.asdict(rec).items() if v is not None}


def _source(texts: RecordTexts) -> str:
    """The source (file name) of a stored run's first record."""
    return RecordTexts(texts.texts[:1]).records()[0].source


@router.get("/v1/runs", tags=["runs"])
def list_runs(  # noqa: PLR0917 - the query parameters
    c: Service,
    since: float | None = None,
    until: float | None = None,
    tool: Annotated[str | None, Query(max_length=500)] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 50,
    cursor_: Annotated[str | None, Query(alias="cursor", max_length=300)] = None,
) -> dict[str, Any]:
    """Runs, newest first, filtered by time and tool; ``next`` is the next page's cursor."""
    if tool is not None and not tool.isprintable():
        raise HTTPException(400, "tool: must be printable text")
    before = cursor(cursor_) if cursor_ else None
    found = c.db.runs(since=since, until=until, tool=tool, before=before, limit=limit)
    nxt = None
    if len(found) == limit:
        last = found[-1]
        nxt = f"{last['last_seen']!r}~{last['run_id']}"
    return {"runs": found, "next": nxt}


@router.get("/v1/runs/{run_id}", tags=["runs"])
def get_run(
    c: Service,
    run_id: str,
    after: Annotated[int, Query(ge=0, le=INT64_MAX)] = 0,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
) -> dict[str, Any]:
    """The run's events in order (``after`` the last event id of the previous page)."""
    known(c, run_id)
    page = c.db.events(run_id, after=after, limit=limit)
    summary = next(iter(c.db.runs_by_id([run_id])), None)
    return {
        "run": summary,
        "events": [{"id": i, **_plain(rec)} for i, rec in page],
        "next": page[-1][0] if len(page) == limit else None,
    }


@router.get("/v1/runs/{run_id}/check", dependencies=BUSY, tags=["analysis"])
async def check_run(c: Service, pool: Pool, run_id: str) -> Response:
    """The invariants of the run: ``tracetape check --format json`` for it."""

    def read() -> tuple[RecordTexts, tuple[str, ...]]:
        texts = stored(c, run_id)
        return texts, c.analyses.key("check", (run_id,), texts)

    texts, key = await run_in_threadpool(read)
    config = c.settings.config
    return _json(await c.analyses.aget(key, lambda: pool.run(jobs.check, texts, run_id, config)))


@router.get("/v1/diff", dependencies=BUSY, tags=["analysis"])
async def diff_runs(c: Service, pool: Pool, a: RunId, b: RunId) -> Response:
    """Exactly the JSON ``tracetape diff --format json`` gives for runs ``a`` and ``b``."""

    def read() -> tuple[RecordTexts, RecordTexts, tuple[str, str], dict[str, str], tuple[str, ...]]:
        # The stored texts go to the analysis as they are (DuckDB reads them in bulk).
        ra, rb = stored(c, a), stored(c, b)
        names = (_source(ra) or a, _source(rb) or b)
        ended = c.db.endings((a, b))
        return (
            ra,
            rb,
            names,
            ended,
            c.analyses.key("diff", (*names, *ended_key(ended, a, b)), ra, rb),
        )

    ra, rb, names, ended, key = await run_in_threadpool(read)
    config = c.settings.config
    try:
        text = await c.analyses.aget(key, lambda: pool.run(jobs.diff, ra, rb, names, ended, config))
    except jobs.Failed as exc:
        if not exc.tape:
            raise
        raise HTTPException(400, str(exc)) from None
    return _json(text)
