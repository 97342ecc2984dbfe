"""The README and the documentation pages in docs/ are a specification: their examples run,
every command is documented, and the pages build as a site with no broken link."""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest
import yaml
from markdown.extensions.toc import slugify

from tracetape.cli import COMMANDS, main

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
BLOCK = re.compile(r"```(\w+)\n(.*?)```(?:\s*\n(prints)\s*\n\s*```text\n(.*?)```)?", re.S)
HEADING = re.compile(r"^#{1,6} (.+)$", re.M)


def pages() -> list[Path]:
    """The documentation pages in the order mkdocs.yml's nav reads them."""
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    return [DOCS / next(iter(entry.values())) for entry in config["nav"]]


def documentation() -> str:
    """The README and every page: where a command, an option or a table may be documented."""
    return "\n".join(path.read_text(encoding="utf-8") for path in [README, *pages()])


def blocks(path: Path = README) -> list[tuple[str, str, str | None]]:
    text = path.read_text(encoding="utf-8")
    return [(m[1], m[2], m[4] if m[3] else None) for m in BLOCK.finditer(text)]


def anchors(path: Path) -> set[str]:
    """The ids MkDocs gives a page's headings (code blocks' comment lines left out)."""
    prose = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
    return {slugify(title.replace("`", ""), "-") for title in HEADING.findall(prose)}


def test_every_command_is_documented() -> None:
    """Each `tracetape` command is documented in the README or a page of docs/."""
    text = documentation()
    missing = [name for name in COMMANDS if f"tracetape {name}" not in text]
    assert missing == []


def test_the_readme_starts_with_the_two_command_quick_start() -> None:
    """The quick start is exactly `make demo` and `make test`."""
    first = next(body for lang, body, _ in blocks() if lang == "console")
    assert first.split() == ["make", "demo", "make", "test"]


def test_the_readme_is_where_users_start() -> None:
    """The README stays short: what tracetape is, install, the quick starts (``tracetape run``,
    the pytest plugin, diff two runs), the clients it works with, what it promises and where
    that stops, and where to go next, each link to an existing page and heading of docs/."""
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250
    sections = HEADING.findall(re.sub(r"```.*?```", "", text, flags=re.S))
    assert sections == [
        "tracetape",
        "Quick start",
        "Install",
        "Tape your own program: `tracetape run`",
        "Tape your tests: the pytest plugin",
        "Diff two runs",
        "Any language: the proxy",
        "What it promises, and where that stops",
        "Where to go next",
    ]
    links = re.findall(r"\]\(docs/([^)#]+)(?:#([^)]+))?\)", text)
    assert {page for page, _ in links} >= {path.name for path in pages()}
    for page, anchor in links:
        assert (DOCS / page).is_file(), page
        assert not anchor or anchor in anchors(DOCS / page), f"docs/{page}#{anchor}"


def test_the_nav_holds_every_page() -> None:
    """mkdocs.yml's nav lists every page of docs/ once."""
    listed = [path.name for path in pages()]
    assert sorted(listed) == sorted(path.name for path in DOCS.glob("*.md"))


def test_the_collector_page_shows_every_screenshot() -> None:
    """The collector's page shows each screenshot ``python -m examples.screenshots`` draws
    into docs/img (MkDocs checks the paths), and the README links to that page."""
    text = (DOCS / "collector.md").read_text(encoding="utf-8")
    shots = sorted(path.name for path in (DOCS / "img").glob("*.png"))
    assert len(shots) == 6
    assert [name for name in shots if f"](img/{name})" not in text] == []
    assert "](docs/collector.md)" in README.read_text(encoding="utf-8")


def test_the_docs_build_strict(tmp_path: Path) -> None:
    """``mkdocs build --strict`` builds the site with no warning: every link and anchor found
    (offline: the theme loads no web font, and no plugin fetches)."""
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert built.returncode == 0, built.stderr
    assert (tmp_path / "collector" / "index.html").is_file()


