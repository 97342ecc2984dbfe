"""Every command on malformed input: a clean exit (0, 1 or 2, one plain line), never a traceback.

Valid inputs of each kind (a tracetape cassette, a seed JSONL trace, span records, OTLP/JSON, a
diff report) are mutated the ways a hostile or careless user does (truncation, a field of the
wrong type anywhere, deep nesting, a huge line, random bytes, CRLF, a BOM, lines deleted or
doubled, nothing at all) and fed to every command that reads them, and to ``Tape`` in replay.
"""

from __future__ import annotations

import contextlib
import json
import random
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given
from hypothesis import strategies as st

from tests.analysis.helpers import SEED_A, SEED_B
from tests.suite import bounded
from tracetape import Tape, TapeError
from tracetape.cli import main
from tracetape.formats.otlp import cassette_to_otlp

DEEP = "<deep>"
ODD_VALUES: list[Any] = [
    7, -1.5, 2**70, True, None, "x", "", "\u0000\ud7ff", [], {}, [1, [2, [3]]], {"a": {"b": []}},
]  # fmt: skip


def _valid_inputs(folder: Path) -> dict[str, bytes]:
    cassette = folder / "valid.cassette.jsonl"
    with Tape(cassette, mode="record") as tape:
        messages: list[dict[str, Any]] = [{"role": "user", "content": "find the flaky test"}]
        for step in range(1, 4):
            payload = {"messages": messages, "params": {"model": "m"}, "step": step}
            tape.call("llm", payload, lambda step=step: {"content": f"step {step}"})
            tape.call("tool", {"name": "grep", "args": {"q": step}, "step": step}, lambda: [step])
            messages = [*messages, {"role": "tool", "content": f"found {step}"}]
    span = {
        "span_id": "7f3c",
        "tool_call": {"argv": ["git", "diff"], "env_digest": "sha256:9a1e", "timeout_s": 30},
        "tool_result": {"exit_code": 0, "stdout": "3 files changed", "stderr": ""},
        "model_decision": {"tool_name": "git_diff", "args": {}, "model_id": "m"},
    }
    report = CliRunner().invoke(main, ["diff", str(cassette), str(cassette), "--format", "json"])
    return {
        "cassette": cassette.read_bytes(),
        "trace": b"".join(orjson.dumps(r) + b"\n" for r in SEED_A + SEED_B),
        "spans": b"".join(orjson.dumps({**span, "span_id": i}) + b"\n" for i in ("7f3c", "8a00")),
        "otlp": json.dumps(cassette_to_otlp(cassette)).encode(),
        "report": report.output.encode(),
    }


# What reads each kind of input: command lines ({} is the file), and the replay tape.
COMMANDS: dict[str, list[list[str]]] = {
    "cassette": [
        ["show", "{}"],
        ["show", "{}", "--format", "json"],
        ["verify", "{}"],
        ["export", "--otel", "{}"],
        ["diff", "{}", "{}"],
        ["check", "{}"],
    ],
    "trace": [
        ["diff", "{}", "--runs", "run_0042", "run_0043"],
        ["export", "--parquet", "{}", "-o", "{}.parquet"],
        ["check", "{}", "--format", "json"],
    ],
    "spans": [["diff", "{}", "{}"], ["check", "{}"]],
    "otlp": [["diff", "{}", "{}", "--format", "markdown"], ["check", "{}"]],
    "report": [["summarize", "{}"], ["summarize", "{}", "--format", "json"]],
}


def _set_somewhere(value: Any, rng: random.Random, new: Any) -> Any:
    """``value`` with one node (chosen at random, the root included) replaced by ``new``."""
    if rng.random() < 0.25 or not isinstance(value, dict | list) or not value:
        return new
    if isinstance(value, dict):
        key = rng.choice(list(value))
        return {**value, key: _set_somewhere(value[key], rng, new)}
    i = rng.randrange(len(value))
    return [*value[:i], _set_somewhere(value[i], rng, new), *value[i + 1 :]]


def _mutate(data: bytes, how: str, rng: random.Random) -> bytes:
    lines = data.splitlines(keepends=True) or [b""]
    i = rng.randrange(len(lines))
    if how == "truncate":
        return data[: rng.randrange(len(data) + 1)]
    if how == "retype":
        try:
            parsed = json.loads(lines[i])
        except (ValueError, RecursionError):  # not JSON, or nested deeper than json reads
            return data
        new = rng.choice([*ODD_VALUES, DEEP])
        text = json.dumps(_set_somewhere(parsed, rng, new)).encode()
        # nested deeper than a JSON encoder recurses: spliced in as text
        depth = rng.choice([50, 600, 3000])
        lines[i] = text.replace(b'"<deep>"', b"[" * depth + b"0" + b"]" * depth) + b"\n"
        return b"".join(lines)
    if how == "huge":
        lines[i] = json.dumps({"x": "y" * 300_000}).encode() + b"\n"
        return b"".join(lines)
    if how == "bytes":
        at = rng.randrange(len(data) + 1)
        return data[:at] + rng.randbytes(rng.randrange(1, 40)) + data[at:]
    if how == "crlf":
        return data.replace(b"\n", b"\r\n")
    if how == "bom":
        return b"\xef\xbb\xbf" + data
    if how == "delete":
        return b"".join(lines[:i] + lines[i + 1 :])
    if how == "double":
        return b"".join(lines[: i + 1] + lines[i:])
    if how == "nothing":
        return rng.choice([b"", b"\n\n  \n", b"null\n", b"[]\n", rng.randbytes(4096)])
    raise AssertionError(how)


MUTATIONS = ["truncate", "retype", "retype", "retype", "huge", "bytes", "crlf", "bom", "delete",
             "double", "nothing"]  # fmt: skip


