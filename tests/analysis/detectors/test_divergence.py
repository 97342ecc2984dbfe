"""Where two runs part: the first divergence of their requests (changed field paths, the end
of the shorter run, a divergence at a write), and the origin: the first call whose request or
answer differs, its cause, what it explains, the independent changes after it, and severity
by effect."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.analysis.agent_pairs import record_all
from tests.analysis.helpers import call, diff, patterns, write_jsonl
from tracetape.analysis import AnalysisConfig, Severity, diff_traces
from tracetape.analysis.render import render_text
from tracetape.analysis.rules import classify_table
from tracetape.formats.otlp import cassette_to_otlp


def test_first_divergence_names_the_changed_field_paths(tmp_path: Path) -> None:
    """The first position where the runs disagree is reported with both calls and field paths."""
    a = [
        call("A", 1, "search", {"q": "x", "page": 1}, "o1"),
        call("A", 2, "read", {"path": "f", "opts": {"n": 1}}, "o2"),
    ]
    b = [
        call("B", 1, "search", {"q": "x", "page": 1}, "o1"),
        call("B", 2, "read", {"path": "f", "opts": {"n": 2}}, "o2"),
    ]
    report = diff(tmp_path, a, b)
    div = report.divergence
    assert div is not None
    assert div.position == 2
    assert report.aligned == 1
    assert [c.path for c in div.changes] == ["args.opts.n"]
    assert (div.a["run"], div.b["run"], div.a["step"]) == ("A", "B", 2)  # type: ignore[index]
    assert patterns(report) == ["divergence", "replay-miss"]


def test_a_run_that_stops_early_diverges_at_its_end(tmp_path: Path) -> None:
    """When one run is a prefix of the other, the divergence is where the shorter one ended."""
    a = [call("A", 1, "s", {"i": 1}, "o"), call("A", 2, "s", {"i": 2}, "o")]
    report = diff(tmp_path, a, a[:1])
    assert report.divergence is not None
    assert report.divergence.position == 2
    assert report.divergence.b is None


def test_a_divergence_at_a_write_is_fatal(tmp_path: Path) -> None:
    """Runs that diverge at a write call produce a fatal divergent-write finding."""
    a = [call("A", 1, "write_file", {"path": "x", "body": "1"}, "ok", effect="write")]
    b = [call("B", 1, "write_file", {"path": "x", "body": "2"}, "ok", effect="write")]
    report = diff(tmp_path, a, b)
    assert report.worst is Severity.FATAL
    assert "divergent-write" in patterns(report)


# -- the origin: recorded runs of a real openai-SDK agent (tests/analysis/agent_pairs.py) ------


@pytest.fixture(scope="module")
def tapes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every variant of the agent, recorded once through ``tracetape run``."""
    return record_all(tmp_path_factory.mktemp("pairs"))


def origin_of(tapes: dict[str, Path], variant: str) -> dict[str, Any]:
    report = diff_traces(tapes["base"], tapes[variant])
    data = report.to_dict()
    assert data["origin"] is not None
    return data


@pytest.mark.parametrize(
    ("variant", "expected"),
    [
        pytest.param("model", (2, 1, "llm", "output", "model", [3, 4]), id="model"),
        pytest.param("tool", (3, 1, "tool", "output", "tool", [4]), id="tool"),
        pytest.param("env", (1, 1, "env", "output", "env", [2, 4]), id="env"),
        pytest.param("input", (2, 1, "llm", "input", "input", [4]), id="input"),
        pytest.param("prompt", (2, 1, "llm", "input", "prompt", [4]), id="prompt"),
        pytest.param("config", (2, 1, "llm", "input", "config", []), id="config"),
        pytest.param("code", (3, 1, "tool", "input", "code", [4]), id="code"),
        pytest.param("ending", (3, 1, "tool", "ending", "ending", [4]), id="ending"),
    ],
)
def test_the_origin_names_the_call_its_side_and_its_cause(
    tapes: dict[str, Path], variant: str, expected: tuple[Any, ...]
) -> None:
    """Each pair differs by one known cause: the origin is the first call that differs (the
    request, or the answer to the same request), with that cause (call, step, kind, side,
    cause), and explains every later difference."""
    call, step, kind, side, cause, explains = expected
    data = origin_of(tapes, variant)
    origin = data["origin"]
    assert (origin["call"], origin["step"], origin["kind"], origin["side"]) == (
        call, step, kind, side,
    )  # fmt: skip
    assert (origin["cause"], origin["causes"]) == (cause, [cause])
    assert origin["explains"] == explains and origin["explained"] == len(explains)
    assert origin["changes"], "the changed paths are named"
    divergences = [f for f in data["findings"] if f["pattern"] == "divergence"]
    assert len(divergences) == 1 and divergences[0]["call"] == call
    assert divergences[0]["step"] == step and divergences[0]["evidence"]["cause"] == cause


