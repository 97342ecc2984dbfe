"""tracetape diff / check / summarize: reports, formats and exit codes (0, 1, 2)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

from tests.analysis.helpers import call as rec
from tracetape.analysis import (
    TraceError,
    diff_records,
    diff_traces,
    render_markdown,
    render_text,
)
from tracetape.analysis.report import redacted
from tracetape.cli import main
from tracetape.record import Record


def write(path: Path, records: list[dict[str, Any]]) -> str:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    return str(path)


SEED_A = [
    rec("run_0042", 1, "search_issues", {"q": "broken:true", "page": 1}, "a1b2c3"),
    rec("run_0042", 2, "search_issues", {"q": "broken:true", "page": 1}, "a1b2c3"),
]
SEED_B = [rec("run_0043", 1, "search_issues", {"q": "broken:true", "page": 1}, "d4e5f6")]
WRITE_A = [rec("A", 1, "write_file", {"path": "x", "body": "1"}, "ok", effect="write")]
WRITE_B = [rec("B", 1, "write_file", {"path": "x", "body": "2"}, "ok", effect="write")]


def run(*args: str) -> Any:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.fixture
def seed_files(tmp_path: Path) -> tuple[str, str]:
    return write(tmp_path / "trace_run_0042.jsonl", SEED_A), write(
        tmp_path / "trace_run_0043.jsonl", SEED_B
    )


def test_diff_prints_the_seed_lines_then_a_severity_table(seed_files: tuple[str, str]) -> None:
    """diff A B prints the verdict first (where B diverged, why, what it explains, what each
    run came to), then the repeat, drift and replay lines and a severity table."""
    result = run("diff", *seed_files)
    assert result.exit_code == 0
    lines = result.output.splitlines()
    assert lines[:10] == [
        "B diverged from A at step 1 (call #1): the tool search_issues returned another result "
        "for the same call  [cause: tool]",
        "  A: output a1b2c3",
        "  B: output d4e5f6",
        "  changed: output_sha: a1b2c3 -> d4e5f6",
        "  this explains call #2 (A only)",
        "  B: 1 call (A 2), 100 tokens (A 200)",
        "  (A is run_0042, B is run_0043)",
        "repeat: run_0042 step 1 == step 2 (same args, same output)",
        "drift: search_issues -> 2 distinct outputs (step 1, call #1)",
        "replay: 1 unique call, 1 mock mismatch",
    ]
    assert any(line.startswith("duplicate-call   suspicious") for line in lines)


@pytest.mark.parametrize(
    ("fail_on", "a", "b", "code"),
    [
        pytest.param("fatal", SEED_A, SEED_B, 0, id="suspicious-only-passes-fatal-gate"),
        pytest.param("suspicious", SEED_A, SEED_B, 1, id="suspicious-fails-suspicious-gate"),
        pytest.param("fatal", WRITE_A, WRITE_B, 1, id="fatal-fails"),
        pytest.param("never", WRITE_A, WRITE_B, 0, id="never-fails"),
    ],
)
def test_diff_exit_code_follows_fail_on(
    tmp_path: Path, fail_on: str, a: list[Any], b: list[Any], code: int
) -> None:
    """diff exits 1 only when a finding reaches --fail-on."""
    result = run(
        "diff", write(tmp_path / "a.jsonl", a), write(tmp_path / "b.jsonl", b), "--fail-on", fail_on
    )
    assert result.exit_code == code


def test_diff_json_is_the_full_report(seed_files: tuple[str, str]) -> None:
    """--format json prints the report with findings, table, divergence and replay."""
    data = json.loads(run("diff", *seed_files, "--format", "json").output)
    assert data["worst"] == "suspicious"
    assert data["replay"] == {"unique": 1, "mismatches": 1, "unrecorded": 0}
    assert {f["pattern"] for f in data["findings"]} == {
        "duplicate-call",
        "drift",
        "replay-mismatch",
        "divergence",
    }
    assert data["divergence"]["position"] == 2


def test_diff_markdown_fits_a_pr_comment(seed_files: tuple[str, str]) -> None:
    """--format markdown prints the verdict as a heading, a table of the origin, a table of
    what each run came to, and a severity table."""
    out = run("diff", *seed_files, "--format", "markdown").output
    assert out.startswith(
        "### tracetape diff: B diverged from A at step 1 (call #1), cause **tool**; "
        "worst severity **suspicious**"
    )
    assert (
        "| origin | #1 | 1 | `tool` | the tool search_issues returned another result for the "
        "same call | output a1b2c3 | output d4e5f6 | #2 (A only) |"
    ) in out
    assert "| calls | 2 | 1 |" in out and "| tokens | 200 | 100 |" in out
    assert "<details><summary>What changed</summary>" in out
    assert "| `duplicate-call` | suspicious | 1 | Cap tool calls per step |" in out


def test_diff_of_one_file_with_runs(tmp_path: Path) -> None:
    """diff FILE --runs A B compares two runs of one file."""
    path = write(tmp_path / "t.jsonl", SEED_A + SEED_B)
    result = run("diff", path, "--runs", "run_0042", "run_0043", "--format", "json")
    data = json.loads(result.output)
    assert (data["baseline"]["run"], data["candidate"]["run"]) == ("run_0042", "run_0043")


def test_secrets_in_args_are_redacted_from_reports(tmp_path: Path) -> None:
    """An API key in a call's args never reaches the printed report."""
    secret = "sk-proj-" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4"
    a = write(tmp_path / "a.jsonl", [rec("A", 1, "call_api", {"key": secret, "q": 1}, "o")])
    b = write(tmp_path / "b.jsonl", [rec("B", 1, "call_api", {"key": secret, "q": 2}, "o")])
    for fmt in ("text", "json", "markdown"):
        out = run("diff", a, b, "--format", fmt).output
        assert secret not in out
        assert "REDACTED" in out


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_check_reports_never_show_a_secret_whole_or_cut(tmp_path: Path, fmt: str) -> None:
    """``check``'s broken-invariant lines quote a call's arguments: a secret-named field and
    a key in prose are redacted before the line is cut short, in every format (issue 37,
    item 5), so neither the secret nor a prefix of it long enough to matter is printed."""
    password, key = "v4lue-gCNoFhAgrKWVNY", "sk-proj-" + "Zq8xW3vN7mK2pL9tR4yB6cD1fG5hJ0aS3e"
    calls = [rec("ra", 1, "search", {"password": password, "query": "x"}, "a1")] * 3
    calls += [rec("ra", 2, "fetch", {"q": "z" * 20 + " use key " + key + " now"}, "b2")] * 3
    path = write(tmp_path / "t.jsonl", calls)
    result = CliRunner().invoke(main, ["check", path, "--max-repeats", "1", "--format", fmt])
    assert result.exit_code == 1, result.output
    assert "repeat budget" in result.output and "REDACTED" in result.output
    for secret in (password, key):
        assert secret[:12] not in result.output, secret


