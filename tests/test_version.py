"""The version, and the ``pip install`` line that installs this copy of tracetape again."""

from __future__ import annotations

import json
import tomllib
from importlib import metadata
from pathlib import Path

import tracetape
from tracetape._version import __version__, install_command

ROOT = Path(__file__).resolve().parents[1]


def test_the_version_is_the_projects() -> None:
    """``__version__`` is pyproject.toml's version, and the installed distribution's."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert __version__ == project["version"] == metadata.version("tracetape")
    assert tracetape.__version__ == __version__


def _installed_from() -> str:
    """Where pip recorded this tracetape came from (PEP 610), as a path."""
    text = metadata.distribution("tracetape").read_text("direct_url.json")
    assert text, "the test venv installs tracetape from a checkout (pip install -e .)"
    url = json.loads(text)["url"]
    assert url.startswith("file://")
    return str(url).removeprefix("file://")


def test_the_install_command_names_where_this_copy_came_from() -> None:
    """The line names the checkout (or wheel) pip installed from, quoted for a shell, with the
    extra in brackets; ``upgrade`` adds ``-U``."""
    where = _installed_from()
    assert Path(where).resolve() == ROOT
    assert install_command() == f"pip install '{where}'"
    assert install_command("server") == f"pip install '{where}[server]'"
    assert install_command("push", upgrade=True) == f"pip install -U '{where}[push]'"
