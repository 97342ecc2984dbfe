"""``tracetape serve`` (the collector) and ``tracetape push`` (a trace to it).

Exit codes: ``EXIT_CODES`` in ``cli/__init__.py``.
"""

from __future__ import annotations

import importlib
import os
import socket
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import click

from .._version import install_command
from . import exit_codes_help
from ._common import EXIT_BAD_INPUT, EXIT_OK, echo_json, handle_errors, output_options

EXIT_UNREACHABLE = 3


def _extra(extra: str, *modules: str) -> None:
    """Exit 2 with the one line that installs ``extra`` when one of ``modules`` is missing."""
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError:
            click.echo(
                f"tracetape: error: this needs the {extra} extra ({module} is missing): "
                f"{install_command(extra)}",
                err=True,
            )
            sys.exit(EXIT_BAD_INPUT)


def _listen(host: str, port: int) -> socket.socket:
    """A socket listening on ``host:port`` (port 0: one the system picks), which uvicorn is
    handed: the port printed is the one served, and no other process can take it between a
    check and uvicorn's own bind. Exit 2, saying so, when it cannot be listened on."""
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # uvicorn sets it on each connection of a socket it binds itself; connections accepted
    # from this one inherit it (a small write never waits for a delayed ACK)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host.strip("[]"), port))
        sock.listen(2048)  # uvicorn's default backlog
    except OSError as exc:
        sock.close()
        click.echo(
            f"tracetape: error: cannot listen on {host}:{port}: {exc.strerror}; stop what "
            "holds it, or choose another --port",
            err=True,
        )
        sys.exit(EXIT_BAD_INPUT)
    return sock


@click.command(
    short_help="Run the collector: store trace lines, serve diffs.", epilog=exit_codes_help("serve")
)
@click.option(
    "--db",
    envvar="TRACETAPE_DB",
    default="sqlite:///tracetape.db",
    show_default=True,
    help="Database URL: sqlite:///PATH, or postgresql+psycopg://USER:PASSWORD@HOST/DB "
    "(env TRACETAPE_DB).",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8750,
    show_default=True,
    help="Port to listen on; 0 picks a free one (the line printed on start names it).",
)
@click.option(
    "--token",
    envvar="TRACETAPE_TOKEN",
    help="Bearer token every /v1 request must carry (env TRACETAPE_TOKEN); required beyond "
    "loopback.",
)
@click.option(
    "--workers",
    type=click.IntRange(1, 64),
    default=1,
    show_default=True,
    help="Worker processes (they share the database).",
)
@click.option(
    "--max-body",
    type=click.IntRange(1024),
    default=16 << 20,
    show_default=True,
    help="Largest request body, bytes (413 beyond).",
)
@click.option(
    "--max-lines",
    type=click.IntRange(1),
    default=10_000,
    show_default=True,
    help="Most lines in one batch (413 beyond).",
)
@click.option(
    "--max-analyses",
    type=click.IntRange(1, 256),
    default=None,
    help="Diffs, checks and pages run at once per worker, each in a process of its own "
    "(default: the CPUs, 2 to 8).",
)
@click.option(
    "--analysis-queue",
    type=click.IntRange(0, 10_000),
    default=None,
    help="Requests that may wait for an analysis, at most 10 s each (default: twice "
    "--max-analyses); past it they answer 503 with Retry-After at once.",
)
@click.option(
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    envvar="TRACETAPE_ALLOWED_HOSTS",
    help="A host name clients reach the collector by, beyond the address it listens on and "
    "localhost (repeatable; env TRACETAPE_ALLOWED_HOSTS, separated by spaces); requests "
    "naming another host are refused (DNS rebinding).",
)
@handle_errors
def serve(  # noqa: PLR0917 - click passes every option
    db: str,
    host: str,
    port: int,
    token: str | None,
    workers: int,
    max_body: int,
    max_lines: int,
    max_analyses: int | None,
    analysis_queue: int | None,
    allowed_hosts: tuple[str, ...],
) -> None:
    """Run the collector: POST trace lines to /v1/lines, read runs and diffs from /v1, and
    the OpenAPI spec at /docs.

    The schema is created (or upgraded) on start. Without a token the collector listens only
    on loopback.
    """
    _extra("server", "fastapi", "sqlalchemy", "uvicorn")
    import uvicorn

    from ..collector.server import check_binding
    from ..stores.database import Database

    token = check_binding(host, token)
    sock = _listen(host, port)
    Database.open(db).close()  # create or upgrade the schema once, before any worker
    os.environ.update(
        TRACETAPE_DB=db,
        TRACETAPE_MAX_BODY=str(max_body),
        TRACETAPE_MAX_LINES=str(max_lines),
        TRACETAPE_BIND=host,
        TRACETAPE_ALLOWED_HOSTS=",".join(allowed_hosts),
    )
    if max_analyses is not None:
        os.environ["TRACETAPE_MAX_ANALYSES"] = str(max_analyses)
    if analysis_queue is not None:
        os.environ["TRACETAPE_ANALYSIS_QUEUE"] = str(analysis_queue)
    if token:
        os.environ["TRACETAPE_TOKEN"] = token
    port = sock.getsockname()[1]
    click.echo(
        f"tracetape collector on http://{host}:{port} ({db.split('://', maxsplit=1)[0]})", err=True
    )
    # A client that connects before the app is ready waits in the socket's backlog.
    uvicorn.run(
        "tracetape.collector.server:app_from_env",
        factory=True,
        fd=sock.fileno(),
        workers=workers,
        log_level="warning",
    )


