"""What the collector's routes depend on, as FastAPI dependencies (tests can override them
with ``app.dependency_overrides``): the ``Collector`` of the app, the bearer token of the API,
the session of the pages, a slot among ``max_analyses`` (``BUSY``) and the worker processes
that analyse (``Pool``); and the checks every route makes of a run id and a page cursor.
The dependencies are coroutines, though none of them waits for anything: FastAPI runs a
plain function in a thread, and those hops, several a request, cost the event loop more
than the checks themselves when hundreds of requests come at once.
"""

from __future__ import annotations

import hmac
import math
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Annotated, TypeVar

from fastapi import Depends, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, Response

from ..record import RecordTexts
from ..stores.database import RUN_ID
from .security import SESSION_S, check_session, new_session
from .service import Collector
from .workers import Workers

__all__ = [
    "AUTH",
    "BUSY",
    "COOKIE",
    "Access",
    "MaybeRunId",
    "Page",
    "Pool",
    "RunId",
    "Service",
    "collector",
    "cursor",
    "ended_key",
    "known",
    "page_access",
    "stored",
    "workers",
]

COOKIE = "tracetape_session"
R = TypeVar("R", bound=Response)

# Checked whole by ``RUN_ID.fullmatch`` in the route (a ``Query`` pattern only searches).
RunId = Annotated[str, Query(min_length=1, max_length=200)]
MaybeRunId = Annotated[str | None, Query(min_length=1, max_length=200)]


async def collector(request: Request) -> Collector:
    """The app's ``Collector``."""
    found: Collector = request.app.state.collector
    return found


Service = Annotated[Collector, Depends(collector)]


async def authorized(request: Request, c: Service) -> None:
    """Refuse (401) an API request without this collector's bearer token, when it has one."""
    token = c.settings.token
    if token is None:
        return
    given = request.headers.get("authorization", "")
    scheme, _, bearer = given.partition(" ")
    if not given:
        problem = "a bearer token is required: Authorization: Bearer $TRACETAPE_TOKEN"
    elif scheme.lower() != "bearer":
        problem = "the Authorization header must use the Bearer scheme: Bearer $TRACETAPE_TOKEN"
    elif not hmac.compare_digest(bearer.strip().encode(), token.encode()):
        problem = "the bearer token is not this collector's; check TRACETAPE_TOKEN"
    else:
        return
    raise HTTPException(401, problem, headers={"WWW-Authenticate": "Bearer"})


async def workers(c: Service) -> Workers:
    """The worker processes that run the app's analyses."""
    return c.workers


Pool = Annotated[Workers, Depends(workers)]


async def analysis_slot(c: Service) -> AsyncIterator[None]:
    """Hold one of ``max_analyses`` slots while the route runs: at once, or after waiting
    in the queue; or raise ``workers.Busy`` (a 503 with ``Retry-After``) at once when the
    queue is full, or when no slot came free within ``analysis_wait`` seconds."""
    async with c.gate.slot():
        yield


AUTH = [Depends(authorized)]
# given back when the route returns, before its answer is sent
BUSY = [Depends(analysis_slot, scope="function")]


@dataclass(frozen=True)
class Page:
    """A page's access: the token to sign a session with, and whether this request opened
    the page with a right ``?token=`` (its answer then starts a session)."""

    token: str | None
    fresh: bool

    def cookie(self, response: R) -> R:
        """``response`` with the session cookie, when the page was opened with the token."""
        if self.fresh and self.token:
            response.set_cookie(
                COOKIE,
                new_session(self.token),
                max_age=SESSION_S,
                httponly=True,
                samesite="strict",
            )
        return response

    def html(self, text: str, status: int = 200) -> HTMLResponse:
        """``text`` as the page's answer."""
        return self.cookie(HTMLResponse(text, status_code=status))


async def page_access(request: Request, c: Service) -> Page:
    """Refuse (401) a page that may not be shown (no session cookie, bearer header or
    ``?token=``); a right ``?token=`` starts a session."""
    token = c.settings.token
    if token is None:
        return Page(None, False)
    if check_session(token, request.cookies.get(COOKIE)):
        return Page(token, False)
    scheme, _, bearer = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and hmac.compare_digest(bearer.strip().encode(), token.encode()):
        return Page(token, False)
    given = request.query_params.get("token")
    if given and hmac.compare_digest(given.strip().encode(), token.encode()):
        return Page(token, True)
    raise HTTPException(
        401, "this collector needs its token: open this page once with ?token=$TRACETAPE_TOKEN"
    )


Access = Annotated[Page, Depends(page_access)]


def _valid(run_id: str) -> None:
    if not RUN_ID.fullmatch(run_id):
        raise HTTPException(
            400,
            "the run id must be 1-200 letters, digits and ._:@+=-, starting with a letter or digit",
        )


def known(c: Collector, run_id: str) -> str:
    """``run_id``, checked (400) and there (404)."""
    _valid(run_id)
    if not c.db.run_exists(run_id):
        raise HTTPException(404, f"no run {run_id!r} in this collector")
    return run_id


def stored(c: Collector, run_id: str) -> RecordTexts:
    """The run's stored records (400 for a bad id, 404 for a run not there)."""
    _valid(run_id)
    texts = c.db.record_texts(run_id)
    if not texts.texts:
        raise HTTPException(404, f"no run {run_id!r} in this collector")
    return texts


def ended_key(ended: dict[str, str], *runs: str) -> tuple[str, ...]:
    """The runs' endings, as part of a kept analysis's key (a trailer may come alone)."""
    return tuple(f"ended:{ended.get(run, '')}" for run in runs)


def cursor(text: str) -> tuple[float, str]:
    """A page cursor this collector gave (``last_seen~run``), or 400."""
    seen, sep, run = text.partition("~")
    try:
        value = float(seen)
    except ValueError:
        value = float("nan")
    if not sep or math.isnan(value) or not RUN_ID.fullmatch(run):
        raise HTTPException(400, "cursor is not one this collector gave")
    return value, run
