"""What each compared run came to (the report's ``summary``): calls, steps, tokens, cost,
duration, ending and final answer, from the records where the inputs hold them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest

from tests.analysis.helpers import SEED_A, SEED_B, diff
from tracetape import Tape
from tracetape.analysis import diff_records, diff_traces, load
from tracetape.record import Record, RecordTexts


def _answer(text: str) -> dict[str, Any]:
    message = {"role": "assistant", "content": text}
    return {"status": 200, "body": {"choices": [{"index": 0, "message": message}]}}


def _run(run: str, final: str, ms: float) -> list[Record]:
    api = "openai.chat.completions"
    return [
        Record(kind="tool", run=run, name="w", step=1, input={"args": {"c": 1}}, out="9",
               out_digest="9", ms=ms),
        Record(kind="llm", run=run, name="gpt-4o-mini", step=1, api=api,
               input={"messages": [{"role": "user", "content": "hi"}]}, out=_answer(final),
               out_digest=final, usage={"input": 1000, "output": 100}, tokens=1100, ms=ms),
    ]  # fmt: skip


def test_the_summary_of_two_runs_from_their_records() -> None:
    """Calls, steps and tokens from the engine; the price of each priced model call summed;
    the records' ms summed; the last model answer's text, and whether it changed."""
    summary = diff_records(_run("a", "Pack a coat.", 5), _run("b", "Pack a hat.", 7)).to_dict()
    data = summary["summary"]
    assert data["calls"] == [2, 2] and data["steps"] == [1, 1] and data["tokens"] == [1100, 1100]
    assert data["cost"] == [pytest.approx(0.00021), pytest.approx(0.00021)]
    assert data["duration_ms"] == [10, 14]
    assert data["ending"] == [None, None]
    assert data["final"] == {"changed": True, "before": "Pack a coat.", "after": "Pack a hat."}
    assert summary["origin"]["cause"] == "model"


def test_store_texts_and_records_give_the_same_summary() -> None:
    """A store's texts (read by DuckDB, the records decoded only where the summary needs
    them) summarize as the records do."""
    a, b = _run("a", "x", 1), _run("b", "y", 2)
    texts = [RecordTexts([msgspec.json.encode(r) for r in run]) for run in (a, b)]
    assert diff_records(*texts).to_dict()["summary"] == diff_records(a, b).to_dict()["summary"]


def test_seed_summary_holds_only_what_seed_lines_say(tmp_path: Path) -> None:
    """Seed JSONL holds no answer, timing, price or ending: null each, never a guessed zero;
    the final answer is not said to change."""
    data = diff(tmp_path, SEED_A, SEED_B).to_dict()["summary"]
    assert data["calls"] == [2, 1] and data["tokens"] == [1624, 817]
    assert (data["cost"], data["duration_ms"], data["ending"]) == (None, None, [None, None])
    assert data["final"] == {"changed": False, "before": None, "after": None}


def _cassette(path: Path, answer: str, *, fail: bool = False) -> Path:
    try:
        with Tape(path, mode="record", harness_sha="t") as tape:
            tape.call("tool", {"name": "w", "args": {"c": 1}, "step": 1}, lambda: "9")
            if fail:
                raise ValueError("boom")
            tape.call("llm", {"messages": ["hi"], "step": 1}, lambda: {"content": answer})
    except ValueError:
        pass
    return path


def test_cassettes_read_again_or_kept_summarize_alike(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cassette too large to keep is read again for the calls the report shows: the same
    summary and origin as one kept as read; its trailer gives each run's ending."""
    a, b = _cassette(tmp_path / "a.jsonl", "Pack."), _cassette(tmp_path / "b.jsonl", "x", fail=True)
    kept = diff_traces(a, b).to_dict()
    monkeypatch.setattr(load, "KEEP_BYTES", 0)
    again = diff_traces(a, b).to_dict()
    assert kept["summary"] == again["summary"] and kept["origin"] == again["origin"]
    assert kept["summary"]["ending"] == ["completed", "failed: ValueError"]
    assert kept["summary"]["final"] == {"changed": True, "before": "Pack.", "after": None}
    assert kept["origin"]["side"] == "ending" and kept["origin"]["call"] == 2
    assert kept["origin"]["changes"] == [
        {
            "path": "ending",
            "before": "completed after 2 calls",
            "after": "failed: ValueError after 1 call",
        }
    ]
    finding = next(f for f in kept["findings"] if f["pattern"] == "divergence")
    assert finding["severity"] == "fatal"


@pytest.mark.parametrize(
    ("before", "after", "changed"),
    [
        pytest.param("x" * 300 + "A", "x" * 300 + "B", True, id="differs-past-the-width"),
        pytest.param("x" * 300 + "A", "x" * 300 + "A", False, id="same-long-answer"),
        pytest.param("x" * 198 + "A", "x" * 198 + "B", True, id="differs-at-the-width"),
    ],
)
def test_a_final_answer_that_changes_past_its_brief_is_changed(
    before: str, after: str, changed: bool
) -> None:
    """Whether the final answer changed is read from the whole answers; where they differ
    past the brief's width, the briefs are cut around the first difference, so they show it."""
    final = diff_records(_run("a", before, 1), _run("b", after, 1)).to_dict()["summary"]["final"]
    assert final["changed"] is changed
    assert (final["before"] != final["after"]) is changed
    if changed:
        assert final["before"].endswith("A") and final["after"].endswith("B")
        assert len(final["before"]) <= 200