def test_readme_examples_run_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's python blocks run in order (their `prints` blocks must match) and its
    `$ tracetape` lines exit as documented (0 unless marked `# exit N`), printing the lines
    shown under them."""
    monkeypatch.chdir(tmp_path)
    assert _run_examples(README, {"__name__": "readme"}) >= 5


# The push example records with no collector listening (unless one runs on this machine):
# the tape says what it could not send, as the collector's page describes.
@pytest.mark.filterwarnings("ignore:.*were not pushed to:tracetape.errors.TapeWarning")
def test_docs_examples_run_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each page's examples run as the README's do, each page's python blocks in a namespace
    of their own; the pages share one folder, in the nav's order (the command line's page
    shows the cassette the record-and-replay page wrote)."""
    monkeypatch.chdir(tmp_path)
    ran = {path.name: _run_examples(path, {"__name__": "docs"}) for path in pages()}
    assert sum(ran.values()) >= 60, ran


def _run_examples(path: Path, namespace: dict[str, object]) -> int:
    ran = 0
    for number, (lang, body, expected) in enumerate(blocks(path), 1):
        where = f"{path.name}, block {number}"
        if lang == "python":
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                exec(compile(body, str(path), "exec"), namespace)
            if expected is not None:
                assert out.getvalue() == expected, where
            ran += 1
        elif lang == "console" and "$ " in body:
            for command, shown in _commands(body):
                args = shlex.split(command)
                code = 0
                if "# exit" in command:
                    code = int(command.split("# exit")[1].split()[0])
                    args = shlex.split(command.split("#")[0])
                assert args[0] == "tracetape", where
                done = subprocess.run(
                    [sys.executable, "-m", "tracetape", *args[1:]],
                    capture_output=True,
                    text=True,
                    check=False,
                )
                assert done.returncode == code, (where, command, done.stdout, done.stderr)
                for line in shown:
                    assert line in done.stdout + done.stderr, (where, command)
                ran += 1
    return ran


def _commands(body: str) -> list[tuple[str, list[str]]]:
    out: list[tuple[str, list[str]]] = []
    for line in body.splitlines():
        if line.startswith("$ "):
            out.append((line[2:], []))
        elif out and line.strip():
            out[-1][1].append(line)
    return out


def test_the_rule_table_is_the_rules() -> None:
    """The documented classification table is the rule table the CLI classifies with."""
    from tracetape.analysis.rules import rules_markdown

    assert rules_markdown() in (DOCS / "diff.md").read_text(encoding="utf-8")


def test_every_command_help_is_whole_and_its_options_are_documented() -> None:
    """Each command's ``--help`` loads, no summary is cut mid-sentence in ``tracetape --help``,
    and every option a command takes is named in the README or the pages."""
    from click.testing import CliRunner

    text = documentation()
    overview = CliRunner().invoke(main, ["--help"], terminal_width=80).output
    listed = overview.split("Commands:")[1].splitlines()
    assert listed and not [line for line in listed if line.rstrip().endswith("...")]
    for name in COMMANDS:
        command = main.get_command(click.Context(main), name)
        assert command is not None
        assert CliRunner().invoke(main, [name, "--help"]).exit_code == 0
        options = [o for p in command.params for o in p.opts if o.startswith("--")]
        missing = [o for o in options if o not in text and o != "--help"]
        assert missing == [], f"tracetape {name}: {missing} not documented"


def test_exit_codes_are_one_table_in_the_docs_and_every_help() -> None:
    """The command line page's exit-code table is ``EXIT_CODES``, and each command's
    ``--help`` ends with its row (CI gates depend on these codes)."""
    from click.testing import CliRunner

    from tracetape.cli import EXIT_CODES, exit_codes_help, exit_codes_markdown

    assert exit_codes_markdown() in (DOCS / "cli.md").read_text(encoding="utf-8")
    assert sorted(EXIT_CODES) == sorted(COMMANDS)
    for name in COMMANDS:
        shown = " ".join(CliRunner().invoke(main, [name, "--help"]).output.split())
        assert shown.endswith(" ".join(exit_codes_help(name).split())), name


def test_option_choices_in_the_docs_are_the_clis() -> None:
    """Where the README or a page spells an option's choices (``--mode replay|record|...``),
    they are exactly the choices a command accepts (``--format`` differs between commands)."""
    text = documentation().replace("\\|", "|")
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
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    installs = [line for line in plan if "pip install" in line and "-e '.[" in line]
    assert len(installs) == 4
    assert all(f"-m pip install{progress} -e '.[" in line for line in installs), installs
    assert sum(line.startswith('echo "== installing tracetape') for line in plan) == 4
