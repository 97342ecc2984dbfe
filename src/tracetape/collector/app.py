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
* ``GET /healthz``: the database answers; the analyses running and waiting.

Bodies over ``max_body`` bytes or ``max_lines`` lines are refused with 413 before they are
parsed. Run ids and parameters are validated; every query is parameterized by SQLAlchemy.
Analyses (diffs, checks, pages) run in worker processes, ``max_analyses`` at once and
``analysis_queue`` waiting at most ``analysis_wait`` seconds; past that a 503 with
``Retry-After`` at once (``workers``), answered before the request is routed (``_Shed``:
hundreds of requests refused must cost the event loop little, or ``/healthz`` waits).

``create_app`` makes the ``Collector`` (``service``: the database, the settings, the
worker processes and the gate that admits analyses, the kept analyses, the background
worker), the middleware (body limits, ``security``'s guard) and the error handlers, and
includes the routers (``routers``: health, ingest, query, pages), which take what they need
from ``deps``; it stops the worker processes when the app stops. The pages' HTML is in
``pages``.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Receive, Scope, Send

from .._version import __version__
from ..stores.database import Database
from . import deps, pages
from .ingest import BadBatch
from .jobs import Failed
from .routers import health, ingest, query
from .routers import pages as page_routes
from .security import Guard, allowed_hosts, clean_token
from .service import Collector, Settings
from .workers import Busy, Gate, WorkerDied

__all__ = ["Settings", "create_app"]


def _error(status: int, message: str, **extra: Any) -> JSONResponse:
    return JSONResponse({"error": message, **extra}, status_code=status)


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


class _Limit:
    """Refuse a body declared too big before reading it (plain ASGI: a response passes
    through untouched, where ``BaseHTTPMiddleware`` would stream it through a queue)."""

    def __init__(self, app: ASGIApp, max_body: int):
        self.app, self.max_body = app, max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            length = next((v for k, v in scope["headers"] if k == b"content-length"), None)
            if length is not None and not length.isdigit():
                await _error(400, "Content-Length is not a number")(scope, receive, send)
                return
            if length is not None and int(length) > self.max_body:
                too_big = f"the body is over {self.max_body} bytes; send smaller batches"
                await _error(413, too_big)(scope, receive, send)
                return
        await self.app(scope, receive, send)


class _Shed:
    """Refuse an analysis at once (503, ``Retry-After``) when every slot is taken and the
    queue is full, before FastAPI routes it and solves its dependencies: the route's own
    admission (``deps.analysis_slot``) would refuse it too, at several times the cost."""

    def __init__(self, app: ASGIApp, gate: Gate, paths: Sequence[re.Pattern[str]]):
        self.app, self.gate, self.paths = app, gate, paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            busy = self.gate.refusal()
            if busy is not None and any(p.match(scope["path"]) for p in self.paths):
                headers = {"Retry-After": str(busy.retry_after)}
                await _failure(Request(scope), 503, str(busy), headers)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _analyses(*routers: APIRouter) -> list[re.Pattern[str]]:
    """The paths of the routes that analyse: those that hold a slot (``deps.BUSY``), and the
    run list, which takes one once its runs' summaries are there (the routers are included
    without a prefix)."""
    return [
        route.path_regex
        for router in routers
        for route in router.routes
        if isinstance(route, APIRoute)
        and (deps.BUSY[0] in route.dependencies or route.endpoint is page_routes.runs_html)
    ]


def create_app(db: Database, settings: Settings | None = None) -> FastAPI:
    """The collector's ASGI app over ``db`` (see the module docstring)."""
    conf = settings or Settings()
    conf = replace(conf, token=clean_token(conf.token))
    collector = Collector(db, conf)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        collector.workers.prepare()
        yield
        collector.close()

    app = FastAPI(
        title="tracetape collector",
        version=__version__,
        description="Stores every trace line and serves run-to-run diffs.",
        lifespan=lifespan,
        # served by the pages' router, behind the token and without assets from elsewhere
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    app.state.collector = collector
    app.state.db, app.state.settings = db, conf
    app.state.analyses = collector.analyses
    app.add_middleware(
        _Shed, gate=collector.gate, paths=_analyses(query.router, page_routes.router)
    )
    app.add_middleware(_Limit, max_body=conf.max_body)
    app.add_middleware(Guard, hosts=allowed_hosts(conf.bind, conf.allowed_hosts), csp=pages.CSP)

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

    @app.exception_handler(Busy)
    async def busy(request: Request, exc: Busy) -> Response:
        return _failure(request, 503, str(exc), {"Retry-After": str(exc.retry_after)})

    @app.exception_handler(WorkerDied)
    async def died(request: Request, exc: WorkerDied) -> Response:
        return _failure(request, 503, str(exc), {"Retry-After": "1"})

    @app.exception_handler(Failed)
    async def analysis_failed(request: Request, exc: Failed) -> Response:
        return _failure(request, 500, f"the collector failed: {exc.name}; nothing was stored")

    @app.exception_handler(Exception)
    async def failed(request: Request, exc: Exception) -> Response:
        # Nothing was stored by a request that failed here (a batch is one transaction).
        message = f"the collector failed: {type(exc).__name__}; nothing was stored"
        return _failure(request, 500, message)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        # every error, a route's own and the framework's (404, 405), in the one shape
        return _failure(request, exc.status_code, str(exc.detail), exc.headers)

    routers = (health.router, ingest.router, query.router, page_routes.router)
    for router in routers:
        app.include_router(router)
    return app
