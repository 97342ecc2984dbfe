"""``ForkStore``: a fork's branch, named for its fork point, written from it: its header
names the parent and the fork point, then the records replayed before it, then the rest."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tracetape import Record, Tape
from tracetape.formats.cassette import final_chain, new_header, read_cassette
from tracetape.stores.fork import ForkStore, branch_path


def test_a_branch_is_named_for_its_fork_point(tmp_path: Path) -> None:
    """``NAME.fork-3.jsonl`` for step 3, ``NAME.fork-miss.jsonl`` at the first miss, then
    ``-2``... while taken."""
    parent = tmp_path / "run.jsonl"
    assert branch_path(parent, 3).name == "run.fork-3.jsonl"
    (tmp_path / "run.fork-miss.jsonl").write_text("")
    assert branch_path(parent, None).name == "run.fork-miss-2.jsonl"


def test_a_branch_is_never_its_parent(tmp_path: Path) -> None:
    """A fork writes beside its parent, never over it."""
    with pytest.raises(ValueError, match="must not be its parent"):
        ForkStore(tmp_path / "run.jsonl", branch=tmp_path / "." / "run.jsonl")


def test_a_step_at_or_past_fork_at_is_due() -> None:
    """``fork_at`` 2 makes steps 2 and later go live; no ``fork_at``, none."""
    store = ForkStore(Path("/nowhere/run.jsonl"), 2)
    assert [store.due(step) for step in (None, 1, 2, 3)] == [False, False, True, True]
    assert not ForkStore(Path("/nowhere/run.jsonl")).due(5)


def _header(run_id: str, **fields: Any) -> dict[str, Any]:
    return new_header(run_id=run_id, **fields)


def test_going_live_writes_the_header_then_the_replayed_records(tmp_path: Path) -> None:
    """At the fork point the branch begins with its parent (path, final chain, run id) and
    the fork point in its header, then the records replayed so far; a second fork point is
    none, and the live rest is appended."""
    parent = tmp_path / "run.jsonl"
    with Tape(parent, mode="record", run_id="parent-1") as tape:
        tape.call("tool", {"name": "t", "step": 1}, lambda: 1)
    store = ForkStore(parent, 2)
    played = Record(kind="tool", key="tool:1", step=1, out=1)
    store.played(played)
    assert store.go_live(_header, {"run_id": "parent-1"}, None, kind="tool", key="tool:2",
                         step=2) == 1  # fmt: skip
    assert store.go_live(_header, {}, None, step=3) is None
    store.append(Record(kind="tool", key="tool:2", step=2, out=2))
    store.commit()
    branch = read_cassette(store.branch)
    assert branch.header is not None and branch.header["run_id"].startswith("run.fork-2@")
    assert branch.header["parent"] == {
        "path": str(parent), "chain": final_chain(parent), "run_id": "parent-1"
    }  # fmt: skip
    assert branch.header["fork"] == {
        "seq": 2, "step": 2, "kind": "tool", "key": "tool:2", "reason": "fork_at 2"
    }  # fmt: skip
    assert [r.out for r in branch.records] == [1, 2] and store.point == branch.header["fork"]
