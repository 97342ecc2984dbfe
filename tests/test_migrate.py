"""Migrating cassettes of older formats and keying: re-keyed, re-sealed, replayed the same."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest

from tracetape import Match, Tape, read_cassette
from tracetape.config import _load
from tracetape.errors import CassetteError
from tracetape.formats.cassette import KEYS_VERSION, verify_seal
from tracetape.migrate import migrate_cassette

sys.path.insert(0, str(Path(__file__).parent))
from test_tape import _fixture_agent  # the agent that recorded the format-1 fixture

FIXTURES = Path(__file__).parent / "fixtures"
SEED = FIXTURES / "recorded_by_the_seed.jsonl"  # format 0: tests/_seed.py's Tape wrote it
FORMAT_1 = FIXTURES / "recorded_before_record_model.jsonl"
KEYS_1 = FIXTURES / "recorded_before_conversation_steps.jsonl"
ENDLESS = FIXTURES / "recorded_before_trust_round_two.jsonl"  # a trailer without its ending


def copy_fixture(fixture: Path, tmp_path: Path) -> Path:
    """A copy of ``fixture`` in ``tmp_path``, to migrate in place."""
    path = tmp_path / fixture.name
    shutil.copy(fixture, path)
    return path


def _seed_agent(tape: Any) -> list[Any]:
    """The calls that recorded ``SEED`` (see its generation in the fixture's history)."""
    first = [{"role": "user", "content": "fix the flaky test"}]
    return [
        tape.call("llm", {"messages": first, "step": 1}, lambda: 1 / 0),
        tape.call("tool", {"name": "pytest", "args": {"k": "flaky"}, "step": 1}, lambda: 1 / 0),
        tape.call(
            "llm",
            {"messages": [*first, {"role": "tool", "content": "1 failed"}], "step": 2},
            lambda: 1 / 0,
        ),
    ]


@pytest.fixture(autouse=True)
def _no_project_rules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test runs in its own folder: no pyproject's match rules but its own."""
    monkeypatch.chdir(tmp_path)
    _load.cache_clear()


def test_a_seed_cassette_migrates_to_a_sealed_one_that_replays(tmp_path: Path) -> None:
    path = copy_fixture(SEED, tmp_path)
    found = migrate_cassette(path)
    assert found.written and found.format == 0 and found.changes[0] == "format 0 -> 2 (sealed)"
    assert found.backup == path.with_name(path.name + ".bak")
    assert found.backup.read_bytes() == SEED.read_bytes()
    assert verify_seal(path).state == "sealed"
    header = read_cassette(path).header
    assert header is not None and header["migrated"]["from"] == {"format": 0, "keys": 1}
    with Tape(path, "replay", strict=True) as tape:
        outs = _seed_agent(tape)
    assert outs == [{"content": "run the tests", "tool": "pytest"}, "1 failed", {"content": "done"}]


def test_a_format_1_cassette_migrates_and_replays_every_decision(tmp_path: Path) -> None:
    path = copy_fixture(FORMAT_1, tmp_path)
    before = read_cassette(path)
    found = migrate_cassette(path, backup=False)
    assert found.changes == [  # its calls are tape.call's: their steps stay the code's
        "format 1 -> 2 (sealed)",
        f"keys 1 -> {KEYS_VERSION} (no hooked model call)",
    ]
    assert found.backup is None and not path.with_name(path.name + ".bak").exists()
    after = read_cassette(path)
    assert after.format == 2 and verify_seal(path).state == "sealed"
    assert [r.out for r in after] == [r.out for r in before]
    with Tape(path, "replay", harness_sha="fixture", strict=True) as tape:
        found_hits = _fixture_agent(tape)
    assert found_hits == [{"hits": [f"test_{i}.py"], "score": 0.5} for i in (1, 2, 3)]


def test_a_cassette_keyed_per_thread_gets_conversation_steps(tmp_path: Path) -> None:
    path = copy_fixture(KEYS_1, tmp_path)
    migrate_cassette(path)
    steps = [(r.kind, r.step) for r in read_cassette(path)]
    assert steps == [
        ("llm", 1), ("tool", 1), ("llm", 2), ("tool", 2), ("llm", 3), ("tool", 3), ("llm", 4)
    ]  # fmt: skip
    assert read_cassette(path).header["keys"] == KEYS_VERSION  # type: ignore[index]


def test_a_secret_an_older_tracetape_stored_is_redacted_by_the_migration(tmp_path: Path) -> None:
    path = copy_fixture(ENDLESS, tmp_path)
    assert b"sk-proj-" in path.read_bytes()
    found = migrate_cassette(path, backup=False)
    assert any("secret redacted now" in change for change in found.changes)
    assert b"sk-proj-" not in path.read_bytes()


def test_project_rules_re_key_cassettes_under_them(tmp_path: Path) -> None:
    with Tape("r.jsonl", "record") as tape:
        tape.call("llm", {"messages": ["job 0b7e1b2c-6a1f-4c1e-9a51-8f0b8f9b2a11"], "step": 1},
                  lambda: "ok")  # fmt: skip
    assert migrate_cassette("r.jsonl", check=True).changes == []
    (tmp_path / "pyproject.toml").write_text('[tool.tracetape.match]\nmask = ["uuid"]\n')
    _load.cache_clear()
    found = migrate_cassette("r.jsonl")
    assert found.changes == ["match rules: none -> mask uuid", "1 of 1 record(s) re-keyed"]
    with Tape("r.jsonl", "replay") as tape:
        other = {"messages": ["job 11111111-2222-3333-4444-555555555555"], "step": 1}
        assert tape.call("llm", other, lambda: "live") == "ok"


def test_a_migration_that_would_not_replay_the_same_replaces_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = copy_fixture(FORMAT_1, tmp_path)
    import tracetape.migrate as migration

    real = migration._current

    def shuffled(*args: Any, **kwargs: Any) -> list[Any]:
        records = real(*args, **kwargs)  # the second record takes the first one's key
        return [records[0], msgspec.structs.replace(records[1], key=records[0].key), *records[2:]]

    monkeypatch.setattr(migration, "_current", shuffled)
    with pytest.raises(CassetteError, match="does not replay record #2"):
        migrate_cassette(path)
    assert path.read_bytes() == FORMAT_1.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]


