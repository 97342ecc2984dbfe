"""The ``tracetape`` command line: one module per command group, each thin.

Exit codes are ``EXIT_CODES``: the one table every command's ``--help`` ends with and the
exit-code table of docs/cli.md is generated from (a test holds the page to it). In short, 0 is
success, 1 the command's check failed, 2 bad input or usage; ``tracetape run`` passes the
program's own code through and adds 3, 4 and 5.
"""

from __future__ import annotations

import importlib
import warnings
from typing import TextIO

import click

from .._lazy import collector_paused

# Each command's module, imported when the command is looked up: `tracetape run` does not
# load the analysis, nor `tracetape diff` the runner (every process start pays for imports).
COMMANDS = {
    "show": "show",
    "verify": "show",
    "migrate": "migrate",
    "run": "run",
    "proxy": "proxy",
    "diff": "diff",
    "check": "diff",
    "summarize": "diff",
    "export": "export",
    "span": "span",
    "explain": "span",
    "serve": "collector",
    "push": "collector",
}


# What each exit code of each command means (CI gates depend on them).
EXIT_CODES: dict[str, dict[str, str]] = {
    "diff": {
        "0": "no finding at or above `--fail-on`'s severity (default `fatal`), and no root "
        "of the differences with a cause it names",
        "1": "a finding at or above `--fail-on`'s severity, or a root with a cause it names "
        "(`--fail-on prompt,config`)",
        "2": "bad input: a missing or empty file, a malformed line (file, line and field "
        "named), an unknown run, a bad option or config",
    },
    "check": {
        "0": "every invariant holds",
        "1": "an invariant is broken (fanout, repeats, tokens, steps, calls, exploration)",
        "2": "bad input",
    },
    "summarize": {
        "0": "the summary is printed (also when `--llm` fell back to the rules)",
        "2": "bad input",
    },
    "export": {
        "0": "written",
        "2": "bad input: a missing or corrupt cassette or trace, an unwritable output",
    },
    "span": {
        "0": "listed, extracted, or a verdict printed (`replay`: nondeterministic tool, world "
        "drifted or decision layer; `decide`: same or different decision)",
        "2": "bad input, or the span cannot be replayed here: a missing or malformed span or "
        "trace (file, line and field named), a write span without `--stub`, a Python tool "
        "without `--call`, a command that is not installed, a decision endpoint that times "
        "out, fails or answers no chat completion",
    },
    "explain": {
        "0": "the story is printed (also when the runs never parted, or the span could not be "
        "replayed: it says why and what to run)",
        "2": "bad input: a missing or malformed trace, an unknown run, a `--call` or `--stub` "
        "that cannot be imported",
    },
    "serve": {
        "0": "stopped (Ctrl-C)",
        "2": "it cannot start: a bad database URL or one it cannot reach, a schema newer than "
        "this tracetape, a blank token, a host beyond loopback without a token of 16 "
        "characters or more, a port in use, the server extra missing",
    },
    "push": {
        "0": "every line is stored (or was already)",
        "2": "bad input: a missing or malformed trace, a batch the collector refused (its "
        "lines and the reason named), a missing or wrong token, a run another file filled "
        "(without --append), the push extra missing",
        "3": "the collector could not be reached, or kept failing, after the retries (what "
        "was sent before is stored; push again to send the rest)",
    },
    "show": {"0": "printed", "2": "the cassette is missing or unreadable"},
    "verify": {
        "0": "the cassette is sound",
        "1": "it is corrupt",
        "2": "it is missing or not a file (a folder)",
    },
    "migrate": {
        "0": "every cassette is migrated, or was current",
        "1": "with `--check`: a cassette would change",
        "2": "a cassette is missing, unreadable or cannot be migrated (a record without its "
        "input under match rules, a migration that would not replay the same): it is left "
        "as it was",
    },
    "proxy": {
        "0": "stopped (Ctrl-C or SIGTERM), the cassette sealed, no miss",
        "2": "it cannot start: a missing or corrupt cassette, a bad option or --upstream, a "
        "host beyond loopback without a token of 16 characters or more, a port in use, the "
        "server extra missing",
        "3": "a request missed in replay (each was answered 400 with its diagnosis)",
    },
    "run": {
        "N": "the program's own exit code when the tape ran clean (a signal N gives 128 + N)",
        "2": "the tape could not start: a bad option, a missing or corrupt cassette in replay, "
        "a Python that cannot import tracetape, `--strict` replay under environment drift, "
        "(in replay) a command that started no Python at all; or the recording stopped (a "
        "full disk: the cassette holds what was written before)",
        "3": "replay met a decision that was never recorded, even where the program caught the "
        "`ReplayMiss` (the diagnosis is on stderr); with `--proxy`, a request the proxy "
        "answered 400 with the diagnosis",
        "4": "`--strict` replay left recorded decisions unplayed",
        "5": "replay tried to open a network connection (blocked unless `--network "
        "loopback` or `allow`), even where the program caught the error",
        "126/127": "the command is not executable / not found",
    },
}


def exit_codes_help(name: str) -> str:
    """The exit-code paragraph that ends ``tracetape NAME --help``."""
    codes = "; ".join(f"{code} {what}" for code, what in EXIT_CODES[name].items())
    return "Exit codes: " + codes.replace("`", "") + "."


def exit_codes_markdown() -> str:
    """The exit-code table of docs/cli.md."""
    lines = ["| command | exit codes |", "|---|---|"]
    for name, codes in EXIT_CODES.items():
        cell = "; ".join(f"**{code}** {what}" for code, what in codes.items())
        lines.append(f"| `{name}` | {cell} |")
    return "\n".join(lines) + "\n"


class _LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        with collector_paused():  # the command's modules: most of what a start imports
            module = importlib.import_module(f"{__name__}.{COMMANDS[cmd_name]}")
        command: click.Command = getattr(module, cmd_name)
        return command


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
# The installed distribution's version (importlib.metadata, read only when asked for).
@click.version_option(None, "-V", "--version", package_name="tracetape", prog_name="tracetape")
def main() -> None:
    """Record agent runs, replay them offline, and diff runs."""
    warnings.showwarning = _one_line_warning


def _one_line_warning(  # noqa: PLR0917 - warnings.showwarning's signature
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    """A warning on the command line is one plain line (no Python file, line or source)."""
    click.echo(f"tracetape: warning: {message}", err=True)
