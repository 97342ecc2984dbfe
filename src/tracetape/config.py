"""``[tool.tracetape]`` from the nearest ``pyproject.toml``.

Options given in code or on the command line win over the file; the file wins over the
documented defaults. A value of the wrong type is an error naming the file and the field.
"""

from __future__ import annotations

import tomllib
from functools import lru_cache
from pathlib import Path
from typing import Any

from .errors import ConfigError

__all__ = ["ConfigError", "find_pyproject", "load_config"]


def find_pyproject(start: Path | None = None) -> Path | None:
    """Return the nearest ``pyproject.toml`` at or above ``start`` (default: the cwd)."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None


@lru_cache(maxsize=16)
def _load(path: Path) -> dict[str, Any]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read [tool.tracetape]: {exc}") from exc
    table = data.get("tool", {}).get("tracetape", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.tracetape] must be a table")
    return table


def load_config(section: str | None = None, start: Path | None = None) -> dict[str, Any]:
    """Return ``[tool.tracetape]`` (or its sub-table ``section``) as a dict, empty if absent.

    >>> isinstance(load_config("redact"), dict)
    True
    """
    path = find_pyproject(start)
    if path is None:
        return {}
    table = _load(path)
    if section is None:
        return dict(table)
    value = table.get(section, {})
    if not isinstance(value, dict):
        raise ConfigError(f"{path}: [tool.tracetape.{section}] must be a table, not {value!r}")
    return dict(value)
