"""``tracetape proxy``: record or replay any program's model requests through a local server
of the providers' own HTTP APIs (``integrations.proxy``). Needs the ``server`` extra."""

from __future__ import annotations

import signal
import sys
import threading
from pathlib import Path

import click

from ..errors import OptionError, TapeError
from ..tape import TapeOptions
from . import exit_codes_help
from ._common import EXIT_BAD_INPUT, mode_option, tape_option
from .collector import _extra

__all__ = ["proxy"]

EXIT_MISSED = 3


@click.command(
    short_help="Serve the providers' HTTP APIs locally: tape an agent in any language.",
    epilog=exit_codes_help("proxy"),
)
@tape_option
@mode_option(
    "auto",
    "As tracetape run's: record, replay, auto (replay if the cassette exists), rewrite, fork.",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="The address to bind.")
@click.option(
    "--port", type=click.IntRange(0, 65535), default=0, help="The port (default: a free one)."
)
@click.option(
    "--upstream",
    "upstreams",
    multiple=True,
    metavar="PROVIDER=URL",
    help="Where a provider's requests go when recording (default: its API), e.g. "
    "openai=http://127.0.0.1:9000.",
)
@click.option(
    "--token",
    envvar="TRACETAPE_PROXY_TOKEN",
    default=None,
    help="Needed to bind beyond loopback: every request carries it in X-Tracetape-Token "
    "(env TRACETAPE_PROXY_TOKEN, 16 characters or more).",
)
def proxy(
    *,
    tape_path: Path,
    mode: str,
    host: str,
    port: int,
    upstreams: tuple[str, ...],
    token: str | None,
) -> None:
    """Serve OpenAI, Anthropic, Gemini, Mistral, Cohere, Groq, Ollama and Bedrock's HTTP APIs
    on HOST:PORT, recording each exchange into the cassette or answering it from there. It
    prints the variables that point each known client at it first, then serves until Ctrl-C.

    \b
        tracetape proxy --tape runs/ts.jsonl --mode record
        OPENAI_BASE_URL=http://127.0.0.1:PORT/v1 node agent.mjs
    """
    _extra("server", "uvicorn", "httpx")
    from ..integrations.proxied import address_of, is_loopback, listen, serving
    from ..integrations.proxy import ProxyApp, client_env, parse_upstreams
    from ..tape import Tape

    if not is_loopback(host) and (token is None or len(token.strip()) < 16):
        click.echo(
            f"tracetape proxy: error: binding {host} (beyond loopback) needs --token of 16 "
            "characters or more, which every request carries in X-Tracetape-Token",
            err=True,
        )
        sys.exit(EXIT_BAD_INPUT)
    try:  # before the tape: a port in use leaves no recording begun
        sock = listen(host, port)
    except OSError as exc:
        click.echo(f"tracetape proxy: error: cannot listen on {host}:{port}: {exc}", err=True)
        sys.exit(EXIT_BAD_INPUT)
    try:
        upstream = parse_upstreams(upstreams)
        tape = Tape(tape_path, options=TapeOptions(mode=mode))
    except OptionError as exc:
        click.echo(f"tracetape proxy: error: {exc.flag_message}", err=True)
        sys.exit(EXIT_BAD_INPUT)
    except (TapeError, ValueError, OSError) as exc:
        click.echo(f"tracetape proxy: error: {exc}", err=True)
        sys.exit(EXIT_BAD_INPUT)
    app = ProxyApp(tape, upstreams=upstream, token=token)
    address = address_of(sock)
    click.echo(f"tracetape proxy on {address} ({tape.mode.value}: {tape_path})", err=True)
    for name, value in client_env(address).items():
        click.echo(f"export {name}={value}")
    sys.stdout.flush()
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):  # either ends it, the cassette sealed
        signal.signal(signum, lambda *_: stop.set())
    with serving(app, sock):
        stop.wait()
    try:
        tape.close(failed=bool(app.misses))
    except TapeError as exc:
        click.echo(f"tracetape proxy: {exc}", err=True)
    done = (
        f"replayed {len(tape.records) - len(tape.unplayed)} of {len(tape.records)} decision(s)"
        if tape.replaying
        else f"recorded {tape.written} decision(s)"
    )
    click.echo(f"tracetape proxy: {done}; {len(app.misses)} miss(es)", err=True)
    sys.exit(EXIT_MISSED if app.misses else 0)
