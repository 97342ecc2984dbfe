"""``tracetape run``: run a program with a tape active from its first import.

Exit codes: ``EXIT_CODES`` in ``cli/__init__.py`` (the program's own, or 2, 3, 4, 5).

The program owns stdout; tracetape's own lines (and the ``--format json`` report) go to stderr.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..errors import OptionError
from ..integrations.runner import EXIT_SETUP, HOOKS, NETWORK, RunResult, run_program
from ..options import TapeOptions
from . import exit_codes_help
from ._common import mode_option, output_options, tape_option

__all__ = ["run"]


def _run_with_proxy(
    command: tuple[str, ...],
    tape_path: Path,
    options: TapeOptions,
    upstreams: tuple[str, ...],
    proxy_env: str,
) -> RunResult:
    """``tracetape run --proxy``: the server extra's proxy in front of the program."""
    from .collector import _extra

    _extra("server", "uvicorn", "httpx")
    from ..integrations.proxied import run_with_proxy
    from ..integrations.proxy import parse_upstreams

    return run_with_proxy(
        command, tape_path, options, upstreams=parse_upstreams(upstreams), proxy_env=proxy_env
    )


EXIT_NOT_EXECUTABLE = 126
EXIT_NOT_FOUND = 127


@click.command(
    short_help="Run a program with a tape active from its first import.",
    epilog=exit_codes_help("run"),
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
)
@tape_option
@mode_option(
    "replay",
    "replay: run offline from the cassette; record: run live and write a cassette that "
    "does not exist yet; auto: replay if the cassette exists, else record; rewrite: run live "
    "and overwrite; fork: replay while the run matches, then go live, writing the whole run "
    "to a branch cassette (the cassette itself is never changed).",
)
@click.option(
    "--fork-at",
    type=click.IntRange(min=0),
    default=None,
    metavar="STEP",
    help="With --mode fork: go live from this step on, even where it matches (retry a step).",
)
@click.option(
    "--branch",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="With --mode fork: the branch cassette (default: NAME.fork-STEP.jsonl beside it).",
)
@click.option(
    "--latency",
    default=None,
    metavar="instant|recorded|FACTOR",
    help="In replay: wait each decision's recorded time (recorded), a factor of it (0.5), or "
    "not at all (instant, the default): reproduces timeout and race bugs.",
)
@click.option(
    "--hook",
    type=click.Choice(HOOKS),
    default="auto",
    show_default=True,
    help="What to patch: auto (every provider's SDK and MCP clients, and the HTTP clients "
    "for every other request), the model and MCP calls only, every request of the HTTP "
    "clients (httpx, aiohttp, botocore) only, or nothing (only @tracetape.tool and "
    "tracetape.env are taped).",
)
@click.option(
    "--strict",
    is_flag=True,
    help="Exit 4 when replay leaves recorded decisions unplayed; environment drift exits 2.",
)
@click.option(
    "--trust-edits",
    is_flag=True,
    help="Replay a sealed cassette edited by hand (a warning names the lines) instead of "
    "refusing it (exit 2).",
)
@click.option(
    "--network",
    type=click.Choice(NETWORK),
    default="block",
    show_default=True,
    help="In replay: block every connection, allow loopback only, or allow all.",
)
@click.option(
    "--traceback",
    "show_traceback",
    is_flag=True,
    help="On a replay miss, print the program's traceback before the diagnosis.",
)
@click.option(
    "--proxy",
    "proxy",
    is_flag=True,
    help="Tape the program through a local proxy of the providers' HTTP APIs instead of "
    "hooks: any language (Node, a coding-agent CLI); its clients are pointed at it by "
    "OPENAI_BASE_URL, ANTHROPIC_BASE_URL and the like (see tracetape proxy).",
)
@click.option(
    "--upstream",
    "upstreams",
    multiple=True,
    metavar="PROVIDER=URL",
    help="With --proxy: where a provider's requests go when recording (default: its API).",
)
@click.option(
    "--proxy-env",
    type=click.Choice(["keep", "force"]),
    default="keep",
    show_default=True,
    help="With --proxy: keep a base-URL variable the environment already sets, or override it.",
)
@output_options
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def run(
    *,
    tape_path: Path,
    mode: str,
    hook: str,
    strict: bool,
    trust_edits: bool,
    network: str,
    show_traceback: bool,
    fork_at: int | None,
    branch: Path | None,
    latency: str | None,
    proxy: bool,
    upstreams: tuple[str, ...],
    proxy_env: str,
    fmt: str,
    command: tuple[str, ...],
) -> None:
    """Run COMMAND with the tape active from its first import; no change to the program.

    \b
        tracetape run --tape runs/412.jsonl --mode record -- python -m agent --task fix-ci
        tracetape run --tape runs/412.jsonl -- python -m agent --task fix-ci
        tracetape run --tape runs/412.jsonl --mode fork --fork-at 17 -- python -m agent
        tracetape run --proxy --tape runs/ts.jsonl --mode record -- node agent.mjs
    """
    try:
        options = TapeOptions(
            mode=mode,
            strict=strict,
            fork_at=fork_at,
            branch=branch,
            replay_latency=latency,
            trust_edits=trust_edits or None,  # not given: [tool.tracetape] trust_edits
        )
    except OptionError as exc:  # said as the flags say it: --latency: ...
        click.echo(f"tracetape run: error: {exc.flag_message}", err=True)
        sys.exit(EXIT_SETUP)
    try:
        if proxy or upstreams:
            result = _run_with_proxy(command, tape_path, options, upstreams, proxy_env)
        else:
            result = run_program(
                command,
                tape_path,
                options,
                hook=hook,
                network=network,
                show_traceback=show_traceback,
            )
    except (OSError, ValueError) as exc:
        click.echo(f"tracetape run: error: {exc}", err=True)
        if isinstance(exc, FileNotFoundError):
            sys.exit(EXIT_NOT_FOUND)
        sys.exit(EXIT_NOT_EXECUTABLE if isinstance(exc, PermissionError) else EXIT_SETUP)
    if fmt == "json":
        import json

        click.echo(json.dumps(result.as_json(command), indent=2), err=True)
    else:
        for message in result.messages:
            click.echo(f"tracetape run: {message}", err=True)
    sys.exit(result.exit_code)