def test_rules_given_to_a_tape_are_written_by_the_migration_too(tmp_path: Path) -> None:
    with Tape("m.jsonl", "record", match=Match(ignore=["user"])) as tape:
        tape.call("llm", {"messages": [], "params": {"user": "a"}, "step": 1}, lambda: 1)
    assert migrate_cassette("m.jsonl", check=True).changes == []  # its own rules are current


MATCHED = FIXTURES / "recorded_with_match_rules_and_an_ending.jsonl"  # this release's format


def test_a_cassette_of_this_release_is_current_replays_and_migrates_as_it_is(
    tmp_path: Path,
) -> None:
    """Kept for the next format change: a cassette with match rules in its header and an
    ending in its trailer (interrupted) reads, verifies, replays under its own rules, and
    needs no migration but its keys version raised (it has no hooked model call)."""
    path = copy_fixture(MATCHED, tmp_path)
    assert verify_seal(path).state == "sealed"
    cassette = read_cassette(path)
    assert cassette.ended == "interrupted"
    assert cassette.header is not None
    assert cassette.header["match"] == {"ignore": ["user"], "mask": ["uuid", "ts"]}
    found = migrate_cassette(path, check=True)
    assert (
        found.changes == [f"keys 2 -> {KEYS_VERSION} (no hooked model call)"] and not found.rekeyed
    )
    prompt = "job 11111111-2222-3333-4444-555555555555 at 2026-01-01T00:00:00Z: find the flaky test"
    with Tape(path, "replay", harness_sha="fixture", strict=True) as tape:
        first = {"messages": [{"role": "user", "content": prompt}],
                 "params": {"model": "m", "user": "someone else"}, "step": 1}  # fmt: skip
        assert tape.call("llm", first, lambda: 1 / 0) == {"content": "run it", "tool": "pytest"}
        tool = {"name": "pytest", "args": {"k": "flaky"}, "step": 1}
        assert tape.call("tool", tool, lambda: 1 / 0) == "1 failed"


@pytest.mark.parametrize(
    ("cut", "ended"),
    [
        pytest.param(True, "interrupted", id="trailer-cut-off"),
        pytest.param(False, "completed", id="whole"),
    ],
)
def test_a_cut_cassette_migrates_as_an_interrupted_recording(
    tmp_path: Path, cut: bool, ended: str
) -> None:
    """A cassette of older keys whose trailer never came (its recorder was killed) migrates
    to a sealed one that says it was interrupted; the same cassette whole, completed."""
    path = copy_fixture(KEYS_1, tmp_path)
    if cut:
        lines = path.read_bytes().splitlines(keepends=True)
        path.write_bytes(b"".join(lines[:-1]))
        assert read_cassette(path).ended == "unfinished"
    migrate_cassette(path)
    assert read_cassette(path).ended == ended
    assert verify_seal(path).state == "sealed"


def test_an_edited_cassette_is_not_migrated_unless_its_edits_are_trusted(tmp_path: Path) -> None:
    """A sealed cassette edited by hand is refused, nothing changed (migrating would seal the
    edit as if recorded), also by ``check``; ``trust_edits`` migrates it as edited."""
    path = copy_fixture(KEYS_1, tmp_path)  # older keys: migrating it rewrites it
    lines = path.read_bytes().splitlines(keepends=True)
    assert lines[3].count(b'"id":"chatcmpl-4"') == 1
    edited = b"".join([*lines[:3], lines[3].replace(b'"id":"chatcmpl-4"', b'"id":"chatcmpl-5"'),
                       *lines[4:]])  # fmt: skip
    path.write_bytes(edited)
    for check in (False, True):
        with pytest.raises(CassetteError, match=r"jsonl:4: the record was changed .*--trust-edits"):
            migrate_cassette(path, check=check)
    assert path.read_bytes() == edited and not list(tmp_path.glob("*.bak"))
    found = migrate_cassette(path, trust_edits=True)
    assert found.written and verify_seal(path).state == "sealed"
    assert b'"id":"chatcmpl-5"' in path.read_bytes()
