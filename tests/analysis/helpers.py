"""Builders of small traces for the analysis tests."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest.mock import patch

import orjson

from tracetape.analysis.sign import Signer


def call(
    run: str,
    step: int,
    tool: str,
    args: dict[str, Any],
    out: str,
    **extra: Any,
) -> dict[str, Any]:
    """One seed-schema record."""
    return {
        "run_id": run,
        "step": step,
        "tool": tool,
        "args": args,
        "output_sha": out,
        "tokens": extra.pop("tokens", 100),
        "ts": "2026-08-31T09:12:04Z",
        **extra,
    }


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    """Write records one per line and return the path."""
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    return path


SEED_A = [
    call("run_0042", 1, "search_issues", {"q": "broken:true", "page": 1}, "a1b2c3", tokens=812),
    call("run_0042", 2, "search_issues", {"q": "broken:true", "page": 1}, "a1b2c3", tokens=812),
]
SEED_B = [
    call("run_0043", 1, "search_issues", {"q": "broken:true", "page": 1}, "d4e5f6", tokens=817)
]


@contextmanager
def told_to_sign() -> Iterator[list[str | None]]:
    """Yield what each ``Signer._to_sign`` of the analyses run inside returned (the texts to
    key where some are alone; None: all)."""
    told: list[str | None] = []
    to_sign = Signer._to_sign

    def spy(self: Signer, texts: str) -> str | None:
        told.append(to_sign(self, texts))
        return told[-1]

    with patch.object(Signer, "_to_sign", spy):
        yield told


@contextmanager
def families() -> Iterator[list[int]]:
    """Yield the number of families whose texts DuckDB keyed, of each ``Signer._to_sign`` of
    the analyses run inside."""
    keyed: list[int] = []
    to_sign = Signer._to_sign

    def spy(self: Signer, texts: str) -> str | None:
        bare = to_sign(self, texts)
        keyed.append(len(self.structures))
        return bare

    with patch.object(Signer, "_to_sign", spy):
        yield keyed
