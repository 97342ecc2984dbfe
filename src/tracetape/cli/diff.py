"""``tracetape diff``, ``tracetape check`` and ``tracetape summarize``: diff runs, not logs.

Exit codes: ``EXIT_CODES`` in ``cli/__init__.py``.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click
import orjson

from ..analysis import (
    AnalysisConfig,
    Report,
    Severity,
    TraceError,
    TraceFormat,
    check_trace,
    diff_traces,
    render_markdown,
    render_text,
)
from ..analysis.api import expand
from ..analysis.causes import CAUSES
from ..analysis.render import skipped_line, summary_lines
from ..analysis.report import redacted
from ..analysis.summarize import LLMSettings, rule_summary, summarize_with_llm
from . import exit_codes_help
from ._common import (
    EXIT_FAILED,
    EXIT_OK,
    echo_json,
    format_option,
    handle_errors,
    output_options,
)

PROGRESS_MIN_BYTES = 4 << 20

_input_format = click.option(
    "--input-format",
    type=click.Choice([f.value for f in TraceFormat]),
    default="auto",
    show_default=True,
    help="Trace format; auto tells cassettes, seed JSONL, span records and OTLP/JSON apart.",
)
_skip = click.option(
    "--skip-bad-lines",
    is_flag=True,
    help="Skip malformed lines (and report how many) instead of failing.",
)


@contextmanager
def _progress(traces: list[str]) -> Iterator[Callable[[Path, int], None] | None]:
    """A rich progress bar on a terminal, for inputs over a few MB; else nothing."""
    try:
        paths = expand(traces)
    except TraceError:
        paths = []  # the analysis reports it
    sizes = {p: p.stat().st_size for p in paths if p.is_file()}
    total = sum(sizes.values())
    if not sys.stderr.isatty() or total < PROGRESS_MIN_BYTES:
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn

    done: dict[Path, int] = dict.fromkeys(sizes, 0)
    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        DownloadColumn(),
        TimeRemainingColumn(),
        transient=True,
        console=Console(stderr=True),
    ) as bar:
        task = bar.add_task("reading traces", total=total)

        def update(path: Path, offset: int) -> None:
            done[path] = offset
            bar.update(task, completed=sum(done.values()))

        yield update


def _emit(report: Report, fmt: str, output: Path | None) -> None:
    if fmt == "json":
        text = json.dumps(redacted(report.to_dict()), indent=2, ensure_ascii=False, default=str)
    elif fmt == "markdown":
        text = render_markdown(report).rstrip("\n")
    else:
        text = render_text(report)
    if output is None:
        click.echo(text)
    else:
        output.write_text(text + "\n", encoding="utf-8")


_SEVERITIES = ("fatal", "suspicious", "expected", "never")


def _fail_on(ctx: click.Context, param: click.Parameter, value: str) -> tuple[str, ...]:
    """``--fail-on``'s severities and causes, each checked (an unknown one names the valid)."""
    items = tuple(item.strip() for item in value.split(",") if item.strip())
    valid = (*_SEVERITIES, *CAUSES)
    for item in items:
        if item not in valid:
            raise click.BadParameter(f"{item!r} is not one of {', '.join(valid)}")
    if not items:
        raise click.BadParameter(f"give one or more of {', '.join(valid)}")
    return items


def failed_on(report: Report, gates: tuple[str, ...]) -> bool:
    """Whether ``report`` trips one of ``--fail-on``'s gates: a finding at or above a
    severity, or a root of the differences with a cause named."""
    for gate in gates:
        if gate in CAUSES and any(gate in root.causes for root in report.roots):
            return True
        if gate in _SEVERITIES and gate != "never" and report.at_least(Severity(gate)):
            return True
    return False


