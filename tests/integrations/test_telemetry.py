"""Telemetry hosts: never decisions. In record a request to one goes through unrecorded, in
replay it is answered at once with an empty success, whatever the hook level, and both are
counted; ``[tool.tracetape.telemetry]`` adds and removes hosts."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
import requests

import tracetape
from tracetape import ConfigError, Tape, read_cassette
from tracetape.integrations import unpatch_all
from tracetape.integrations.network import block_network
from tracetape.integrations.state import state_of
from tracetape.integrations.telemetry import answer, hosts, is_telemetry

from .test_aiohttp_client import Server


def _forget() -> None:
    hosts.cache_clear()
    is_telemetry.cache_clear()


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A project whose ``[tool.tracetape.telemetry]`` counts the local server's host as a
    telemetry host (the tests are offline: the real hosts are not reached)."""
    (tmp_path / "pyproject.toml").write_text(
        '[tool.tracetape.telemetry]\nadd = ["127.0.0.1"]\nremove = ["posthog.com"]\n'
    )
    monkeypatch.chdir(tmp_path)
    _forget()
    yield tmp_path
    _forget()
    unpatch_all()


@pytest.fixture
def server() -> Iterator[Server]:
    srv = Server()
    try:
        yield srv
    finally:
        srv.stop()


@pytest.mark.parametrize(
    ("host", "telemetry"),
    [
        ("telemetry.crewai.com", True),
        ("os-api.agno.com", True),
        ("us.i.posthog.com", True),
        ("o4507.ingest.us.sentry.io", True),
        ("api.smith.langchain.com", True),
        ("TELEMETRY.CREWAI.COM.", True),
        ("api.openai.com", False),
        ("notposthog.com", False),
        ("sentry.io", False),
        ("crewai.com", False),
    ],
)
def test_the_table_matches_a_host_or_a_subdomain_of_one(host: str, telemetry: bool) -> None:
    assert is_telemetry(host) is telemetry


def test_the_project_adds_and_removes_hosts(project: Path) -> None:
    assert is_telemetry("127.0.0.1") and not is_telemetry("us.i.posthog.com")
    assert is_telemetry("telemetry.crewai.com")


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('add = "stats.example"', "add must be a list of host names, not 'stats.example'"),
        ("remove = [1]", "remove must be a list of host names, not [1]"),
        ('hosts = ["a"]', "has no field 'hosts'; use 'add' or 'remove'"),
    ],
)
def test_a_wrong_table_names_the_file_and_field(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, table: str, message: str
) -> None:
    (tmp_path / "pyproject.toml").write_text(f"[tool.tracetape.telemetry]\n{table}\n")
    monkeypatch.chdir(tmp_path)
    _forget()
    try:
        with pytest.raises(ConfigError) as error:
            hosts()
    finally:
        _forget()
    assert str(tmp_path / "pyproject.toml") in str(error.value)
    assert message in str(error.value)


def _program(url: str) -> Any:
    """An agent's telemetry, by requests (urllib3) and by httpx2, then one real decision."""
    sent = requests.post(f"{url}/echo", json={"event": "run_started", "id": "f3e1"}, timeout=5)
    with httpx2.Client() as client:
        again = client.post(f"{url}/echo", json={"event": "run_ended", "id": "9c2a"})
    return sent.status_code, again.status_code, tracetape.env("HOME")


@pytest.mark.parametrize("hook", ["patch_sdks", "patch_http"])
def test_telemetry_is_unrecorded_in_record_and_answered_in_replay(
    project: Path, server: Server, hook: str
) -> None:
    path = project / "run.jsonl"
    with Tape(path, mode="record") as tape, getattr(tracetape, hook)(tape):
        assert _program(server.url)[:2] == (200, 200)
    assert server.requests == ["/echo", "/echo"], "record sends telemetry as it is"
    assert state_of(tape).telemetry == {"127.0.0.1:" + server.url.rsplit(":", 1)[1]: 2}
    assert [r.kind for r in read_cassette(path).records] == ["env"]
    server.stop()
    with (
        block_network() as guard,
        Tape(path, mode="replay") as tape,
        getattr(tracetape, hook)(tape),
    ):
        assert _program(server.url)[:2] == (200, 200)
    assert guard.attempts == []
    assert sum(state_of(tape).telemetry.values()) == 2


def test_a_replayed_answer_is_an_empty_success_of_the_requests_kind() -> None:
    assert answer("application/json") == {"status": 200, "body": {}}
    assert answer("application/x-protobuf")["base64"] == ""
