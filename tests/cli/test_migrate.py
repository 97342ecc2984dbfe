"""``tracetape migrate``: ``--check`` lists what would change and exits 1; a cassette that cannot
be migrated exits 2, and the others are migrated all the same."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.test_migrate import ENDLESS, FIXTURES, FORMAT_1, KEYS_1, SEED, copy_fixture
from tracetape.cli import main
from tracetape.config import _load


@pytest.fixture(autouse=True)
def _no_project_rules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test runs in its own folder: no pyproject's match rules but its own."""
    monkeypatch.chdir(tmp_path)
    _load.cache_clear()


def test_a_migrated_cassette_is_current_and_check_says_so(tmp_path: Path) -> None:
    paths = [copy_fixture(f, tmp_path) for f in (SEED, FORMAT_1, KEYS_1, ENDLESS)]
    checked = CliRunner().invoke(main, ["migrate", "--check", *map(str, paths)])
    assert checked.exit_code == 1, checked.output
    assert checked.output.count("would change:") == 4
    assert [p.read_bytes() for p in paths] == [
        (FIXTURES / p.name).read_bytes() for p in paths
    ]  # --check changes nothing
    done = CliRunner().invoke(main, ["migrate", *map(str, paths), "--format", "json"])
    assert done.exit_code == 0, done.output
    report = json.loads(done.output)
    assert [c["written"] for c in report["cassettes"]] == [True] * 4
    again = CliRunner().invoke(main, ["migrate", "--check", *map(str, paths)])
    assert again.exit_code == 0 and again.output.count("current:") == 4
    assert CliRunner().invoke(main, ["migrate", *map(str, paths)]).exit_code == 0


def test_a_record_without_its_input_cannot_be_keyed_under_rules(tmp_path: Path) -> None:
    path = copy_fixture(SEED, tmp_path)
    (tmp_path / "pyproject.toml").write_text('[tool.tracetape.match]\nmask = ["uuid"]\n')
    _load.cache_clear()
    result = CliRunner().invoke(main, ["migrate", str(path)])
    assert result.exit_code == 2
    assert "stored no input" in result.output and "re-record" in result.output
    assert path.read_bytes() == SEED.read_bytes()
    assert not list(tmp_path.glob("*.migrating*")) and not list(tmp_path.glob("*.bak"))


@pytest.mark.parametrize(
    ("content", "said"),
    [(None, "no such cassette"), (b"", "empty"), (b'{"tracetape": 99}\n', "newer")],
)
def test_a_missing_or_unreadable_cassette_exits_2(
    tmp_path: Path, content: bytes | None, said: str
) -> None:
    path = tmp_path / "bad.jsonl"
    if content is not None:
        path.write_bytes(content)
    good = copy_fixture(SEED, tmp_path)
    result = CliRunner().invoke(main, ["migrate", str(path), str(good)])
    assert result.exit_code == 2 and said in result.output
    assert "migrated:" in result.output  # the good one is migrated all the same


def test_an_edited_cassette_exits_2_unless_its_edits_are_trusted(tmp_path: Path) -> None:
    """``migrate`` refuses a sealed cassette edited by hand (exit 2, the line named);
    ``--trust-edits`` migrates it."""
    path = copy_fixture(KEYS_1, tmp_path)
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(
        b"".join([*lines[:3], lines[3].replace(b"chatcmpl-4", b"chatcmpl-5"), *lines[4:]])
    )
    refused = CliRunner().invoke(main, ["migrate", str(path)])
    assert refused.exit_code == 2
    assert f"{path}:4: the record was changed" in refused.output, refused.output
    trusted = CliRunner().invoke(main, ["migrate", "--trust-edits", str(path)])
    assert trusted.exit_code == 0 and "migrated:" in trusted.output, trusted.output