@pytest.mark.parametrize(
    ("args", "match"),
    [
        pytest.param(["missing.jsonl", "b.jsonl"], "no such trace file", id="missing-file"),
        pytest.param(["bad.jsonl", "b.jsonl"], "bad.jsonl:2: field 'output_sha'", id="bad-line"),
        pytest.param(["empty.jsonl", "b.jsonl"], "empty", id="empty-file"),
        pytest.param(
            ["b.jsonl", "--runs", "run_0043", "nope"],
            "run 'nope' is not in this trace",
            id="unknown-run",
        ),
        pytest.param(["b.jsonl"], "needs two runs", id="one-run-file"),
    ],
)
def test_diff_bad_input_exits_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], match: str
) -> None:
    """Bad input prints one error line naming the file (and line, field) and exits 2."""
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "b.jsonl", SEED_B)
    (tmp_path / "bad.jsonl").write_text(
        json.dumps(SEED_A[0]) + '\n{"run_id": "r", "step": 1, "tool": "t", "args": {}}\n'
    )
    (tmp_path / "empty.jsonl").write_text("")
    result = CliRunner().invoke(main, ["diff", *args])
    assert result.exit_code == 2
    assert match in result.output


def test_skip_bad_lines_reports_the_count(tmp_path: Path) -> None:
    """--skip-bad-lines diffs the good lines and says how many were skipped."""
    bad = tmp_path / "a.jsonl"
    bad.write_text("".join(json.dumps(r) + "\n" for r in SEED_A) + "{torn\n")
    result = run("diff", str(bad), write(tmp_path / "b.jsonl", SEED_B), "--skip-bad-lines")
    assert result.exit_code == 0
    assert "skipped 1 bad line (--skip-bad-lines)" in result.output


