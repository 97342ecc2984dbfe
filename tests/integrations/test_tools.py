"""``@tool`` and ``env`` (on ``tape=`` or the current tape): tool calls and environment reads."""

from __future__ import annotations

import asyncio
import json
import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tracetape
from tracetape import IrreversibleEffectError, ReplayMiss, Tape, read_cassette
from tracetape.integrations.state import state_of
from tracetape.integrations.tools import env, tool


class QuotaError(Exception):
    """A tool error class importable by replay."""


def test_tool_replays_recorded_output_without_running(tmp_path: Path) -> None:
    """A replayed tool returns the recorded output and never runs the function."""
    calls: list[str] = []

    @tool
    def weather(city: str) -> dict[str, Any]:
        calls.append(city)
        return {"city": city, "temp": 21}

    path = tmp_path / "run.jsonl"
    with Tape(path, mode="record"):
        assert weather("Oslo") == {"city": "Oslo", "temp": 21}
    with Tape(path, mode="replay"):
        assert weather("Oslo") == {"city": "Oslo", "temp": 21}
    assert calls == ["Oslo"]


def test_tool_key_payload_is_name_args_step(tmp_path: Path) -> None:
    """The recorded input is ``{"name", "args", "step"}``, defaults applied, ``self`` left out."""

    class Agent:
        @tool(effect="write")
        def save(self, text: str, tags: tuple[str, ...] = ("a",)) -> str:
            return "ok"

    path = tmp_path / "run.jsonl"
    with Tape(path, mode="record") as tape:
        state_of(tape).steps.saw(3)  # a model call of step 3 was made
        Agent().save("hi")
    (rec,) = read_cassette(path).records
    assert rec.kind == "tool"
    assert rec.effect == "write"
    assert rec.step == 3
    assert rec.input == {"name": "save", "args": {"text": "hi", "tags": ["a"]}, "step": 3}


def test_positional_and_keyword_calls_are_the_same_decision(tmp_path: Path) -> None:
    """Calling a tool positionally or by keyword, defaults spelled or not, hits one recording."""

    @tool
    def search(query: str, page: int = 1) -> list[str]:
        return [f"{query}:{page}"]

    path = tmp_path / "run.jsonl"
    with Tape(path, mode="record"):
        search("cats")
    with Tape(path, mode="replay"):
        assert search(page=1, query="cats") == ["cats:1"]


@settings(max_examples=25, deadline=None)
@given(
    a=st.recursive(
        st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=8),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
        max_leaves=6,
    ),
    b=st.integers(-(2**63), 2**63 - 1),
)
def test_binding_style_never_changes_the_key(a: object, b: int) -> None:
    """Any JSON arguments recorded positionally replay when passed by keyword."""

    @tool
    def f(a: object, b: int = 0) -> str:
        return "out"

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "run.jsonl"
        with Tape(path, mode="record"):
            f(a, b)
        with Tape(path, mode="replay", strict=True):
            assert f(b=b, a=a) == "out"


def test_tool_step_follows_model_calls(tmp_path: Path) -> None:
    """The same tool call after a different number of model calls is a different decision."""

    @tool
    def clock() -> str:
        return "noon"

    path = tmp_path / "run.jsonl"
    with Tape(path, mode="record") as tape:
        state_of(tape).steps.saw(1)  # a model call of step 1 was made
        clock()
    with pytest.raises(ReplayMiss) as info, Tape(path, mode="replay") as tape:
        state_of(tape).steps.saw(2)  # a model call of step 2 was made
        clock()
    assert info.value.changes == ["step"]


def test_changed_argument_is_named_in_the_miss(tmp_path: Path) -> None:
    """A tool called with a changed argument misses, naming exactly that argument."""

    @tool
    def read_file(path: str, encoding: str = "utf-8") -> str:
        return "text"

    cassette = tmp_path / "run.jsonl"
    with Tape(cassette, mode="record"):
        read_file("/srv/a.txt")
    with pytest.raises(ReplayMiss) as info, Tape(cassette, mode="replay"):
        read_file("/srv/b.txt")
    assert info.value.changes == ["args.path"]
    assert "changed: args.path" in str(info.value)