@click.command(
    short_help="Where two runs stopped agreeing, and every finding.", epilog=exit_codes_help("diff")
)
@click.argument("traces", nargs=-1, required=True)
@click.option(
    "--runs",
    nargs=2,
    metavar="RUN_A RUN_B",
    help="The two runs to compare (by run id), among all the runs of every TRACE.",
)
@format_option("text", "json", "markdown")
@click.option(
    "--fail-on",
    callback=_fail_on,
    default="fatal",
    show_default=True,
    metavar="SEVERITY,CAUSE,...",
    help="Exit 1 when a finding at or above this severity exists (fatal, suspicious, "
    "expected; never: exit 0), or the runs part or change with one of these causes (model, "
    "tool, env, input, prompt, config, code, ending); comma-separated: fatal,prompt.",
)
@click.option(
    "-o", "--output", type=click.Path(path_type=Path), help="Write the report here, not to stdout."
)
@click.option(
    "--view",
    type=click.Choice(["report", "conversation"]),
    default="report",
    show_default=True,
    help="With --format text: after the report, conversation prints the two runs aligned "
    "call by call, each changed text with its removed words red and its added words green.",
)
@_input_format
@_skip
@handle_errors
def diff(  # noqa: PLR0917 - click passes every option
    traces: tuple[str, ...],
    runs: tuple[str, str] | None,
    fmt: str,
    fail_on: tuple[str, ...],
    output: Path | None,
    view: str,
    input_format: str,
    skip_bad_lines: bool,
) -> None:
    """Compare two runs without executing anything: TRACE_A TRACE_B, or TRACE... --runs A B.

    TRACE_A and TRACE_B are each a file or a quoted glob pattern ('traces/a-*.jsonl'): every
    run they hold is on that side. With --runs, the two runs are looked up among every run of
    every TRACE. Prints the verdict first (where B diverged from A, its cause, what it
    explains, what each run came to), then the repeats, drift and mock-replay result, then a
    severity table.
    """
    a: list[str] | str
    b: str | None
    if runs:
        a, b = list(traces), None
    elif len(traces) <= 2:
        a, b = traces[0], (traces[1] if len(traces) == 2 else None)
    else:
        raise click.UsageError(
            f"got {len(traces)} traces; give two (TRACE_A TRACE_B, each a file or a quoted "
            "glob pattern), or pick the two runs to compare with --runs RUN_A RUN_B"
        )
    with _progress(list(traces)) as progress:
        report = diff_traces(
            a,
            b,
            runs=runs or None,
            config=AnalysisConfig.load(),
            fmt=input_format,
            skip_bad_lines=skip_bad_lines,
            progress=progress,
        )
    _emit(report, fmt, output)
    if view == "conversation" and fmt == "text":
        _conversation(a, b, runs)
    if failed_on(report, fail_on):
        sys.exit(EXIT_FAILED)
    sys.exit(EXIT_OK)


def _conversation(a: list[str] | str, b: str | None, runs: tuple[str, str] | None) -> None:
    """The two runs aligned as conversations (``--view conversation``)."""
    from rich.console import Console

    from ..views import read_steps
    from ._views import print_diff, records_of

    if runs:
        sides = [records_of(a, runs[0]), records_of(a, runs[1])]
    elif b is not None:
        sides = [records_of(a), records_of(b)]
    else:
        return
    console = Console(width=None if sys.stdout.isatty() else 120)
    console.print()
    print_diff(console, read_steps(sides[0]), read_steps(sides[1]))