def test_check_passes_a_clean_run(seed_files: tuple[str, str]) -> None:
    """check exits 0 when every invariant holds, and says which bounds it used."""
    result = run("check", seed_files[0])
    assert result.exit_code == 0
    assert result.output.splitlines()[-1].startswith(
        "ok: 1 run(s), 2 call(s) checked (max_calls_per_step 10"
    )


@pytest.mark.parametrize(
    ("option", "broken"),
    [
        pytest.param(
            ["--max-repeats", "0"],
            'repeat budget: run_0042 search_issues {"page":1,"q":"broken:true"} ran 2 times',
            id="repeats",
        ),
        pytest.param(
            ["--max-tokens", "199"], "token budget: run_0042 used 200 tokens", id="tokens"
        ),
        pytest.param(["--max-steps", "1"], "step budget: run_0042 took 2 steps", id="steps"),
        pytest.param(["--max-calls", "1"], "call budget: run_0042 made 2 calls", id="calls"),
        pytest.param(
            ["--max-calls-per-step", "0"],
            "fanout: run_0042 step 1: 1 tool calls (max_calls_per_step 0)",
            id="calls-per-step",
        ),
    ],
)
def test_check_fails_a_broken_invariant(
    seed_files: tuple[str, str], option: list[str], broken: str
) -> None:
    """check exits 1 and names the broken invariant when a bound is exceeded, by one."""
    result = run("check", seed_files[0], *option)
    assert result.exit_code == 1
    assert f"broken: {broken}" in result.output


@pytest.mark.parametrize(
    "option",
    [
        pytest.param(["--max-repeats", "1"], id="repeats"),
        pytest.param(["--max-tokens", "200"], id="tokens"),
        pytest.param(["--max-steps", "2"], id="steps"),
        pytest.param(["--max-calls", "2"], id="calls"),
        pytest.param(["--max-calls-per-step", "1"], id="calls-per-step"),
    ],
)
def test_check_passes_a_run_exactly_at_a_bound(
    seed_files: tuple[str, str], option: list[str]
) -> None:
    """check exits 0 for a run that reaches a bound without passing it (one less fails:
    test_check_fails_a_broken_invariant)."""
    result = run("check", seed_files[0], *option)
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[-1].startswith("ok: 1 run(s), 2 call(s) checked")