def _clean(args: list[str]) -> tuple[int, str]:
    result = CliRunner().invoke(main, args)
    error = result.exception
    assert error is None or isinstance(error, SystemExit), (args, repr(error))
    assert result.exit_code in (0, 1, 2), (args, result.exit_code, result.output)
    assert "Traceback" not in result.output, (args, result.output)
    return result.exit_code, result.output


@pytest.fixture(scope="module")
def valid(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    return _valid_inputs(tmp_path_factory.mktemp("valid"))


def test_every_command_accepts_the_valid_inputs(valid: dict[str, bytes], tmp_path: Path) -> None:
    """The unmutated inputs pass (the fuzzing starts from inputs that work)."""
    for kind, data in valid.items():
        path = tmp_path / f"{kind}.jsonl"
        path.write_bytes(data)
        for command in COMMANDS[kind]:
            code, output = _clean([a.replace("{}", str(path)) for a in command])
            assert code == 0, (kind, command, output)


@given(
    kind=st.sampled_from(sorted(COMMANDS)),
    hows=st.lists(st.sampled_from(MUTATIONS), min_size=1, max_size=3),
    seed=st.integers(0, 2**32 - 1),
)
@bounded(deep=200, ci=20, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_every_command_exits_cleanly_on_malformed_input(
    valid: dict[str, bytes], tmp_path: Path, kind: str, hows: list[str], seed: int
) -> None:
    """Whatever the damage, each command exits 0, 1 or 2 without a traceback, and a replay
    tape loads the file or raises a ``TapeError``."""
    rng = random.Random(seed)
    data = valid[kind]
    for how in hows:
        data = _mutate(data, how, rng)
    path = tmp_path / f"{kind}.jsonl"
    path.write_bytes(data)
    for command in COMMANDS[kind]:
        _clean([a.replace("{}", str(path)) for a in command])
    _replay(path)


def _replay(path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with contextlib.suppress(TapeError):
            Tape(path, mode="replay").close()


@pytest.mark.parametrize(
    "content",
    [
        pytest.param(b"", id="empty"),
        pytest.param(b"\n \n\t\n", id="blank-lines"),
        pytest.param(bytes(range(256)) * 16, id="random-bytes"),
        pytest.param(b"not json at all\n", id="prose"),
    ],
)
@pytest.mark.parametrize(
    "command",
    [["show", "{}"], ["verify", "{}"], ["export", "--otel", "{}"], ["check", "{}"]],
    ids=lambda c: c[0],
)
def test_nothing_usable_is_never_exit_0(tmp_path: Path, content: bytes, command: list[str]) -> None:
    """An empty, blank or non-JSON file is bad input (exit 2, or 1 for verify's "corrupt"),
    never a silent success; a replay tape refuses it too."""
    path = tmp_path / "x.jsonl"
    path.write_bytes(content)
    code, output = _clean([a.replace("{}", str(path)) for a in command])
    assert code in (1, 2), output
    assert str(path) in output
    with pytest.raises(TapeError):
        Tape(path, mode="replay")


def _cassette_with(valid: bytes, line: int, change: Callable[[dict[str, Any]], None]) -> bytes:
    lines = valid.splitlines(keepends=True)
    rec = json.loads(lines[line])
    change(rec)
    lines[line] = json.dumps(rec).encode() + b"\n"
    return b"".join(lines)


DEEP_ARGS = (
    b'{"run_id":"a","step":1,"tool":"t","args":{"x":' + b"[" * 600 + b"0" + b"]" * 600 + b"},"
    b'"output_sha":"o"}\n{"run_id":"b","step":1,"tool":"t","args":{},"output_sha":"o"}\n'
)

# The crashes the trust issue reported, each now a clean exit: (input kind, bytes or a change
# of the valid input, commands).
REPORTED: list[Any] = [
    pytest.param("cassette", lambda v: _cassette_with(v, 1, lambda r: r.update(key=7)),
                 id="key-an-int"),
    pytest.param("cassette", lambda v: _cassette_with(v, 1, lambda r: r.update(kind=["llm"])),
                 id="kind-a-list"),
    pytest.param("cassette", lambda v: _cassette_with(v, 3, lambda r: r.update(input="x")),
                 id="delta-input-a-string"),
    pytest.param("cassette", lambda v: _cassette_with(v, 3, lambda r: r.update(input=[1])),
                 id="delta-input-a-list"),
    pytest.param("cassette", lambda v: _cassette_with(v, 2, lambda r: r.update(seq="2")),
                 id="seq-a-string"),
    pytest.param("cassette", lambda v: _cassette_with(v, 2, lambda r: r.update(ms=[1, 2])),
                 id="ms-a-list"),
    pytest.param("trace", lambda v: DEEP_ARGS, id="args-nested-600-deep"),
    pytest.param("otlp", lambda v: b'{"resourceSpans": [{"scopeSpans": 7}]}\n',
                 id="otlp-scopespans-a-number"),
    pytest.param("report", lambda v: b'{"findings": [1, 2]}\n', id="findings-not-objects"),
]  # fmt: skip


@pytest.mark.parametrize(("kind", "make"), REPORTED)
def test_the_reported_crashes_exit_cleanly(
    valid: dict[str, bytes], tmp_path: Path, kind: str, make: Callable[[bytes], bytes]
) -> None:
    """Each input that once raised a traceback now exits 0, 1 or 2 with one plain line."""
    path = tmp_path / f"{kind}.jsonl"
    path.write_bytes(make(valid[kind]))
    for command in COMMANDS[kind]:
        _clean([a.replace("{}", str(path)) for a in command])
    _replay(path)
