"""Shared CLI plumbing: output options, error handling and exit codes."""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
import orjson

from ..errors import TapeError

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2

F = TypeVar("F", bound=Callable[..., Any])


def format_option(*formats: str) -> Callable[[F], F]:
    """``--format`` (as ``fmt``) with the given choices, ``text`` first and the default."""
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(list(formats)),
        default=formats[0],
        show_default=True,
        help=f"How to print the report: {', '.join(formats)}.",
    )


output_options = format_option("text", "json")
"""The shared ``--format text|json`` of every command that prints a report."""

tape_option = click.option(
    "--tape",
    "tape_path",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The cassette to record into or replay from.",
)
"""The ``--tape PATH`` of ``tracetape run`` and ``tracetape proxy`` (as ``tape_path``)."""


def mode_option(default: str, help: str) -> Callable[[F], F]:
    """``--mode`` of a tape, one of ``Mode``'s values."""
    from ..options import Mode

    return click.option(
        "--mode",
        type=click.Choice([m.value for m in Mode]),
        default=default,
        show_default=True,
        help=help,
    )


def handle_errors(func: F) -> F:
    """Turn tracetape's errors into one clear line on stderr and exit code 2."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except (TapeError, ValueError, OSError) as exc:
            click.echo(f"tracetape: error: {exc}", err=True)
            sys.exit(EXIT_BAD_INPUT)
        except (RecursionError, orjson.JSONEncodeError) as exc:  # orjson: over 255 levels
            if isinstance(exc, orjson.JSONEncodeError) and "ecursion" not in str(exc):
                click.echo(f"tracetape: error: {_inputs(kwargs)}: {exc}", err=True)
                sys.exit(EXIT_BAD_INPUT)
            click.echo(
                f"tracetape: error: {_inputs(kwargs)}: a value is nested deeper than tracetape "
                "reads (hundreds of levels of lists or objects); flatten it, or leave that line "
                "out (--skip-bad-lines skips the lines a reader can name)",
                err=True,
            )
            sys.exit(EXIT_BAD_INPUT)

    return wrapper  # type: ignore[return-value]


def _inputs(kwargs: dict[str, Any]) -> str:
    """The input files a command was given, for an error that cannot name the line."""
    paths = [str(v) for v in kwargs.values() if isinstance(v, Path)]
    return ", ".join(paths) or "the input"


def echo_json(data: Any) -> None:
    """Print ``data`` as indented JSON on stdout."""
    click.echo(json.dumps(data, indent=2, ensure_ascii=False, default=str))