def test_check_reads_bounds_from_pyproject(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without an option, check takes its bound from [tool.tracetape.check]."""
    (tmp_path / "pyproject.toml").write_text("[tool.tracetape.check]\nmax_calls_per_step = 1\n")
    monkeypatch.chdir(tmp_path)
    path = write(tmp_path / "t.jsonl", [rec("r", 1, "a", {}, "o"), rec("r", 1, "b", {}, "o")])
    result = run("check", path, "--format", "json")
    data = json.loads(result.output)
    assert result.exit_code == 1
    assert data["ok"] is False
    assert [f["pattern"] for f in data["broken"]] == ["fanout"]


def test_check_bad_input_exits_2(tmp_path: Path) -> None:
    """check exits 2 on a malformed trace."""
    path = tmp_path / "t.jsonl"
    path.write_text("{nope\n")
    result = CliRunner().invoke(main, ["check", str(path)])
    assert result.exit_code == 2


def test_exit_codes_from_a_real_process(tmp_path: Path, seed_files: tuple[str, str]) -> None:
    """The installed entry point exits 0, 1 and 2 as documented."""
    exe = [str(Path(sys.executable).with_name("tracetape"))]
    ok = subprocess.run([*exe, "check", seed_files[0]], capture_output=True, text=True, check=False)
    broken = subprocess.run(
        [*exe, "check", seed_files[0], "--max-repeats", "0"], capture_output=True, check=False
    )
    bad = subprocess.run(
        [*exe, "diff", str(tmp_path / "nope.jsonl"), seed_files[1]],
        capture_output=True,
        text=True,
        check=False,
    )
    assert (ok.returncode, broken.returncode, bad.returncode) == (0, 1, 2)
    assert bad.stderr.startswith("tracetape: error: ")


def test_several_files_and_glob_patterns(tmp_path: Path, seed_files: tuple[str, str]) -> None:
    """check reads every file of a pattern as one trace; diff takes a pattern a side, or
    any number of files with --runs; more than two traces without --runs is a usage error."""
    a, b = seed_files
    pattern = str(tmp_path / "trace_run_*.jsonl")
    both = run("check", pattern, "--format", "json")
    assert both.exit_code == 0, both.output
    data = json.loads(both.output)
    assert (data["runs"], data["inputs"]) == (2, [a, b])
    assert json.loads(run("check", a, b, "--format", "json").output)["runs"] == 2
    one = run("diff", a, b, "--format", "json")
    globbed = run(
        "diff", str(tmp_path / "*0042.jsonl"), str(tmp_path / "*0043.jsonl"), "--format", "json"
    )
    assert json.loads(one.output)["findings"] == json.loads(globbed.output)["findings"]
    named = run("diff", a, b, "--runs", "run_0042", "run_0043", "--format", "json")
    assert named.exit_code == 0, named.output
    assert json.loads(named.output)["divergence"] == json.loads(one.output)["divergence"]
    assert run("diff", a, b, a).exit_code == 2
    missing = run("check", str(tmp_path / "none*.jsonl"))
    assert missing.exit_code == 2
    assert "no file matches this pattern" in missing.output


# -- summarize -----------------------------------------------------------------------------------


@pytest.fixture
def diff_json(tmp_path: Path, seed_files: tuple[str, str]) -> str:
    path = tmp_path / "diff.json"
    path.write_text(run("diff", *seed_files, "--format", "json").output)
    return str(path)


def test_summarize_prints_one_rule_line_per_finding(diff_json: str) -> None:
    """summarize prints pattern, severity, suggested fix for every finding, from the rules."""
    lines = run("summarize", diff_json).output.splitlines()
    assert len(lines) == 4
    assert "duplicate-call, suspicious, Cap tool calls per step" in lines


class FakeChat:
    """A local OpenAI-compatible /chat/completions endpoint that answers what a test sets."""

    def __init__(self) -> None:
        self.answer: str = ""
        self.status = 200
        self.requests: list[dict[str, Any]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                fake.requests.append(
                    {
                        "path": self.path,
                        "auth": self.headers.get("Authorization"),
                        "body": json.loads(body),
                    }
                )
                payload = json.dumps(
                    {"choices": [{"message": {"role": "assistant", "content": fake.answer}}]}
                ).encode()
                self.send_response(fake.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def chat(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeChat]:
    fake = FakeChat()
    monkeypatch.setenv("OPENAI_BASE_URL", fake.url)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("TRACETAPE_MODEL", "judge-1")
    yield fake
    fake.close()


def _summarize(diff_json: str) -> Any:
    return CliRunner().invoke(main, ["summarize", diff_json, "--llm", "--format", "json"])


def test_summarize_llm_uses_a_valid_answer(diff_json: str, chat: FakeChat) -> None:
    """A valid model answer (one line per finding, allowed severities) is used as is."""
    chat.answer = "\n".join(
        [
            "1. divergence, suspicious, re-record if intended",
            "2. drift, expected, data is live",
            "3. duplicate-call, fatal, cap calls",
            "4. replay-mismatch, suspicious, refresh the mock",
        ]
    )
    result = _summarize(diff_json)
    data = json.loads(result.stdout)
    assert result.exit_code == 0
    assert (data["source"], data["model"], data["fallback"]) == ("llm", "judge-1", None)
    assert data["lines"][2] == {
        "pattern": "duplicate-call",
        "severity": "fatal",
        "fix": "cap calls",
    }
    (request,) = chat.requests
    assert request["path"] == "/v1/chat/completions"
    assert request["auth"] == "Bearer test-key"
    assert request["body"]["model"] == "judge-1"
    assert (
        "Allowed severities: expected, suspicious, fatal."
        in request["body"]["messages"][0]["content"]
    )
    assert "repeat: run_0042 step 1 == step 2" in request["body"]["messages"][1]["content"]


@pytest.mark.parametrize(
    ("answer", "status", "reason"),
    [
        pytest.param(
            "drift, critical, x\na, fatal, b\nc, fatal, d\ne, fatal, f",
            200,
            "severity 'critical'",
            id="bad-severity",
        ),
        pytest.param("drift, fatal, x", 200, "returned 1 lines for 4 findings", id="too-few-lines"),
        pytest.param(
            "just some prose\nno\nno\nno",
            200,
            "not 'pattern, severity, suggested fix'",
            id="not-the-format",
        ),
        pytest.param("", 500, "HTTP 500", id="server-error"),
    ],
)
def test_summarize_llm_falls_back_to_the_rules(
    diff_json: str, chat: FakeChat, answer: str, status: int, reason: str
) -> None:
    """An invalid answer or a failing endpoint falls back to the rule result and says why."""
    chat.answer, chat.status = answer, status
    result = _summarize(diff_json)
    data = json.loads(result.stdout)
    assert result.exit_code == 0
    assert data["source"] == "rules"
    assert reason in data["fallback"]
    assert "using the rule table instead" in result.stderr
    assert len(data["lines"]) == 4


def test_summarize_llm_falls_back_when_nothing_listens(
    diff_json: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A refused connection falls back to the rules too."""
    fake = FakeChat()
    fake.close()
    monkeypatch.setenv("TRACETAPE_MODEL", "m")
    result = CliRunner().invoke(
        main, ["summarize", diff_json, "--llm", "--base-url", fake.url, "--format", "json"]
    )
    assert json.loads(result.stdout)["fallback"].startswith("the endpoint failed (ConnectError")


def test_summarize_rejects_a_file_that_is_not_a_diff(tmp_path: Path) -> None:
    """summarize exits 2 and says what to pass when the file is not diff JSON."""
    path = tmp_path / "x.json"
    path.write_text('{"hello": 1}')
    result = CliRunner().invoke(main, ["summarize", str(path)])
    assert result.exit_code == 2
    assert "field 'findings' missing" in result.output


@pytest.mark.parametrize("command", ["diff", "check", "summarize", "export --otel"])
def test_every_analysis_command_is_documented(command: str) -> None:
    """Each analysis command has an example in the README or docs/ and appears in tracetape
    --help."""
    root = Path(__file__).parents[2]
    readme = "".join(
        p.read_text(encoding="utf-8") for p in [root / "README.md", *root.glob("docs/*.md")]
    )
    assert f"$ tracetape {command}" in readme
    assert command.split(maxsplit=1)[0] in run("--help").output


def test_a_side_left_empty_by_skipped_lines_is_bad_input(tmp_path: Path) -> None:
    """When --skip-bad-lines leaves a file with no calls, diff says so and exits 2."""
    bad = tmp_path / "b.jsonl"
    bad.write_text('{"run_id": "r", "tool": "t"}\n')
    result = CliRunner().invoke(
        main, ["diff", write(tmp_path / "a.jsonl", SEED_A), str(bad), "--skip-bad-lines"]
    )
    assert result.exit_code == 2
    assert "b.jsonl: the trace holds no calls to compare" in result.output


def test_diff_output_file_keeps_the_exit_code(tmp_path: Path) -> None:
    """-o writes the report to a file; the exit code still follows --fail-on."""
    out = tmp_path / "diff.md"
    a, b = write(tmp_path / "a.jsonl", WRITE_A), write(tmp_path / "b.jsonl", WRITE_B)
    result = run("diff", a, b, "--format", "markdown", "-o", str(out))
    assert result.exit_code == 1
    assert result.output == ""
    assert out.read_text().startswith("### tracetape diff: B diverged from A")
    assert "worst severity **fatal**" in out.read_text().splitlines()[0]


def test_check_takes_the_exploration_bound(tmp_path: Path) -> None:
    """``--exploration`` sets the distinct-args bound the check uses, as the config can."""
    calls = [{**SEED_A[0], "args": {"q": f"term {i}", "page": 1}} for i in range(3)]
    path = write(tmp_path / "t.jsonl", calls)
    loose, tight = run("check", path), run("check", path, "--exploration", "2")
    assert "exploration:" not in loose.output and "exploration 4)" in loose.output
    assert "exploration: run_0042 step 1: search_issues called with 3" in tight.output
    assert "exploration 2)" in tight.output


def test_a_torn_last_line_is_said_as_such_not_as_a_skipped_bad_line(tmp_path: Path) -> None:
    """A recording killed mid-write is read as far as it goes; check says so, and does not
    name --skip-bad-lines, which was not given."""
    from tracetape import Tape

    path = tmp_path / "run.jsonl"
    with Tape(path, mode="record") as tape:
        tape.call("tool", {"name": "f", "args": {}, "step": 1}, lambda: 1)
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:-1]) + lines[-1][:10])  # the trailer torn
    result = run("check", str(path))
    assert "skipped 1 torn last line (a recording killed mid-write)" in result.output
    assert "--skip-bad-lines" not in result.output


