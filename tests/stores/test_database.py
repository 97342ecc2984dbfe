"""The database store: the schema's versions and their migrations (a database the 0001
collector wrote, upgraded), and ``DatabaseStore`` under a tape."""

from __future__ import annotations

from pathlib import Path

import pytest

from tracetape import Record, Tape
from tracetape.stores.database import Database, DatabaseStore

FIXTURES = Path(__file__).parent.parent / "fixtures"


def test_a_tape_records_into_and_replays_from_the_database(db: Database) -> None:
    """DatabaseStore is a RecordStore: record, replay, re-record (a crashed run's recording is
    kept, as a file store keeps it); an aborted recording leaves the old run."""
    store = DatabaseStore(db, "agent-1")
    with Tape(store, mode="record") as tape:
        assert tape.call("tool", {"name": "ls", "args": {}, "step": 1}, lambda: ["a"]) == ["a"]
    with Tape(DatabaseStore(db, "agent-1"), mode="replay") as tape:
        assert tape.call("tool", {"name": "ls", "args": {}, "step": 1}, lambda: ["b"]) == ["a"]
    with pytest.raises(RuntimeError), Tape(DatabaseStore(db, "agent-1"), mode="rewrite") as tape:
        tape.call("tool", {"name": "ls", "args": {}, "step": 1}, lambda: ["c"])
        raise RuntimeError("the agent crashed")
    assert [r.out for r in db.records("agent-1")] == [["c"]]
    assert not db.run_exists("agent-1~pending")
    assert db.endings(["agent-1"]) == {"agent-1": "failed: RuntimeError"}  # the commit's
    store = DatabaseStore(db, "agent-1")
    store.begin({})
    store.append(Record(kind="tool", name="ls", step=1, out=["d"]))
    store.abort()
    assert [r.out for r in db.records("agent-1")] == [["c"]]
    assert not db.run_exists("agent-1~pending")
    with pytest.raises(ValueError, match="is not a run id"):
        DatabaseStore(db, "a b")


def _rec(run: str, step: int, **fields: object) -> Record:
    return Record(kind="tool", run=run, name="ls", step=step, **fields)  # type: ignore[arg-type]


def test_a_line_key_is_stored_once_per_table(db: Database) -> None:
    """The same keys in another batch are known, not stored; a batch sent again whole is a
    duplicate; lines without keys (a tape's own store) are always stored."""
    first = db.store([_rec("r1", 1), _rec("r1", 2)], digest="a", keys=[11, 12], source="f")
    assert (first.events, first.known, first.duplicate) == (2, 0, False)
    again = db.store([_rec("r1", 2), _rec("r1", 3)], digest="b", keys=[12, 13], source="f")
    assert (again.events, again.known) == (1, 1)
    whole = db.store([_rec("r1", 2), _rec("r1", 3)], digest="b", keys=[12, 13], source="f")
    assert whole.duplicate and whole.events == 0
    bare = db.store([_rec("r1", 4)], digest="c", source="f")
    assert bare.events == 1
    assert [r.step for r in db.records("r1")] == [1, 2, 3, 4]
    assert db.runs_by_id(["r1"])[0]["events"] == 4


def test_a_run_refuses_another_source_unless_appended(db: Database) -> None:
    from tracetape.stores.database import RunConflict

    db.store([_rec("r1", 1)], digest="a", keys=[1], source="runs/run.jsonl")
    with pytest.raises(RunConflict, match=r"runs/run\.jsonl.*other/run\.jsonl"):
        db.store([_rec("r1", 2)], digest="b", keys=[2], source="other/run.jsonl")
    assert len(db.records("r1")) == 1  # nothing of the refused batch
    db.store([_rec("r1", 2)], digest="c", keys=[2], source="other/run.jsonl", append=True)
    assert len(db.records("r1")) == 2


def test_a_runs_tokens_saturate_at_64_bits(db: Database) -> None:
    top = (1 << 63) - 1
    db.store([_rec("r1", 1, tokens=1 << 62) for _ in range(3)], digest="a")
    db.store([_rec("r1", 2, tokens=top)], digest="b")
    assert db.runs_by_id(["r1"])[0]["tokens"] == top


def test_rewrite_changes_only_the_rows_that_quote_the_text(db: Database) -> None:
    db.store([_rec("r1", 1, out="said 100%_sure"), _rec("r1", 2, out="other")], digest="a")
    db.store([_rec("r2", 1, out="said 100%_sure")], digest="b")
    seen: list[bytes] = []

    def fix(text: bytes) -> bytes:
        seen.append(text)
        return text.replace(b"100%_sure", b"[gone]")

    # LIKE's wildcards in the text are literal: "100%_sure" does not match "other"
    assert db.rewrite("r1", fix, ["100%_sure"]) == 1
    assert len(seen) == 1
    assert [r.out for r in db.records("r1")] == ["said [gone]", "other"]
    assert [r.out for r in db.records("r2")] == ["said 100%_sure"]  # another run is untouched


def test_a_verdict_is_kept_only_for_the_records_it_read(db: Database) -> None:
    """A verdict computed from runs another writer added lines to meanwhile is not kept: the
    counts it read must still be the runs' own; clearing forgets it for both runs it read."""
    db.store([_rec("r1", 1)], digest="d1", source="s")
    db.store([_rec("r2", 1)], digest="d2", source="s")
    assert not db.set_verdict("r2", "r1", "stale", (1, 2))  # r2 holds 1 record, not 2
    assert not db.set_verdict("r2", "r1", "stale", (3, 1))  # r1 holds 1 record, not 3
    assert db.set_verdict("r2", "r1", "B diverged", (1, 1))
    row = next(r for r in db.runs(limit=10) if r["run_id"] == "r2")
    assert (row["verdict"], row["verdict_of"]) == ("B diverged", "r1")
    db.clear_verdicts(["r1"])  # the run it was read against changed
    row = next(r for r in db.runs(limit=10) if r["run_id"] == "r2")
    assert (row["verdict"], row["verdict_of"]) == (None, None)


def test_kept_pages_are_read_back_forgotten_with_their_runs_and_bounded(db: Database) -> None:
    """A kept page reads back whole; forgetting a run forgets every page that read it (as
    either side) and no other; past ``KEPT_PAGES`` the oldest go, the newest stay."""
    db.keep_page("k1", ("r1", "r2"), b"one")
    db.keep_page("k2", ("r3", "r1"), b"two")
    db.keep_page("k3", ("r3", "r4"), b"three")
    db.keep_page("k3", ("r3", "r4"), b"three again")  # the same key: replaced
    assert (db.page("k1"), db.page("k3"), db.page("nope")) == (b"one", b"three again", None)
    db.forget_pages(["r1"])
    assert (db.page("k1"), db.page("k2"), db.page("k3")) == (None, None, b"three again")
    db.KEPT_PAGES = 2
    for i in range(4):
        db.keep_page(f"n{i}", ("a", "b"), str(i).encode())
    assert [db.page(k) for k in ("k3", "n0", "n1", "n2", "n3")] == [None, None, None, b"2", b"3"]
