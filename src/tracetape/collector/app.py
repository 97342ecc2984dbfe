"""The collector's HTTP API (FastAPI): store trace lines, list runs, serve run-to-run diffs.

Routes (every ``/v1`` route needs ``Authorization: Bearer TOKEN`` when a token is set):

* ``POST /v1/lines``: JSONL, or a JSON array, of trace lines in any format ``tracetape diff``
  reads; ``?source=NAME`` names them (a run without its own id takes it), ``?offset=N`` is the
  number of lines of that source sent before, ``?format=`` skips sniffing, ``?run=ID`` files
  every line under that run, ``?append=true`` lets lines of another source into a run (else
  409). The batch is stored atomically: all its new lines or none (400 naming each bad line
  by number and field); a line stored before is not stored again (``"known"`` counts them), a
  batch sent again is recognised whole (``"duplicate": true``); a 2xx means the lines are on
  disk.
* ``POST /v1/otlp/v1/traces``: an OTLP/HTTP JSON export (``ExportTraceServiceRequest`` with
  GenAI spans), so an OpenTelemetry SDK or Collector exports straight here.
* ``GET /v1/runs``: runs, newest first, paginated (``limit``, ``cursor``), filtered by time
  (``since``, ``until``: Unix seconds) and by a tool the run called (``tool``).
* ``GET /v1/runs/{run_id}``: the run's summary and events in order (``after``, ``limit``).
* ``GET /v1/runs/{run_id}/check``: the invariants of the run (``tracetape check``'s JSON).
* ``GET /v1/diff?a=RUN&b=RUN``: exactly the JSON ``tracetape diff --format json`` gives.
* ``GET /healthz``: the database answers.

Bodies over ``max_body`` bytes or ``max_lines`` lines are refused with 413 before they are
parsed. Run ids and parameters are validated; every query is parameterized by SQLAlchemy.

Why one module: the routes are closures over one database, one set of limits and one pool
of analyses made by ``create_app``; the admission of analyses, the token check and the
limits on bodies are shared by every route. The pages' HTML is in ``pages``, ingest in
``ingest``, security in ``security``.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import gzip
import hashlib
import hmac
import json
import math
import os
import threading
import zlib
from collections.abc import AsyncIterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Annotated, Any, TypeVar
from urllib.parse import urlencode

import msgspec
import sqlalchemy as sa
from fastapi import Depends, FastAPI, HTTPException, Path, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Receive, Scope, Send

from .._version import __version__
from ..analysis import AnalysisConfig, check_records, diff_records
from ..analysis.engine import Workspace
from ..analysis.render import verdict_text
from ..analysis.report import redacted
from ..config import load_config
from ..errors import TapeError
from ..record import INT64_MAX, RecordTexts
from ..redact import Redactor, RedactRules
from ..stores.database import RUN_ID, Database, RunConflict
from ..stores.migrations import HEAD
from . import pages
from .ingest import BadBatch, Batch, Registry, parse_batch, redact_stored
from .memo import Analyses
from .security import SESSION_S, Guard, allowed_hosts, check_session, clean_token, new_session
from .summaries import RANK, Summaries, summarize

__all__ = ["Settings", "create_app"]

MAX_BODY = 16 << 20
MAX_LINES = 10_000


@dataclass
class Settings:
    """The collector's settings: the bearer ``token`` (none: no auth, loopback only), body
    and line limits, the address it listens on (``bind``) and the other host names it
    answers to (``allowed_hosts``), how many analyses (diffs, checks, pages) run at once
    (``max_analyses``: past it, a 503 with ``Retry-After``), and the analysis configuration."""

    token: str | None = None
    max_body: int = MAX_BODY
    max_lines: int = MAX_LINES
    bind: str | None = "127.0.0.1"
    allowed_hosts: tuple[str, ...] = ()
    max_analyses: int = field(default_factory=lambda: max(2, os.cpu_count() or 2))
    config: AnalysisConfig = field(default_factory=AnalysisConfig.load)
    redactor: Redactor = field(
        default_factory=lambda: Redactor(RedactRules.coerce(load_config("redact") or None))
    )
    registry: Registry = field(default_factory=Registry)


def _error(status: int, message: str, **extra: Any) -> JSONResponse:
    return JSONResponse({"error": message, **extra}, status_code=status)


# Checked whole by ``RUN_ID.fullmatch`` in the route (a ``Query`` pattern only searches).
RunId = Annotated[str, Query(min_length=1, max_length=200)]
MaybeRunId = Annotated[str | None, Query(min_length=1, max_length=200)]


def create_app(db: Database, settings: Settings | None = None) -> FastAPI:
    """The collector's ASGI app over ``db`` (see the module docstring)."""
    conf = settings or Settings()
    conf = replace(conf, token=clean_token(conf.token))
    # One DuckDB database for every analysis of this process, opened by the first one.
    spaces: list[Workspace] = []
    lock = threading.Lock()

    def workspace() -> Workspace:
        with lock:
            if not spaces:
                spaces.append(Workspace(conf.config.memory_limit))
            return spaces[0]

    # Health has threads of its own: it answers while every other thread runs an analysis.
    health_pool = ThreadPoolExecutor(2, thread_name_prefix="tracetape-health")
    slots = threading.BoundedSemaphore(conf.max_analyses)
    analyses = Analyses()  # the last reports, by the texts they read (``memo``)

    def summarized(run: str, diff: bool) -> None:
        """Compute and keep one run's summary (``summaries``: the run list reads it) and,
        with ``diff`` (its recording's last lines were stored), its verdict against the run
        of its source before it and that diff's page. The summary is stored last: a page
        that sees it finds the rest done."""
        texts = db.record_texts(run)
        if not texts.texts:
            return
        if diff:
            before = db.previous([run]).get(run)
            if before is not None:
                _verdict(before, run, texts)
        found = summarize(texts, run, config=_many(conf.config), workspace=workspace())
        db.set_summary(run, found, len(texts.texts))

    def _verdict(before: str, run: str, texts: RecordTexts) -> None:
        """Keep ``run``'s verdict against ``before`` and their diff page (the run list shows
        the one and links the other, and neither is analysed on view). A pair the analysis
        cannot read keeps none: its lines are stored, and its diff page says why."""
        ended = db.endings((before, run))
        ta = db.record_texts(before)
        ra, rb = ta.records(), texts.records()
        try:
            report = diff_records(
                ra, rb, names=(before, run), config=_many(conf.config), workspace=workspace(),
                endings=ended,
            )  # fmt: skip
        except Exception:  # the verdict is a convenience; the lines are stored
            return
        read = (len(ta.texts), len(texts.texts))
        if db.set_verdict(run, before, verdict_text(report), read):
            html = pages.diff_page(before, run, ra, rb, report)
            key = page_key((before, run), read, ended)
            db.keep_page(key, (before, run), gzip.compress(html.encode(), 5))

    # what a kept diff page depends on besides its runs: this collector's code and settings
    made_by = hashlib.sha256(f"{__version__}\n{conf.config!r}\n{pages.CSP}".encode()).hexdigest()

    def page_key(runs: tuple[str, str], events: tuple[int, int], ended: dict[str, str]) -> str:
        """The key of a diff page of ``runs``: what it read (``events`` of each, how each
        ended) and what drew it."""
        said = [made_by, *runs, *map(str, events), *(ended.get(r, "") for r in runs)]
        return hashlib.sha256("\x00".join(said).encode()).hexdigest()

    summaries = Summaries(summarized)
    summaries.add(db.unsummarized())  # runs stored before, or by a collector stopped early

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        summaries.close()
        health_pool.shutdown(wait=False)
        for space in spaces:
            space.close()

    async def analysis_slot() -> AsyncIterator[None]:
        """Hold one of ``max_analyses`` slots for the request, or answer 503 at once."""
        if not slots.acquire(blocking=False):
            raise HTTPException(
                503,
                f"{conf.max_analyses} analyses are running; retry in a moment",
                headers={"Retry-After": "1"},
            )
        try:
            yield
        finally:
            slots.release()

    busy = [Depends(analysis_slot)]

    app = FastAPI(
        title="tracetape collector",
        version=__version__,
        description="Stores every trace line and serves run-to-run diffs.",
        lifespan=lifespan,
        # served below, behind the token and without assets from elsewhere
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    app.state.db, app.state.settings, app.state.analyses = db, conf, analyses
    app.state.summaries = summaries
    too_big = f"the body is over {conf.max_body} bytes; send smaller batches"

    class Limit:
        """Refuse a body declared too big before reading it (plain ASGI: a response passes
        through untouched, where ``BaseHTTPMiddleware`` would stream it through a queue)."""

        def __init__(self, app: ASGIApp):
            self.app = app

        async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] == "http":
                length = next((v for k, v in scope["headers"] if k == b"content-length"), None)
                if length is not None and not length.isdigit():
                    await _error(400, "Content-Length is not a number")(scope, receive, send)
                    return
                if length is not None and int(length) > conf.max_body:
                    await _error(413, too_big)(scope, receive, send)
                    return
            await self.app(scope, receive, send)

    app.add_middleware(Limit)
    app.add_middleware(Guard, hosts=allowed_hosts(conf.bind, conf.allowed_hosts), csp=pages.CSP)

    def authorized(request: Request) -> None:
        if conf.token is None:
            return
        given = request.headers.get("authorization", "")
        scheme, _, token = given.partition(" ")
        if not given:
            problem = "a bearer token is required: Authorization: Bearer $TRACETAPE_TOKEN"
        elif scheme.lower() != "bearer":
            problem = "the Authorization header must use the Bearer scheme: Bearer $TRACETAPE_TOKEN"
        elif not hmac.compare_digest(token.strip().encode(), conf.token.encode()):
            problem = "the bearer token is not this collector's; check TRACETAPE_TOKEN"
        else:
            return
        raise HTTPException(401, problem, headers={"WWW-Authenticate": "Bearer"})

    auth = [Depends(authorized)]

    async def body_of(request: Request) -> bytes:
        """The request's body, decompressed (``Content-Encoding`` gzip or deflate), at most
        ``max_body`` bytes as sent and as decompressed (a gzip bomb is a 413)."""
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > conf.max_body:
                raise BadBatch(413, too_big)
            chunks.append(chunk)
        body = b"".join(chunks)
        encoding = request.headers.get("content-encoding", "").strip().lower()
        return body if encoding in ("", "identity") else _decoded(body, encoding, conf.max_body)

    @app.exception_handler(BadBatch)
    async def bad_batch(request: Request, exc: BadBatch) -> JSONResponse:
        return JSONResponse(exc.body(), status_code=exc.status)

    @app.exception_handler(RequestValidationError)
    async def bad_parameter(request: Request, exc: RequestValidationError) -> Response:
        problems = [
            f"{'.'.join(str(p) for p in e.get('loc', ())[1:])}: {e.get('msg')}"
            for e in exc.errors()
        ]
        return _failure(request, 400, "; ".join(problems) or "bad request")

    @app.exception_handler(Exception)
    async def failed(request: Request, exc: Exception) -> Response:
        # Nothing was stored by a request that failed here (a batch is one transaction).
        message = f"the collector failed: {type(exc).__name__}; nothing was stored"
        return _failure(request, 500, message)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        # every error, a route's own and the framework's (404, 405), in the one shape
        return _failure(request, exc.status_code, str(exc.detail), exc.headers)

    async def ingest(
        body: bytes,
        source: str,
        offset: int,
        fmt: str,
        *,
        run: str | None = None,
        append: bool = False,
    ) -> dict[str, Any]:
        batch = await run_in_threadpool(
            parse_batch,
            body,
            source=source,
            offset=offset,
            fmt=fmt,
            redactor=conf.redactor,
            max_lines=conf.max_lines,
            run=run,
            registry=conf.registry,
        )
        try:
            stored = await run_in_threadpool(
                db.store,
                batch.records,
                digest=batch.digest,
                lines=batch.lines,
                keys=batch.keys,
                source=source,
                append=append,
                ended=batch.ended,
            )
        except RunConflict as exc:
            raise BadBatch(409, str(exc)) from None
        if batch.learned:
            await run_in_threadpool(_learned, batch)
        if stored.events or batch.learned:
            await run_in_threadpool(db.clear_verdicts, stored.runs)
            await run_in_threadpool(db.forget_pages, stored.runs)
            # a recording's last lines: its verdict against the run of its source before it
            summaries.add(stored.runs, diff=batch.ended is not None and bool(stored.events))
        return {
            "stored": stored.events,
            "known": stored.known,
            "duplicate": stored.duplicate,
            "runs": stored.runs,
            "redacted": batch.redacted,
            "batch": stored.digest,
        }

    def _learned(batch: Batch) -> None:
        """Remember what the batch taught for its runs, and redact it in what they stored
        before (a secret quoted before the line that named it)."""
        for name in batch.runs:
            conf.registry.add(name, batch.learned)
            redactor = conf.redactor.fresh(conf.registry.known(name))
            db.rewrite(name, partial(redact_stored, redactor=redactor), list(batch.learned))

    def ping() -> None:
        with db.engine.connect() as conn:
            conn.execute(sa.text("SELECT 1"))

    @app.get("/healthz", tags=["service"])
    async def healthz() -> dict[str, Any]:
        """Whether the collector and its database answer (503 when the database does not
        within 5 s); it never waits behind analyses."""
        loop = asyncio.get_running_loop()
        try:
            await asyncio.wait_for(loop.run_in_executor(health_pool, ping), timeout=5)
        except TimeoutError:
            raise HTTPException(503, "the database did not answer within 5 s") from None
        return {"ok": True, "database": db.engine.dialect.name, "schema": HEAD}

    @app.post("/v1/lines", dependencies=auth, tags=["ingest"])
    async def post_lines(  # noqa: PLR0917 - the query parameters
        request: Request,
        source: Annotated[str, Query(max_length=1000)] = "request",
        offset: Annotated[int, Query(ge=0, le=1 << 40)] = 0,
        format: Annotated[str, Query()] = "auto",
        run: Annotated[str | None, Query(max_length=200)] = None,
        append: bool = False,
    ) -> dict[str, Any]:
        """Store a batch of trace lines (JSONL or a JSON array) atomically: the lines not
        stored before (``known`` counts the others)."""
        body = await body_of(request)
        return await ingest(body, source, offset, format, run=run, append=append)

    @app.post("/v1/otlp/v1/traces", dependencies=auth, tags=["ingest"])
    async def post_otlp(request: Request) -> dict[str, Any]:
        """Store an OTLP/HTTP JSON trace export (GenAI spans)."""
        kind = request.headers.get("content-type", "application/json").split(";")[0].strip()
        if kind != "application/json":
            raise BadBatch(415, "only OTLP/HTTP JSON is accepted (Content-Type: application/json)")
        body = await body_of(request)
        await ingest(b" ".join(body.splitlines()), "otlp", 0, "otlp")  # one document, one line
        return {"partialSuccess": {}}

    @app.get("/v1/runs", dependencies=auth, tags=["runs"])
    def list_runs(
        since: float | None = None,
        until: float | None = None,
        tool: Annotated[str | None, Query(max_length=500)] = None,
        limit: Annotated[int, Query(ge=1, le=1000)] = 50,
        cursor: Annotated[str | None, Query(max_length=300)] = None,
    ) -> dict[str, Any]:
        """Runs, newest first, filtered by time and tool; ``next`` is the next page's cursor."""
        if tool is not None and not tool.isprintable():
            raise HTTPException(400, "tool: must be printable text")
        before = _cursor(cursor) if cursor else None
        found = db.runs(since=since, until=until, tool=tool, before=before, limit=limit)
        nxt = None
        if len(found) == limit:
            last = found[-1]
            nxt = f"{last['last_seen']!r}~{last['run_id']}"
        return {"runs": found, "next": nxt}

    def _valid(run_id: str) -> None:
        if not RUN_ID.fullmatch(run_id):
            raise HTTPException(
                400,
                "the run id must be 1-200 letters, digits and ._:@+=-, starting with a "
                "letter or digit",
            )

    def _missing(run_id: str) -> HTTPException:
        return HTTPException(404, f"no run {run_id!r} in this collector")

    def _stored(run_id: str) -> RecordTexts:
        """The run's stored records (400 for a bad id, 404 for a run not there)."""
        _valid(run_id)
        texts = db.record_texts(run_id)
        if not texts.texts:
            raise _missing(run_id)
        return texts

    def _known(run_id: str) -> str:
        _valid(run_id)
        if not db.run_exists(run_id):
            raise _missing(run_id)
        return run_id

    @app.get("/v1/runs/{run_id}", dependencies=auth, tags=["runs"])
    def get_run(
        run_id: str,
        after: Annotated[int, Query(ge=0, le=INT64_MAX)] = 0,
        limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
    ) -> dict[str, Any]:
        """The run's events in order (``after`` the last event id of the previous page)."""
        _known(run_id)
        page = db.events(run_id, after=after, limit=limit)
        summary = next(iter(db.runs_by_id([run_id])), None)
        return {
            "run": summary,
            "events": [{"id": i, **_plain(rec)} for i, rec in page],
            "next": page[-1][0] if len(page) == limit else None,
        }

    @app.get("/v1/runs/{run_id}/check", dependencies=[*auth, *busy], tags=["analysis"])
    def check_run(run_id: str) -> Response:
        """The invariants of the run: ``tracetape check --format json`` for it."""
        texts = _stored(run_id)
        report = analyses.get(
            analyses.key("check", (run_id,), texts),
            lambda: check_records(texts, name=run_id, config=conf.config, workspace=workspace()),
        )
        return _json(redacted(report.to_dict()))

    @app.get("/v1/diff", dependencies=[*auth, *busy], tags=["analysis"])
    def diff_runs(a: RunId, b: RunId) -> Response:
        """Exactly the JSON ``tracetape diff --format json`` gives for runs ``a`` and ``b``."""
        # The stored texts go to the analysis as they are (DuckDB reads them in bulk).
        ra, rb = _stored(a), _stored(b)
        names = (_source(ra) or a, _source(rb) or b)
        ended = db.endings((a, b))
        try:
            report = analyses.get(
                analyses.key("diff", (*names, *_ended_key(ended, a, b)), ra, rb),
                lambda: diff_records(
                    ra, rb, names=names, config=conf.config, workspace=workspace(),
                    endings=ended,
                ),
            )  # fmt: skip
        except TapeError as exc:
            raise HTTPException(400, str(exc)) from None
        return _json(redacted(report.to_dict()))

    def page_auth(request: Request) -> bool:
        """Raise 401 unless the page may be shown (a session cookie, the bearer header, or
        ``?token=``); return whether a right ``?token=`` should start a session."""
        if conf.token is None:
            return False
        if check_session(conf.token, request.cookies.get(_COOKIE)):
            return False
        scheme, _, bearer = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(
            bearer.strip().encode(), conf.token.encode()
        ):
            return False
        given = request.query_params.get("token")
        if given and hmac.compare_digest(given.strip().encode(), conf.token.encode()):
            return True
        raise HTTPException(
            401, "this collector needs its token: open this page once with ?token=$TRACETAPE_TOKEN"
        )

    def _html(text: str, set_cookie: bool, status: int = 200) -> HTMLResponse:
        return _cookie(HTMLResponse(text, status_code=status), set_cookie)

    def _cookie(response: R, set_cookie: bool) -> R:
        """``response`` with the session cookie, when the page was opened with the token."""
        if set_cookie and conf.token:
            response.set_cookie(
                _COOKIE,
                new_session(conf.token),
                max_age=SESSION_S,
                httponly=True,
                samesite="strict",
            )
        return response

    @app.get("/favicon.ico", include_in_schema=False)
    def favicon() -> Response:
        """The pages' icon (no token needed: a browser asks for it before any page)."""
        return Response(
            pages.FAVICON,
            media_type="image/x-icon",
            headers={"Cache-Control": "public, max-age=86400"},
        )

    @app.get("/openapi.json", include_in_schema=False)
    def openapi(request: Request) -> JSONResponse:
        """The OpenAPI spec (behind the token when one is set)."""
        page_auth(request)
        return JSONResponse(app.openapi())

    @app.get("/docs", response_class=HTMLResponse, include_in_schema=False)
    def docs(request: Request) -> HTMLResponse:
        """The API's routes, parameters and answers, rendered here: no asset from elsewhere."""
        fresh = page_auth(request)
        return _html(pages.docs_page(app.openapi()), fresh)

    @app.get("/", response_class=HTMLResponse, tags=["pages"], dependencies=busy)
    def runs_html(  # noqa: PLR0917 - the page's filters
        request: Request,
        cursor: Annotated[str | None, Query(max_length=300)] = None,
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
        and findings by severity; filtered by text, time range and severity."""
        fresh = page_auth(request)
        keyset = sort == "last_seen" and order == "desc"
        before = _cursor(cursor) if cursor and keyset else None

        def listed() -> list[dict[str, Any]]:
            return db.runs(
                before=before,
                limit=50,
                text=q or None,
                since=_moment(since, "since"),
                until=_moment(until, "until", end=True),
                sort=sort,
                descending=order == "desc",
                offset=0 if keyset else page * 50,
                worst=RANK[severity] if severity else None,
            )

        found = listed()
        waiting = [r["run_id"] for r in found if r["summary_of"] != r["events"]]
        if waiting:  # stored a moment ago: their summaries are being computed
            summaries.add([r for r in waiting if not summaries.queued(r)])
            summaries.wait_once(waiting)
            found = listed()
        nxt = None
        if keyset and len(found) == 50:
            nxt = f"{found[-1]['last_seen']!r}~{found[-1]['run_id']}"
        filters = {"q": q, "since": since, "until": until, "severity": severity,
                   "sort": sort, "order": order}  # fmt: skip
        more = pages.RunsPaging(filters, nxt, page if not keyset else None, len(found) == 50)
        previous = db.previous(r["run_id"] for r in found)
        return _html(pages.runs_page(found, more, previous), fresh)

    @app.get("/runs/{run_id}", response_class=HTMLResponse, tags=["pages"], dependencies=busy)
    def run_html(request: Request, run_id: str) -> HTMLResponse:
        """One run's timeline."""
        fresh = page_auth(request)
        _known(run_id)
        summary = db.runs_by_id([run_id])[0]
        return _html(pages.run_page(run_id, summary, db.records(run_id)), fresh)

    @app.get("/runs/{run_id}/raw/{n}", tags=["pages"], dependencies=busy)
    def raw_html(request: Request, run_id: str, n: Annotated[int, Path(ge=1)]) -> Response:
        """Decision ``n`` of a run, whole, as JSON (the run page's "whole record" links)."""
        fresh = page_auth(request)
        _known(run_id)
        found = db.records(run_id)
        if n > len(found):
            raise HTTPException(404, f"run {run_id} has {len(found)} decisions, not {n}")
        answer = Response(pages.raw_record(found[n - 1]), media_type="application/json")
        return _cookie(answer, fresh)

    @app.get("/diff", response_class=HTMLResponse, tags=["pages"], dependencies=busy)
    def diff_html(
        request: Request,
        a: MaybeRunId = None,
        b: MaybeRunId = None,
        run: Annotated[list[str] | None, Query(max_length=2)] = None,
    ) -> Response:
        """Two runs side by side, aligned, with the divergence and findings highlighted
        (``a`` the baseline, ``b`` the candidate; or two ``run`` s, as the run list's compare
        form sends them: the earlier is the baseline)."""
        fresh = page_auth(request)
        if a is None or b is None:
            picked = [_known(name) for name in dict.fromkeys(run or ())]
            if len(picked) != 2:
                raise HTTPException(
                    400, f"tick two runs to compare, not {len(picked)} (or give ?a=RUN&b=RUN)"
                )
            rows = sorted(db.runs_by_id(picked), key=lambda r: (_ran(r), r["run_id"]))
            href = "/diff?" + urlencode({"a": rows[0]["run_id"], "b": rows[1]["run_id"]})
            return _cookie(RedirectResponse(href, status_code=303), fresh)
        _known(a)
        _known(b)
        counts = {r["run_id"]: r["events"] for r in db.runs_by_id([a, b])}
        ended = db.endings((a, b))
        key = page_key((a, b), (counts[a], counts[b]), ended)
        kept = db.page(key)
        if kept is not None:  # drawn when it was stored, or viewed before
            return _cookie(_zipped(request, kept), fresh)
        ta, tb = db.record_texts(a), db.record_texts(b)

        def page() -> str:
            ra, rb = ta.records(), tb.records()
            config = _many(conf.config)
            report = diff_records(
                ra, rb, names=(a, b), config=config, workspace=workspace(), endings=ended
            )
            return pages.diff_page(a, b, ra, rb, report)

        try:
            # the whole page is kept: it depends on nothing but the texts and the runs'
            # endings (no clock, no nonce)
            memo = analyses.key("diff page", (a, b, *_ended_key(ended, a, b)), ta, tb)
            text = analyses.get(memo, page)
        except TapeError as exc:
            raise HTTPException(400, str(exc)) from None
        if (len(ta.texts), len(tb.texts)) == (counts[a], counts[b]):
            db.keep_page(key, (a, b), gzip.compress(text.encode(), 5))
        return _html(text, fresh)

    return app


def _zipped(request: Request, body: bytes) -> Response:
    """A kept page (gzipped HTML) as sent: as it is to a client that accepts gzip."""
    if "gzip" in request.headers.get("accept-encoding", "").lower():
        return Response(
            body,
            media_type="text/html; charset=utf-8",
            headers={"Content-Encoding": "gzip", "Vary": "Accept-Encoding"},
        )
    return HTMLResponse(gzip.decompress(body))


def _failure(
    request: Request, status: int, message: str, headers: Mapping[str, str] | None = None
) -> Response:
    """An error in the one shape, ``{"error": message}``; a page opened in a browser (it
    accepts HTML, and the path is not the ``/v1`` API) gets it as a small page instead."""
    path = request.url.path
    browser = "text/html" in request.headers.get("accept", "")
    if browser and not path.startswith("/v1/") and path != "/openapi.json":
        return HTMLResponse(pages.error_page(status, message), status, headers=headers)
    return JSONResponse({"error": message}, status_code=status, headers=headers)


def _ran(row: dict[str, Any]) -> float:
    """When a run ran: its records' own time where they say it, else when it was stored."""
    began = row.get("began")
    return float(began if began is not None else row["first_seen"])


def _ended_key(ended: dict[str, str], *runs: str) -> tuple[str, ...]:
    """The runs' endings, as part of a kept analysis's key (a trailer may come alone)."""
    return tuple(f"ended:{ended.get(run, '')}" for run in runs)


R = TypeVar("R", bound=Response)
_COOKIE = "tracetape_session"


def _decoded(body: bytes, encoding: str, limit: int) -> bytes:
    """``body`` decompressed from ``encoding`` (gzip; deflate, zlib-wrapped or raw), refused
    past ``limit`` bytes decompressed without inflating the rest."""
    if encoding in ("gzip", "x-gzip"):
        modes = [16 + zlib.MAX_WBITS]
    elif encoding == "deflate":
        modes = [zlib.MAX_WBITS, -zlib.MAX_WBITS]
    else:
        raise BadBatch(415, "Content-Encoding must be gzip, deflate or identity")
    for wbits in modes:
        inflater = zlib.decompressobj(wbits)
        try:
            out = inflater.decompress(body, limit + 1)
        except zlib.error:
            continue
        if len(out) > limit or inflater.unconsumed_tail:
            raise BadBatch(
                413, f"the body is over {limit} bytes decompressed; send smaller batches"
            )
        if not inflater.eof:
            raise BadBatch(400, f"the {encoding} body is cut short; send it whole")
        return out
    raise BadBatch(400, f"the body is not valid {encoding} data")


def _many(config: AnalysisConfig) -> AnalysisConfig:
    """The configuration with room for every finding a page shows."""
    return replace(config, max_examples=10_000)


def _plain(rec: Any) -> dict[str, Any]:
    """A record as an event of the API: every field that is not None (a 0 and an empty
    string too, which the stored form leaves out as defaults)."""
    return {k: v for k, v in msgspec.structs.asdict(rec).items() if v is not None}


def _source(texts: RecordTexts) -> str:
    """The source (file name) of a stored run's first record."""
    return RecordTexts(texts.texts[:1]).records()[0].source


def _json(data: Any) -> Response:
    text = json.dumps(data, ensure_ascii=False, default=str)
    return Response(text, media_type="application/json")


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


def _cursor(text: str) -> tuple[float, str]:
    seen, sep, run = text.partition("~")
    try:
        value = float(seen)
    except ValueError:
        value = float("nan")
    if not sep or math.isnan(value) or not RUN_ID.fullmatch(run):
        raise HTTPException(400, "cursor is not one this collector gave")
    return value, run
