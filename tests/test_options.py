"""``TapeOptions``: every option of a tape in one frozen value, each kept in one form, each
refused with its own message (in ``Tape``'s keywords and in ``tracetape run``'s flags), and
handed to another process whole as JSON."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from tracetape import Match, RedactRules, Tape
from tracetape.config import _load
from tracetape.errors import OptionError
from tracetape.options import OPTIONS, Mode, TapeOptions


def test_every_option_has_one_default_and_its_spellings() -> None:
    """``OPTIONS`` lists each field of ``TapeOptions`` in ``Tape``'s keyword order, with the
    default a bare ``TapeOptions()`` holds, and its spelling on ``tracetape run``, in
    ``[tool.tracetape]`` and in the environment where it has one."""
    assert list(OPTIONS) == [f.name for f in dataclasses.fields(TapeOptions)]
    bare = TapeOptions()
    assert all(getattr(bare, name) == option.default for name, option in OPTIONS.items())
    flags = {name: o.flag for name, o in OPTIONS.items() if o.flag}
    assert flags == {
        "mode": "--mode",
        "strict": "--strict",
        "fork_at": "--fork-at",
        "branch": "--branch",
        "replay_latency": "--latency",
        "trust_edits": "--trust-edits",
    }
    assert {name: o.config for name, o in OPTIONS.items() if o.config} == {
        "redact": "redact",
        "match": "match",
        "trust_edits": "trust_edits",
    }
    assert OPTIONS["redact_key"].env == "TRACETAPE_REDACT_KEY"


def test_each_option_is_kept_in_one_form() -> None:
    """A mode's name is its ``Mode``, iterables are tuples, a branch a ``Path``, redaction
    and match rules given as mappings are ``RedactRules`` and ``Match``."""
    options = TapeOptions(
        mode="fork",
        env_allow=iter(["MODEL"]),
        harness_paths=[Path("agent.py")],
        branch="b.jsonl",
        redact={"fields": ["ssn"]},
        match={"ignore": ["params.user"]},
    )
    assert options.mode is Mode.FORK and options.env_allow == ("MODEL",)
    assert options.harness_paths == ("agent.py",) and options.branch == Path("b.jsonl")
    assert options.redact == RedactRules(fields=("ssn",))
    assert options.match == Match(ignore=["params.user"])


def test_options_are_frozen() -> None:
    """Once built and checked, an options value does not change."""
    options = TapeOptions(strict=True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.strict = False  # type: ignore[misc]


@pytest.mark.parametrize(
    ("given", "said", "flagged"),
    [
        pytest.param(
            {"mode": "rec"},
            "'rec' is not a valid mode; use one of 'replay', 'record', 'auto', 'rewrite', 'fork'",
            "--mode: 'rec' is not a valid mode",
            id="mode",
        ),
        pytest.param(
            {"mode": "replay", "fork_at": 2},
            "fork_at and branch are options of mode 'fork'",
            "--fork-at and --branch need --mode fork",
            id="fork-at-without-fork",
        ),
        pytest.param(
            {"branch": "b.jsonl"},
            "fork_at and branch are options of mode 'fork'",
            "--fork-at and --branch need --mode fork",
            id="branch-without-fork",
        ),
        pytest.param(
            {"mode": "fork", "fork_at": -1},
            "fork_at must be a step number (0 or more), not -1",
            "--fork-at: fork_at must be a step number",
            id="negative-step",
        ),
        pytest.param(
            {"mode": "fork", "fork_at": True},
            "fork_at must be a step number (0 or more), not True",
            "--fork-at: ",
            id="a-bool-is-no-step",
        ),
        pytest.param(
            {"replay_latency": "slow"},
            "replay latency 'slow' is not 'instant', 'recorded' or a factor from 0 to 1000",
            "--latency: replay latency 'slow'",
            id="latency",
        ),
        pytest.param(
            {"run_id": "-x"},
            "run_id must be 1-200 letters, digits and ._:@+=-, starting with a letter or digit, "
            "not '-x'",
            "run_id must be",
            id="run-id",
        ),
        pytest.param(
            {"match": {"ignore": "user"}},
            "match ignore must be a list of strings",
            "match ignore",
            id="match",
        ),
        pytest.param(
            {"trust_edits": "yes"},
            "trust_edits must be True or False, not 'yes'",
            "--trust-edits: trust_edits must be",
            id="trust-edits",
        ),
    ],
)
def test_a_bad_option_is_refused_with_its_message(
    given: dict[str, Any], said: str, flagged: str
) -> None:
    """Each check raises ``OptionError`` (a ``ValueError``) naming the option as ``Tape``
    takes it; ``flag_message`` says it as ``tracetape run``'s flags do."""
    with pytest.raises(OptionError) as info:
        TapeOptions(**given)
    assert str(info.value).startswith(said) and isinstance(info.value, ValueError)
    assert info.value.flag_message.startswith(flagged)
    with pytest.raises(ValueError, match="^" + said[:20].replace("(", r"\(")):
        Tape("never-opened.jsonl", **given)


