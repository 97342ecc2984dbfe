"""``tracetape span list|extract|replay|decide`` and ``tracetape explain``.

Callables and stubs may also be named in ``pyproject.toml``, by tool name::

    [tool.tracetape.span]
    calls = { read_file = "myagent.tools:read_file" }
    stubs = { post_comment = "myagent.testing:fake_post" }
    env_allow = ["PATH", "LANG"]

Exit codes: ``EXIT_CODES`` in ``cli/__init__.py``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from ..config import find_pyproject, load_config
from ..errors import ConfigError
from . import exit_codes_help
from ._common import echo_json, format_option, handle_errors, output_options

F = Callable[..., Any]


def _span_config() -> dict[str, Any]:
    table = load_config("span")
    where = find_pyproject() or Path("pyproject.toml")
    unknown = sorted(set(table) - {"calls", "stubs", "env_allow"})
    if unknown:
        raise ConfigError(
            f"{where}: [tool.tracetape.span] unknown field {unknown[0]!r}; fields: calls, "
            "env_allow, stubs"
        )
    for name in ("calls", "stubs"):
        value = table.get(name, {})
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            raise ConfigError(
                f'{where}: [tool.tracetape.span] {name} must be a table of tool = "module:function"'
            )
    allow = table.get("env_allow", [])
    if not isinstance(allow, list) or not all(isinstance(v, str) for v in allow):
        raise ConfigError(f"{where}: [tool.tracetape.span] env_allow must be a list of names")
    return table


def _importable_cwd() -> None:
    """``module:function`` is looked up as ``python -m`` would: from the current folder."""
    here = str(Path.cwd())
    if here not in sys.path:
        sys.path.insert(0, here)


def _named(specs: tuple[str, ...], config: dict[str, str]) -> dict[str, str]:
    """``module:function`` by tool name: ``TOOL=module:function``, or ``module:function`` for
    the tool named like the function; the command line wins over ``[tool.tracetape.span]``.
    They are imported (from the current folder, as ``python -m`` would) only when used."""
    _importable_cwd()
    named = dict(config)
    for spec in specs:
        tool, sep, target = spec.partition("=")
        if not sep:
            tool, target = spec.rpartition(":")[2].rpartition(".")[2], spec
        named[tool] = target
    return named


def _live_options(func: F) -> F:
    for option in reversed(
        [
            click.option(
                "--env",
                "pins",
                multiple=True,
                metavar="NAME=VALUE",
                help="Pin an environment variable of the live run (repeat for more).",
            ),
            click.option(
                "--pure-env",
                is_flag=True,
                help="Run with only the pinned variables, not this shell's environment.",
            ),
            click.option(
                "--env-allow",
                multiple=True,
                metavar="NAME",
                help="A variable the recorded env_digest covers (repeat for more).",
            ),
            click.option("--cwd", help="Run the command here instead of the recorded cwd."),
            click.option(
                "--timeout",
                "timeout_s",
                type=click.FloatRange(min=0, min_open=True),
                help="Seconds before a live run is killed (default: the recorded timeout_s, "
                "else 30).",
            ),
        ]
    ):
        func = option(func)
    return func


def _live(  # noqa: PLR0917 - the live options, as click passes them
    config: dict[str, Any],
    pins: tuple[str, ...],
    pure_env: bool,
    env_allow: tuple[str, ...],
    cwd: str | None,
    timeout_s: float | None,
) -> Any:
    from ..span import Live

    env: dict[str, str] = {}
    for pin in pins:
        name, sep, value = pin.partition("=")
        if not sep or not name:
            raise click.BadParameter(f"{pin!r} is not NAME=VALUE", param_hint="--env")
        env[name] = value
    allow = tuple(config.get("env_allow", [])) + env_allow
    return Live(env=env, pure_env=pure_env, cwd=cwd, timeout_s=timeout_s, env_allow=allow)


_skip = click.option(
    "--skip-bad-lines", is_flag=True, help="Skip malformed lines instead of failing."
)
_id_option = click.option(
    "--id", "span_id", metavar="ID", help="The span of a trace (an id, or its unique start)."
)


@click.group(
    short_help="List, extract, replay and re-decide one tool span.",
    epilog=exit_codes_help("span"),
)
def span() -> None:
    """Replay one span of a failed run: is the tool nondeterministic, did the world drift, or
    did the model decide badly?

    A span is one tool call with its recorded result and the model decision that asked for
    it: a line of span JSONL, a tool record of a tracetape cassette (its decision is the
    preceding model call) or an OTLP execute_tool span.
    """


@span.command("list", short_help="The spans of a trace.", epilog=exit_codes_help("span"))
@click.argument("trace", type=click.Path(path_type=Path))
@output_options
@_skip
@handle_errors
def list_spans(trace: Path, fmt: str, skip_bad_lines: bool) -> None:
    """List the spans of TRACE: id, run, step, tool, effect and exit code."""
    from ..span import read_spans

    spans = read_spans(trace, skip_bad_lines=skip_bad_lines)
    if fmt == "json":
        echo_json(
            [
                {
                    "span_id": s.span_id,
                    "run_id": s.run,
                    "step": s.step,
                    "tool": s.tool,
                    "effect": s.effect,
                    "exit_code": s.exit_code,
                    "line": s.line,
                }
                for s in spans
            ]
        )
        return
    from rich.console import Console
    from rich.table import Table

    table = Table("id", "run", "step", "tool", "effect", "exit", box=None, pad_edge=False)
    for s in spans:
        exit_code = "-" if s.exit_code is None else str(s.exit_code)
        step = "-" if s.step is None else str(s.step)
        table.add_row(s.span_id, s.run or "-", step, s.tool, s.effect or "-", exit_code)
    Console(soft_wrap=True).print(table)
    click.echo(f"{len(spans)} span(s) in {trace}")


@span.command(short_help="One span as indented JSON.", epilog=exit_codes_help("span"))
@click.argument("trace", type=click.Path(path_type=Path))
@click.option("--id", "span_id", required=True, metavar="ID", help="The span to extract.")
@click.option(
    "-o", "--output", type=click.Path(path_type=Path), help="Write here instead of stdout."
)
@_skip
@handle_errors
def extract(trace: Path, span_id: str, output: Path | None, skip_bad_lines: bool) -> None:
    """Write the span ID of TRACE as indented JSON (what span replay and decide read)."""
    from ..span import find_span, read_spans

    found = find_span(read_spans(trace, skip_bad_lines=skip_bad_lines), span_id, str(trace))
    text = json.dumps(found.to_dict(), indent=2, ensure_ascii=False, default=str)
    if output is None:
        click.echo(text)
    else:
        output.write_text(text + "\n", encoding="utf-8")
        click.echo(f"wrote span {found.span_id} ({found.tool}) to {output}", err=True)


@span.command(
    "replay", short_help="Run a span's tool live: a verdict.", epilog=exit_codes_help("span")
)
@click.argument("source", metavar="SPAN", type=click.Path(path_type=Path))
@_id_option
@click.option(
    "--mode",
    type=click.Choice(["both", "determinism", "drift"]),
    default="both",
    show_default=True,
    help="determinism: run twice, compare; drift: run once, compare with the recording.",
)
@click.option(
    "--call", "call_spec", metavar="MODULE:FUNCTION", help="The function of a Python tool."
)
@click.option(
    "--stub",
    "stub_spec",
    metavar="MODULE:FUNCTION",
    help="Called instead of a write tool; the arguments it receives are compared.",
)
@_live_options
@output_options
@handle_errors
def replay_span(  # noqa: PLR0917 - click passes every option
    source: Path,
    span_id: str | None,
    mode: str,
    call_spec: str | None,
    stub_spec: str | None,
    pins: tuple[str, ...],
    pure_env: bool,
    env_allow: tuple[str, ...],
    cwd: str | None,
    timeout_s: float | None,
    fmt: str,
) -> None:
    """Run the tool of SPAN live and compare fingerprints.

    SPAN is a span file (span extract -o), or a trace with --id. --mode both (the default)
    runs determinism, then drift, and ends with a verdict: nondeterministic tool, world
    drifted, or decision layer. A write or irreversible span is never run live: give a stub.
    """
    from ..analysis import AnalysisConfig
    from ..span import load_callable, replay, span_of_trace

    found = span_of_trace(source, span_id)
    config = _span_config()
    live = _live(config, pins, pure_env, env_allow, cwd, timeout_s)
    calls = _named((f"{found.tool}={call_spec}",) if call_spec else (), config.get("calls", {}))
    stubs = _named((f"{found.tool}={stub_spec}",) if stub_spec else (), config.get("stubs", {}))
    if found.tool in calls:
        live.call = load_callable(calls[found.tool], "--call")
    if found.tool in stubs:
        live.stub = load_callable(stubs[found.tool], "--stub")
    result = replay(found, mode, live=live, normalizer=AnalysisConfig.load().normalizer)
    if fmt == "json":
        echo_json(result.to_dict())
    else:
        click.echo("\n".join(result.lines()))


@span.command(
    "decide", short_help="Ask a second model for the decision.", epilog=exit_codes_help("span")
)
@click.argument("source", metavar="SPAN", type=click.Path(path_type=Path))
@_id_option
@click.option("--model", required=True, help="The second model to ask.")
@click.option(
    "--base-url",
    help="An OpenAI-compatible endpoint ending in /v1 (default: OPENAI_BASE_URL, then OpenAI).",
)
@click.option(
    "--repeat", type=click.IntRange(1, 100), default=1, show_default=True, help="Ask N times."
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=60.0,
    show_default=True,
    help="Seconds to wait for each answer.",
)
@output_options
@handle_errors
def decide_span(  # noqa: PLR0917 - click passes every option
    source: Path,
    span_id: str | None,
    model: str,
    base_url: str | None,
    repeat: int,
    timeout: float,
    fmt: str,
) -> None:
    """Ask a second model for SPAN's tool call, with the recorded prompt and tool schema.

    same decision: the decision is robust and the bug sits downstream; different decision:
    it is model-dependent. The key is read from OPENAI_API_KEY.
    """
    from ..analysis import AnalysisConfig
    from ..span import decide, span_of_trace

    found = span_of_trace(source, span_id)
    result = decide(
        found,
        model,
        base_url=base_url,
        repeat=repeat,
        timeout=timeout,
        normalizer=AnalysisConfig.load().normalizer,
    )
    if fmt == "json":
        echo_json(result.to_dict())
    else:
        click.echo("\n".join(result.lines()))


@click.command(
    short_help="From a good run and a bad run to a cause, in one step.",
    epilog=exit_codes_help("explain"),
)
@click.argument("traces", nargs=-1, required=True)
@click.option("--runs", nargs=2, metavar="GOOD_RUN BAD_RUN", help="Two runs of one trace.")
@click.option(
    "--call",
    "call_specs",
    multiple=True,
    metavar="[TOOL=]MODULE:FUNCTION",
    help="The function of a Python tool (TOOL defaults to the function's name).",
)
@click.option(
    "--stub",
    "stub_specs",
    multiple=True,
    metavar="[TOOL=]MODULE:FUNCTION",
    help="The stub of a write tool (TOOL defaults to the function's name).",
)
@_live_options
@click.option("--model", help="Also replay the decision with this model when the tool is cleared.")
@click.option("--base-url", help="The model's OpenAI-compatible endpoint (see span decide).")
@click.option("--repeat", type=click.IntRange(1, 100), default=1, help="Ask the model N times.")
@format_option("text", "json", "markdown")
@handle_errors
def explain(  # noqa: PLR0917 - click passes every option
    traces: tuple[str, ...],
    runs: tuple[str, str] | None,
    call_specs: tuple[str, ...],
    stub_specs: tuple[str, ...],
    pins: tuple[str, ...],
    pure_env: bool,
    env_allow: tuple[str, ...],
    cwd: str | None,
    timeout_s: float | None,
    model: str | None,
    base_url: str | None,
    repeat: int,
    fmt: str,
) -> None:
    """Explain why BAD went another way than GOOD: GOOD BAD (two cassettes or traces), or
    TRACE --runs GOOD_RUN BAD_RUN.

    Finds the first divergent decision, replays the tool span that fed it (determinism, then
    drift), and prints one short story: where the runs parted, the verdict, and the next
    command to run.
    """
    from ..span import Explain
    from ..span import explain as explain_runs

    good: list[str] | str
    bad: str | None
    if runs:
        good, bad = list(traces), None
    elif len(traces) == 2:
        good, bad = traces[0], traces[1]
    else:
        raise click.UsageError("give GOOD BAD (two traces), or TRACE --runs GOOD_RUN BAD_RUN")
    config = _span_config()
    options = Explain(
        calls=_named(call_specs, config.get("calls", {})),
        stubs=_named(stub_specs, config.get("stubs", {})),
        live=_live(config, pins, pure_env, env_allow, cwd, timeout_s),
        model=model,
        base_url=base_url,
        repeat=repeat,
    )
    story = explain_runs(good, bad, runs=runs or None, options=options)
    if fmt == "json":
        echo_json(story.to_dict())
    elif fmt == "markdown":
        click.echo(story.markdown().rstrip("\n"))
    else:
        click.echo("\n".join(story.lines()))
