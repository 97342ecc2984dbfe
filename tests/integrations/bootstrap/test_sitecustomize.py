"""The bootstrap of ``tracetape run`` (``bootstrap/sitecustomize.py``): the program's Python
runs the sitecustomize the environment had, then starts the tape; a Python that cannot import
tracetape stops, saying so; anywhere else, importing it does nothing."""

from __future__ import annotations

import os
import subprocess
import textwrap
import venv
from pathlib import Path

from tests.integrations.test_runner import PYTHON, TRACETAPE
from tracetape.integrations.runner import BOOTSTRAP_DIR as BOOTSTRAP


def test_python_m_module_and_existing_sitecustomize(tmp_path: Path) -> None:
    """``python -m pkg`` works and a sitecustomize already on the path still runs."""
    (tmp_path / "agentpkg").mkdir()
    (tmp_path / "agentpkg" / "__init__.py").write_text("")
    (tmp_path / "agentpkg" / "__main__.py").write_text(
        textwrap.dedent("""
        import os, tracetape
        print(os.environ.get("SITE_RAN"), tracetape.current_tape().mode)
    """)
    )
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import os\nos.environ['SITE_RAN'] = 'yes'\n")
    env = {**os.environ, "PYTHONPATH": str(site)}
    done = subprocess.run(
        [
            TRACETAPE,
            "run",
            "--tape",
            "t.jsonl",
            "--mode",
            "auto",
            "--hook",
            "none",
            "--",
            PYTHON,
            "-m",
            "agentpkg",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "yes record\n"


def test_a_python_that_cannot_import_tracetape_stops_and_says_so(tmp_path: Path) -> None:
    """The program's Python (here a fresh venv's, without tracetape) exits 2 before the
    program runs, naming itself and what to install; the program never runs untaped."""
    venv.create(tmp_path / "bare", with_pip=False)
    bare = tmp_path / "bare" / "bin" / "python"
    program = tmp_path / "agent.py"
    program.write_text("print('the program ran')\n")
    done = subprocess.run(
        [TRACETAPE, "run", "--tape", "t.jsonl", "--mode", "record", "--hook", "none", "--",
         str(bare), str(program)],
        cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "the program ran" not in done.stdout
    assert f"this Python ({bare}) cannot import tracetape" in done.stderr
    assert "install tracetape in the environment that runs the program" in done.stderr


def test_importing_it_outside_tracetape_run_does_nothing(tmp_path: Path) -> None:
    """Without the variable ``tracetape run`` sets, the module starts no tape, chains to no
    other sitecustomize and imports nothing of tracetape (a doctest collector may import it)."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import os\nos.environ['SITE_RAN'] = 'yes'\n")
    code = textwrap.dedent(f"""
        import os, runpy, sys
        runpy.run_path({str(BOOTSTRAP / "sitecustomize.py")!r})
        ours = sorted(m for m in sys.modules if m.startswith("tracetape"))
        print(os.environ.get("SITE_RAN"), ours)
    """)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRACETAPE_")}
    env["PYTHONPATH"] = str(site)  # on the path, but -S imports no sitecustomize: a chain would
    done = subprocess.run(
        [PYTHON, "-S", "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert done.stdout == "None []\n"


def test_the_program_starts_with_the_collector_as_it_was(tmp_path: Path) -> None:
    """The cyclic garbage collector, paused while the tape starts, is on again when the
    program's first line runs."""
    (tmp_path / "agent.py").write_text("import gc\nprint(gc.isenabled())\n")
    done = subprocess.run(
        [TRACETAPE, "run", "--tape", "t.jsonl", "--mode", "record", "--", PYTHON, "agent.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == "True\n"