def test_an_unknown_keyword_is_a_type_error_listing_the_options() -> None:
    """A misspelt keyword is refused as Python refuses one, with the options it could be."""
    with pytest.raises(TypeError, match="'strictly'; options: mode, redact"):
        TapeOptions(strictly=True)  # type: ignore[call-arg]


def test_options_travel_whole_as_json() -> None:
    """``to_builtins`` holds the options that differ from their defaults as JSON values, and
    ``from_builtins`` reads them back to an equal value (a key given as bytes too)."""
    options = TapeOptions(
        mode="fork",
        fork_at=3,
        branch="b.jsonl",
        env_allow=["MODEL"],
        redact={"patterns": {"ticket": "TCK-[0-9]+"}},
        redact_key=b"\x00key",
        match={"mask": ["uuid"]},
        replay_latency=0.5,
        allow_network=True,
        trust_edits=True,
    )
    carried = json.loads(json.dumps(options.to_builtins()))
    assert TapeOptions.from_builtins(carried) == options
    assert TapeOptions().to_builtins() == {}
    assert TapeOptions(strict=True).to_builtins() == {"strict": True}


def test_builtins_naming_no_option_are_refused() -> None:
    """A value read from elsewhere names only options."""
    with pytest.raises(OptionError, match=r"unknown option\(s\) \['speed'\]"):
        TapeOptions.from_builtins({"speed": 2})


def test_rules_not_given_are_the_projects(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Redaction rules given are added to ``[tool.tracetape.redact]``; match rules given
    replace ``[tool.tracetape.match]``, which holds when none are given."""
    (tmp_path / "pyproject.toml").write_text(
        '[tool.tracetape.redact]\nfields = ["badge"]\n[tool.tracetape.match]\nmask = ["uuid"]\n'
    )
    monkeypatch.chdir(tmp_path)
    assert TapeOptions(redact={"fields": ["ssn"]}).redact_rules().fields == ("badge", "ssn")
    assert TapeOptions().match_rules() == Match(mask=["uuid"])
    assert TapeOptions(match=Match(ignore=["x"])).match_rules() == Match(ignore=["x"])


def test_trusting_edits_not_given_is_the_projects(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``trust_edits`` given holds; not given, ``[tool.tracetape] trust_edits``, else False."""
    monkeypatch.chdir(tmp_path)
    _load.cache_clear()
    assert TapeOptions().trust_edits is None and TapeOptions().trusting_edits() is False
    (tmp_path / "pyproject.toml").write_text("[tool.tracetape]\ntrust_edits = true\n")
    assert TapeOptions().trusting_edits() is True
    assert TapeOptions(trust_edits=False).trusting_edits() is False
    assert TapeOptions().to_builtins() == {}  # not given: the child reads the project's
    _load.cache_clear()


def test_a_tape_takes_options_whole_or_as_keywords_not_both(tmp_path: Path) -> None:
    """``Tape(path, options=...)`` is ``Tape(path, **keywords)``; given both, it refuses."""
    options = TapeOptions(mode="record", run_id="run-1")
    with Tape(tmp_path / "a.jsonl", options=options) as tape:
        assert tape.options is options and tape.mode is Mode.RECORD
    assert Tape(tmp_path / "a.jsonl", mode="replay").header["run_id"] == "run-1"  # type: ignore[index]
    with pytest.raises(TypeError, match="not both"):
        Tape(tmp_path / "b.jsonl", options=options, strict=True)


def test_the_documented_table_lists_every_option() -> None:
    """docs/record-and-replay.md's table of options names each option, in order, with its
    ``tracetape run`` flag where it has one."""
    page = Path(__file__).resolve().parents[1] / "docs" / "record-and-replay.md"
    rows = [
        line.split("|")[1:4]
        for line in page.read_text(encoding="utf-8").split("## Options", 1)[1].splitlines()
        if line.startswith("| `")
    ]
    assert [name.strip(" `") for name, _, _ in rows] == list(OPTIONS)
    for name, _, flag in rows:
        option = OPTIONS[name.strip(" `")]
        assert option.flag is None or f"`{option.flag}`" in flag, name
