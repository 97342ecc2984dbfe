"""README.md is a specification: its examples run, and every command is documented."""

from __future__ import annotations

import contextlib
import io
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest

from tracetape.cli import COMMANDS, main

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCK = re.compile(r"```(\w+)\n(.*?)```(?:\s*\n(prints)\s*\n\s*```text\n(.*?)```)?", re.S)


def blocks() -> list[tuple[str, str, str | None]]:
    text = README.read_text(encoding="utf-8")
    return [(m[1], m[2], m[4] if m[3] else None) for m in BLOCK.finditer(text)]


def test_every_command_is_documented_in_the_readme() -> None:
    """Each `tracetape` command has a section in the README."""
    text = README.read_text(encoding="utf-8")
    missing = [name for name in COMMANDS if f"tracetape {name}" not in text]
    assert missing == []


def test_the_readme_starts_with_the_two_command_quick_start() -> None:
    """The quick start is exactly `make demo` and `make test`."""
    first = next(body for lang, body, _ in blocks() if lang == "console")
    assert first.split() == ["make", "demo", "make", "test"]


# The push example records with no collector listening (unless one runs on this machine):
# the tape says what it could not send, as the README describes.
@pytest.mark.filterwarnings("ignore:.*were not pushed to:tracetape.errors.TapeWarning")
def test_readme_examples_run_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Python blocks run in order (their `prints` blocks must match) and `$ tracetape` lines exit
    as documented (0 unless marked `# exit N`), printing the lines shown under them."""
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "readme"}
    ran = 0
    for lang, body, expected in blocks():
        if lang == "python":
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                exec(compile(body, str(README), "exec"), namespace)
            if expected is not None:
                assert out.getvalue() == expected
            ran += 1
        elif lang == "console" and "$ " in body:
            for command, shown in _commands(body):
                args = shlex.split(command)
                code = 0
                if "# exit" in command:
                    code = int(command.split("# exit")[1].split()[0])
                    args = shlex.split(command.split("#")[0])
                assert args[0] == "tracetape"
                done = subprocess.run(
                    [sys.executable, "-m", "tracetape", *args[1:]],
                    capture_output=True,
                    text=True,
                    check=False,
                )
                assert done.returncode == code, (command, done.stdout, done.stderr)
                for line in shown:
                    assert line in done.stdout + done.stderr
                ran += 1
    assert ran >= 5


def _commands(body: str) -> list[tuple[str, list[str]]]:
    out: list[tuple[str, list[str]]] = []
    for line in body.splitlines():
        if line.startswith("$ "):
            out.append((line[2:], []))
        elif out and line.strip():
            out[-1][1].append(line)
    return out


def test_the_rule_table_is_the_rules() -> None:
    """The README's classification table is the rule table the CLI classifies with."""
    from tracetape.analysis.rules import rules_markdown

    assert rules_markdown() in README.read_text(encoding="utf-8")


def test_every_command_help_is_whole_and_its_options_are_documented() -> None:
    """Each command's ``--help`` loads, no summary is cut mid-sentence in ``tracetape --help``,
    and every option a command takes is named in the README."""
    from click.testing import CliRunner

    text = README.read_text(encoding="utf-8")
    overview = CliRunner().invoke(main, ["--help"], terminal_width=80).output
    listed = overview.split("Commands:")[1].splitlines()
    assert listed and not [line for line in listed if line.rstrip().endswith("...")]
    for name in COMMANDS:
        command = main.get_command(click.Context(main), name)
        assert command is not None
        assert CliRunner().invoke(main, [name, "--help"]).exit_code == 0
        options = [o for p in command.params for o in p.opts if o.startswith("--")]
        missing = [o for o in options if o not in text and o != "--help"]
        assert missing == [], f"tracetape {name}: {missing} not in the README"


def test_exit_codes_are_one_table_in_the_readme_and_every_help() -> None:
    """The README's exit-code table is ``EXIT_CODES``, and each command's ``--help`` ends with
    its row (CI gates depend on these codes)."""
    from click.testing import CliRunner

    from tracetape.cli import EXIT_CODES, exit_codes_help, exit_codes_markdown

    assert exit_codes_markdown() in README.read_text(encoding="utf-8")
    assert sorted(EXIT_CODES) == sorted(COMMANDS)
    for name in COMMANDS:
        shown = " ".join(CliRunner().invoke(main, [name, "--help"]).output.split())
        assert shown.endswith(" ".join(exit_codes_help(name).split())), name


def test_option_choices_in_the_readme_are_the_clis() -> None:
    """Where the README spells an option's choices (``--mode replay|record|...``), they are
    exactly the choices a command accepts (``--format`` differs between commands)."""
    text = README.read_text(encoding="utf-8").replace("\\|", "|")
    choices: dict[str, list[set[str]]] = {}
    for name in COMMANDS:
        command = main.get_command(click.Context(main), name)
        assert command is not None
        for param in command.params:
            if isinstance(param.type, click.Choice):
                for opt in param.opts:
                    choices.setdefault(opt, []).append(set(map(str, param.type.choices)))
    spelled = re.findall(r"`(--[\w-]+) (\w+(?:\|\w+)+)`", text)
    assert spelled
    for opt, values in spelled:
        assert set(values.split("|")) in choices.get(opt, []), (opt, values)


@pytest.mark.parametrize(
    ("ci", "progress"),
    [pytest.param("", "", id="terminal"), pytest.param("true", " --progress-bar off", id="ci")],
)
def test_make_test_says_what_it_installs(ci: str, progress: str) -> None:
    """Each environment ``make test`` installs is announced and pip is not silenced (its
    progress bars are left out under CI)."""
    if shutil.which("make") is None:
        pytest.skip("no make here")
    stamps = [".venv/.installed-dev", ".venv-instructor/.installed"]
    stamps += [".venv-oldest-sdks/.installed", ".venv-strands/.installed"]
    plan = subprocess.run(
        ["make", "-n", "-B", *stamps, f"CI={ci}"],
        cwd=README.parent,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    installs = [line for line in plan if "pip install" in line and "-e '.[" in line]
    assert len(installs) == 4
    assert all(f"-m pip install{progress} -e '.[" in line for line in installs), installs
    assert sum(line.startswith('echo "== installing tracetape') for line in plan) == 4
