"""Tape: record, replay, modes, ReplayMiss diagnosis, redaction, environment, side effects."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tracetape
from tests import _seed
from tracetape import (
    CassetteError,
    CassetteExistsError,
    CassetteNotFoundError,
    EnvironmentDriftError,
    IrreversibleEffectError,
    NetworkBlockedError,
    ReplayMiss,
    Tape,
    TapeWarning,
    UnplayedDecisionsError,
    key,
)
from tracetape.canonical import reference_json
from tracetape.formats.cassette import read_cassette

OPENAI_KEY = "sk-proj-Zz9Yy8Xx7Ww6Vv5Uu4Tt3Ss2Rr1Qq0Pp"
DB_PASSWORD = "correct-horse-battery"


class ScriptedModel:
    """A deterministic model: calls `lookup` for each of `steps` steps, then answers."""

    def __init__(self, steps: int) -> None:
        self.steps = steps
        self.calls = 0

    def chat(self, messages: list[dict[str, Any]], tools: list[str]) -> dict[str, Any]:
        self.calls += 1
        done = sum(1 for m in messages if m["role"] == "tool")
        if done >= self.steps:
            return {"content": f"done after {done} lookups", "tool": None, "args": None}
        return {"content": f"looking up {done}", "tool": "lookup", "args": {"n": done}}


def run_agent(tape: Any, task: str, model: ScriptedModel, tool: Callable[..., Any]) -> str:
    """The seed's agent loop, routed through a tape."""
    msgs: list[dict[str, Any]] = [{"role": "user", "content": task}]
    tools = {"lookup": tool}
    for step in range(1, 30):
        schemas = sorted(tools)
        decision = tape.call(
            "llm",
            {"messages": msgs, "tools": schemas, "step": step},
            lambda: model.chat(messages=msgs, tools=schemas),
        )
        if decision["tool"] is None:
            return str(decision["content"])
        name, args = decision["tool"], decision["args"]
        result = tape.call(
            "tool", {"name": name, "args": args, "step": step}, lambda: tools[name](**args)
        )
        msgs = [
            *msgs,
            {"role": "assistant", "content": decision["content"]},
            {"role": "tool", "name": name, "content": json.dumps(result)},
        ]
    raise RuntimeError("step budget exhausted")


def lookup(n: int) -> dict[str, Any]:
    return {"n": n, "rows": [f"row {n}.{i}" for i in range(3)]}