def test_arguments_are_captured_at_call_time(tmp_path: Path) -> None:
    """An argument mutated after the call is recorded as it was when the call was made."""

    @tool
    def send(items: list[int]) -> int:
        return len(items)

    items = [1]
    path = tmp_path / "run.jsonl"
    with Tape(path, mode="record"):
        send(items)
        items.append(2)
        send(items)
    first, second = read_cassette(path).records
    assert first.input["args"] == {"items": [1]}
    assert second.input["args"] == {"items": [1, 2]}


def test_ignored_arguments_stay_out_of_the_key(tmp_path: Path) -> None:
    """Arguments named in ``ignore`` (a client object) neither key nor block replay."""

    @tool(ignore=["client"])
    def fetch(client: object, url: str) -> str:
        return "body"

    path = tmp_path / "run.jsonl"
    with Tape(path, mode="record"):
        fetch(object(), "https://example.org")
    with Tape(path, mode="replay"):
        assert fetch(object(), "https://example.org") == "body"


def test_async_tool_records_and_replays(tmp_path: Path) -> None:
    """An async tool is awaited while recording and never awaited in replay."""
    calls: list[int] = []

    @tool(effect="read")
    async def double(n: int) -> int:
        calls.append(n)
        await asyncio.sleep(0)
        return n * 2

    async def run(mode: str) -> list[int]:
        async with Tape(tmp_path / "run.jsonl", mode=mode):
            return list(await asyncio.gather(double(1), double(2)))

    assert asyncio.run(run("record")) == [2, 4]
    assert asyncio.run(run("replay")) == [2, 4]
    assert calls == [1, 2]


@pytest.mark.parametrize(
    ("exc", "expected_type"),
    [
        pytest.param(FileNotFoundError(2, "No such file"), FileNotFoundError, id="builtin"),
        pytest.param(
            FileNotFoundError(2, "No such file", "/srv/a.txt"), FileNotFoundError, id="filename"
        ),
        pytest.param(QuotaError("over quota"), QuotaError, id="importable-class"),
    ],
)
def test_tool_exception_is_recorded_and_raised_again(
    tmp_path: Path, exc: Exception, expected_type: type[Exception]
) -> None:
    """A tool that raised is replayed by raising the same exception type with the same args."""

    @tool
    def flaky() -> str:
        raise exc

    path = tmp_path / "run.jsonl"
    with Tape(path, mode="record"), pytest.raises(expected_type):
        flaky()
    with Tape(path, mode="replay"), pytest.raises(expected_type) as info:
        flaky()
    assert info.value.args == exc.args
    assert str(info.value) == str(exc)


def test_unimportable_tool_exception_replays_as_runtime_error(tmp_path: Path) -> None:
    """An exception class that replay cannot import comes back as a RuntimeError naming it."""

    class Local(Exception):
        pass

    @tool
    def flaky() -> str:
        raise Local("boom")

    path = tmp_path / "run.jsonl"
    with Tape(path, mode="record"), pytest.raises(Local):
        flaky()
    with Tape(path, mode="replay"), pytest.raises(RuntimeError, match="Local: boom"):
        flaky()


def test_irreversible_tool_needs_a_stub_to_record(tmp_path: Path) -> None:
    """An irreversible tool never runs for real while recording unless a stub stands in."""
    sent: list[str] = []

    @tool(effect="irreversible")
    def wire(amount: int) -> str:
        sent.append("real")
        return "sent"

    with Tape(tmp_path / "a.jsonl", mode="record"), pytest.raises(IrreversibleEffectError):
        wire(10)

    @tool(effect="irreversible", stub=lambda amount: f"stubbed {amount}")
    def wire2(amount: int) -> str:
        sent.append("real")
        return "sent"

    with Tape(tmp_path / "b.jsonl", mode="record"):
        assert wire2(10) == "stubbed 10"
    with Tape(tmp_path / "b.jsonl", mode="replay"):
        assert wire2(10) == "stubbed 10"
    assert sent == []
    assert read_cassette(tmp_path / "b.jsonl").records[0].effect == "irreversible"


def test_tool_without_a_tape_is_a_plain_call() -> None:
    """With no tape active a decorated tool just runs."""

    @tool
    def add(a: int, b: int) -> int:
        return a + b

    assert tracetape.current_tape() is None
    assert add(1, 2) == 3


