"""The CLI's shared plumbing: ``--format``, tracetape's errors as one line and exit 2 (also
for values nested deeper than tracetape reads), JSON output."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
import orjson
import pytest
from click.testing import CliRunner

from tracetape.cli._common import EXIT_BAD_INPUT, echo_json, format_option, handle_errors
from tracetape.errors import CassetteError


def _command(raise_: BaseException | None) -> click.Command:
    """A command over a trace file that raises ``raise_`` (or prints its options)."""

    @click.command()
    @click.argument("trace", type=click.Path(path_type=Path))
    @format_option("text", "json", "markdown")
    @handle_errors
    def command(trace: Path, fmt: str) -> None:
        if raise_ is not None:
            raise raise_
        echo_json({"trace": trace, "fmt": fmt})

    return command


def test_the_format_option_offers_its_choices_text_first() -> None:
    """The first format is the default; others are choices; an unknown one is a usage error."""
    runner = CliRunner()
    assert json.loads(runner.invoke(_command(None), ["t.jsonl"]).output)["fmt"] == "text"
    chosen = runner.invoke(_command(None), ["t.jsonl", "--format", "markdown"])
    assert json.loads(chosen.output)["fmt"] == "markdown"
    wrong = runner.invoke(_command(None), ["t.jsonl", "--format", "xml"])
    assert wrong.exit_code == 2 and "'text', 'json', 'markdown'" in wrong.output


@pytest.mark.parametrize(
    ("error", "said"),
    [
        pytest.param(
            CassetteError("torn", path="t.jsonl", line=3), "t.jsonl:3: torn", id="tape-error"
        ),
        pytest.param(
            ValueError("max_steps must be a number"), "max_steps must be a number", id="value-error"
        ),
        pytest.param(
            FileNotFoundError(2, "No such file or directory"),
            "[Errno 2] No such file or directory",
            id="os-error",
        ),
        pytest.param(
            RecursionError("maximum recursion depth exceeded"),
            "t.jsonl: a value is nested deeper than tracetape reads",
            id="recursion",
        ),
    ],
)
def test_an_error_is_one_line_and_exit_2(error: BaseException, said: str) -> None:
    """No traceback: ``tracetape: error:`` and what went wrong (a recursion names the input
    and how to leave the line out)."""
    result = CliRunner().invoke(_command(error), ["t.jsonl"])
    assert result.exit_code == EXIT_BAD_INPUT
    (line,) = result.output.splitlines()
    assert line.startswith(f"tracetape: error: {said}")
    if isinstance(error, RecursionError):
        assert "--skip-bad-lines" in line


def test_a_value_orjson_cannot_write_is_named_with_the_input() -> None:
    """orjson refuses a value nested past its 255 levels (a recursion, said as one) or of a
    type it does not write (its own words, with the input)."""
    deep: Any = []
    for _ in range(300):
        deep = [deep]
    errors = []
    for value in (deep, {1j: 1}):
        try:
            orjson.dumps(value)
        except orjson.JSONEncodeError as exc:
            errors.append(exc)
    too_deep, odd = (CliRunner().invoke(_command(e), ["t.jsonl"]) for e in errors)
    assert too_deep.exit_code == odd.exit_code == EXIT_BAD_INPUT
    assert "t.jsonl: a value is nested deeper than tracetape reads" in too_deep.output
    assert odd.output.startswith("tracetape: error: t.jsonl: ") and "nested" not in odd.output


def test_an_error_of_another_kind_is_not_hidden() -> None:
    """A bug (any other exception) keeps its traceback: it is not the input's fault."""
    result = CliRunner().invoke(_command(KeyError("bug")), ["t.jsonl"])
    assert isinstance(result.exception, KeyError)


def test_json_is_indented_keeps_non_ascii_and_writes_any_value(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Indented by two, non-ASCII as it is, and a value JSON has no type for as its text."""
    echo_json({"path": Path("café/t.jsonl"), "n": 1})
    assert capsys.readouterr().out == '{\n  "path": "café/t.jsonl",\n  "n": 1\n}\n'
