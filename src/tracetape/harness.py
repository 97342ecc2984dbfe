"""The harness and the environment a run was recorded under, and what drifted since.

A recording stores the harness as the git HEAD of the working directory, or, when the agent
loop's files are named, a digest of their content; and the allowed environment variables as
keyed hashes. ``environment_drift`` names every difference a replay runs under.
"""

from __future__ import annotations

import functools
import hashlib
import os
import subprocess
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

__all__ = ["environment_drift", "git_sha", "harness_digest"]


def git_sha() -> str | None:
    """HEAD of the git work tree holding the working directory, or None outside one."""
    return _git_sha_of(str(Path.cwd()))


@functools.lru_cache(maxsize=32)
def _git_sha_of(folder: str) -> str | None:
    # Cached per folder: a subprocess costs milliseconds, and every replay checks the SHA.
    try:
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
            cwd=folder,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    sha = done.stdout.strip()
    return sha if done.returncode == 0 and sha else None


def harness_digest(paths: Iterable[str | os.PathLike[str]]) -> str:
    """A digest of the harness files' names and contents (folders walked, caches skipped)."""
    digest = hashlib.sha256()
    for root in sorted(str(p) for p in paths):
        base = Path(root)
        if base.is_dir():
            files = sorted(
                f for f in base.rglob("*") if f.is_file() and "__pycache__" not in f.parts
            )
        else:
            files = [base]
        for file in files:
            digest.update(file.as_posix().encode() + b"\0")
            digest.update(file.read_bytes() if file.is_file() else b"<missing>")
            digest.update(b"\0")
    return f"sha256:{digest.hexdigest()[:16]}"


def environment_drift(
    header: Mapping[str, Any],
    env_allow: Iterable[str],
    env_digest: Callable[[str], str | None],
    harness_sha: str | None = None,
) -> list[str]:
    """What differs from the recording's ``header``: allowed environment variables (compared
    by ``env_digest``), the harness files' digest, or the harness git SHA (``harness_sha``,
    else the live HEAD); one sentence each.

    >>> environment_drift({"env": {"MODEL": "hmac:1"}}, ["MODEL"], lambda name: "hmac:2")
    ['environment variable MODEL has a different value than when recorded']
    """
    drift: list[str] = []
    recorded_env: dict[str, Any] = header.get("env") or {}
    for name in sorted(set(recorded_env) | set(env_allow)):
        if name not in recorded_env:
            drift.append(f"environment variable {name} was not recorded in this cassette")
        elif env_digest(name) != recorded_env[name]:
            drift.append(f"environment variable {name} has a different value than when recorded")
    recorded_paths, recorded_digest = header.get("harness_paths"), header.get("harness_digest")
    if isinstance(recorded_paths, list) and recorded_digest:
        # The recording named its harness files: their content, not HEAD, is the harness.
        live_digest = harness_digest(recorded_paths)
        if live_digest != recorded_digest:
            drift.append(
                f"harness files {', '.join(map(str, recorded_paths))} changed: recorded "
                f"{recorded_digest}, now {live_digest}"
            )
    else:
        recorded_sha = header.get("harness_sha")
        live_sha = harness_sha or (git_sha() if recorded_sha else None)
        if recorded_sha and live_sha and recorded_sha != live_sha:
            drift.append(f"harness git SHA changed: recorded {recorded_sha}, now {live_sha}")
    return drift