def test_a_missing_run_lists_the_runs_of_its_side_in_order(tmp_path: Path) -> None:
    """The error for a run that is not there lists the runs found (of the side it was asked
    on, when there are two files) in the order they first appear, ten at most."""
    pool = write(
        tmp_path / "pool.jsonl", [rec(f"r{i:02d}", 1, "t", {}, "o") for i in range(12, 0, -1)]
    )
    listed = "r12, r11, r10, r09, r08, r07, r06, r05, r04, r03 ..."
    result = run("diff", pool, "--runs", "r12", "nope")
    assert result.exit_code == 2
    assert f"run 'nope' is not in this trace; runs found: {listed}" in result.output
    other = write(tmp_path / "other.jsonl", [rec(f"x{i}", 1, "t", {}, "o") for i in (1, 2)])
    with pytest.raises(TraceError) as caught:  # two sides: the candidate's runs are listed
        diff_traces(pool, other, runs=("r12", "r12"))
    assert str(caught.value).endswith(
        "other.jsonl: run 'r12' is not in this trace; runs found: x1, x2"
    )
    one = write(
        tmp_path / "one.jsonl", [rec("solo", 1, "t", {}, "o"), rec("solo", 2, "t", {}, "p")]
    )
    result = run("diff", one)
    assert "needs two runs to diff, found 1 (solo)" in result.output