@click.command(
    short_help="Ship a trace to a collector, in batches.", epilog=exit_codes_help("push")
)
@click.argument("traces", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--url",
    envvar="TRACETAPE_URL",
    default="http://127.0.0.1:8750",
    show_default=True,
    help="The collector (env TRACETAPE_URL).",
)
@click.option("--token", envvar="TRACETAPE_TOKEN", help="Bearer token (env TRACETAPE_TOKEN).")
@click.option(
    "--batch",
    type=click.IntRange(1, 100_000),
    default=1000,
    show_default=True,
    help="Lines a batch.",
)
@click.option(
    "--retries", type=click.IntRange(0, 20), default=6, show_default=True, help="Retries a batch."
)
@click.option(
    "--run-id",
    help="File every line under this run (default: a cassette's own run id; a trace's lines "
    "name theirs).",
)
@click.option(
    "--append",
    is_flag=True,
    help="Add these lines to a run that another file filled (refused otherwise).",
)
@output_options
@handle_errors
def push(  # noqa: PLR0917 - click passes every option
    traces: tuple[Path, ...],
    url: str,
    token: str | None,
    batch: int,
    retries: int,
    run_id: str | None,
    append: bool,
    fmt: str,
) -> None:
    """Ship each TRACE to the collector in batches, retrying with backoff.

    A line the collector already has is not stored twice, whatever the batches, so a push
    that stopped, or a file that has grown, can simply be pushed again.
    """
    _extra("push", "httpx")
    from ..errors import PushError
    from ..stores.client import push as push_trace

    results = []
    for trace in traces:
        with _bar(trace) as advance:
            try:
                done = push_trace(
                    trace,
                    url,
                    token=token,
                    batch=batch,
                    retries=retries,
                    progress=advance,
                    run_id=run_id,
                    append=append,
                )
                results.append(done)
            except PushError as exc:
                click.echo(f"tracetape: error: {trace}: {exc}", err=True)
                sys.exit(EXIT_UNREACHABLE if exc.unreachable else 2)
    if fmt == "json":
        echo_json([dict(r.to_dict(), trace=str(t)) for t, r in zip(traces, results, strict=True)])
    else:
        for trace, done in zip(traces, results, strict=True):
            click.echo(
                f"{trace}: {done.stored} new, {done.known} already stored, from {done.lines} "
                f"line(s) in {done.batches} batch(es); runs: {', '.join(sorted(done.runs))} "
                f"({done.url})"
            )
    sys.exit(EXIT_OK)


@contextmanager
def _bar(trace: Path) -> Iterator[Callable[[int], None] | None]:
    """A rich progress bar of the lines sent, on a terminal only."""
    if not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import Progress

    with Progress(transient=True, console=Console(stderr=True)) as bar:
        task = bar.add_task(f"pushing {trace}", total=None)
        yield lambda n: bar.update(task, advance=n)
