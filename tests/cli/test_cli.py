"""The ``tracetape`` group itself: version and the command list."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata

import pytest
from click.testing import CliRunner

from tracetape.cli import COMMANDS, main


@pytest.mark.parametrize("flag", ["-V", "--version"])
def test_version_flags_print_the_installed_version(flag: str) -> None:
    """``-V`` and ``--version`` print the installed distribution's version and exit 0."""
    result = CliRunner().invoke(main, [flag])
    assert result.exit_code == 0
    assert result.output == f"tracetape, version {metadata.version('tracetape')}\n"


def test_the_command_prints_its_version() -> None:
    """``tracetape --version`` run as a command prints the version line on stdout alone."""
    done = subprocess.run(
        [sys.executable, "-m", "tracetape", "--version"], capture_output=True, text=True, check=True
    )
    assert (done.stdout, done.stderr) == (
        f"tracetape, version {metadata.version('tracetape')}\n",
        "",
    )


def test_every_command_is_listed_and_loads() -> None:
    """``tracetape --help`` lists every command, and each one's module loads on demand."""
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0
    for name in COMMANDS:
        assert f"  {name} " in result.output
        assert CliRunner().invoke(main, [name, "--help"]).exit_code == 0