def test_a_changed_text_shows_the_changed_words_with_context(tmp_path: Path) -> None:
    """The change in a long text is shown where it is, not cut off from its start."""
    ask = "What is the weather in {} and what is the best time of the day for a walk?"
    a = write(tmp_path / "a.jsonl", [rec("A", 1, "llm_call", {"q": ask.format("Paris")}, "x")])
    b = write(tmp_path / "b.jsonl", [rec("B", 1, "llm_call", {"q": ask.format("Rome")}, "y")])
    result = run("diff", a, b)
    line = next(x for x in result.output.splitlines() if "changed: q:" in x)
    assert "weather in Paris and what" in line and "weather in Rome and what" in line
    assert "…" in line  # cut around the change, with context


def test_diff_view_conversation_marks_the_changed_words(tmp_path: Path) -> None:
    ask = "What is the weather in {} today?"
    a = write(tmp_path / "a.jsonl", [rec("A", 1, "llm_call", {"q": ask.format("Paris")}, "x")])
    b = write(tmp_path / "b.jsonl", [rec("B", 1, "llm_call", {"q": ask.format("Rome")}, "y")])
    result = run("diff", a, b, "--view", "conversation")
    assert result.exit_code == 0
    tail = result.output.split("pattern ", 1)[1]
    assert '- call  llm_call(q="What is the weather in Paris today?")' in tail
    assert '+ call  llm_call(q="What is the weather in Rome today?")' in tail


