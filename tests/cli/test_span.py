"""tracetape span list|extract|replay|decide and tracetape explain: output and exit codes,
run as a user runs them (real processes)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.span.helpers import Decider, tool_call_reply, write_span
from tests.span.test_model import SEED_SPAN, record_agent

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable


def tracetape(*args: str, cwd: Path = ROOT, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PY, "-m", "tracetape", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, **env},
        check=False,
    )


def command_span(path: Path, code: str, stdout: str, **fields: object) -> Path:
    return write_span(
        path,
        span_id="7f3c",
        tool_call={"argv": [PY, "-c", code], "timeout_s": 10},
        tool_result={"exit_code": 0, "stdout": stdout, "stderr": ""},
        **fields,
    )


def test_span_list_and_extract(tmp_path: Path) -> None:
    """list shows id, run, step, tool, effect and exit code; extract writes the span as JSON
    that replay reads back."""
    trace = tmp_path / "trace.jsonl"
    trace.write_text(json.dumps(SEED_SPAN) + "\n")
    listed = tracetape("span", "list", str(trace))
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.split("\n")[1].split() == ["7f3c", "trace", "1", "git_diff_stat", "-", "0"]
    as_json = json.loads(tracetape("span", "list", str(trace), "--format", "json").stdout)
    assert as_json == [
        {"span_id": "7f3c", "run_id": "trace", "step": 1, "tool": "git_diff_stat",
         "effect": None, "exit_code": 0, "line": 1}
    ]  # fmt: skip
    out = tmp_path / "span.json"
    done = tracetape("span", "extract", str(trace), "--id", "7f", "-o", str(out))
    assert done.returncode == 0 and "wrote span 7f3c (git_diff_stat)" in done.stderr
    data = json.loads(out.read_text())
    assert data["tool_call"] == SEED_SPAN["tool_call"]
    assert data["model_decision"] == SEED_SPAN["model_decision"]
    assert out.read_text().startswith('{\n  "span_id": "7f3c"')  # indented
    printed = tracetape("span", "extract", str(trace), "--id", "7f3c")
    assert json.loads(printed.stdout) == data


def test_span_replay_prints_the_seed_lines_and_a_verdict(tmp_path: Path) -> None:
    """Mode both (the default) prints both lines and the verdict; exit 0."""
    span = command_span(tmp_path / "s.json", "print('3 files changed')", "3 files changed\n")
    done = tracetape("span", "replay", str(span))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[1].startswith("recorded=") and lines[1].endswith("stable=True")
    assert " run1=" in lines[1] and " run2=" in lines[1]
    assert lines[2].endswith("drift=False") and " live=" in lines[2]
    assert lines[-1].startswith("verdict: decision layer")
    det = tracetape("span", "replay", str(span), "--mode", "determinism")
    assert "drift=" not in det.stdout and "verdict" not in det.stdout
    drift = tracetape("span", "replay", str(span), "--mode", "drift", "--format", "json")
    data = json.loads(drift.stdout)
    assert (data["drift"], data["stable"], data["verdict"], data["runs"]) == (False, None, None, [])


def test_span_replay_json_gives_fingerprints_booleans_verdict_and_diff(tmp_path: Path) -> None:
    span = command_span(tmp_path / "s.json", "print('4 files changed')", "3 files changed\n")
    data = json.loads(tracetape("span", "replay", str(span), "--format", "json").stdout)
    assert data["verdict"] == "world drifted"
    assert data["stable"] is True and data["drift"] is True
    assert len(data["recorded"]) == 16 and data["runs"] == [data["live"], data["live"]]
    assert data["diff"] == [
        {"path": "stdout", "before": "3 files changed\n", "after": "4 files changed\n"}
    ]


def test_span_replay_from_a_trace_with_id_and_pinned_environment(tmp_path: Path) -> None:
    """A trace and --id is a span file; --env pins a variable; --pure-env drops the rest."""
    trace = tmp_path / "t.jsonl"
    line = {**SEED_SPAN, "tool_call": {"argv": [PY, "-c", "import os; print(os.environ['X'])"]},
            "tool_result": {"exit_code": 0, "stdout": "1\n", "stderr": ""}}  # fmt: skip
    trace.write_text(json.dumps(line) + "\n")
    done = tracetape("span", "replay", str(trace), "--id", "7f3c", "--env", "X=1", "--pure-env")
    assert done.returncode == 0, done.stderr
    assert "verdict: decision layer" in done.stdout
    bad = tracetape("span", "replay", str(trace), "--id", "7f3c", "--env", "X")
    assert bad.returncode == 2 and "'X' is not NAME=VALUE" in bad.stderr


@pytest.mark.parametrize(
    ("fields", "args", "message"),
    [
        pytest.param(
            {"tool_call": {"argv": ["tracetape-no-such-tool"]}},
            [],
            "is not installed here",
            id="not-installed",
        ),
        pytest.param(
            {"tool_call": {"argv": ["rm", "-rf", "/"]}, "effect": "irreversible"},
            [],
            "never run; pass a stub",
            id="write-without-stub",
        ),
        pytest.param(
            {"tool_call": {"name": "lookup", "args": {}}},
            [],
            "--call module:function",
            id="python-without-call",
        ),
        pytest.param(
            {"tool_call": {"argv": ["ls"]}},
            ["--call", "nope_mod:f"],
            "cannot import nope_mod",
            id="bad-call",
        ),
        pytest.param(
            {"tool_call": {"argv": ["ls"]}},
            ["--call", "nocolon"],
            "name a function as module:function",
            id="bad-spec",
        ),
    ],
)
def test_span_replay_refusals_exit_2_with_one_line(
    tmp_path: Path, fields: dict[str, object], args: list[str], message: str
) -> None:
    span = write_span(tmp_path / "s.json", span_id="1", tool_result=None, **fields)
    done = tracetape("span", "replay", str(span), *args)
    assert done.returncode == 2
    assert message in done.stderr
    assert done.stderr.startswith("tracetape: error: ") and "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("content", "message"),
    [
        pytest.param(None, "no such span file", id="missing"),
        pytest.param("{not json", "not one JSON span", id="bad-json"),
        pytest.param('{"span_id": 1}', "field tool_call: missing", id="no-call"),
    ],
)
def test_a_bad_span_file_exits_2(tmp_path: Path, content: str | None, message: str) -> None:
    path = tmp_path / "span.json"
    if content is not None:
        path.write_text(content)
    for cmd in (["replay"], ["decide", "--model", "m"]):
        done = tracetape("span", *cmd, str(path))
        assert done.returncode == 2 and message in done.stderr, (cmd, done.stderr)


def test_a_write_span_with_a_stub_is_compared_by_arguments(tmp_path: Path) -> None:
    """--stub: the stub (imported from the current folder) gets the recorded arguments."""
    (tmp_path / "stubs.py").write_text(
        "import json, os\n"
        "def post(issue, body):\n"
        "    with open(os.environ['STUB_LOG'], 'a') as f:\n"
        "        f.write(json.dumps([issue, body]) + '\\n')\n"
        "    return {'posted': False}\n"
    )
    span = write_span(
        tmp_path / "s.json",
        span_id="w1",
        effect="write",
        tool_call={"name": "post_comment", "args": {"issue": 412, "body": "fix"}},
        tool_result={"posted": True},
    )
    log = tmp_path / "calls.log"
    done = tracetape(
        "span", "replay", str(span), "--stub", "stubs:post", cwd=tmp_path, STUB_LOG=str(log)
    )
    assert done.returncode == 0, done.stderr
    assert log.read_text().splitlines() == ['[412, "fix"]'] * 3
    assert "compared: the stub arguments" in done.stdout
    assert "verdict: decision layer" in done.stdout


def test_span_decide_against_a_local_endpoint(tmp_path: Path, decider: Decider) -> None:
    """decide: exit 0 with the verdict; --repeat gives the agreement; an error status is one
    line and exit 2."""
    trace = record_agent(tmp_path / "run.jsonl")
    listed = json.loads(tracetape("span", "list", str(trace), "--format", "json").stdout)
    first = listed[0]["span_id"]
    decider.reply = lambda body: tool_call_reply("search_issues", {"q": "parser drops exports"})
    done = tracetape(
        "span", "decide", str(trace), "--id", first, "--model", "m2", "--repeat", "2",
        "--base-url", decider.base_url, OPENAI_API_KEY="sk-secret-test-key",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "agreement: 2/2 (100%)" in done.stdout
    assert done.stdout.splitlines()[-1].startswith("verdict: same decision")
    assert decider.requests[0]["headers"]["Authorization"] == "Bearer sk-secret-test-key"
    assert "sk-secret-test-key" not in done.stdout + done.stderr
    decider.reply = lambda body: (503, {"error": {"message": "try later"}})
    failed = tracetape(
        "span", "decide", str(trace), "--id", first, "--model", "m2", "--base-url", decider.base_url
    )
    assert failed.returncode == 2
    assert failed.stderr.strip().endswith("answered HTTP 503: try later")


def test_explain_on_two_recorded_runs(tmp_path: Path) -> None:
    """The example agent: a drifted tool output gives world drifted; a changed prompt gives
    the decision layer, in text, JSON and Markdown; runs that never parted exit 0."""
    good = record_agent(tmp_path / "good.jsonl")
    data = tmp_path / "data"
    shutil.copytree(ROOT / "examples" / "agent" / "data", data)
    source = data / "repo" / "csv_parser.py"
    source.write_text(source.read_text().replace("rows[:-1]", "rows[:-2]"))
    bad = tmp_path / "bad.jsonl"
    task = "Find why the parser drops the last row of CSV exports"
    recorded = subprocess.run(
        [PY, "-m", "examples.agent", "--task", task, "--tape", str(bad), "--mode", "record"],
        cwd=ROOT, env={**os.environ, "EXAMPLE_AGENT_DATA": str(data)},
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert recorded.returncode == 0, recorded.stderr
    done = tracetape("explain", str(good), str(bad), "--call", "examples.agent:read_file")
    assert done.returncode == 0, done.stderr
    assert "Verdict: world drifted" in done.stdout
    assert "The runs parted at call #4 (step 2)" in done.stdout
    edited = record_agent(
        tmp_path / "edited.jsonl", "Find why the parser loses the last row of CSV exports"
    )

    def explained(fmt: str) -> subprocess.CompletedProcess[str]:
        call = "examples.agent:search_issues"
        return tracetape("explain", str(good), str(edited), "--call", call, "--format", fmt)

    md = explained("markdown")
    assert md.returncode == 0 and md.stdout.startswith("### tracetape explain: **decision layer**")
    js = json.loads(explained("json").stdout)
    assert js["verdict"] == "decision layer" and js["next"][0].startswith("tracetape span decide")
    assert (js["cause"], js["origin"]["cause"], js["origin"]["call"]) == ("input", "input", 1)
    same = tracetape("explain", str(good), str(good))
    assert same.returncode == 0 and "never parted" in same.stdout
    usage = tracetape("explain", str(good))
    assert usage.returncode == 2 and "give GOOD BAD" in usage.stderr
    missing = tracetape("explain", str(good), str(tmp_path / "none.jsonl"))
    assert missing.returncode == 2 and "none.jsonl" in missing.stderr


def test_span_config_in_pyproject(tmp_path: Path) -> None:
    """[tool.tracetape.span] names callables by tool; a wrong shape is exit 2 naming it."""
    (tmp_path / "tools.py").write_text("def lookup(city):\n    return {'city': city}\n")
    span = write_span(
        tmp_path / "s.json", span_id="p1",
        tool_call={"name": "lookup", "args": {"city": "Oslo"}}, tool_result={"city": "Oslo"},
    )  # fmt: skip
    (tmp_path / "pyproject.toml").write_text(
        '[tool.tracetape.span]\ncalls = { lookup = "tools:lookup" }\n'
    )
    done = tracetape("span", "replay", str(span), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "verdict: decision layer" in done.stdout
    (tmp_path / "pyproject.toml").write_text("[tool.tracetape.span]\ncalls = [1]\n")
    bad = tracetape("span", "replay", str(span), cwd=tmp_path)
    assert bad.returncode == 2 and "[tool.tracetape.span] calls must be a table" in bad.stderr
