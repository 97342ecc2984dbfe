"""The harness a run was recorded under (the git HEAD, or a digest of named files) and the
environment's drift since, one sentence each."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tracetape.harness import environment_drift, git_sha, harness_digest


def _git(folder: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(folder), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return done.stdout.strip()


def test_the_sha_is_the_head_of_the_work_tree_holding_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From any folder of a work tree, its HEAD; outside one, None."""
    repo = tmp_path / "repo"
    (repo / "sub").mkdir(parents=True)
    _git(repo, "init", "-q")
    _git(repo, "commit", "-q", "--allow-empty", "-m", "x")
    monkeypatch.chdir(repo / "sub")
    assert git_sha() == _git(repo, "rev-parse", "HEAD")
    (tmp_path / "plain").mkdir()
    monkeypatch.chdir(tmp_path / "plain")
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    assert git_sha() is None


def test_the_digest_follows_the_files_names_and_contents(tmp_path: Path) -> None:
    """Folders are walked, caches skipped; an edit, a rename or a new file changes the digest,
    the order the paths are given in does not."""
    agent = tmp_path / "agent"
    agent.mkdir()
    (agent / "loop.py").write_text("STEPS = 12\n")
    (tmp_path / "prompt.txt").write_text("be brief")
    paths = [agent, tmp_path / "prompt.txt"]
    first = harness_digest(paths)
    assert first.startswith("sha256:") and len(first) == len("sha256:") + 16
    assert harness_digest(reversed(paths)) == first
    (agent / "__pycache__").mkdir()
    (agent / "__pycache__" / "loop.cpython-311.pyc").write_bytes(b"\0")
    assert harness_digest(paths) == first
    (agent / "loop.py").write_text("STEPS = 20\n")
    edited = harness_digest(paths)
    assert edited != first
    (agent / "loop.py").rename(agent / "main.py")
    assert harness_digest(paths) not in (first, edited)
    (agent / "main.py").rename(agent / "loop.py")
    assert harness_digest(paths) == edited
    assert harness_digest([*paths, tmp_path / "missing.py"]) != edited


def test_no_drift_when_all_is_as_recorded(tmp_path: Path) -> None:
    header = {"env": {"MODEL": "hmac:1"}, "harness_sha": "aaaa"}
    assert environment_drift(header, ["MODEL"], lambda name: "hmac:1", "aaaa") == []


def test_each_difference_is_one_sentence() -> None:
    """A variable allowed now but not recorded, one whose value changed, and another SHA."""
    header = {"env": {"MODEL": "hmac:1", "REGION": "hmac:2"}, "harness_sha": "aaaa1111"}
    digests = {"MODEL": "hmac:9", "REGION": "hmac:2"}
    assert environment_drift(header, ["MODEL", "TEMPERATURE"], digests.get, "bbbb2222") == [
        "environment variable MODEL has a different value than when recorded",
        "environment variable TEMPERATURE was not recorded in this cassette",
        "harness git SHA changed: recorded aaaa1111, now bbbb2222",
    ]


def test_named_harness_files_replace_the_sha(tmp_path: Path) -> None:
    """A recording that named its harness files is compared by their content: another HEAD is
    no drift, an edited file is, naming both digests."""
    loop = tmp_path / "loop.py"
    loop.write_text("STEPS = 12\n")
    header = {
        "harness_sha": "aaaa",
        "harness_paths": [str(loop)],
        "harness_digest": harness_digest([loop]),
    }
    assert environment_drift(header, [], lambda name: None, "bbbb") == []
    recorded = header["harness_digest"]
    loop.write_text("STEPS = 20\n")
    assert environment_drift(header, [], lambda name: None, "bbbb") == [
        f"harness files {loop} changed: recorded {recorded}, now {harness_digest([loop])}"
    ]


def test_without_a_given_sha_the_live_head_is_compared(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Replay in a work tree whose HEAD moved since the recording names both SHAs; a
    recording with no SHA compares none."""
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "commit", "-q", "--allow-empty", "-m", "x")
    monkeypatch.chdir(tmp_path)
    head = _git(tmp_path, "rev-parse", "HEAD")
    assert environment_drift({"harness_sha": head}, [], lambda name: None) == []
    assert environment_drift({"harness_sha": "0000"}, [], lambda name: None) == [
        f"harness git SHA changed: recorded 0000, now {head}"
    ]
    assert environment_drift({}, [], lambda name: None) == []
