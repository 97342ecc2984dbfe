"""The ``tracetape`` group itself: version and the command list."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from tracetape import __version__
from tracetape.cli import COMMANDS, main


@pytest.mark.parametrize("flag", ["-V", "--version"])
def test_version_flags_print_the_version(flag: str) -> None:
    """``-V`` and ``--version`` print the version and exit 0."""
    result = CliRunner().invoke(main, [flag])
    assert result.exit_code == 0
    assert result.output == f"tracetape, version {__version__}\n"


def test_every_command_is_listed_and_loads() -> None:
    """``tracetape --help`` lists every command, and each one's module loads on demand."""
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0
    for name in COMMANDS:
        assert f"  {name} " in result.output
        assert CliRunner().invoke(main, [name, "--help"]).exit_code == 0