def test_the_model_answering_the_same_request_otherwise_is_the_origin_not_the_next_call(
    tapes: dict[str, Path],
) -> None:
    """The issue's case: the same request at step 1 got a final answer instead of a tool
    call; the origin is that call (#2), not the next one, and says both answers."""
    data = origin_of(tapes, "model")
    origin = data["origin"]
    assert origin["changes"] == [
        {"path": "answer.calls", "before": 'get_weather(city="Paris")', "after": None},
        {"path": "answer.text", "before": None, "after": "Pack a light jacket, it is spring."},
    ]
    assert (origin["a"], origin["b"]) == (
        'get_weather(city="Paris")',
        'final answer "Pack a light jacket, it is spring."',
    )
    summary = data["summary"]
    assert summary["calls"] == [4, 2] and summary["steps"] == [2, 1]
    assert summary["tokens"][1] < summary["tokens"][0]
    assert summary["ending"] == ["completed", "completed"]
    assert summary["final"] == {
        "changed": True,
        "before": "Pack a light jacket: 9°C in Paris.",
        "after": "Pack a light jacket, it is spring.",
    }
    assert all(ms > 0 for ms in summary["duration_ms"])
    drift = next(f for f in data["findings"] if f["pattern"] == "model-drift")
    assert (drift["call"], drift["step"]) == (2, 1)
    assert "freshness" not in drift["fix"] and "freshness" not in data["findings"][0]["fix"]


def test_a_tool_result_quoted_by_the_next_request_is_explained_not_a_new_root(
    tapes: dict[str, Path],
) -> None:
    """The env value the agent puts in its user message, and the tool result fed back, are
    explained by the call that changed them: one root each pair."""
    for variant, changed in (("env", ("eu", "us")), ("tool", ("9", "21"))):
        data = origin_of(tapes, variant)
        roots = [f for f in data["findings"] if f["pattern"] == "divergence"]
        assert len(roots) == 1, variant
        change = data["origin"]["changes"][0]
        assert (change["before"], change["after"]) == changed


def test_a_second_independent_change_is_its_own_finding(tapes: dict[str, Path]) -> None:
    """A changed tool result, then a temperature changed at step 2: two roots, the second
    naming only its own cause and change."""
    report = diff_traces(tapes["base"], tapes["tool+later-config"])
    assert [(r.call, r.step, r.cause) for r in report.roots] == [(3, 1, "tool"), (4, 2, "config")]
    assert [c["path"] for c in report.roots[1].changes] == ["params.temperature"]
    assert report.counts["divergence"] == 2
    lines = render_text(report).splitlines()
    assert lines[0].startswith("B diverged from A at step 1 (call #3): the tool get_weather")
    assert any(
        line.startswith("also, independently, at step 2 (call #4): the request's settings")
        for line in lines
    )


@pytest.mark.parametrize(
    ("variant", "severity"),
    [
        pytest.param("ending", Severity.FATAL, id="failed-ending-is-fatal"),
        pytest.param("model", Severity.SUSPICIOUS, id="changed-final-is-suspicious"),
        pytest.param("prompt", Severity.EXPECTED, id="same-final-is-expected"),
    ],
)
def test_severity_follows_the_effect(
    tapes: dict[str, Path], variant: str, severity: Severity
) -> None:
    """A failed ending is fatal, a changed final answer suspicious, a change that left the
    final answer and the ending alone expected."""
    report = diff_traces(tapes["base"], tapes[variant])
    finding = next(f for f in report.findings if f.pattern == "divergence")
    assert finding.severity is severity


def test_an_override_sets_the_divergence_severity_whatever_the_effect(
    tapes: dict[str, Path],
) -> None:
    """[tool.tracetape.severity] divergence = "fatal" holds for an expected change too."""
    config = AnalysisConfig(rules=classify_table({"divergence": "fatal"}))
    report = diff_traces(tapes["base"], tapes["prompt"], config=config)
    assert next(f for f in report.findings if f.pattern == "divergence").severity is Severity.FATAL


def test_runs_that_do_not_differ_have_no_origin(tapes: dict[str, Path]) -> None:
    """The same run diffed with itself: origin null, no divergence finding."""
    data = diff_traces(tapes["base"], tapes["base"]).to_dict()
    assert data["origin"] is None and data["divergence"] is None
    assert data["summary"]["final"]["changed"] is False
    assert not [f for f in data["findings"] if f["pattern"].startswith("diverg")]


