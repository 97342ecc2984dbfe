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

import click

from .._version import __version__
from .diff import check, diff, summarize
from .export import export
from .run import run
from .show import show, verify


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="tracetape")
def main() -> None:
    """Record agent runs, replay them offline, and diff runs."""


main.add_command(show)
main.add_command(verify)
main.add_command(run)
main.add_command(diff)
main.add_command(check)
main.add_command(summarize)
main.add_command(export)
