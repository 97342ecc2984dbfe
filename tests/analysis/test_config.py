"""Analysis settings from [tool.tracetape]: normalization, bounds, severity overrides."""

from __future__ import annotations

from pathlib import Path

import pytest

from tracetape.analysis import AnalysisConfig, Severity
from tracetape.config import ConfigError


def _project(tmp_path: Path, body: str) -> Path:
    (tmp_path / "pyproject.toml").write_text(body)
    return tmp_path


def test_settings_are_read_from_pyproject(tmp_path: Path) -> None:
    """Bounds, volatile keys, masks, resource keys and severities come from the file."""
    root = _project(
        tmp_path,
        """
[tool.tracetape.normalize]
extra_volatile_keys = ["nonce"]
masks = { "sess-[0-9]+" = "<session>" }
[tool.tracetape.check]
max_steps = 7
resource_keys = ["doc"]
[tool.tracetape.severity]
write-echo = "suspicious"
[tool.tracetape.analysis]
memory_limit = "1GiB"
""",
    )
    config = AnalysisConfig.load(root)
    assert config.memory_limit == "1GiB"
    assert config.limits.max_steps == 7
    assert config.limits.max_repeats == 2
    assert config.normalizer({"nonce": 1, "ts": 2, "s": "sess-42", "k": 3}) == {
        "s": "<session>",
        "k": 3,
    }
    assert config.resource_keys == ("doc",)
    assert config.rules["write-echo"].severity is Severity.SUSPICIOUS


def test_options_win_over_the_file(tmp_path: Path) -> None:
    """A bound given as an option overrides the file's."""
    root = _project(tmp_path, "[tool.tracetape.check]\nmax_steps = 7\n")
    assert AnalysisConfig.load(root, max_steps=3, max_tokens=None).limits.max_steps == 3


@pytest.mark.parametrize(
    ("body", "match"),
    [
        pytest.param(
            "[tool.tracetape.check]\nmax_steps = 'many'\n",
            "max_steps must be a non-negative integer",
            id="wrong-type",
        ),
        pytest.param(
            "[tool.tracetape.check]\nmax_stepz = 3\n",
            "unknown field 'max_stepz'",
            id="unknown-bound",
        ),
        pytest.param(
            "[tool.tracetape.severity]\nrepeat = 'fatal'\n",
            "unknown pattern 'repeat'",
            id="unknown-pattern",
        ),
        pytest.param(
            "[tool.tracetape.severity]\nfanout = 'bad'\n",
            "'bad' is not a valid severity",
            id="bad-severity",
        ),
        pytest.param(
            "[tool.tracetape.normalize]\nvolatile_keys = 'ts'\n",
            "list of strings",
            id="keys-not-list",
        ),
        pytest.param(
            "[tool.tracetape.analysis]\nmemory_limit = 'lots'\n",
            "memory_limit must be a size",
            id="bad-memory-limit",
        ),
        pytest.param(
            "[tool.tracetape.analysis]\nthreads = 2\n",
            "unknown field 'threads'",
            id="unknown-engine-field",
        ),
    ],
)
def test_bad_settings_name_file_and_field(tmp_path: Path, body: str, match: str) -> None:
    """A setting of the wrong shape raises ConfigError naming pyproject.toml and the field."""
    root = _project(tmp_path, body)
    with pytest.raises(ConfigError, match=match) as info:
        AnalysisConfig.load(root)
    assert "pyproject.toml" in str(info.value)
