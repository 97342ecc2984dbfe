"""`tracetape show` and `tracetape verify`."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from tracetape import NotACassetteError, Tape
from tracetape.cli import main


@pytest.fixture
def cassette(tmp_path: Path) -> Path:
    path = tmp_path / "run.jsonl"
    with Tape(path, mode="record") as tape:
        tape.call("llm", {"messages": [], "params": {"model": "gpt-x"}, "step": 1}, lambda: "go")
        tape.call("tool", {"name": "search", "args": {"q": "x"}, "step": 1}, lambda: [1])
    return path


def test_show_prints_a_table_of_decisions(cassette: Path) -> None:
    """The table names the model of llm decisions and the tool of tool decisions."""
    result = CliRunner().invoke(main, ["show", str(cassette)])
    assert result.exit_code == 0
    assert "gpt-x" in result.output and "search" in result.output and "llm:" in result.output


def test_show_json_lists_each_decision(cassette: Path) -> None:
    """--format json gives seq, step, kind, name, ms, key, effect, tokens and usage per
    decision."""
    result = CliRunner().invoke(main, ["show", str(cassette), "--format", "json"])
    rows = json.loads(result.output)
    assert [(r["seq"], r["kind"], r["name"], r["step"]) for r in rows] == [
        (1, "llm", "gpt-x", 1),
        (2, "tool", "search", 1),
    ]


def test_show_of_a_missing_file_exits_2(tmp_path: Path) -> None:
    """A missing cassette is one error line and exit code 2."""
    result = CliRunner().invoke(main, ["show", str(tmp_path / "nope.jsonl")])
    assert result.exit_code == 2
    assert "no such cassette" in result.output


def test_verify_summarizes_a_sound_cassette(cassette: Path) -> None:
    """verify prints one line with format, counts and seal, exit 0."""
    result = CliRunner().invoke(main, ["verify", str(cassette)])
    assert result.exit_code == 0
    assert result.output.strip() == f"ok: {cassette}: format 2, 2 records (1 llm, 1 tool), sealed"


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        pytest.param(
            lambda lines: [*lines[:1], "{oops", *lines[1:]], "not valid JSON", id="corrupt-line"
        ),
        pytest.param(
            lambda lines: [lines[0], lines[2], lines[1]], "not strictly increasing", id="reordered"
        ),
        pytest.param(
            lambda lines: [json.dumps({"tracetape": 7}), *lines[1:]],
            "format 7",
            id="future-version",
        ),
    ],
)
def test_verify_reports_damage_with_exit_1(cassette: Path, damage, message: str) -> None:  # type: ignore[no-untyped-def]
    """A corrupt, reordered or future-format cassette is reported on one line, exit 1."""
    lines = cassette.read_text().splitlines()
    cassette.write_text("\n".join(damage(lines)) + "\n")
    result = CliRunner().invoke(main, ["verify", str(cassette), "--format", "json"])
    assert result.exit_code == 1
    summary = json.loads(result.output)
    assert summary["ok"] is False and message in " ".join(summary["problems"])


def test_verify_reports_a_torn_last_line_as_an_unfinished_recording(cassette: Path) -> None:
    """A recording killed mid-write (no trailer, a torn last line) is its own state, not
    corruption: its records replay and chain intact (exit 0, said on the line)."""
    lines = cassette.read_text().splitlines(keepends=True)
    cassette.write_text("".join(lines[:-1]) + '{"seq": 3, "key": "to')
    result = CliRunner().invoke(main, ["verify", str(cassette)])
    assert result.exit_code == 0, result.output
    assert "unfinished; the recording never closed (its last line is torn" in result.output


def test_verify_of_a_missing_file_exits_2(tmp_path: Path) -> None:
    """verify exits 2 when there is nothing to verify."""
    assert CliRunner().invoke(main, ["verify", str(tmp_path / "x.jsonl")]).exit_code == 2


def test_verify_and_show_of_a_folder_exit_2(tmp_path: Path) -> None:
    """A folder given as the cassette is bad input (exit 2) for verify and show alike."""
    assert CliRunner().invoke(main, ["verify", str(tmp_path)]).exit_code == 2
    assert CliRunner().invoke(main, ["show", str(tmp_path)]).exit_code == 2


@pytest.fixture
def sealed(tmp_path: Path) -> Path:
    path = tmp_path / "sealed.jsonl"
    with Tape(path, mode="record") as tape:
        for i in range(4):
            tape.call("tool", {"name": "f", "args": {"i": i}, "step": 1}, lambda i=i: {"n": i})
    return path


def _sub(line: str, old: str, new: str) -> str:
    assert old in line
    return line.replace(old, new)


# Hand edits of a sealed cassette (lines: header, 4 records, trailer) and what verify says.
EDITS = [
    pytest.param(lambda ls: [*ls[:2], _sub(ls[2], '"n":1', '"n":7'), *ls[3:]], 3,
                 "the record was changed", id="changed-output"),
    pytest.param(lambda ls: [*ls[:2], _sub(ls[2], '"i":1}', '"i":8}'), *ls[3:]], 3,
                 "the record was changed", id="changed-input-copy"),
    pytest.param(lambda ls: [*ls[:2], _sub(ls[2], '"key":"tool:', '"key":"tool:0'), *ls[3:]], 3,
                 "the record was changed", id="changed-key"),
    pytest.param(lambda ls: [_sub(ls[0], '"version"', '"versio"'), *ls[1:]], 2,
                 "the header or this record was changed", id="changed-header"),
    pytest.param(lambda ls: [*ls[:2], *ls[3:]], 3, "records were deleted or moved", id="deleted"),
    pytest.param(lambda ls: [*ls[:4], ls[5]], 5, "the trailer seals 4 records and this file "
                 "holds 3", id="deleted-last-record"),
    pytest.param(lambda ls: [ls[0], ls[2], ls[1], *ls[3:]], 2, "records were deleted or moved "
                 "before it (seq 0 is followed by 2)", id="swapped"),
    pytest.param(lambda ls: [*ls[:3], ls[2], *ls[3:]], 4, "records were reordered or copied",
                 id="duplicated"),
    pytest.param(lambda ls: [*ls[:2], '{"seq":2,"key":"tool:1","kind":"tool","out":1}', *ls[2:]],
                 3, "the record has no chain digest: inserted by hand", id="inserted"),
    pytest.param(lambda ls: [*ls, ls[-1]], 7, "lines were added after the trailer",
                 id="after-trailer"),
    pytest.param(lambda ls: [*ls[:5], _sub(ls[5], '"end":4', '"end":5')], 6, "the trailer's "
                 "record count was changed: it says 5, and the chain it seals holds 4",
                 id="trailer-count-raised"),
    pytest.param(lambda ls: [*ls[:5], _sub(ls[5], '"end":4', '"end":3')], 6, "the trailer's "
                 "record count was changed: it says 3", id="trailer-count-lowered"),
    pytest.param(lambda ls: [*ls[:5], _sub(ls[5], '"end":4', '"end":"4"')], 6, "the trailer's "
                 "record count was changed: it says '4'", id="trailer-count-a-string"),
    pytest.param(lambda ls: [*ls[:5], _sub(ls[5], '"completed"', '"interrupted"')], 6,
                 "the trailer's ending or its seal was changed", id="trailer-ending-changed"),
    pytest.param(lambda ls: [*ls[:5], _sub(ls[5], '"ended":"completed",', '')], 6,
                 "the trailer's ending or its seal was changed", id="trailer-ending-removed"),
    pytest.param(lambda ls: [*ls[:5], _sub(ls[5], '"completed"', '"done!"')], 6,
                 "the trailer's ending was changed", id="trailer-ending-unknown"),
]  # fmt: skip


@pytest.mark.parametrize(("edit", "line", "reason"), EDITS)
def test_verify_finds_every_hand_edit_at_its_line(
    sealed: Path, edit, line: int, reason: str
) -> None:  # type: ignore[no-untyped-def]
    """A changed, deleted, inserted, duplicated or reordered record, or a changed header, is
    found at the line at fault (exit 1), though each line still parses."""
    lines = sealed.read_text().splitlines()
    assert len(lines) == 6
    sealed.write_text("\n".join(edit(lines)) + "\n")
    result = CliRunner().invoke(main, ["verify", str(sealed)])
    assert result.exit_code == 1, result.output
    assert result.output.startswith(f"corrupt: {sealed}:{line}: {reason}"), result.output


def test_verify_says_unsealed_and_unfinished_without_calling_them_corrupt(sealed: Path) -> None:
    """A recording that never closed (no trailer) and a format-1 cassette (no digests) are
    sound as far as can be told: exit 0, and the line says which."""
    lines = sealed.read_text().splitlines()
    sealed.write_text("\n".join(lines[:-1]) + "\n")
    result = CliRunner().invoke(main, ["verify", str(sealed)])
    assert result.exit_code == 0 and "unfinished; the recording never closed (no trailer)" in (
        result.output
    )
    old = [lines[0].replace('"tracetape":2', '"tracetape":1')]
    old += [line.split(',"chain"')[0] + "}" for line in lines[1:-1]]
    sealed.write_text("\n".join(old) + "\n")
    result = CliRunner().invoke(main, ["verify", str(sealed), "--format", "json"])
    summary = json.loads(result.output)
    assert result.exit_code == 0 and summary["seal"] == "unsealed" and summary["format"] == 1
    assert "re-record it to seal it" in summary["notes"][0]


def test_warnings_on_the_command_line_are_one_plain_line(sealed: Path) -> None:
    """A torn last line is a warning: one line naming the file and line, no Python source."""
    sealed.write_text(sealed.read_text()[:-40])
    for command in (["show", str(sealed)], ["export", "--otel", str(sealed)]):
        # a real process: pytest records warnings in-process instead of showing them
        done = subprocess.run(
            [sys.executable, "-m", "tracetape", *command], capture_output=True, text=True,
            check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert done.stderr.splitlines() == [
            f"tracetape: warning: {sealed}:6: skipped a torn last line (the recording process "
            "was killed mid-write); the records before it replay"
        ]


# Files that hold no cassette at all (issue 37, item 6): no header, no record before the first
# broken line. A recording killed mid-write keeps its header line, so it is not one of them.
NOT_CASSETTES = [
    pytest.param(bytes(range(256)).replace(b"\n", b"") * 16, id="4-KB-of-bytes-no-newline"),
    pytest.param(b'{"tracetape":2,"versi', id="a-torn-header-alone"),
    pytest.param(b"\x00\xff garbage\nmore garbage\n", id="bytes-with-newlines"),
    pytest.param(b"", id="empty"),
    pytest.param(b"\n\n  \n", id="blank-lines"),
]


@pytest.mark.parametrize("content", NOT_CASSETTES)
def test_a_file_that_is_not_a_cassette_is_bad_input(tmp_path: Path, content: bytes) -> None:
    """show, verify and export refuse it (exit 2, naming the file), and replay raises
    ``NotACassetteError``: it never replays as an empty cassette."""
    path = tmp_path / "c.jsonl"
    path.write_bytes(content)
    for command in (["show"], ["verify"], ["export", "--otel"]):
        result = CliRunner().invoke(main, [*command, str(path)])
        assert result.exit_code == 2, (command, result.output)
        assert str(path) in result.output
    with pytest.raises(NotACassetteError, match=r"c\.jsonl"):
        Tape(path, mode="replay")


def test_a_killed_recording_keeps_its_header_and_replays(tmp_path: Path) -> None:
    """A header followed by a torn line is a recording cut short, not garbage: verify says
    it is unfinished (exit 0) and replay loads the records before the torn line."""
    path = tmp_path / "c.jsonl"
    with Tape(path, mode="record") as tape:
        tape.call("tool", {"name": "f", "args": {}, "step": 1}, lambda: 1)
    lines = path.read_text().splitlines(keepends=True)
    path.write_text(lines[0] + lines[1] + lines[1][:15])
    result = CliRunner().invoke(main, ["verify", str(path)])
    assert result.exit_code == 0 and "unfinished" in result.output, result.output
    with pytest.warns(Warning, match="torn last line"):
        assert len(Tape(path, mode="replay").records) == 1


def test_show_and_verify_name_a_branch_its_rules_and_how_it_ended(tmp_path: Path) -> None:
    """A fork's branch: ``show`` prints its parent, fork point and match rules above the
    table, ``verify --format json`` has them, and an interrupted recording says so."""
    from tracetape import Match

    parent, branch = tmp_path / "p.jsonl", tmp_path / "b.jsonl"
    with Tape(parent, mode="record", match=Match(mask=["uuid"])) as tape:
        tape.call("tool", {"name": "f", "step": 1}, lambda: 1)
    with contextlib.suppress(KeyboardInterrupt), Tape(parent, mode="fork", branch=branch) as tape:
        tape.call("tool", {"name": "g", "step": 1}, lambda: 2)
        raise KeyboardInterrupt
    shown = CliRunner().invoke(main, ["show", str(branch)])
    assert shown.exit_code == 0
    for line in (
        "the recording ended interrupted: replay stops where it stopped",
        "match rules: mask uuid",
        f"branch of {parent}",
        "forked at decision 1 (step 1): first miss",
    ):
        assert line in shown.output
    summary = json.loads(
        CliRunner().invoke(main, ["verify", str(branch), "--format", "json"]).output
    )
    assert summary["ok"] and summary["ended"] == "interrupted"
    assert summary["parent"]["path"] == str(parent) and summary["fork"]["seq"] == 1
    assert summary["match"] == {"ignore": [], "mask": ["uuid"]}
    plain = CliRunner().invoke(main, ["show", str(parent)]).output
    assert "branch of" not in plain and "ended" not in plain.split("\n")[0]


def test_show_decision_prints_one_decision_whole_and_what_its_rules_leave_out(
    tmp_path: Path,
) -> None:
    from tracetape import Match

    path = tmp_path / "r.jsonl"
    payload = {
        "messages": [{"role": "user", "content": "job 0b7e1b2c-6a1f-4c1e-9a51-8f0b8f9b2a11"}],
        "params": {"user": "u1", "model": "m"},
        "step": 1,
    }
    with Tape(path, mode="record", match=Match(ignore=["user"], mask=["uuid"])) as tape:
        tape.call("llm", payload, lambda: "ok")
    result = CliRunner().invoke(main, ["show", str(path), "--decision", "1"])
    assert result.exit_code == 0, result.output
    shown = json.loads(result.output)
    assert shown["input"] == payload and shown["out"] == "ok"
    assert shown["ignored"] == ["params.user"] and shown["masked"] == ["messages[0].content"]
    missing = CliRunner().invoke(main, ["show", str(path), "--decision", "2"])
    assert missing.exit_code == 2 and "no decision #2; it holds 1" in missing.output


def test_show_reads_a_run_as_a_conversation(tmp_path: Path) -> None:
    """``--view conversation``: what was said, the answer, the call and its result, a step
    each; piped (not a terminal) the default stays the table."""
    path = tmp_path / "c.jsonl"
    with Tape(path, mode="record") as tape:
        messages = [{"role": "user", "content": "weather in Paris?"}]
        answer = {"content": "let me look", "tool": "get_weather", "args": {"city": "Paris"}}
        tape.call("llm", {"messages": messages, "step": 1}, lambda: answer)
        tape.call("tool", {"name": "get_weather", "args": {"city": "Paris"}, "step": 1},
                  lambda: "sunny")  # fmt: skip
    shown = CliRunner().invoke(main, ["show", str(path), "--view", "conversation"])
    assert shown.exit_code == 0, shown.output
    for text in ("said (user)  weather in Paris?", "answer  let me look",
                 'call  get_weather(city="Paris")', "result  sunny"):  # fmt: skip
        assert text in shown.output
    assert "┃ seq" in CliRunner().invoke(main, ["show", str(path)]).output


def test_show_json_carries_each_decisions_tokens_and_usage(tmp_path: Path) -> None:
    """A model call recorded with its usage shows it, and its tokens, in ``--format json``;
    a decision that says none shows null for both."""
    path = tmp_path / "usage.jsonl"
    with Tape(path, mode="record") as tape:
        decision = tape.prepare("llm", {"messages": [], "params": {"model": "m"}, "step": 1})
        tape.record(decision, {"text": "ok"}, usage={"input": 120, "output": 30})
        tape.call("tool", {"name": "ls", "args": {}, "step": 1}, lambda: "a b")
    rows = json.loads(CliRunner().invoke(main, ["show", str(path), "--format", "json"]).output)
    assert rows[0]["usage"] == {"input": 120, "output": 30} and rows[0]["tokens"] == 150
    assert (rows[1]["usage"], rows[1]["tokens"]) == (None, None)