def test_otlp_traces_of_the_runs_find_the_same_origin(
    tapes: dict[str, Path], tmp_path: Path
) -> None:
    """The runs exported as OTLP/JSON: the same origin as the cassettes', call for call (the
    export keeps every decision, the environment read that opens the runs too), with the same
    changes and what it explains."""
    for variant in ("model", "tool", "prompt"):
        files = []
        for name in ("base", variant):
            out = tmp_path / f"{name}.otlp.json"
            out.write_text(json.dumps(cassette_to_otlp(tapes[name])))
            files.append(out)
        cassette = diff_traces(tapes["base"], tapes[variant]).to_dict()["origin"]
        otlp = diff_traces(*files).to_dict()["origin"]
        assert otlp is not None, variant
        assert otlp == cassette, variant


def test_seed_jsonl_traces_get_the_causes_they_can_show(tmp_path: Path) -> None:
    """Seed lines hold a tool, its args and an output digest: a changed digest for the same
    args is ``tool``, changed args ``code``, a shorter run ``ending``."""
    a = [call("A", 1, "search", {"q": "x"}, "o1"), call("A", 2, "read", {"id": 1}, "o2")]
    cases = {
        "tool": [call("B", 1, "search", {"q": "x"}, "o9"), call("B", 2, "read", {"id": 1}, "o2")],
        "code": [call("B", 1, "search", {"q": "y"}, "o1"), call("B", 2, "read", {"id": 1}, "o2")],
        "ending": a[:1],
    }
    expected = {"tool": (1, "output", []), "code": (1, "input", []), "ending": (2, "ending", [])}
    for cause, b in cases.items():
        origin = diff(tmp_path, a, b).to_dict()["origin"]
        assert (origin["call"], origin["side"], origin["explains"]) == expected[cause]
        assert origin["cause"] == cause
    tool = diff(tmp_path, a, cases["tool"]).to_dict()["origin"]
    assert tool["changes"] == [{"path": "output_sha", "before": "o1", "after": "o9"}]


def test_interleaved_runs_count_their_own_calls(tmp_path: Path) -> None:
    """Two runs written line by line into one file (each run's calls not one stretch): the
    origin, the drift and the repeat each name the call's position in its own run."""
    a = [call("A", i, "s", {"i": i}, "o") for i in range(1, 5)]
    b = [call("B", i, "s", {"i": i}, "o" if i < 3 else "x") for i in range(1, 5)]
    b[3] = call("B", 4, "s", {"i": 3}, "o")  # B repeats call 3's args at its fourth call
    mixed = [line for pair in zip(a, b, strict=True) for line in pair]
    path = write_jsonl(tmp_path / "mixed.jsonl", mixed)
    report = diff_traces(path, runs=("A", "B"))
    data = report.to_dict()
    assert (data["origin"]["call"], data["origin"]["cause"]) == (3, "tool")
    assert data["origin"]["explains"] == [4]
    drift = next(f for f in data["findings"] if f["pattern"].endswith("drift"))
    assert (drift["call"], drift["step"]) == (3, 3)
    repeat = next(f for f in data["findings"] if f["pattern"] == "repeat-changed-output")
    assert (repeat["run"], repeat["call"], repeat["step"]) == ("B", 3, 3)
    packed = diff(tmp_path, a, b).to_dict()
    assert packed["origin"] == data["origin"]


def test_new_tool_call_ids_are_no_difference(tapes: dict[str, Path]) -> None:
    """A real provider gives each answer and tool call a new id, which the next request
    carries back: two runs that differ only so do not differ; with a changed tool result
    besides, the origin is that result, and the model call after it is explained."""
    report = diff_traces(tapes["base"], tapes["ids"])
    same = report.to_dict()
    assert same["origin"] is None
    # the answers' envelopes differ, not what they say: no drift, no mock mismatch
    assert [f["pattern"] for f in same["findings"]] == ["replay-miss"]
    assert same["replay"]["mismatches"] == 0
    line = next(x for x in render_text(report).splitlines() if x.startswith("no divergence"))
    assert line.endswith("from call #4 their requests differ only in the ids of earlier tool calls")
    tool = diff_traces(tapes["base"], tapes["ids+tool"]).to_dict()
    assert (tool["origin"]["call"], tool["origin"]["cause"]) == (3, "tool")
    assert tool["origin"]["explains"] == [4]
    assert [f["call"] for f in tool["findings"] if f["pattern"] == "divergence"] == [3]