def test_tape_tool_binds_to_its_own_tape(tmp_path: Path) -> None:
    """``tool(tape=...)`` records on its tape even while another tape is the current one."""
    tape = Tape(tmp_path / "bound.jsonl", mode="record")

    @tool(effect="read", tape=tape)
    def ping() -> str:
        return "pong"

    with Tape(tmp_path / "other.jsonl", mode="record"):
        ping()
    tape.close()
    assert len(read_cassette(tmp_path / "bound.jsonl").records) == 1
    assert read_cassette(tmp_path / "other.jsonl").records == []


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        pytest.param({"effect": "delete"}, "one of 'read', 'write', 'irreversible'", id="effect"),
    ],
)
def test_bad_decorator_arguments_are_explained(kwargs: dict[str, Any], message: str) -> None:
    """A wrong ``effect`` fails at decoration time, listing the valid values."""
    with pytest.raises(ValueError, match=message):
        tool(**kwargs)


def test_generator_tools_are_refused() -> None:
    """A generator function cannot be taped and the error says to return a list."""
    with pytest.raises(TypeError, match="return a list"):

        @tool
        def items() -> Any:
            yield 1


def test_threads_each_record_on_their_own_tape(tmp_path: Path) -> None:
    """Two threads, each inside its own tape, never mix their tool records."""

    @tool
    def echo(text: str) -> str:
        return text

    barrier = threading.Barrier(2)

    def worker(name: str) -> None:
        with Tape(tmp_path / f"{name}.jsonl", mode="record"):
            for i in range(50):
                if i == 10:
                    barrier.wait()
                echo(f"{name}-{i}")

    threads = [threading.Thread(target=worker, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for name in ("a", "b"):
        outs = [r.out for r in read_cassette(tmp_path / f"{name}.jsonl").records]
        assert outs == [f"{name}-{i}" for i in range(50)]


def test_env_replays_the_recorded_value(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``env(name, tape=tape)`` returns the value read while recording, whatever the live
    value is now."""
    path = tmp_path / "run.jsonl"
    monkeypatch.setenv("AGENT_REGION", "eu-north")
    monkeypatch.delenv("AGENT_UNSET", raising=False)
    with Tape(path, mode="record") as tape:
        assert env("AGENT_REGION", tape=tape) == "eu-north"
        assert env("AGENT_UNSET", "dflt", tape=tape) == "dflt"
    monkeypatch.setenv("AGENT_REGION", "us-east")
    monkeypatch.setenv("AGENT_UNSET", "now-set")
    with Tape(path, mode="replay") as tape:
        assert env("AGENT_REGION") == "eu-north"
        assert env("AGENT_UNSET", "dflt", tape=tape) == "dflt"


@pytest.mark.parametrize(
    ("name", "value"),
    [
        pytest.param("OPENAI_API_KEY", "sk-proj-abcdefghijklmnopqrstuvwx", id="key-shape"),
        pytest.param("DB_PASSWORD", "hunter2-correct-horse", id="secret-name"),
    ],
)
def test_env_secrets_never_reach_the_cassette(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    """A secret read through ``env`` is redacted in the cassette by its shape or its name."""
    monkeypatch.setenv(name, value)
    path = tmp_path / "run.jsonl"
    with Tape(path, mode="record") as tape:
        assert env(name, tape=tape) == value
    assert value not in path.read_text()
    with Tape(path, mode="replay") as tape:
        replayed = env(name, tape=tape)
    assert replayed is not None
    assert replayed.startswith("[REDACTED:")
    assert json.loads(path.read_text().splitlines()[1])["kind"] == "env"


@settings(max_examples=30, deadline=None)
@given(
    kind=st.sampled_from([ValueError, KeyError, TimeoutError, PermissionError, QuotaError]),
    args=st.lists(st.text(max_size=12) | st.integers(-(2**31), 2**31), max_size=3),
)
def test_tool_errors_round_trip(kind: type[Exception], args: list[object]) -> None:
    """Any recorded tool error replays as the same exception type with the same args."""

    @tool
    def failing() -> None:
        raise kind(*args)

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "run.jsonl"
        with Tape(path, mode="record"), pytest.raises(kind) as original:
            failing()
        with Tape(path, mode="replay"), pytest.raises(kind) as info:
            failing()
    assert info.value.args == original.value.args
    assert str(info.value) == str(original.value)
