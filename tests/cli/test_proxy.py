"""``tracetape proxy`` as users run it: a process that prints where it is and what to set,
serves until SIGTERM, seals the cassette, and exits 3 after a replay that missed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import openai
import pytest

from tests.integrations.fakeserver import FakeServer
from tracetape import read_cassette

TRACETAPE = str(Path(sys.executable).with_name("tracetape"))


@pytest.fixture
def fake() -> Iterator[FakeServer]:
    srv = FakeServer().start()
    try:
        yield srv
    finally:
        srv.stop()


@contextmanager
def proxy(tmp_path: Path, *args: str) -> Iterator[tuple[dict[str, str], subprocess.Popen[str]]]:
    """Start ``tracetape proxy ARGS``; yields the variables it printed and the process."""
    process = subprocess.Popen(
        [TRACETAPE, "proxy", "--tape", "run.jsonl", *args],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    env: dict[str, str] = {}
    for line in process.stdout:  # the variables come first, one a line
        name, _, value = line.strip().removeprefix("export ").partition("=")
        env[name] = value
        if name == "OLLAMA_HOST":  # the last one
            break
    try:
        yield env, process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
        assert process.stderr is not None
        with process.stdout, process.stderr:  # no pipe is left open
            SAID[process.pid] = process.stderr.read()


# What each proxy process said on stderr, read when it ended.
SAID: dict[int, str] = {}


def _err(process: subprocess.Popen[str]) -> str:
    return SAID.pop(process.pid)


def _ask(env: dict[str, str], text: str) -> str:
    client = openai.OpenAI(base_url=env["OPENAI_BASE_URL"], api_key="sk-local", max_retries=0)
    answer = client.chat.completions.create(
        model="gpt-test", messages=[{"role": "user", "content": text}]
    )
    return str(answer.choices[0].message.tool_calls or answer.choices[0].message.content)


def test_record_then_replay_then_a_miss_exits_3(tmp_path: Path, fake: FakeServer) -> None:
    with proxy(tmp_path, "--mode", "record", "--upstream", f"openai={fake.base_url}") as (
        env,
        process,
    ):
        assert env["OPENAI_BASE_URL"].endswith("/v1") and "ANTHROPIC_BASE_URL" in env
        live = _ask(env, "sum 1 to 2")
    assert process.returncode == 0
    assert "recorded 1 decision(s); 0 miss(es)" in _err(process)
    assert read_cassette(tmp_path / "run.jsonl").ended == "completed"
    fake.stop()
    with proxy(tmp_path, "--mode", "replay") as (env, process):
        assert _ask(env, "sum 1 to 2") == live
    assert process.returncode == 0
    with (
        proxy(tmp_path, "--mode", "replay") as (env, process),
        pytest.raises(openai.BadRequestError, match="tracetape replay miss"),
    ):
        _ask(env, "sum 1 to 3")
    assert process.returncode == 3
    err = _err(process)
    assert "tracetape proxy: replay miss at POST /v1/chat/completions" in err
    assert "1 miss(es)" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--host", "0.0.0.0"], "binding 0.0.0.0 (beyond loopback) needs --token"),
        (["--host", "0.0.0.0", "--token", "short"], "needs --token of 16 characters"),
        (["--upstream", "openai"], "--upstream 'openai': use PROVIDER=URL"),
        (["--upstream", "openai=ftp://x"], "'ftp://x' is not an http(s) URL"),
        (["--mode", "replay"], "no such cassette to replay"),
    ],
)
def test_it_refuses_to_start_with_exit_2_saying_why(
    tmp_path: Path, args: list[str], message: str
) -> None:
    done = subprocess.run(
        [TRACETAPE, "proxy", "--tape", "run.jsonl", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "TRACETAPE_PROXY_TOKEN": ""},
    )
    assert done.returncode == 2
    assert message in done.stderr


def test_a_port_in_use_exits_2_before_any_recording_begins(tmp_path: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [TRACETAPE, "proxy", "--tape", "run.jsonl", "--mode", "record", "--port", str(port)],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert done.returncode == 2
    assert f"cannot listen on 127.0.0.1:{port}" in done.stderr
    assert list(tmp_path.iterdir()) == [], "no cassette nor .partial begun"
