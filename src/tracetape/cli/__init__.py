"""The ``tracetape`` command line: one module per command group, each thin.

Exit codes (every command):

* 0: success, nothing to report;
* 1: the command's check failed (a corrupt cassette for ``verify``, a finding at or above
  ``--fail-on`` for ``diff``, a broken invariant for ``check``);
* 2: bad input or usage: a missing or unreadable file, an unknown format, a bad option.

``tracetape run`` passes the program's own exit code through and adds 3 (replay miss), 4
(strict replay left decisions unplayed) and 5 (replay tried the network); see ``cli/run.py``.
"""

from __future__ import annotations

import importlib

import click

from .._version import __version__

# Each command's module, imported when the command is looked up: `tracetape run` does not
# load the analysis, nor `tracetape diff` the runner (every process start pays for imports).
COMMANDS = {
    "show": "show",
    "verify": "show",
    "run": "run",
    "diff": "diff",
    "check": "diff",
    "summarize": "diff",
    "export": "export",
}


class _LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        module = importlib.import_module(f"{__name__}.{COMMANDS[cmd_name]}")
        command: click.Command = getattr(module, cmd_name)
        return command


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="tracetape")
def main() -> None:
    """Record agent runs, replay them offline, and diff runs."""
