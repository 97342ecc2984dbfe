"""`explain` on recorded runs of the example agent: from two runs to a verdict."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from examples import agent
from tests.span.helpers import Decider, tool_call_reply
from tests.span.test_model import record_agent
from tracetape.formats.otlp import cassette_to_otlp
from tracetape.span import (
    DECISION_LAYER,
    NONDETERMINISTIC,
    SAME,
    WORLD_DRIFTED,
    Explain,
    explain,
    read_spans,
)

EDITED = "Find why the parser loses the last row of CSV exports"


@pytest.fixture
def drifted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A good run, and a bad run recorded while the repository file read_file reads held
    another line (the world drifted for the bad run only)."""
    good = record_agent(tmp_path / "good.jsonl")
    data = tmp_path / "data"
    shutil.copytree(agent.DATA, data)
    source = data / "repo" / "csv_parser.py"
    source.write_text(source.read_text().replace("rows[:-1]", "rows[:-2]"))
    with monkeypatch.context() as m:
        m.setattr(agent, "DATA", data)
        bad = record_agent(tmp_path / "bad.jsonl")
    return good, bad


def test_a_tool_output_that_drifted_between_the_runs_is_world_drifted(
    drifted: tuple[Path, Path],
) -> None:
    """The runs part at the read_file call that returned another text (the origin: the model
    call after it only read it); that span is replayed live, is stable, and gives today what
    the good run recorded: world drifted, cause tool."""
    good, bad = drifted
    story = explain(good, bad, options=Explain(calls={"read_file": agent.read_file}))
    assert story.divergence is not None and story.divergence["position"] == 5
    assert story.origin is not None and story.origin["call"] == 4
    assert (story.origin["side"], story.origin["cause"]) == ("output", "tool")
    assert story.span is not None and story.span.tool == "read_file"
    assert story.relation == "the divergent call"
    assert story.recordings_differ
    assert [c["path"] for c in story.recording_changes] == ["text"]
    assert story.replay is not None
    assert (story.replay.stable, story.replay.drift) == (True, True)
    assert story.verdict == WORLD_DRIFTED
    assert "today gives what the good run recorded" in story.because
    assert story.cause == "tool" and story.to_dict()["cause"] == "tool"
    text = "\n".join(story.lines())
    assert "The runs parted at call #4 (step 2): the tool read_file returned another" in text
    assert "[cause: tool]" in text
    assert f"Next: tracetape span replay {bad} --id {story.span.span_id} --mode drift" in text


def test_an_unreplayable_tool_still_tells_where_the_runs_parted(
    drifted: tuple[Path, Path],
) -> None:
    """Without --call the story says why it did not replay and what to run."""
    good, bad = drifted
    story = explain(good, bad)
    assert story.replay is None
    assert story.not_replayed and "--call module:function" in story.not_replayed
    assert story.verdict == WORLD_DRIFTED  # the two recordings of one call differ
    assert "nondeterministic tool is not ruled out" in story.because
    assert story.next == [
        f"tracetape span replay {bad} --id {story.span.span_id} --call module:function"  # type: ignore[union-attr]
    ]


def test_a_changed_prompt_is_the_decision_layer(tmp_path: Path) -> None:
    """The runs part at the first model call; its tool is stable and as recorded, so the
    verdict is the decision layer, the changed prompt is shown, and decide is offered."""
    good = record_agent(tmp_path / "good.jsonl")
    bad = record_agent(tmp_path / "bad.jsonl", EDITED)
    story = explain(good, bad, options=Explain(calls={"search_issues": agent.search_issues}))
    assert story.divergence is not None and story.divergence["position"] == 1
    assert story.span is not None and story.span.tool == "search_issues"
    assert story.relation == "the tool call the divergent decision asked for"
    assert not story.recordings_differ
    assert story.verdict == DECISION_LAYER
    assert "args.messages[0].content" in story.because and "loses" in story.because
    assert story.next == [f"tracetape span decide {bad} --id {story.span.span_id} --model MODEL"]
    markdown = story.markdown()
    assert markdown.startswith("### tracetape explain: **decision layer**")
    assert "```console\n$ tracetape span decide" in markdown
    data = story.to_dict()
    assert data["verdict"] == DECISION_LAYER and data["replay"]["stable"] is True


def test_with_a_model_named_the_decision_is_replayed(tmp_path: Path, decider: Decider) -> None:
    """When the tool is cleared and a model is named, explain asks it."""
    good = record_agent(tmp_path / "good.jsonl")
    bad = record_agent(tmp_path / "bad.jsonl", EDITED)
    decider.reply = lambda body: tool_call_reply("search_issues", {"q": "parser loses exports"})
    options = Explain(
        calls={"search_issues": agent.search_issues}, model="m2", base_url=decider.base_url
    )
    story = explain(good, bad, options=options)
    assert story.decided is not None and story.decided.verdict == SAME
    assert story.next == []
    assert "Decision replayed:" in story.lines()


def test_runs_that_never_parted_have_nothing_to_explain(tmp_path: Path) -> None:
    good = record_agent(tmp_path / "good.jsonl")
    story = explain(good, record_agent(tmp_path / "again.jsonl"))
    assert story.divergence is None and story.verdict is None
    assert story.lines() == ["The runs never parted: they made the same decisions, call for call."]


def flaky_read(path: str) -> dict[str, object]:
    return {"path": path, "text": str(time.perf_counter_ns())}


def test_a_nondeterministic_tool_is_named_first(drifted: tuple[Path, Path]) -> None:
    """Two live runs that disagree make the verdict, whatever the recordings say."""
    good, bad = drifted
    story = explain(good, bad, options=Explain(calls={"read_file": flaky_read}))
    assert story.verdict == NONDETERMINISTIC
    assert story.next[0].endswith("--mode determinism --call module:function")


def test_two_runs_of_one_trace(tmp_path: Path) -> None:
    """--runs picks the good and the bad run among the runs of one file."""
    good = record_agent(tmp_path / "good.jsonl")
    bad = record_agent(tmp_path / "bad.jsonl", EDITED)

    both = tmp_path / "both.otlp.jsonl"
    both.write_text(
        json.dumps(cassette_to_otlp(good)) + "\n" + json.dumps(cassette_to_otlp(bad)) + "\n"
    )

    runs = list(dict.fromkeys(s.run for s in read_spans(both)))
    story = explain(
        both, runs=(runs[0], runs[1]), options=Explain(calls={"search_issues": agent.search_issues})
    )
    assert story.verdict == DECISION_LAYER
    assert story.span is not None and story.span.run == runs[1]
