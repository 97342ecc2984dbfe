"""``[tool.tracetape]`` from the nearest ``pyproject.toml``: found upwards from a folder, read
as tables, a value of the wrong shape named with its file."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tracetape.config import ConfigError, find_pyproject, load_config
from tracetape.errors import TapeError


def _project(folder: Path, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "pyproject.toml"
    path.write_text(text)
    return path


def test_the_nearest_pyproject_at_or_above_the_folder_is_found(tmp_path: Path) -> None:
    """The folder's own file first, else its parents', the nearest one winning."""
    outer = _project(tmp_path, "[tool.tracetape]\n")
    inner = _project(tmp_path / "a", "[tool.tracetape]\n")
    (tmp_path / "a" / "b" / "c").mkdir(parents=True)
    assert find_pyproject(tmp_path / "a" / "b" / "c") == inner
    assert find_pyproject(tmp_path / "a") == inner
    assert find_pyproject(tmp_path) == outer


def test_the_working_directory_is_the_default_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no folder given, the search starts at the working directory."""
    path = _project(tmp_path / "proj", "[tool.tracetape.redact]\nfields = ['pin']\n")
    (tmp_path / "proj" / "src").mkdir()
    monkeypatch.chdir(tmp_path / "proj" / "src")
    assert find_pyproject() == path
    assert load_config("redact") == {"fields": ["pin"]}


def test_the_table_and_its_sections_are_read(tmp_path: Path) -> None:
    """The whole ``[tool.tracetape]`` table, or a sub-table of it; absent ones are empty, and
    what comes back is a copy the caller may change."""
    _project(
        tmp_path,
        "[tool.other]\nx = 1\n[tool.tracetape]\nmode = 'replay'\n"
        "[tool.tracetape.check]\nmax_steps = 7\n",
    )
    table = load_config(start=tmp_path)
    assert table == {"mode": "replay", "check": {"max_steps": 7}}
    assert load_config("check", tmp_path) == {"max_steps": 7}
    assert load_config("redact", tmp_path) == {}
    load_config("check", tmp_path)["max_steps"] = 99
    assert load_config("check", tmp_path) == {"max_steps": 7}


def test_no_pyproject_or_no_table_is_an_empty_config(tmp_path: Path) -> None:
    """A project without ``[tool.tracetape]`` configures nothing."""
    _project(tmp_path, "[project]\nname = 'x'\n")
    assert load_config(start=tmp_path) == {}
    assert load_config("check", tmp_path) == {}


@pytest.mark.parametrize(
    ("text", "said"),
    [
        pytest.param("[tool.tracetape\n", r"cannot read \[tool.tracetape\]: ", id="not-toml"),
        pytest.param(
            "[tool]\ntracetape = 3\n", r"\[tool.tracetape\] must be a table", id="not-a-table"
        ),
        pytest.param(
            "[tool.tracetape]\ncheck = 'strict'\n",
            r"\[tool.tracetape.check\] must be a table, not 'strict'",
            id="section-not-a-table",
        ),
    ],
)
def test_a_value_of_the_wrong_shape_names_the_file(tmp_path: Path, text: str, said: str) -> None:
    """A file that is not TOML, or a table that is not one, is a ``ConfigError`` (a
    ``ValueError`` and a ``TapeError``) naming the file."""
    path = _project(tmp_path, text)
    with pytest.raises(ConfigError, match=f"^{re.escape(str(path))}: {said}") as raised:
        load_config("check", tmp_path)
    assert isinstance(raised.value, ValueError) and isinstance(raised.value, TapeError)