def failing(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("replay must not execute anything")


def record(path: Path, task: str = "find the bug", steps: int = 4, **kw: Any) -> str:
    with Tape(path, mode="record", **kw) as tape:
        return run_agent(tape, task, ScriptedModel(steps), lookup)


def test_replay_returns_the_recorded_run_without_executing_anything(tmp_path: Path) -> None:
    """Replay reaches the same final answer with no model and no tool executed."""
    path = tmp_path / "run.jsonl"
    answer = record(path)
    model = ScriptedModel(4)
    with Tape(path, mode="replay") as tape:
        assert run_agent(tape, "find the bug", model, failing) == answer
    assert model.calls == 0 and tape.unplayed == []


def test_same_call_twice_replays_both_outputs_in_order(tmp_path: Path) -> None:
    """The per-key queue is FIFO: a repeated decision replays its outputs in recorded order."""
    path = tmp_path / "fifo.jsonl"
    outputs = iter(["first", "second"])
    with Tape(path, mode="record") as tape:
        got = [
            tape.call("tool", {"name": "now", "step": 1}, lambda: next(outputs)) for _ in range(2)
        ]
    with Tape(path, mode="replay") as tape:
        assert [tape.call("tool", {"name": "now", "step": 1}, failing) for _ in range(2)] == got


def test_record_moves_the_partial_file_into_place_even_when_the_agent_raises(
    tmp_path: Path,
) -> None:
    """A failing run's cassette is the main artifact: it is kept on close."""
    path = tmp_path / "fail.jsonl"
    with pytest.raises(ZeroDivisionError), Tape(path, mode="record") as tape:
        tape.call("tool", {"name": "ok", "step": 1}, lambda: 1)
        tape.call("tool", {"name": "boom", "step": 2}, lambda: 1 / 0)
    assert [r.key for r in read_cassette(path)] == [key("tool", {"name": "ok", "step": 1})]
    assert not (tmp_path / "fail.jsonl.partial").exists()


KILLED_RUN = """
import os, sys
from tracetape import Tape
tape = Tape(sys.argv[1], mode="rewrite")
for i in range(5):
    tape.call("tool", {"name": "t", "args": {"i": i}, "step": i}, lambda: i * i)
os.kill(os.getpid(), 9)
"""


def test_a_killed_run_leaves_a_replayable_partial_and_the_old_cassette(tmp_path: Path) -> None:
    """SIGKILL mid-run keeps the old PATH untouched and PATH.partial replays its records."""
    path = tmp_path / "run.jsonl"
    path.write_text("old cassette\n")
    done = subprocess.run([sys.executable, "-c", KILLED_RUN, str(path)], check=False)
    assert done.returncode == -9
    assert path.read_text() == "old cassette\n"
    with Tape(tmp_path / "run.jsonl.partial", mode="replay") as tape:
        assert [
            tape.call("tool", {"name": "t", "args": {"i": i}, "step": i}, failing) for i in range(5)
        ] == [0, 1, 4, 9, 16]


def test_modes_are_validated_loudly() -> None:
    """An unknown mode is a ValueError listing the valid ones."""
    with pytest.raises(ValueError, match="'replay', 'record', 'auto', 'rewrite'"):
        Tape("x.jsonl", mode="playback")


def test_auto_records_when_missing_and_replays_when_present(tmp_path: Path) -> None:
    """auto mode records the first time and replays afterwards."""
    path = tmp_path / "auto.jsonl"
    with Tape(path, mode="auto") as tape:
        assert tape.mode == "record"
        tape.call("tool", {"name": "x"}, lambda: 7)
    with Tape(path, mode="auto") as tape:
        assert tape.mode == "replay"
        assert tape.call("tool", {"name": "x"}, failing) == 7


def test_replaying_a_missing_cassette_says_how_to_record_it(tmp_path: Path) -> None:
    """A missing cassette in replay mode is an error that shows the record command."""
    with pytest.raises(CassetteNotFoundError, match="mode='record'"):
        Tape(tmp_path / "missing.jsonl", mode="replay")


def test_replay_miss_names_the_changed_field_with_before_and_after(tmp_path: Path) -> None:
    """A one-word prompt edit raises ReplayMiss naming messages[0].content and both words."""
    path = tmp_path / "run.jsonl"
    record(path, task="please fix the bug in parser.py today")
    with pytest.raises(ReplayMiss) as info, Tape(path, mode="replay") as tape:
        run_agent(tape, "please fix the issue in parser.py today", ScriptedModel(4), failing)
    miss = info.value
    first_line = str(miss).splitlines()[0]
    assert first_line == f"{miss.key} was never recorded — the run diverged here"
    assert miss.kind == "llm" and miss.step == 1
    assert (miss.matched, miss.recorded) == (0, 9)
    assert miss.changes == ["messages[0].content"]
    assert miss.expected is not None and miss.expected.seq == 1
    text = str(miss)
    assert "matched 0 of 9 recorded decisions" in text
    assert "bug" in text and "issue" in text


def test_replay_miss_later_in_the_run_counts_the_matched_decisions(tmp_path: Path) -> None:
    """A changed tool output diverges at step 3; the miss says 4 decisions matched first."""
    path = tmp_path / "run.jsonl"
    record(path)

    def drifted(n: int) -> dict[str, Any]:
        return {**lookup(n), "rows": ["changed"]} if n == 1 else lookup(n)

    with pytest.raises(ReplayMiss) as info, Tape(path, mode="replay") as tape:
        msgs_tape = _LiveTools(tape, drifted)
        run_agent(msgs_tape, "find the bug", ScriptedModel(4), drifted)
    assert info.value.matched == 4 and info.value.step == 3
    assert info.value.changes == ["messages[4].content"]


class _LiveTools:
    """Replays llm decisions but runs tools live, the way span replay re-runs a tool."""

    def __init__(self, tape: Tape, tool: Callable[..., Any]) -> None:
        self.tape, self.tool = tape, tool

    def call(self, kind: str, payload: dict[str, Any], do: Callable[[], Any]) -> Any:
        if kind == "tool":
            self.tape.call(kind, payload, do)
            return do()
        return self.tape.call(kind, payload, do)


def test_replay_miss_after_the_end_of_the_recording(tmp_path: Path) -> None:
    """A run that goes past the recording is told no decision of that kind is left."""
    path = tmp_path / "short.jsonl"
    with Tape(path, mode="record") as tape:
        tape.call("tool", {"name": "a"}, lambda: 1)
    with pytest.raises(ReplayMiss) as again, Tape(path, mode="replay") as tape:
        tape.call("tool", {"name": "a"}, failing)
        with pytest.raises(ReplayMiss, match="this exact input was recorded 1 time") as info:
            tape.call("tool", {"name": "a"}, failing)
    # caught inside the block, the miss is raised again when the tape closes
    assert again.value is info.value
    assert info.value.expected is None
    assert "no unplayed 'tool' decision is left" in str(info.value)


def test_strict_replay_turns_unplayed_decisions_into_an_error(tmp_path: Path) -> None:
    """Closing a strict replay that skipped recorded decisions raises; otherwise it warns."""
    path = tmp_path / "run.jsonl"
    record(path)
    with pytest.warns(TapeWarning, match="9 recorded decision"), Tape(path, mode="replay"):
        pass
    with pytest.raises(UnplayedDecisionsError) as info, Tape(path, mode="replay", strict=True):
        pass
    assert len(info.value.unplayed) == 9


def test_seed_cassettes_replay_unchanged(tmp_path: Path) -> None:
    """A cassette written by the seed's reference Tape replays, keyed as the seed keys it."""
    path = tmp_path / "seed.jsonl"
    answer = run_agent(_seed.Tape(str(path), "record"), "find the bug", ScriptedModel(3), lookup)
    with Tape(path, mode="replay") as tape:
        assert run_agent(tape, "find the bug", ScriptedModel(3), failing) == answer
    with pytest.raises(ReplayMiss, match="seed's format"), Tape(path, mode="replay") as tape:
        run_agent(tape, "find the bugs", ScriptedModel(3), failing)


def test_seed_cassettes_with_a_secret_in_the_prompt_replay(tmp_path: Path) -> None:
    """The seed keys the intact payload (it stores no redacted copy): a seed recording whose
    prompt holds a secret replays, because replay keys the live text before redacting it.
    tracetape's own cassettes key the redacted text, and the same run replays there too."""
    task = f"deploy with {OPENAI_KEY}"
    seed = tmp_path / "seed.jsonl"
    answer = run_agent(_seed.Tape(str(seed), "record"), task, ScriptedModel(3), lookup)
    # the seed stores no input: its keys hash the intact prompt, secret included
    assert _seed._key("llm", {"messages": [{"role": "user", "content": task}], "tools": ["lookup"],
                              "step": 1}) in seed.read_text()  # fmt: skip
    with Tape(seed, mode="replay", strict=True) as tape:
        assert run_agent(tape, task, ScriptedModel(3), failing) == answer
    ours = tmp_path / "ours.jsonl"
    record(ours, task=task, steps=3)
    assert OPENAI_KEY.encode() not in ours.read_bytes()
    with Tape(ours, mode="replay", strict=True) as tape:
        assert run_agent(tape, task, ScriptedModel(3), failing) == answer


def test_tracetape_cassettes_keep_the_seeds_keys(tmp_path: Path) -> None:
    """Without secrets, every recorded key equals the key the seed's Tape records."""
    ours, seed = tmp_path / "ours.jsonl", tmp_path / "seed.jsonl"
    record(ours)
    run_agent(_seed.Tape(str(seed), "record"), "find the bug", ScriptedModel(4), lookup)
    seed_keys = [json.loads(line)["key"] for line in seed.read_text().splitlines()]
    assert [r.key for r in read_cassette(ours)] == seed_keys


def test_records_hold_step_effect_redacted_input_and_digests(tmp_path: Path) -> None:
    """Each record carries seq, key, kind, step, ms, effect, out, input and field digests."""
    path = tmp_path / "run.jsonl"
    record(path, steps=1)
    first = read_cassette(path).records[0]
    line = json.loads(path.read_text().splitlines()[1])
    assert set(line) == {
        "seq", "key", "kind", "step", "ms", "effect", "out", "input", "digests", "chain"
    }  # fmt: skip
    assert first.input["messages"][0]["content"] == "find the bug"
    assert {"messages", "messages[]", "tools", "tools[]", "step"} <= set(first.digests)


def test_growing_conversations_are_stored_as_deltas(tmp_path: Path) -> None:
    """A record stores only the messages that are new since the previous record of its kind,
    and reading the cassette rebuilds every input in full."""
    path = tmp_path / "run.jsonl"
    record(path, steps=6)
    raw = [json.loads(line) for line in path.read_text().splitlines()[1:-1]]  # not the trailer
    llm = [r for r in raw if r["kind"] == "llm"]
    assert "base" not in llm[0] and llm[-1]["base"] == {"messages": 11, "tools": 1}
    assert len(llm[-1]["input"]["messages"]) == 2
    full = [r for r in read_cassette(path).records if r.kind == "llm"]
    assert [len(r.input["messages"]) for r in full] == [1, 3, 5, 7, 9, 11, 13]
    assert all(len(r.digests["messages[]"]) == len(r.input["messages"]) for r in full)
    with Tape(path, mode="replay", strict=True) as tape:
        run_agent(tape, "find the bug", ScriptedModel(6), failing)


def test_an_edited_earlier_message_is_stored_in_full(tmp_path: Path) -> None:
    """When an earlier message changes, the shared prefix stops there and the rest is stored."""
    path = tmp_path / "edit.jsonl"
    with Tape(path, mode="record") as tape:
        msgs = [{"role": "user", "content": f"m{i}"} for i in range(5)]
        tape.call("llm", {"messages": msgs, "step": 1}, lambda: 1)
        msgs[2] = {"role": "user", "content": "edited"}
        tape.call("llm", {"messages": msgs, "step": 2}, lambda: 2)
    second = json.loads(path.read_text().splitlines()[2])
    assert second["base"] == {"messages": 2}
    assert read_cassette(path).records[1].input["messages"] == msgs


def test_a_record_whose_base_is_missing_is_corrupt(tmp_path: Path) -> None:
    """Deleting the record a delta builds on makes the cassette an error naming the line."""
    path = tmp_path / "run.jsonl"
    record(path, steps=2)
    lines = path.read_text().splitlines()
    path.write_text("\n".join([lines[0], *lines[3:]]) + "\n")
    with pytest.raises(CassetteError, match="field 'base'") as info:
        read_cassette(path)
    assert info.value.line == 2


def test_secrets_never_reach_the_cassette_and_the_run_still_replays(tmp_path: Path) -> None:
    """Secrets planted in a prompt and in a tool output the next prompt quotes never land in the
    file, and replay runs to the end because keys are computed on the redacted text."""
    path = tmp_path / "secret.jsonl"
    task = f"deploy with key {OPENAI_KEY}"

    def leaky(n: int) -> dict[str, Any]:
        return {
            "n": n,
            "config": {"db_password": DB_PASSWORD, "token_hint": f"Bearer {OPENAI_KEY}"},
        }

    with Tape(path, mode="record") as tape:
        answer = run_agent(tape, task, ScriptedModel(3), leaky)
    data = path.read_bytes()
    assert OPENAI_KEY.encode() not in data and DB_PASSWORD.encode() not in data
    assert b"[REDACTED:openai_key:" in data and b"[REDACTED:field:" in data
    with Tape(path, mode="replay", strict=True) as tape:
        assert run_agent(tape, task, ScriptedModel(3), failing) == answer


def test_a_secret_used_as_a_key_never_reaches_the_cassette(tmp_path: Path) -> None:
    """The case as found (issue 37, item 1): a token used as a mapping key in a tool's
    arguments and output, and a password the run learned from a field and then used as a key,
    are stored redacted; the run replays (the program then sees the placeholders, as for any
    redacted value)."""
    path = tmp_path / "keys.jsonl"
    password = "v4lue-Hunter2Secret99"

    def run(tape: Tape) -> list[Any]:
        return [
            tape.call("tool", {"name": "map", "args": {"m": {OPENAI_KEY: 1}}, "step": 1},
                      lambda: {OPENAI_KEY: [OPENAI_KEY]}),
            tape.call("tool", {"name": "login", "args": {"password": password}, "step": 1},
                      lambda: {password: "ok"}),
            tape.call("tool", {"name": "again", "args": {"by": {password: 2}}, "step": 2},
                      lambda: {"seen": {password: True}}),
        ]  # fmt: skip

    with Tape(path, mode="record") as tape:
        run(tape)
    data = path.read_bytes()
    assert OPENAI_KEY.encode() not in data and password.encode() not in data
    stored = [r.out for r in read_cassette(path).records]
    assert all("[REDACTED:" in next(iter(out)) for out in stored[:2])
    with Tape(path, mode="replay", strict=True) as tape:
        assert run(tape) == stored


def test_replay_keys_first_and_redacts_only_what_it_cannot_find(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Replay hashes the live text first: a recorded text needs no redaction (it is already
    redacted). Only a text holding a secret is redacted, then found under its recorded key."""
    path = tmp_path / "run.jsonl"
    task = f"deploy with {OPENAI_KEY}"
    answer = record(path, task=task)
    with Tape(path, mode="replay", strict=True) as tape:
        redacted: list[str] = []
        redact = tape.redactor.redact_json
        monkeypatch.setattr(
            tape.redactor,
            "redact_json",
            lambda text: redacted.append(json.loads(text).get("name", "llm")) or redact(text),
        )
        assert run_agent(tape, task, ScriptedModel(4), failing) == answer
        decision = tape.prepare("tool", {"name": "lookup", "args": {"n": 0}, "step": 1})
    # every model call quotes the task's key; no tool call holds a secret
    assert redacted == ["llm"] * 5
    assert isinstance(decision.text, bytes) and decision.blob == decision.text.decode()
    assert decision.input() == {"name": "lookup", "args": {"n": 0}, "step": 1}


def test_replay_miss_messages_show_redacted_text_only(tmp_path: Path) -> None:
    """A miss whose changed field held a secret shows placeholders, never the secret."""
    path = tmp_path / "run.jsonl"
    record(path, task=f"use {OPENAI_KEY} for the bug")
    with pytest.raises(ReplayMiss) as info, Tape(path, mode="replay") as tape:
        run_agent(tape, f"use {OPENAI_KEY} for the issue", ScriptedModel(4), failing)
    assert OPENAI_KEY not in str(info.value) and "[REDACTED:openai_key:" in str(info.value)


def test_environment_values_are_recorded_as_hashes_and_drift_warns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Allowed variables are stored hashed; a changed value warns naming it (strict: an error)."""
    path = tmp_path / "env.jsonl"
    monkeypatch.setenv("AGENT_MODEL", "model-a-2026")
    record(path, env_allow=["AGENT_MODEL"], harness_sha="1111")
    assert b"model-a-2026" not in path.read_bytes()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Tape(path, mode="replay", harness_sha="1111", env_allow=["AGENT_MODEL"]).close(failed=True)
    monkeypatch.setenv("AGENT_MODEL", "model-b-2027")
    with pytest.warns(TapeWarning, match="AGENT_MODEL has a different value"):
        Tape(path, mode="replay", harness_sha="1111").close(failed=True)
    with pytest.raises(EnvironmentDriftError, match="AGENT_MODEL") as info:
        Tape(path, mode="replay", harness_sha="1111", strict=True)
    assert len(info.value.drift) == 1


def test_a_different_harness_sha_names_both(tmp_path: Path) -> None:
    """Replay under another harness git SHA warns naming the recorded and the current SHA."""
    path = tmp_path / "sha.jsonl"
    record(path, harness_sha="aaaa1111")
    with pytest.warns(TapeWarning, match="recorded aaaa1111, now bbbb2222"):
        Tape(path, mode="replay", harness_sha="bbbb2222").close(failed=True)


def test_the_harness_sha_comes_from_git_when_not_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Recording inside a git work tree stores its HEAD SHA."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run(
        [
            "git",
            "-C",
            str(tmp_path),
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "x",
        ],
        check=True,
    )
    sha = subprocess.run(
        ["git", "-C", str(tmp_path), "rev-parse", "HEAD"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    monkeypatch.chdir(tmp_path)
    record(tmp_path / "g.jsonl", steps=1)
    header = read_cassette(tmp_path / "g.jsonl").header
    assert header is not None and header["harness_sha"] == sha


def test_irreversible_tools_need_a_stub_or_consent_to_record(tmp_path: Path) -> None:
    """Recording an irreversible call without stub= or allow_irreversible=True is refused."""
    sent: list[str] = []
    with Tape(tmp_path / "a.jsonl", mode="record") as tape:
        with pytest.raises(IrreversibleEffectError, match="stub="):
            tape.call("tool", {"name": "send"}, lambda: sent.append("real"), effect="irreversible")
        out = tape.call(
            "tool",
            {"name": "send"},
            lambda: sent.append("real"),
            effect="irreversible",
            stub=lambda: "stubbed",
        )
    assert out == "stubbed" and sent == []
    with Tape(tmp_path / "b.jsonl", mode="record", allow_irreversible=True) as tape:
        tape.call("tool", {"name": "send"}, lambda: sent.append("real"), effect="irreversible")
    assert sent == ["real"]
    assert read_cassette(tmp_path / "a.jsonl").records[0].effect == "irreversible"
    with Tape(tmp_path / "a.jsonl", mode="replay") as tape:
        assert tape.call("tool", {"name": "send"}, failing, effect="irreversible") == "stubbed"


def test_effects_are_validated_loudly(tmp_path: Path) -> None:
    """An unknown effect is a ValueError listing read, write and irreversible."""
    with (
        Tape(tmp_path / "e.jsonl", mode="record") as tape,
        pytest.raises(ValueError, match="'write'"),
    ):
        tape.call("tool", {"name": "x"}, lambda: 1, effect="delete")


def test_async_calls_record_and_replay(tmp_path: Path) -> None:
    """acall awaits the call while recording and returns the recorded output in replay."""
    path = tmp_path / "async.jsonl"

    async def fetch(n: int) -> int:
        await asyncio.sleep(0)
        return n * 10

    async def run(tape: Tape, live: bool) -> list[int]:
        async def one(n: int) -> int:
            return await tape.acall(
                "tool", {"name": "fetch", "args": {"n": n}}, lambda: fetch(n) if live else failing()
            )

        return list(await asyncio.gather(*(one(n) for n in range(20))))

    with Tape(path, mode="record") as tape:
        recorded = asyncio.run(run(tape, True))
    with Tape(path, mode="replay", strict=True) as tape:
        assert asyncio.run(run(tape, False)) == recorded == [n * 10 for n in range(20)]


def test_threads_with_their_own_tapes_never_mix(tmp_path: Path) -> None:
    """Two threads recording with their own tapes each get exactly their own decisions."""

    def work(name: str) -> None:
        with Tape(tmp_path / f"{name}.jsonl", mode="record") as tape:
            for i in range(100):
                tape.call("tool", {"name": name, "args": {"i": i}}, lambda i=i: f"{name}-{i}")

    threads = [threading.Thread(target=work, args=(n,)) for n in ("left", "right")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for name in ("left", "right"):
        outs = [r.out for r in read_cassette(tmp_path / f"{name}.jsonl")]
        assert outs == [f"{name}-{i}" for i in range(100)]


def test_current_tape_follows_the_with_block(tmp_path: Path) -> None:
    """current_tape() is the innermost active tape and is reset on exit."""
    from tracetape import current_tape

    assert current_tape() is None
    with Tape(tmp_path / "a.jsonl", mode="record") as tape:
        assert current_tape() is tape
    assert current_tape() is None


def test_the_readme_miss_example_is_the_seeds_first_line(tmp_path: Path) -> None:
    """The first line of a miss keeps the seed's wording so existing log greps still match."""
    with Tape(tmp_path / "x.jsonl", mode="record"):
        pass
    with pytest.raises(ReplayMiss) as info, Tape(tmp_path / "x.jsonl", mode="replay") as tape:
        tape.call("llm", {"step": 1}, failing)
    assert (
        str(info.value).splitlines()[0]
        == f"{key('llm', {'step': 1})} was never recorded — the run diverged here"
    )


def test_store_inputs_false_still_explains_misses_by_digest(tmp_path: Path) -> None:
    """Without input copies, a miss still names the changed fields from the per-field digests."""
    path = tmp_path / "d.jsonl"
    record(path, store_inputs=False)
    assert read_cassette(path).records[0].input is None
    with pytest.raises(ReplayMiss) as info, Tape(path, mode="replay") as tape:
        run_agent(tape, "find the bugs", ScriptedModel(4), failing)
    assert info.value.changes == ["messages[0]"]


def test_env_is_not_leaked_via_os_environ_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Variables outside env_allow are never written at all."""
    monkeypatch.setenv("SOME_TOKEN_VALUE", "do-not-store-me")
    record(tmp_path / "e.jsonl", env_allow=["HOME"])
    data = (tmp_path / "e.jsonl").read_bytes()
    assert b"SOME_TOKEN_VALUE" not in data and b"do-not-store-me" not in data
    assert os.environ["HOME"].encode() not in data


def test_oversized_outputs_are_refused_without_losing_the_recording(tmp_path: Path) -> None:
    """A record over the size limit is an error saying what to do; earlier records are kept."""
    path = tmp_path / "big.jsonl"
    with Tape(path, mode="record", max_record_bytes=10_000) as tape:
        tape.call("tool", {"name": "small"}, lambda: "ok")
        with pytest.raises(CassetteError, match="over the 10,000-byte record limit"):
            tape.call("tool", {"name": "huge"}, lambda: "x" * 20_000)
    assert [r.out for r in read_cassette(path)] == ["ok"]


def test_one_tape_shared_by_threads_keeps_every_input_whole(tmp_path: Path) -> None:
    """Four threads growing their own conversations on one tape read back exactly as sent."""
    path = tmp_path / "shared.jsonl"
    sent: dict[str, list[list[dict[str, str]]]] = {}

    def work(tape: Tape, name: str) -> None:
        msgs: list[dict[str, str]] = []
        sent[name] = []
        for i in range(40):
            msgs = [*msgs, {"role": "user", "content": f"{name}-{i}"}]
            sent[name].append(msgs)
            tape.call("llm", {"messages": msgs, "thread": name}, lambda: i)

    with Tape(path, mode="record") as tape:
        threads = [threading.Thread(target=work, args=(tape, f"t{n}")) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    got: dict[str, list[Any]] = {}
    for rec in read_cassette(path):
        got.setdefault(rec.input["thread"], []).append(rec.input["messages"])
    assert got == sent


def test_redaction_rules_come_from_pyproject(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """[tool.tracetape.redact] adds field names and patterns for every tape under it."""
    (tmp_path / "pyproject.toml").write_text(
        "[tool.tracetape.redact]\n"
        'fields = ["customer_email"]\n'
        'patterns = { ticket = "TCK-[0-9]{6}" }\n'
    )
    monkeypatch.chdir(tmp_path)
    with Tape("c.jsonl", mode="record") as tape:
        tape.call(
            "tool",
            {"name": "crm", "args": {"customer_email": "ann@example.org"}},
            lambda: "TCK-424242",
        )
    data = (tmp_path / "c.jsonl").read_text()
    assert "ann@example.org" not in data and "TCK-424242" not in data
    assert "[REDACTED:ticket:" in data


def test_harness_paths_make_the_harness_the_files_not_the_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With harness_paths another HEAD is no drift, but an edited harness file is, with both
    digests named."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "agent").mkdir()
    (tmp_path / "agent" / "loop.py").write_text("STEPS = 12\n")
    record(tmp_path / "h.jsonl", harness_sha="aaaa", harness_paths=["agent"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Tape(tmp_path / "h.jsonl", mode="replay", harness_sha="bbbb").close(failed=True)
    (tmp_path / "agent" / "loop.py").write_text("STEPS = 20\n")
    with pytest.warns(TapeWarning, match=r"harness files agent changed: recorded sha256:\w+, now"):
        Tape(tmp_path / "h.jsonl", mode="replay").close(failed=True)


FIXTURE = Path(__file__).parent / "fixtures" / "recorded_before_record_model.jsonl"


def _fixture_agent(tape: Tape, *, live: bool = False) -> list[Any]:
    """The agent that recorded ``FIXTURE`` (with tracetape before the record model). Unless
    ``live``, its calls cannot run: replay must answer every one of them."""

    def run(value: Any) -> Callable[[], Any]:
        def do() -> Any:
            assert live, "replay executed a call"
            return value

        return do

    messages: list[dict[str, Any]] = [{"role": "user", "content": "find the flaky test"}]
    tools = [{"type": "function", "function": {"name": "search", "parameters": {}}}]
    params = {"temperature": 0.2, "tags": ["a", "b"]}
    found = []
    for step in (1, 2, 3):
        usage = {"input_tokens": 10, "output_tokens": 5}
        payload = {"messages": messages, "tools": tools, "params": params, "step": step}
        reply = tape.call("llm", payload, run({"content": f"thinking {step}", "usage": usage}))
        args = {"q": f"flaky {step}", "limit": 1e-07}
        result = {"hits": [f"test_{step}.py"], "score": 0.5}
        hits = tape.call("tool", {"name": "search", "args": args, "step": step}, run(result))
        messages = [
            *messages,
            {"role": "assistant", "content": reply["content"]},
            {"role": "tool", "content": str(hits["hits"])},
        ]
        found.append(hits)
    write = {"name": "write_report", "args": {"text": "é naïve"}, "step": 4}
    tape.call("tool", write, run({"ok": True}), effect="write")
    return found


def test_a_cassette_recorded_before_the_record_model_replays(tmp_path: Path) -> None:
    """A cassette written by the previous tracetape (deltas, a float in 1e-07 form, non-ASCII
    text) replays every decision, and recording the same run now writes the same lines."""
    with Tape(FIXTURE, mode="replay", harness_sha="fixture", strict=True) as tape:
        found = _fixture_agent(tape)
    assert found == [{"hits": [f"test_{i}.py"], "score": 0.5} for i in (1, 2, 3)]
    assert tape.unplayed == []
    path = tmp_path / "again.jsonl"
    with Tape(path, mode="record", harness_sha="fixture") as tape:
        _fixture_agent(tape, live=True)

    def lines(p: Path) -> list[dict[str, Any]]:
        # What format 2 adds (the seal, the writer's pid, the version, the keys) aside, the
        # records are the ones the code before the record model wrote.
        records = [json.loads(line) for line in p.read_text().splitlines()]
        records = [rec for rec in records if "end" not in rec]
        for rec in records:
            for name in ("ms", "created", "pid", "chain", "tracetape", "keys", "run_id"):
                rec.pop(name, None)
        return records

    assert lines(path) == lines(FIXTURE)


def test_no_default_destroys_a_recording(tmp_path: Path) -> None:
    """``Tape(path)`` replays a cassette that exists and records one that does not; mode
    ``record`` refuses to overwrite (the old cassette stays whole) and ``rewrite`` overwrites."""
    path = tmp_path / "run.jsonl"
    payload = {"name": "now", "step": 1}
    with Tape(path, harness_sha="x") as tape:
        assert tape.mode == "record"
        tape.call("tool", payload, lambda: "noon")
    recorded = path.read_bytes()
    with Tape(path, harness_sha="x") as tape:
        assert tape.mode == "replay"
        assert tape.call("tool", payload, lambda: "late") == "noon"
    with pytest.raises(CassetteExistsError, match=r"mode='rewrite'") as info:
        Tape(path, mode="record", harness_sha="x")
    assert isinstance(info.value, FileExistsError)
    assert path.read_bytes() == recorded
    assert not path.with_name("run.jsonl.partial").exists()
    with Tape(path, mode="rewrite", harness_sha="x") as tape:
        tape.call("tool", payload, lambda: "late")
    assert [r.out for r in read_cassette(path)] == ["late"]


def test_a_miss_names_the_callers_rerecord_command(tmp_path: Path) -> None:
    """``rerecord`` (how the caller runs the recording again) ends every miss and the
    refusal of mode ``record``; without it, the ``Tape(...)`` call is named."""
    path = tmp_path / "run.jsonl"
    with Tape(path, harness_sha="x") as tape:
        tape.call("tool", {"name": "a", "step": 1}, lambda: 1)
    hint = "make agent-rerecord TASK=412"
    with pytest.raises(ReplayMiss) as info, Tape(path, harness_sha="x", rerecord=hint) as tape:
        tape.call("tool", {"name": "b", "step": 1}, lambda: 1)
    assert str(info.value).splitlines()[-1] == f"  if the change is intended, re-record: {hint}"
    with pytest.raises(CassetteExistsError, match=hint):
        Tape(path, mode="record", rerecord=hint)
    assert Tape(path, harness_sha="x").rerecord == f"Tape({str(path)!r}, mode='rewrite')"


_plain_text = st.text(alphabet="xyzXYZ019 .,:/\\\"'\n\té東🙂_", max_size=10)
_tool_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats()  # NaN and the infinities included
    | _plain_text
    | st.sampled_from([{"__float__": "NaN"}, {"__escaped__": {"__float__": "Infinity"}}]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_plain_text, inner, max_size=4),
    max_leaves=15,
)


@given(_tool_values)
@settings(max_examples=300, deadline=None)
def test_replay_returns_what_the_tool_returned(value: Any) -> None:
    """For any JSON value a tool can return (NaN, infinities, 80-bit integers, dicts that look
    like the store's own tags included), replay returns an equal value."""
    path = Path(tempfile.mkdtemp()) / "run.jsonl"
    payload = {"name": "f", "args": {}, "step": 1}
    with Tape(path, mode="record") as tape:
        tape.call("tool", payload, lambda: value)
    with Tape(path, mode="replay") as tape:
        replayed = tape.call("tool", payload, failing)
    assert reference_json(replayed) == reference_json(value)


SECRET_PW = "correct-horse-9"


def _config_agent(tape: Any, task: str = "connect") -> str:
    """A tool output whose secret only its field name reveals, quoted by the next prompt."""
    out = tape.call("tool", {"name": "get_config", "args": {}, "step": 1},
                    lambda: {"db": {"host": "db1", "password": SECRET_PW}})  # fmt: skip
    prompt = f"{task} to {out['db']['host']} with password {out['db']['password']}"
    return str(tape.call("llm", {"messages": [prompt], "step": 2}, lambda: "connected"))


def test_a_secret_known_only_by_its_field_name_is_redacted_everywhere_and_replays(
    tmp_path: Path,
) -> None:
    """The tool output names the secret a password; the next prompt quotes it in prose. Both
    are stored redacted (the prompt by the run-wide registry), and the run replays: the replayed
    output carries the placeholder, and so does the prompt built from it."""
    path = tmp_path / "run.jsonl"
    with Tape(path, mode="record") as tape:
        assert _config_agent(tape) == "connected"
    assert SECRET_PW.encode() not in path.read_bytes()
    with Tape(path, mode="replay", strict=True) as tape:
        assert _config_agent(tape) == "connected"


def test_a_live_secret_recorded_by_its_field_name_is_recognised_in_replay(tmp_path: Path) -> None:
    """In replay the secret can come from the live world in prose (no shape, no field name):
    it is recognised by the digest of a placeholder the recording holds, so the call replays,
    and a miss never prints it."""
    path = tmp_path / "run.jsonl"
    with Tape(path, mode="record") as tape:
        _config_agent(tape)
    with Tape(path, mode="replay", strict=True) as tape:
        tape.call("tool", {"name": "get_config", "args": {}, "step": 1}, failing)
        prompt = f"connect to db1 with password {SECRET_PW}"  # the live value, not the output
        assert tape.call("llm", {"messages": [prompt], "step": 2}, failing) == "connected"
    with pytest.raises(ReplayMiss) as info, Tape(path, mode="replay") as tape:
        tape.call("tool", {"name": "get_config", "args": {}, "step": 1}, failing)
        tape.call("llm", {"messages": [f"reconnect to db1 with {SECRET_PW}"], "step": 2}, failing)
    assert SECRET_PW not in str(info.value) and "[REDACTED:field:" in str(info.value)


def test_a_secret_read_from_the_environment_is_redacted_where_it_is_quoted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An environment variable named as a secret is recorded redacted, and the registry
    replaces its value in the prompt that quotes it later."""
    from tracetape import env

    monkeypatch.setenv("SHOP_DB_PASSWORD", "ch4ng3-me-later")
    path = tmp_path / "run.jsonl"
    with Tape(path, mode="record") as tape:
        password = env("SHOP_DB_PASSWORD")
        prompt = f"log in with {password}"
        tape.call("llm", {"messages": [prompt], "step": 1}, lambda: "ok")
    assert "ch4ng3-me-later" not in path.read_text()
    with Tape(path, mode="replay", strict=True) as tape:
        password = env("SHOP_DB_PASSWORD")
        assert password is not None and password.startswith("[REDACTED:field:")
        assert tape.call("llm", {"messages": [f"log in with {password}"], "step": 1}, failing)


def test_a_swallowed_miss_is_raised_again_when_the_tape_closes(tmp_path: Path) -> None:
    """A program that catches the ReplayMiss and goes on still ends with the diagnosis."""
    path = tmp_path / "run.jsonl"
    with Tape(path, mode="record") as tape:
        tape.call("tool", {"name": "a", "step": 1}, lambda: 1)
    with (
        pytest.raises(ReplayMiss) as info,
        Tape(path, mode="replay") as tape,
        contextlib.suppress(Exception),  # an agent's "except Exception: carry on"
    ):
        tape.call("tool", {"name": "b", "step": 1}, failing)
    assert info.value is tape.misses[0]
    assert "the program caught this ReplayMiss and went on" in "".join(info.value.__notes__)


class FrameworkError(Exception):
    """What a framework raises after retrying a request that failed."""


def test_a_miss_a_framework_wrapped_surfaces_as_the_miss(tmp_path: Path) -> None:
    """A miss turned into another error (a connection error after retries) leaves the tape as
    the ReplayMiss, the wrapper named in a note."""
    path = tmp_path / "run.jsonl"
    Tape(path, mode="record").close()
    with pytest.raises(ReplayMiss) as info, Tape(path, mode="replay") as tape:
        try:
            tape.call("llm", {"messages": [], "step": 1}, failing)
        except ReplayMiss as miss:
            raise FrameworkError("Connection error.") from miss
    assert info.value.kind == "llm"
    assert "turned it into FrameworkError: Connection error." in "".join(info.value.__notes__)


def test_the_expected_record_is_picked_by_step_not_write_order(tmp_path: Path) -> None:
    """Records of one kind written out of order (a framework writes a failed attempt's stream
    after the final one): the miss at step 1 expects the step-1 record."""
    path = tmp_path / "run.jsonl"
    with Tape(path, mode="record") as tape:
        tape.call("llm", {"messages": ["second"], "step": 2}, lambda: "b")
        tape.call("llm", {"messages": ["first"], "step": 1}, lambda: "a")
    with pytest.raises(ReplayMiss) as info, Tape(path, mode="replay") as tape:
        tape.call("llm", {"messages": ["first, edited"], "step": 1}, failing)
    expected = info.value.expected
    assert expected is not None and expected.step == 1 and expected.seq == 2
    assert info.value.changes == ["messages[0]"]


def test_the_expected_record_is_the_one_of_the_same_flow(tmp_path: Path) -> None:
    """Two flows each left a record at step 2 (two agents at once): a miss at step 2 expects
    the one whose input is closest, its own flow's, whatever order they were written in."""
    path = tmp_path / "run.jsonl"
    a = {"messages": ["sum 1 to 3", "1", "go on, carefully"], "step": 2}
    b = {"messages": ["sum 1 to 2", "1", "go on, carefully"], "step": 2}
    with Tape(path, mode="record") as tape:
        tape.call("llm", b, lambda: "b")
        tape.call("llm", a, lambda: "a")
    edited = {**a, "messages": ["sum 1 to 3", "1", "go on, quickly"]}
    with pytest.raises(ReplayMiss) as info, Tape(path, mode="replay") as tape:
        tape.call("llm", edited, failing)
    expected = info.value.expected
    assert expected is not None and expected.input == a
    assert info.value.changes == ["messages[2]"]


def test_a_shadow_plays_without_touching_its_tape(tmp_path: Path) -> None:
    """A shadow of a replaying tape plays the first record of its key, and a miss on it, or
    a play of the tape itself meanwhile, leaves each as it was."""
    path = tmp_path / "run.jsonl"
    with Tape(path, mode="record") as tape:
        tape.call("llm", {"messages": ["a"], "step": 1}, lambda: "A")
        tape.call("llm", {"messages": ["b"], "step": 2}, lambda: "B")
    with pytest.warns(TapeWarning, match="never played"), Tape(path, mode="replay") as tape:
        first = tape.records[0]
        assert first.key is not None
        shadow = tape.shadow(first.key)
        assert shadow is not None and tape.shadow("llm:nothing") is None
        assert shadow.play(shadow.prepare("llm", first.input)).out == "A"
        with pytest.raises(ReplayMiss):
            shadow.play(shadow.prepare("llm", {"messages": ["not recorded"], "step": 1}))
        assert (tape.matched, tape.misses) == (0, [])
        assert tape.play(tape.prepare("llm", first.input)).out == "A"  # as another flow would
        assert tape.matched == 1 and tape.unplayed[0].key == tape.records[1].key
        again = tape.shadow(first.key)
        assert again is None  # its one record was played


def test_a_numeric_password_quoted_back_in_a_prompt_replays(tmp_path: Path) -> None:
    """The case as found (issue 37, item 4): a tool returns a numeric password, and the next
    prompt quotes that output with ``json.dumps``. Recorded, the prompt held the number; replayed,
    the program quotes the stored placeholder string: both key alike (the number is redacted
    to a quoted placeholder), nothing raw is stored, and the run replays."""
    path = tmp_path / "numeric.jsonl"
    password = 73915502481

    def run(tape: Tape) -> Any:
        out = tape.call(
            "tool",
            {"name": "lookup", "args": {}, "step": 1},
            lambda: {"result": {"password": password}},
        )
        prompt = [{"role": "user", "content": json.dumps(out)}]
        return tape.call("llm", {"messages": prompt, "step": 2}, lambda: "done")  # fmt: skip

    with Tape(path, mode="record") as tape:
        assert run(tape) == "done"
    assert str(password).encode() not in path.read_bytes()
    with Tape(path, mode="replay", strict=True) as tape:
        assert run(tape) == "done"


def test_a_password_first_seen_in_prose_or_an_error_never_reaches_the_cassette(
    tmp_path: Path,
) -> None:
    """The cases as found (issue 37, item 3): a Python repr of a secret-named field in a prompt,
    and in a tool's exception message, are stored redacted, and the password, once learned, is
    replaced in a later output too."""
    path = tmp_path / "prose.jsonl"
    password = "v4lue-P7xQ9zR2kLm8"

    @tracetape.tool
    def login() -> Any:
        raise RuntimeError(f"upstream rejected the request: {{'password': '{password}'}}")

    with Tape(path, mode="record") as tape:
        prompt = [{"role": "user", "content": f"use {{'password': '{password}'}} please"}]
        tape.call("llm", {"messages": prompt, "step": 1}, lambda: "ok")
        with pytest.raises(RuntimeError):
            login()
        tape.call("tool", {"name": "echo", "args": {}, "step": 2}, lambda: f"pw was {password}")
    data = path.read_bytes()
    assert password.encode() not in data
    assert b"tracetape:raised" in data and data.count(b"[REDACTED:field:") >= 3


BEFORE_TRUST_TWO = Path(__file__).parent / "fixtures" / "recorded_before_trust_round_two.jsonl"


def _trust_two_agent(tape: Tape, *, live: bool = False) -> list[Any]:
    """The agent that recorded ``BEFORE_TRUST_TWO`` with tracetape at 5f9c8d8, before the
    second trust round: its secrets (a key used as a mapping key, a password in a repr, a bare
    AWS secret key and a base64-wrapped key in prose, a numeric password) were stored raw then.
    Unless ``live``, its calls cannot run."""
    aws = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKE"
    key = "sk-proj-Zq8xW3vN7mK2pL9tR4yB6cD1fG5hJ0aS3e"
    wrapped = base64.b64encode(key.encode()).decode()
    password = "v4lue-P7xQ9zR2kLm8"

    def run(value: Any) -> Callable[[], Any]:
        def do() -> Any:
            assert live, "replay executed a call"
            return value

        return do

    prompt = f"use {{'password': '{password}'}} with aws {aws} and {wrapped}"
    return [
        tape.call("tool", {"name": "map", "args": {"m": {key: 1}}, "step": 1}, run({key: [key]})),
        tape.call("llm", {"messages": [{"role": "user", "content": prompt}], "step": 1},
                  run("ok")),
        tape.call("tool", {"name": "pin", "args": {}, "step": 2},
                  run({"result": {"password": 73915502481}})),
    ]  # fmt: skip


def test_a_cassette_recorded_before_the_second_trust_round_replays(tmp_path: Path) -> None:
    """Redaction now finds more (keys, prose fields, numbers, bare and wrapped keys), so a
    cassette recorded before keyed those calls on their raw text: replay keys the raw text first
    and plays them all, strictly. Re-recording it stores none of those secrets."""
    with Tape(BEFORE_TRUST_TWO, mode="replay", strict=True, harness_sha="fixture") as tape:
        assert _trust_two_agent(tape)[1] == "ok"
    path = tmp_path / "again.jsonl"
    with Tape(path, mode="record", harness_sha="fixture") as tape:
        _trust_two_agent(tape, live=True)
    data = path.read_bytes()
    for secret in (b"wJalrXUtnFEMI", b"sk-proj-Zq8x", b"c2stcHJv", b"v4lue-P7x", b"73915502481"):
        assert secret not in data, secret


# Issue 53: the four shapes that still leaked through the Tape API, each with the field name
# that reveals it ("key" reveals nothing: the bare AWS key is found by its shape alone).
LAST_LEAKS = [
    pytest.param("key", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKE", id="bare-aws-secret"),
    pytest.param("authorization", "Token v4lue-P7xQ9zR2kLm8", id="authorization-scheme"),
    pytest.param("password", 48213377, id="numeric-password"),
    pytest.param("password", "pa\"ss'w0rd-P7xQ9zR2", id="password-with-quotes"),
]


def _last_leaks_agent(tape: Tape, name: str, secret: str | int, edit: str = "") -> list[Any]:
    """Plants ``secret`` in a tool's exception message and args, in a tool call's nested
    arguments (as a field's value, then as a mapping key) and in a prompt quoting the error.
    The key comes before the value: replay, which never redacts a recorded output again,
    knows the secret only by the recording's placeholders there. ``edit`` changes the key's
    value and the last prompt (a run that misses)."""

    @tracetape.tool(name="login")
    def login(user: str) -> Any:
        raise RuntimeError(f"login refused for {user}, {name}={secret}")

    @tracetape.tool(name="audit")
    def audit(user: str) -> Any:
        raise RuntimeError("audit failed", {"m": {name: secret}})

    ask = [{"role": "user", "content": "log in as bob"}]
    outs: list[Any] = [tape.call("llm", {"messages": ask, "step": 1}, lambda: "call login")]
    try:
        login("bob")
    except RuntimeError as exc:
        error = str(exc)
    with contextlib.suppress(RuntimeError):
        audit("bob")
    outs += [
        tape.call("tool", {"name": "map", "args": {"m": {str(secret): 1 + len(edit)}}, "step": 2},
                  lambda: "mapped"),
        tape.call("tool", {"name": "use", "args": {"m": {name: secret}}, "step": 2},
                  lambda: "used"),
        tape.call("llm", {"messages": [*ask, {"role": "tool", "content": error + edit}],
                          "step": 3}, lambda: "done"),
    ]  # fmt: skip
    return outs


@pytest.mark.parametrize(("name", "secret"), LAST_LEAKS)
def test_the_last_leaks_reach_no_file_miss_or_report_and_the_run_replays(
    tmp_path: Path, name: str, secret: str | int
) -> None:
    """Each shape planted in every path: the ``.partial`` snapshot while recording, the
    cassette, the same run replayed (no miss: record and replay redact keys by one rule), a
    changed run's ReplayMiss, and ``show`` and ``diff`` in text and JSON hold no trace of it."""
    from click.testing import CliRunner

    from tracetape.cli import main

    path, changed = tmp_path / "run.jsonl", tmp_path / "changed.jsonl"
    traces = [str(secret), str(secret)[-10:]]

    def clean(text: str, where: str) -> None:
        for trace in traces:
            assert trace not in text, f"{where}: {text}"

    with Tape(path, mode="record") as tape:
        recorded = _last_leaks_agent(tape, name, secret)
        clean(path.with_name("run.jsonl.partial").read_text(), "partial")
    data = path.read_text()
    clean(data, "cassette")
    assert data.count("tracetape:raised") == 2
    with Tape(path, mode="replay", strict=True) as tape:
        assert _last_leaks_agent(tape, name, secret) == recorded
    with pytest.raises(ReplayMiss) as info, Tape(path, mode="replay") as tape:
        _last_leaks_agent(tape, name, secret, edit="!")
    assert "[REDACTED:" in str(info.value)
    clean(str(info.value), "miss")
    with Tape(changed, mode="record") as tape:
        _last_leaks_agent(tape, name, secret, edit="!")
    for args in (["show", str(path)], ["diff", str(path), str(changed)]):
        for fmt in ("text", "json"):
            result = CliRunner().invoke(main, [*args, "--format", fmt], catch_exceptions=False)
            clean(result.output, f"{args[0]} {fmt}")


# -- replay control: fork, endings, recorded speed, the transport guard ----------------------------


def _three_steps(tape: Tape, last: str, live: list[str] | None = None) -> str:
    """A three-step conversation; ``live`` collects the prompts that ran for real."""
    messages: list[dict[str, str]] = []
    reply = ""
    for step, task in enumerate(["plan", "edit", last], 1):
        messages = [*messages, {"role": "user", "content": task}]

        def model(task: str = task) -> str:
            if live is not None:
                live.append(task)
            return f"did {task}"

        reply = tape.call("llm", {"messages": messages, "step": step}, model)
        messages = [*messages, {"role": "assistant", "content": reply}]
    return reply


def test_a_fork_replays_until_the_first_miss_then_goes_live_into_a_branch(tmp_path: Path) -> None:
    parent = tmp_path / "run.jsonl"
    with Tape(parent, mode="record") as tape:
        _three_steps(tape, "test")
    before = parent.read_bytes()
    live: list[str] = []
    with Tape(parent, mode="fork") as tape:
        assert tape.replaying  # until it diverges
        assert _three_steps(tape, "test twice", live) == "did test twice"
        assert not tape.replaying
    assert live == ["test twice"]
    assert parent.read_bytes() == before
    assert tape.branch == tmp_path / "run.fork-miss.jsonl"
    branch = read_cassette(tape.branch)
    assert branch.header is not None and branch.ended == "completed"
    assert branch.header["parent"]["path"] == str(parent)
    assert branch.header["parent"]["chain"] == json.loads(before.splitlines()[-1])["chain"]
    assert branch.header["fork"] == {
        "seq": 3, "step": 3, "kind": "llm", "key": branch.records[2].key, "reason": "first miss"
    }  # fmt: skip
    assert [r.out for r in branch] == ["did plan", "did edit", "did test twice"]
    with Tape(tape.branch, mode="replay", strict=True) as again:
        assert _three_steps(again, "test twice") == "did test twice"
    with Tape(parent, mode="fork") as second:  # the next default name is free
        _three_steps(second, "test thrice")
    assert second.branch == tmp_path / "run.fork-miss-2.jsonl"


def test_fork_at_goes_live_from_that_step_even_where_it_matches(tmp_path: Path) -> None:
    parent = tmp_path / "run.jsonl"
    with Tape(parent, mode="record") as tape:
        _three_steps(tape, "test")
    live: list[str] = []
    with Tape(parent, mode="fork", fork_at=2, branch=tmp_path / "b.jsonl") as tape:
        _three_steps(tape, "test", live)
    assert live == ["edit", "test"]
    assert tape.fork_point is not None and tape.fork_point["reason"] == "fork_at 2"
    assert [r.step for r in read_cassette(tmp_path / "b.jsonl")] == [1, 2, 3]


def test_a_fork_at_a_step_is_named_for_it_and_runs_under_a_run_id_of_its_own(
    tmp_path: Path,
) -> None:
    """``fork_at=3``'s branch is ``NAME.fork-3.jsonl``, then ``NAME.fork-3-2.jsonl`` while taken,
    and its run id is the branch's, not the parent's with another suffix."""
    parent = tmp_path / "run.jsonl"
    with Tape(parent, mode="record") as tape:
        _three_steps(tape, "test")
    forks = []
    for _ in range(2):
        with Tape(parent, mode="fork", fork_at=3) as tape:
            _three_steps(tape, "test")
        forks.append(tape.branch)
    assert forks == [tmp_path / "run.fork-3.jsonl", tmp_path / "run.fork-3-2.jsonl"]
    run_ids = [(read_cassette(path).header or {})["run_id"] for path in [parent, *forks]]
    assert [run_id.partition("@")[0] for run_id in run_ids] == ["run", "run.fork-3", "run.fork-3-2"]
    assert (read_cassette(forks[0]).header or {})["parent"]["run_id"] == run_ids[0]


def test_a_fork_that_never_diverges_writes_its_replay_as_the_branch(tmp_path: Path) -> None:
    parent = tmp_path / "run.jsonl"
    with Tape(parent, mode="record") as tape:
        _three_steps(tape, "test")
    with Tape(parent, mode="fork", branch=tmp_path / "same.jsonl") as tape:
        _three_steps(tape, "test", live := [])
    assert live == [] and tape.fork_point is not None
    assert tape.fork_point["reason"].startswith("no divergence")
    assert [r.key for r in read_cassette(tmp_path / "same.jsonl")] == [
        r.key for r in read_cassette(parent)
    ]


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"mode": "replay", "fork_at": 2}, "options of mode 'fork'"),
        ({"mode": "rewrite", "branch": "b.jsonl"}, "options of mode 'fork'"),
        ({"mode": "fork", "fork_at": -1}, "step number"),
        ({"mode": "fork", "branch": "run.jsonl"}, "must not be its parent"),
        ({"mode": "replay", "replay_latency": "slow"}, "'instant', 'recorded' or a factor"),
        ({"mode": "replay", "replay_latency": float("nan")}, "a factor from 0 to 1000"),
    ],
)
def test_replay_control_options_are_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, options: dict[str, Any], error: str
) -> None:
    monkeypatch.chdir(tmp_path)
    with Tape("run.jsonl", mode="record") as tape:
        tape.call("tool", {"name": "t", "step": 1}, lambda: 1)
    with pytest.raises(ValueError, match=error):
        Tape("run.jsonl", **options)
    with pytest.raises(CassetteNotFoundError, match="no cassette to fork"):
        Tape("missing.jsonl", mode="fork")


@pytest.mark.parametrize(
    ("raised", "ended"),
    [
        (None, "completed"),
        (KeyboardInterrupt(), "interrupted"),
        (ValueError("bad"), "failed: ValueError"),
        (SystemExit(0), "completed"),
        (SystemExit(3), "failed: SystemExit"),
    ],
)
def test_the_trailer_says_how_a_recording_ended(
    tmp_path: Path, raised: BaseException | None, ended: str
) -> None:
    path = tmp_path / "run.jsonl"
    with contextlib.suppress(BaseException), Tape(path, mode="record") as tape:
        tape.call("tool", {"name": "fetch", "step": 1}, lambda: "page")
        if raised is not None:
            raise raised
    assert read_cassette(path).ended == ended
    assert json.loads(path.read_text().splitlines()[-1])["ended"] == ended


def test_replaying_past_an_interrupted_recording_says_it_was_cut(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    with contextlib.suppress(KeyboardInterrupt), Tape(path, mode="record") as tape:
        tape.call("tool", {"name": "fetch", "step": 1}, lambda: "page 1")
        raise KeyboardInterrupt
    with pytest.raises(ReplayMiss) as raised, Tape(path, mode="replay") as tape:
        tape.call("tool", {"name": "fetch", "step": 1}, lambda: "live")
        tape.call("tool", {"name": "fetch", "step": 2}, lambda: "live")
    assert "the recording was interrupted after 1 decisions" in str(raised.value)
    assert "went on past the end" not in str(raised.value)


def test_sigterm_closes_a_recording_as_interrupted(tmp_path: Path) -> None:
    """A recording tape in the main thread turns SIGTERM into ``SystemExit(143)``: the
    cassette is moved into place and its trailer says ``interrupted``."""
    import signal

    script = tmp_path / "rec.py"
    script.write_text(
        "import sys\nfrom tracetape import Tape\n"
        "with Tape('run.jsonl', mode='record') as tape:\n"
        "    tape.call('tool', {'name': 'fetch', 'step': 1}, lambda: 'page 1')\n"
        "    print('ready', flush=True)\n"
        "    sys.stdin.read()\n"
    )
    proc = subprocess.Popen(
        [sys.executable, str(script)],
        cwd=tmp_path,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM
    assert read_cassette(tmp_path / "run.jsonl").ended == "interrupted"
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # this process's is untouched


def test_replay_latency_waits_the_recorded_time(tmp_path: Path) -> None:
    import time

    path = tmp_path / "slow.jsonl"
    # The sleep is the behaviour under test: a tool that takes time, whose replay must wait
    # at least as long (measured as a lower bound only).
    with Tape(path, mode="record") as tape:
        tape.call("tool", {"name": "slow", "step": 1}, lambda: time.sleep(0.05) or "done")
    recorded = read_cassette(path).records[0].ms or 0.0
    assert recorded >= 50
    for latency, least in (("recorded", recorded), (2, 2 * recorded)):
        with Tape(path, mode="replay", replay_latency=latency) as tape:
            start = time.perf_counter()
            assert tape.call("tool", {"name": "slow", "step": 1}, lambda: "live") == "done"
            assert (time.perf_counter() - start) * 1000 >= least * 0.99


class _Answer(threading.Thread):
    """A local HTTP server that answers every request ``ok`` (the live world)."""

    def __init__(self) -> None:
        import http.server

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length", 0)))
                self.send_response(200)
                self.send_header("content-length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1/chat/completions"
        super().__init__(target=self.server.serve_forever, daemon=True)


@pytest.fixture
def answer() -> Any:
    server = _Answer()
    server.start()
    yield server
    server.server.shutdown()
    server.server.server_close()


def test_a_replaying_tape_no_hook_serves_refuses_a_request(tmp_path: Path, answer: Any) -> None:
    """The hooks forgotten: a request from the replaying tape's context raises, whether it
    opens a connection (urllib), reuses a kept-alive one (an httpx client that sent before the
    replay) or is caught by the program; with a hook, or ``allow_network``, it goes."""
    import urllib.request

    import httpx

    path = tmp_path / "run.jsonl"
    with Tape(path, mode="record") as tape:
        tape.call("tool", {"name": "t", "step": 1}, lambda: 1)
    client = httpx.Client()
    assert client.post(answer.url, json={}).text == "ok"  # a kept-alive connection
    with pytest.raises(NetworkBlockedError) as raised, Tape(path, mode="replay"):
        client.post(answer.url, json={"messages": []})
    message = str(raised.value)
    assert "no hook serves this tape" in message and "patch_sdks(tape)" in message
    assert f"POST http://127.0.0.1:{answer.server.server_address[1]}/v1/chat" in message
    with pytest.raises(NetworkBlockedError), Tape(path, mode="replay"):
        urllib.request.urlopen(urllib.request.Request(answer.url, b"{}"))
    caught = pytest.raises(NetworkBlockedError, match="caught this error")
    with caught, Tape(path, mode="replay") as tape:
        with contextlib.suppress(Exception):
            client.post(answer.url, json={})
        tape.call("tool", {"name": "t", "step": 1}, lambda: 2)
    with Tape(path, mode="replay", allow_network=True) as tape:
        assert client.post(answer.url, json={}).text == "ok"
        tape.call("tool", {"name": "t", "step": 1}, lambda: 2)
    with Tape(path, mode="replay") as tape, tracetape.patch_http(tape):
        tape.call("tool", {"name": "t", "step": 1}, lambda: 2)
    assert client.post(answer.url, json={}).text == "ok"  # outside a tape: untouched
    with Tape(path, mode="rewrite") as tape:  # recording: live
        assert client.post(answer.url, json={}).text == "ok"
    client.close()


def test_a_fork_that_fails_before_it_diverges_says_so(tmp_path: Path) -> None:
    """The branch of a fork that never went live and then raised names why it stopped, and a
    replay past a failed recording says the agent raised."""
    parent = tmp_path / "run.jsonl"
    with Tape(parent, mode="record") as tape:
        _three_steps(tape, "test")
    branch = tmp_path / "b.jsonl"
    with contextlib.suppress(ValueError), Tape(parent, mode="fork", branch=branch) as tape:
        tape.call("llm", {"messages": [{"role": "user", "content": "plan"}], "step": 1}, str)
        raise ValueError("the agent broke")
    cut = read_cassette(branch)
    assert cut.ended == "failed: ValueError" and len(cut) == 1
    assert cut.header is not None
    assert cut.header["fork"]["reason"] == "no divergence before the run ended (failed: ValueError)"
    with pytest.raises(ReplayMiss) as raised, Tape(branch, mode="replay") as again:
        _three_steps(again, "test")
    assert "the recording stopped when the agent raised ValueError after 1 decisions" in str(
        raised.value
    )


def test_rules_compare_by_what_they_do(tmp_path: Path) -> None:
    """The order of ignored paths means nothing (they are kept sorted); the masks' order is
    theirs (each masks what the one before left)."""
    from tracetape import Match

    assert Match(ignore=["b", "a", "b"]) == Match(ignore=("a", "b"))
    assert Match(mask=["uuid", "ts"]) != Match(mask=["ts", "uuid"])
    path = tmp_path / "r.jsonl"
    with Tape(path, mode="record", match=Match(ignore=["user", "metadata"])) as tape:
        tape.call("llm", {"messages": [], "params": {"user": "u"}, "step": 1}, lambda: "ok")
    with Tape(path, mode="replay", match=Match(ignore=["metadata", "user"])) as tape:
        assert tape.call("llm", {"messages": [], "params": {"user": "v"}, "step": 1}, str) == "ok"


def test_a_fork_replays_a_decision_that_holds_a_secret(tmp_path: Path) -> None:
    """A recorded input holding a secret is stored redacted: the fork finds it as replay
    does (keyed again after redaction), rather than going live at it."""
    parent = tmp_path / "run.jsonl"
    secret = "sk-proj-Zq8xW3vN7mK2pL9tR4yB6cD1fG5hJ0aS3e"
    payload = {"messages": [{"role": "user", "content": f"use {secret}"}], "step": 1}
    with Tape(parent, mode="record") as tape:
        tape.call("llm", payload, lambda: "recorded")
    assert secret not in parent.read_text()
    with Tape(parent, mode="fork", branch=tmp_path / "b.jsonl") as tape:
        assert tape.call("llm", payload, lambda: "live") == "recorded"
        assert tape.call("tool", {"name": "t", "step": 2}, lambda: "live") == "live"
    assert tape.fork_point is not None and tape.fork_point["seq"] == 2


@pytest.mark.parametrize(
    ("value", "factor"),
    [
        pytest.param(1000, 1000.0, id="the-bound"),
        pytest.param("1000", 1000.0, id="the-bound-as-text"),
        pytest.param(0, 0.0, id="zero"),
        pytest.param(1000.001, None, id="just-over"),
        pytest.param(-0.001, None, id="just-under"),
        pytest.param(float("inf"), None, id="infinite"),
    ],
)
def test_the_replay_latency_factor_is_bounded_at_1000_on_both_sides(
    value: Any, factor: float | None
) -> None:
    """A factor from 0 to 1000 is taken as given, the bounds included; a hair past either
    bound, or infinity, is refused naming the range."""
    from tracetape.tape import latency_factor

    if factor is None:
        with pytest.raises(ValueError, match="a factor from 0 to 1000"):
            latency_factor(value)
    else:
        assert latency_factor(value) == factor


def test_a_payloads_unkeyed_field_is_stored_never_keyed(tmp_path: Path) -> None:
    """``tape.call`` with a top-level ``unkeyed`` field: stored with the input, out of the
    key (``tracetape.key`` agrees); a replay sending another value plays the recording, and
    a miss on the keyed part names the unkeyed difference as not compared."""
    path = tmp_path / "run.jsonl"

    def fetch(tape: Tape, query: str, request_id: str) -> Any:
        payload = {"name": "fetch", "args": {"q": query}, "step": 1,
                   "unkeyed": {"request_id": request_id}}  # fmt: skip
        return tape.call("tool", payload, lambda: f"found {query}")

    with Tape(path, mode="record") as tape:
        assert fetch(tape, "x", "r-1") == "found x"
    rec = read_cassette(path).records[0]
    assert rec.input["unkeyed"] == {"request_id": "r-1"}
    assert rec.key == tracetape.key("tool", {"name": "fetch", "args": {"q": "x"}, "step": 1})
    with Tape(path, mode="replay") as tape:
        assert fetch(tape, "x", "r-2") == "found x"
    with pytest.raises(ReplayMiss) as caught, Tape(path, mode="replay") as tape:
        fetch(tape, "y", "r-3")
    assert caught.value.changes == ["args.q"]
    assert "differing too, not compared (fields that never reach the model" in str(caught.value)
    assert "unkeyed.request_id" in str(caught.value)
