"""`Tape(..., push=URL)`: a recording also goes to the collector, live, and a collector that
is down never fails the agent: what could not be sent stays in the cassette and is reported."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import httpx
import pytest
from examples.agent import ScriptedModel, run

from tests.collector.conftest import TOKEN
from tests.collector.test_server import serving
from tests.span.test_model import TASK
from tracetape import FileStore, Tape, TapeWarning, read_cassette
from tracetape.stores.push import PushingStore


def test_a_recording_is_pushed_live(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every record reaches the collector under the cassette's run; the cassette is whole."""
    monkeypatch.setenv("TRACETAPE_TOKEN", TOKEN)
    with serving(f"sqlite:///{tmp_path / 'c.db'}") as url:
        path = tmp_path / "live-1.jsonl"
        with warnings.catch_warnings():
            warnings.simplefilter("error", TapeWarning)
            with Tape(path, mode="record", push=url) as tape:
                run(TASK, tape, ScriptedModel(latency_s=0))
        assert isinstance(tape.store, PushingStore)
        assert (tape.store.pushed, tape.store.unsent) == (7, 0)
        run_id = read_cassette(path).header["run_id"]  # type: ignore[index]
        assert run_id.startswith("live-1@")
        events = httpx.get(
            f"{url}/v1/runs/{run_id}", headers={"Authorization": f"Bearer {TOKEN}"}
        ).json()["events"]
    local = read_cassette(path).records
    assert [(e["kind"], e["key"], e["step"]) for e in events] == [
        (r.kind, r.key, r.step) for r in local
    ]
    assert json.dumps([e["out"] for e in events]) == json.dumps([r.out for r in local])


def test_a_collector_that_is_down_never_fails_the_agent(tmp_path: Path, refused_port: int) -> None:
    """Connection refused: the run completes, the cassette is whole, one warning counts what
    was not pushed and says how to send it."""
    path = tmp_path / "offline.jsonl"
    url = f"http://127.0.0.1:{refused_port}"
    with (
        pytest.warns(TapeWarning, match=r"7 record\(s\) were not pushed") as caught,
        Tape(path, mode="record", push=url) as tape,
    ):
        answer = run(TASK, tape, ScriptedModel(latency_s=0))
    assert answer.startswith("#412")
    assert len(read_cassette(path).records) == 7
    (message,) = [str(w.message) for w in caught if issubclass(w.category, TapeWarning)]
    assert "cannot reach" in message and f"tracetape push {path} --url {url}" in message


def test_a_full_queue_drops_from_the_queue_only(tmp_path: Path, refused_port: int) -> None:
    """With room for one record and no collector, appending never blocks; the store counts
    the rest as unsent and keeps them all locally."""
    store = PushingStore(FileStore(tmp_path / "q.jsonl"), f"http://127.0.0.1:{refused_port}",
                         queue_size=1, flush_s=0.5)  # fmt: skip
    with (
        pytest.warns(TapeWarning, match=r"record\(s\) were not pushed"),
        Tape(store, mode="record") as tape,
    ):
        for i in range(50):
            tape.call("tool", {"name": "t", "args": {"i": i}, "step": 1}, lambda: i)
    assert store.pushed == 0 and store.unsent == 50
    assert len(read_cassette(tmp_path / "q.jsonl").records) == 50


def test_replay_does_not_push(tmp_path: Path, refused_port: int) -> None:
    path = tmp_path / "r.jsonl"
    with Tape(path, mode="record") as tape:
        tape.call("tool", {"name": "t", "args": {}, "step": 1}, lambda: 1)
    with Tape(path, mode="replay", push=f"http://127.0.0.1:{refused_port}") as tape:
        assert not isinstance(tape.store, PushingStore)
        tape.call("tool", {"name": "t", "args": {}, "step": 1}, lambda: 2)


def test_a_wrong_token_is_named_in_the_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A collector that answers 401: the warning says the token is the problem."""
    monkeypatch.setenv("TRACETAPE_TOKEN", "not-the-collector-token-0123")
    with (
        serving(f"sqlite:///{tmp_path / 'c.db'}") as url,
        pytest.warns(TapeWarning, match="needs its token.*TRACETAPE_TOKEN"),
        Tape(tmp_path / "t.jsonl", mode="record", push=url) as tape,
    ):
        run(TASK, tape, ScriptedModel(latency_s=0))
