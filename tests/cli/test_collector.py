"""``tracetape serve`` and ``tracetape push`` on the command line: a file pushed in batches and
again, a bad database, a busy port, a missing extra said in one line."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
from pathlib import Path

import pytest

from tests.collector.conftest import TOKEN
from tests.collector.test_app import seed_line
from tests.collector.test_server import PY, serving, stored_counts
from tests.span.test_model import record_agent
from tracetape.formats.cassette import run_id_of


def test_push_ships_a_file_in_batches_and_again_stores_nothing_twice(
    tmp_path: Path,
) -> None:
    """The CLI: batches, a summary, --format json; pushing again finds every batch stored."""
    db_url = f"sqlite:///{tmp_path / 'c.db'}"
    trace = tmp_path / "trace.jsonl"
    trace.write_text("\n".join(seed_line("r1", i, q=str(i % 5)) for i in range(1, 251)) + "\n")
    cassette = record_agent(tmp_path / "agent.jsonl")
    with serving(db_url) as url:
        env = {**os.environ, "TRACETAPE_TOKEN": TOKEN, "TRACETAPE_URL": url}
        cmd = [PY, "-m", "tracetape", "push", str(trace), str(cassette), "--batch", "100"]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr
        assert f"{trace}: 250 new, 0 already stored, from 250 line(s) in 3 batch(es)" in done.stdout
        assert f"{cassette}: 7 new, 0 already stored, from 9 line(s) in 1 batch(es)" in done.stdout
        assert f"runs: {run_id_of(cassette)} " in done.stdout
        again = subprocess.run(
            [*cmd, "--format", "json"], env=env, capture_output=True, text=True, check=False
        )
        data = json.loads(again.stdout)
        assert [(d["stored"], d["known"], d["duplicate_batches"]) for d in data] == [
            (0, 250, 3), (0, 7, 1)
        ]  # fmt: skip
        wrong = subprocess.run(cmd, env={**env, "TRACETAPE_TOKEN": "nope"}, capture_output=True,
                               text=True, check=False)  # fmt: skip
        assert wrong.returncode == 2 and "HTTP 401" in wrong.stderr
    assert stored_counts(db_url) == (257, 2)


@pytest.mark.parametrize(
    ("url", "message"),
    [
        pytest.param("not a url", "is not a database URL", id="garbage"),
        pytest.param("mysql://x/y", "tracetape stores in SQLite or PostgreSQL", id="mysql"),
        pytest.param(
            "postgresql+psycopg://nobody@127.0.0.1:{refused}/x", "cannot reach the database",
            id="down",
        ),
    ],
)  # fmt: skip
def test_serve_names_a_bad_database(url: str, message: str, refused_port: int) -> None:
    done = subprocess.run(
        [PY, "-m", "tracetape", "serve", "--db", url.format(refused=refused_port),
         "--port", "0"],
        capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2 and message in done.stderr, done.stderr


# Run tracetape's command line with these modules made unimportable, as on an install without
# the extra that brings them.
_WITHOUT = """
import sys
for name in {blocked!r}:
    sys.modules[name] = None
from tracetape.cli import main
main()
"""


def cli_without(blocked: list[str], *args: str) -> subprocess.CompletedProcess[str]:
    """``tracetape ARGS`` with the modules ``blocked`` unimportable."""
    code = _WITHOUT.format(blocked=blocked)
    return subprocess.run([PY, "-c", code, *args], capture_output=True, text=True, check=False)


@pytest.mark.parametrize(
    ("blocked", "command", "extra"),
    [(["fastapi"], "serve", "server"), (["sqlalchemy"], "serve", "server"),
     (["httpx"], "push", "push")],
)  # fmt: skip
def test_a_missing_extra_is_one_line_with_an_install_command_that_works(
    tmp_path: Path, blocked: list[str], command: str, extra: str
) -> None:
    args = [command] if command == "serve" else [command, str(tmp_path / "t.jsonl")]
    done = cli_without(blocked, *args)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr
    found = re.search(r"pip install '([^']+)\[(\w+)\]'", lines[0])
    assert found and found[2] == extra
    # the path it names is this checkout, which pip can install with that extra
    assert (Path(found[1]) / "pyproject.toml").is_file()
    assert f"{extra} = [" in (Path(found[1]) / "pyproject.toml").read_text()


def test_serve_on_a_busy_port_says_so_before_it_claims_to_run(tmp_path: Path) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        done = subprocess.run(
            [PY, "-m", "tracetape", "serve", "--db", f"sqlite:///{tmp_path / 'c.db'}",
             "--port", str(port)], env=_no_token(), capture_output=True, text=True,
            check=False, timeout=60,
        )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert f"cannot listen on 127.0.0.1:{port}" in done.stderr and "--port" in done.stderr
    assert "tracetape collector on" not in done.stderr


def _no_token() -> dict[str, str]:
    env = {**os.environ}
    env.pop("TRACETAPE_TOKEN", None)
    return env
