"""Trace lines in: ``POST /v1/lines`` (JSONL or a JSON array, in any format ``tracetape
diff`` reads) and ``POST /v1/otlp/v1/traces`` (an OTLP/HTTP JSON export). A batch is stored
atomically (``Collector.store``); bodies are read at most ``max_body`` bytes, as sent and as
decompressed."""

from __future__ import annotations

import zlib
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.concurrency import run_in_threadpool

from ..deps import AUTH, Service
from ..ingest import BadBatch

__all__ = ["router"]

router = APIRouter(tags=["ingest"], dependencies=AUTH)


async def body_of(request: Request, limit: int) -> bytes:
    """The request's body, decompressed (``Content-Encoding`` gzip or deflate), at most
    ``limit`` bytes as sent and as decompressed (a gzip bomb is a 413)."""
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BadBatch(413, f"the body is over {limit} bytes; send smaller batches")
        chunks.append(chunk)
    body = b"".join(chunks)
    encoding = request.headers.get("content-encoding", "").strip().lower()
    return body if encoding in ("", "identity") else decoded(body, encoding, limit)


def decoded(body: bytes, encoding: str, limit: int) -> bytes:
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


@router.post("/v1/lines")
async def post_lines(  # noqa: PLR0917 - the query parameters
    request: Request,
    c: Service,
    source: Annotated[str, Query(max_length=1000)] = "request",
    offset: Annotated[int, Query(ge=0, le=1 << 40)] = 0,
    format: Annotated[str, Query()] = "auto",
    run: Annotated[str | None, Query(max_length=200)] = None,
    append: bool = False,
) -> dict[str, Any]:
    """Store a batch of trace lines (JSONL or a JSON array) atomically: the lines not
    stored before (``known`` counts the others)."""
    body = await body_of(request, c.settings.max_body)
    return await run_in_threadpool(c.store, body, source, offset, format, run, append)


@router.post("/v1/otlp/v1/traces")
async def post_otlp(request: Request, c: Service) -> dict[str, Any]:
    """Store an OTLP/HTTP JSON trace export (GenAI spans)."""
    kind = request.headers.get("content-type", "application/json").split(";")[0].strip()
    if kind != "application/json":
        raise BadBatch(415, "only OTLP/HTTP JSON is accepted (Content-Type: application/json)")
    body = await body_of(request, c.settings.max_body)
    one = b" ".join(body.splitlines())  # one document, one line
    await run_in_threadpool(c.store, one, "otlp", 0, "otlp")
    return {"partialSuccess": {}}
