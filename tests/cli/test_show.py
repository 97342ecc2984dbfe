"""`tracetape show` and `tracetape verify`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tracetape import Tape
from tracetape.cli import main


@pytest.fixture
def cassette(tmp_path: Path) -> Path:
    path = tmp_path / "run.jsonl"
    with Tape(path, mode="record") as tape:
        tape.call("llm", {"messages": [], "params": {"model": "gpt-x"}, "step": 1}, lambda: "go")
        tape.call("tool", {"name": "search", "args": {"q": "x"}, "step": 1}, lambda: [1])
    return path


def test_show_prints_a_table_of_decisions(cassette: Path) -> None:
    """The table names the model of llm decisions and the tool of tool decisions."""
    result = CliRunner().invoke(main, ["show", str(cassette)])
    assert result.exit_code == 0
    assert "gpt-x" in result.output and "search" in result.output and "llm:" in result.output


def test_show_json_lists_each_decision(cassette: Path) -> None:
    """--format json gives seq, step, kind, name, ms, key and effect per decision."""
    result = CliRunner().invoke(main, ["show", str(cassette), "--format", "json"])
    rows = json.loads(result.output)
    assert [(r["seq"], r["kind"], r["name"], r["step"]) for r in rows] == [
        (1, "llm", "gpt-x", 1),
        (2, "tool", "search", 1),
    ]


def test_show_of_a_missing_file_exits_2(tmp_path: Path) -> None:
    """A missing cassette is one error line and exit code 2."""
    result = CliRunner().invoke(main, ["show", str(tmp_path / "nope.jsonl")])
    assert result.exit_code == 2
    assert "no such cassette" in result.output


def test_verify_summarizes_a_sound_cassette(cassette: Path) -> None:
    """verify prints one line with format and counts, exit 0."""
    result = CliRunner().invoke(main, ["verify", str(cassette)])
    assert result.exit_code == 0
    assert result.output.strip() == f"ok: {cassette}: format 1, 2 records (1 llm, 1 tool)"


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        pytest.param(
            lambda lines: [*lines[:1], "{oops", *lines[1:]], "not valid JSON", id="corrupt-line"
        ),
        pytest.param(
            lambda lines: [lines[0], lines[2], lines[1]], "not strictly increasing", id="reordered"
        ),
        pytest.param(
            lambda lines: [json.dumps({"tracetape": 7}), *lines[1:]],
            "format 7",
            id="future-version",
        ),
    ],
)
def test_verify_reports_damage_with_exit_1(cassette: Path, damage, message: str) -> None:  # type: ignore[no-untyped-def]
    """A corrupt, reordered or future-format cassette is reported on one line, exit 1."""
    lines = cassette.read_text().splitlines()
    cassette.write_text("\n".join(damage(lines)) + "\n")
    result = CliRunner().invoke(main, ["verify", str(cassette), "--format", "json"])
    assert result.exit_code == 1
    summary = json.loads(result.output)
    assert summary["ok"] is False and message in " ".join(summary["problems"])


def test_verify_reports_a_torn_last_line_as_damage(cassette: Path) -> None:
    """A torn last line still replays, but verify flags it (exit 1)."""
    with cassette.open("a") as fh:
        fh.write('{"seq": 3, "key": "to')
    result = CliRunner().invoke(main, ["verify", str(cassette)])
    assert result.exit_code == 1 and "torn last line" in result.output


def test_verify_of_a_missing_file_exits_2(tmp_path: Path) -> None:
    """verify exits 2 when there is nothing to verify."""
    assert CliRunner().invoke(main, ["verify", str(tmp_path / "x.jsonl")]).exit_code == 2


def test_verify_and_show_of_a_folder_exit_2(tmp_path: Path) -> None:
    """A folder given as the cassette is bad input (exit 2) for verify and show alike."""
    assert CliRunner().invoke(main, ["verify", str(tmp_path)]).exit_code == 2
    assert CliRunner().invoke(main, ["show", str(tmp_path)]).exit_code == 2