def _agent_pair(tmp_path: Path) -> tuple[str, str]:
    """Two cassettes of a small agent whose system instructions changed (same final)."""
    from tracetape import Tape

    paths = []
    for name, system in (("a", "Be kind."), ("b", "Be brief.")):
        path = tmp_path / f"{name}.jsonl"
        with Tape(path, mode="record", harness_sha="t") as tape:
            messages = [{"role": "system", "content": system}, {"role": "user", "content": "hi"}]
            tape.call("llm", {"messages": messages, "step": 1}, lambda: {"content": "Pack."})
        paths.append(str(path))
    return paths[0], paths[1]


@pytest.mark.parametrize(
    ("fail_on", "code"),
    [
        pytest.param("fatal", 0, id="expected-change-passes-fatal"),
        pytest.param("prompt", 1, id="the-cause-named-fails"),
        pytest.param("model,tool", 0, id="other-causes-pass"),
        pytest.param("never,prompt", 1, id="never-with-a-cause-still-fails-on-it"),
        pytest.param("expected", 1, id="any-finding-fails-expected"),
        pytest.param("never", 0, id="never-passes"),
    ],
)
def test_fail_on_takes_causes_beside_severities(tmp_path: Path, fail_on: str, code: int) -> None:
    """--fail-on fails on a finding at or above a severity, or on a root of the named cause."""
    a, b = _agent_pair(tmp_path)
    result = run("diff", a, b, "--fail-on", fail_on)
    assert result.exit_code == code, result.output
    assert result.output.startswith("B diverged from A at step 1 (call #1): the system instr")


@pytest.mark.parametrize("value", ["bogus", "fatal,", ",", "fatal,promt"])
def test_fail_on_names_what_is_valid(tmp_path: Path, value: str) -> None:
    """An unknown severity or cause is exit 2, the message listing the valid ones."""
    a, b = _agent_pair(tmp_path)
    result = CliRunner().invoke(main, ["diff", a, b, "--fail-on", value])
    if value == "fatal,":
        assert result.exit_code == 0  # an empty item is no gate
        return
    assert result.exit_code == 2
    assert "fatal, suspicious, expected, never, model, tool, env, input, prompt" in result.output


def test_secrets_never_reach_the_verdict_in_any_format(tmp_path: Path) -> None:
    """Secrets a trace holds unredacted (a seed line's args, an answer written by another
    tool) in the prompt, the user turn, the tool call and the answer: redacted in the
    verdict, the origin's changes and the summary's final answer, in text, JSON and
    Markdown."""
    key = "sk-proj-" + "Q1w2E3r4T5y6U7i8O9p0A1s2D3f4"
    password = "hunter2hunter2"
    a = write(tmp_path / "a.jsonl", [rec("A", 1, "call_api", {"key": key, "q": 1}, "o")])
    b = write(tmp_path / "b.jsonl", [rec("B", 1, "call_api", {"key": key, "q": 2}, "o")])
    for fmt in ("text", "json", "markdown"):
        out = run("diff", a, b, "--format", fmt).output
        assert key not in out and "REDACTED" in out, fmt
    lines = []
    for run_id, system in (("a", "Be kind."), ("b", "Be brief.")):
        messages = [
            {"role": "system", "content": f"{system} key {key}"},
            {"role": "user", "content": f'{{"password": "{password}"}} hi'},
        ]
        answer = {"content": f"Use key {key}; password={password}"}
        lines.append([
            Record(kind="llm", run=run_id, name="m", step=1, input={"messages": messages},
                   out=answer, out_digest="o"),
        ])  # fmt: skip
    report = diff_records(lines[0], lines[1])
    assert report.origin is not None and report.origin.cause == "prompt"
    # JSON as the command and the collector print it (the whole report redacted)
    shown = [render_text(report), render_markdown(report), json.dumps(redacted(report.to_dict()))]
    for text in shown:
        assert key not in text and password not in text
    assert "REDACTED" in report.to_dict()["summary"]["final"]["after"]
