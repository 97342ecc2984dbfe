"""tracetape export --otel: exit codes and output."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from tracetape import Tape
from tracetape.cli import main


def _cassette(tmp_path: Path) -> Path:
    path = tmp_path / "run.jsonl"
    with Tape(path, mode="record", harness_sha="h") as tape:
        tape.call("tool", {"name": "ls", "args": {"path": "/"}, "step": 1}, lambda: ["a"])
    return path


def test_export_otel_writes_otlp_json(tmp_path: Path) -> None:
    """export --otel prints an OTLP/JSON document, or writes it to --output."""
    path = _cassette(tmp_path)
    printed = CliRunner().invoke(main, ["export", "--otel", str(path)])
    assert printed.exit_code == 0
    spans = json.loads(printed.output)["resourceSpans"][0]["scopeSpans"][0]["spans"]
    assert [s["name"] for s in spans] == ["invoke_agent run", "execute_tool ls"]
    out = tmp_path / "out.json"
    written = CliRunner().invoke(main, ["export", "--otel", str(path), "-o", str(out)])
    assert written.exit_code == 0
    assert json.loads(out.read_text()) == json.loads(printed.output)


def test_export_of_a_missing_cassette_exits_2(tmp_path: Path) -> None:
    """A missing cassette is bad input: one error line, exit 2."""
    result = CliRunner().invoke(main, ["export", "--otel", str(tmp_path / "nope.jsonl")])
    assert result.exit_code == 2
    assert "no such cassette" in result.output


def test_export_needs_the_otel_flag(tmp_path: Path) -> None:
    """Without --otel (the only format) export is a usage error, exit 2."""
    result = CliRunner().invoke(main, ["export", str(_cassette(tmp_path))])
    assert result.exit_code == 2