@click.command(
    short_help="The invariants of every run of one trace: the CI gate.",
    epilog=exit_codes_help("check"),
)
@click.argument("traces", nargs=-1, required=True)
@click.option("--max-calls-per-step", type=click.IntRange(0), help="Fanout bound (default 10).")
@click.option(
    "--max-repeats", type=click.IntRange(0), help="Repeats of one call in a run (default 2)."
)
@click.option("--max-tokens", type=click.IntRange(0), help="Tokens per run (default 200000).")
@click.option("--max-steps", type=click.IntRange(0), help="Steps per run (default 50).")
@click.option("--max-calls", type=click.IntRange(0), help="Calls per run (default 500).")
@click.option(
    "--exploration",
    type=click.IntRange(1),
    help="Distinct args of one tool in one step before it is exploration (default 4).",
)
@output_options
@_input_format
@_skip
@handle_errors
def check(
    traces: tuple[str, ...],
    fmt: str,
    input_format: str,
    skip_bad_lines: bool,
    **limits: int | None,
) -> None:
    """Check the invariants of every run in TRACE...: the CI regression gate.

    Each TRACE is a file or a quoted glob pattern ('traces/*.jsonl'); a run spread over
    several files is one run. Each bound comes from its option, else [tool.tracetape.check],
    else its default.
    """
    config = AnalysisConfig.load(None, **limits)  # the --max-* and --exploration options
    with _progress(list(traces)) as progress:
        report = check_trace(
            list(traces),
            config=config,
            fmt=input_format,
            skip_bad_lines=skip_bad_lines,
            progress=progress,
        )
    broken = report.broken_invariants
    if fmt == "json":
        data = report.to_dict()
        data["ok"] = not broken
        data["broken"] = [f.to_dict() for f in broken]
        echo_json(redacted(data))
    else:
        said: list[str] = redacted([f.message for f in broken])
        for message in said:
            click.echo(f"broken: {message}")
        for line in summary_lines(report):
            if line not in said:
                click.echo(line)
        if report.skipped:
            click.echo(skipped_line(report.skipped, report.skipped_examples))
        bounds = ", ".join(f"{k} {v}" for k, v in report.limits.items())
        verdict = "ok" if not broken else f"failed, {report.broken_count} invariant(s) broken"
        click.echo(f"{verdict}: {report.runs} run(s), {report.events} call(s) checked ({bounds})")
    sys.exit(EXIT_FAILED if broken else EXIT_OK)


@click.command(
    short_help="One line per finding: pattern, severity, fix.", epilog=exit_codes_help("summarize")
)
@click.argument("diff_json", type=click.Path(path_type=Path))
@click.option("--llm", is_flag=True, help="Ask a model behind an OpenAI-compatible endpoint.")
@click.option("--model", envvar="TRACETAPE_MODEL", help="Model name (env TRACETAPE_MODEL).")
@click.option(
    "--base-url", envvar="OPENAI_BASE_URL", help="Endpoint base URL (env OPENAI_BASE_URL)."
)
@click.option(
    "--timeout", type=float, default=60.0, show_default=True, help="Seconds to wait for the model."
)
@output_options
@handle_errors
def summarize(  # noqa: PLR0917 - click passes every option
    diff_json: Path, llm: bool, model: str | None, base_url: str | None, timeout: float, fmt: str
) -> None:
    """One line per finding of DIFF_JSON (from diff --format json): pattern, severity, fix.

    With --llm the findings go to an OpenAI-compatible chat endpoint with a strict prompt;
    an invalid answer or a failing endpoint falls back to the rule table, saying so.
    """
    try:
        data: Any = orjson.loads(diff_json.read_bytes())
    except FileNotFoundError:
        raise ValueError(
            f"{diff_json}: no such file; write it with tracetape diff --format json"
        ) from None
    except orjson.JSONDecodeError as exc:
        raise ValueError(
            f"{diff_json}: not JSON ({exc}); pass the output of tracetape diff --format json"
        ) from None
    findings = data.get("findings") if isinstance(data, dict) else None
    if not isinstance(findings, list):
        raise ValueError(
            f"{diff_json}: field 'findings' missing; pass the output of "
            "tracetape diff --format json"
        )
    for i, finding in enumerate(findings):
        if not isinstance(finding, dict) or not isinstance(finding.get("pattern"), str):
            raise ValueError(
                f"{diff_json}: field 'findings[{i}]' is not a finding (an object with a "
                "'pattern' string); pass the output of tracetape diff --format json"
            )
    result = rule_summary(findings)
    if llm:
        settings = LLMSettings(
            model=model or "",
            base_url=base_url or "https://api.openai.com/v1",
            api_key=os.environ.get("OPENAI_API_KEY", ""),
            timeout=timeout,
        )
        result = summarize_with_llm(findings, settings)
        if result.fallback:
            click.echo(f"tracetape: {result.fallback}; using the rule table instead", err=True)
    if fmt == "json":
        echo_json(result.to_dict())
    else:
        for line in result.lines:
            click.echo(line.text())
    sys.exit(EXIT_OK)
