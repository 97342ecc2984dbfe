"""The web pages: ``/`` (the runs), ``/runs/{run_id}`` (one run), ``/runs/{run_id}/raw/{n}``
(a decision whole, as JSON), ``/diff`` (two runs), ``/docs`` and ``/openapi.json`` (the API),
``/favicon.ico``. A page needs the session cookie, the bearer header or ``?token=``
(``deps.page_access``); the HTML is ``collector.pages``', drawn in a worker process
(``jobs``) from what the route read in a thread, but for the run list's (a page of numbers
computed when the runs were stored: drawn in a thread): the event loop only awaits them."""

from __future__ import annotations

import datetime as dt
import gzip
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, HTTPException, Path, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from ...record import RecordTexts, decode_record
from .. import jobs, pages
from ..deps import BUSY, Access, MaybeRunId, Page, Pool, Service, cursor, ended_key, known
from ..service import Collector
from ..summaries import RANK

__all__ = ["router"]

router = APIRouter()
PER_PAGE = 50


def _moment(text: str | None, name: str, *, end: bool = False) -> float | None:
    """A time of the run list's filter: a date (``2026-12-04``: its start, or with ``end``
    its end) or a date and time (``2026-12-04T10:30``, UTC unless a zone is given)."""
    if not text:
        return None
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        raise HTTPException(
            400, f"{name} is not a date or a date and time (2026-12-04, 2026-12-04T10:30)"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    if end and len(text) <= 10:
        when += dt.timedelta(days=1)
    return when.timestamp()


def _ran(row: dict[str, Any]) -> float:
    """When a run ran: its records' own time where they say it, else when it was stored."""
    began = row.get("began")
    return float(began if began is not None else row["first_seen"])


def _zipped(request: Request, body: bytes) -> Response:
    """A kept page (gzipped HTML) as sent: as it is to a client that accepts gzip."""
    if "gzip" in request.headers.get("accept-encoding", "").lower():
        return Response(
            body,
            media_type="text/html; charset=utf-8",
            headers={"Content-Encoding": "gzip", "Vary": "Accept-Encoding"},
        )
    return HTMLResponse(gzip.decompress(body))


@router.get("/favicon.ico", include_in_schema=False)
def favicon() -> Response:
    """The pages' icon (no token needed: a browser asks for it before any page)."""
    return Response(
        pages.FAVICON, media_type="image/x-icon", headers={"Cache-Control": "public, max-age=86400"}
    )


@router.get("/openapi.json", include_in_schema=False)
def openapi(request: Request, access: Access) -> JSONResponse:
    """The OpenAPI spec (behind the token when one is set)."""
    return JSONResponse(request.app.openapi())


@router.get("/docs", response_class=HTMLResponse, include_in_schema=False)
def docs(request: Request, access: Access) -> HTMLResponse:
    """The API's routes, parameters and answers, rendered here: no asset from elsewhere."""
    return access.html(pages.docs_page(request.app.openapi()))


@router.get("/", response_class=HTMLResponse, tags=["pages"])
async def runs_html(  # noqa: PLR0917 - the page's filters
    c: Service,
    access: Access,
    cursor_: Annotated[str | None, Query(alias="cursor", max_length=300)] = None,
    q: Annotated[str | None, Query(max_length=200)] = None,
    since: Annotated[str | None, Query(max_length=40)] = None,
    until: Annotated[str | None, Query(max_length=40)] = None,
    severity: Annotated[str | None, Query(pattern="^(|fatal|suspicious|expected)$")] = None,
    sort: Annotated[
        str, Query(pattern="^(run|last_seen|steps|calls|latency|tokens|cost)$")
    ] = "last_seen",
    order: Annotated[str, Query(pattern="^(asc|desc)$")] = "desc",
    page: Annotated[int, Query(ge=0, le=100_000)] = 0,
) -> HTMLResponse:
    """The runs, newest first (or sorted by a column), with their latency, tokens, cost
    and findings by severity; filtered by text, time range and severity. Each run's numbers
    are its summary, computed when its lines were stored (``summaries``)."""
    db, summaries = c.db, c.summaries
    keyset = sort == "last_seen" and order == "desc"
    before = cursor(cursor_) if cursor_ and keyset else None

    def listed() -> list[dict[str, Any]]:
        return db.runs(
            before=before,
            limit=PER_PAGE,
            text=q or None,
            since=_moment(since, "since"),
            until=_moment(until, "until", end=True),
            sort=sort,
            descending=order == "desc",
            offset=0 if keyset else page * PER_PAGE,
            worst=RANK[severity] if severity else None,
        )

    def read() -> tuple[list[dict[str, Any]], dict[str, str]]:
        found = listed()
        waiting = [r["run_id"] for r in found if r["summary_of"] != r["events"]]
        if waiting:  # stored a moment ago: their summaries are being computed
            summaries.add([r for r in waiting if not summaries.queued(r)])
            summaries.wait_once(waiting)
            found = listed()
        return found, db.previous(r["run_id"] for r in found)

    # read before taking a slot: the summaries waited for need one
    found, previous = await run_in_threadpool(read)
    nxt = None
    if keyset and len(found) == PER_PAGE:
        nxt = f"{found[-1]['last_seen']!r}~{found[-1]['run_id']}"
    filters = {"q": q, "since": since, "until": until, "severity": severity,
               "sort": sort, "order": order}  # fmt: skip
    more = pages.RunsPaging(filters, nxt, page if not keyset else None, len(found) == PER_PAGE)
    # a page of numbers computed before: drawn here, in a thread (a worker process would cost
    # more to reach, and a new collector's first page would wait for one to start)
    async with c.gate.slot():
        return access.html(await run_in_threadpool(pages.runs_page, found, more, previous))


@router.get("/runs/{run_id}", response_class=HTMLResponse, tags=["pages"], dependencies=BUSY)
async def run_html(c: Service, pool: Pool, access: Access, run_id: str) -> HTMLResponse:
    """One run's timeline."""

    def read() -> tuple[dict[str, Any], RecordTexts]:
        known(c, run_id)
        return c.db.runs_by_id([run_id])[0], c.db.record_texts(run_id)

    summary, texts = await run_in_threadpool(read)
    return access.html(await pool.run(jobs.run_page, run_id, summary, texts))


@router.get("/runs/{run_id}/raw/{n}", tags=["pages"], dependencies=BUSY)
def raw_html(c: Service, access: Access, run_id: str, n: Annotated[int, Path(ge=1)]) -> Response:
    """Decision ``n`` of a run, whole, as JSON (the run page's "whole record" links)."""
    known(c, run_id)
    texts = c.db.record_texts(run_id).texts
    if n > len(texts):
        said = f"{len(texts)} decision{'s' if len(texts) != 1 else ''}"
        raise HTTPException(404, f"run {run_id} has {said}, not {n}")
    found = decode_record(texts[n - 1])
    return access.cookie(Response(pages.raw_record(found), media_type="application/json"))


@router.get("/diff", response_class=HTMLResponse, tags=["pages"], dependencies=BUSY)
async def diff_html(  # noqa: PLR0917 - the page's parameters
    request: Request,
    c: Service,
    pool: Pool,
    access: Access,
    a: MaybeRunId = None,
    b: MaybeRunId = None,
    run: Annotated[list[str] | None, Query(max_length=2)] = None,
) -> Response:
    """Two runs side by side, aligned, with the divergence and findings highlighted
    (``a`` the baseline, ``b`` the candidate; or two ``run`` s, as the run list's compare
    form sends them: the earlier is the baseline). A page drawn before (when the later run
    was stored, or on an earlier view) is read, not drawn again."""
    db = c.db
    if a is None or b is None:
        return await run_in_threadpool(_compare, c, access, run or [])
    one, other = a, b

    def read() -> tuple[bytes | None, tuple[Any, ...]]:
        known(c, one)
        known(c, other)
        counts = {r["run_id"]: r["events"] for r in db.runs_by_id([one, other])}
        events = (counts[one], counts[other])
        ended = db.endings((one, other))
        kept = db.page(c.page_key((one, other), events, ended))
        if kept is not None:
            return kept, ()
        ta, tb = db.record_texts(one), db.record_texts(other)
        # the whole page is kept: it depends on nothing but the texts and the runs'
        # endings (no clock, no nonce)
        key = c.analyses.key("diff page", (one, other, *ended_key(ended, one, other)), ta, tb)
        return None, (ta, tb, ended, events, key)

    kept, todo = await run_in_threadpool(read)
    if kept is not None:
        return access.cookie(await run_in_threadpool(_zipped, request, kept))
    ta, tb, ended, events, key = todo
    config = c.settings.config
    try:
        body = await c.analyses.aget(
            key, lambda: pool.run(jobs.diff_page, (one, other), ta, tb, ended, config)
        )
    except jobs.Failed as exc:
        if not exc.tape:
            raise
        raise HTTPException(400, str(exc)) from None

    def answer() -> Response:
        if (len(ta.texts), len(tb.texts)) == events:
            c.keep_page((one, other), events, ended, body)
        return _zipped(request, body)

    return access.cookie(await run_in_threadpool(answer))


def _compare(c: Collector, access: Page, run: list[str]) -> Response:
    """The run list's compare form: two ticked runs, to the diff page of the earlier and
    the later."""
    picked = [known(c, name) for name in dict.fromkeys(run)]
    if len(picked) != 2:
        raise HTTPException(
            400, f"tick two runs to compare, not {len(picked)} (or give ?a=RUN&b=RUN)"
        )
    rows = sorted(c.db.runs_by_id(picked), key=lambda r: (_ran(r), r["run_id"]))
    href = "/diff?" + urlencode({"a": rows[0]["run_id"], "b": rows[1]["run_id"]})
    return access.cookie(RedirectResponse(href, status_code=303))
