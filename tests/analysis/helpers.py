"""Builders of small traces for the analysis tests."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest.mock import patch

import orjson

from tracetape.analysis import AnalysisConfig, Limits, Report, check_trace, diff_traces
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


def diff(tmp_path: Path, a: list[dict[str, Any]], b: list[dict[str, Any]], **kw: Any) -> Report:
    """``diff_traces`` of the runs ``a`` and ``b``, written as seed JSONL in ``tmp_path``."""
    return diff_traces(
        write_jsonl(tmp_path / "a.jsonl", a), write_jsonl(tmp_path / "b.jsonl", b), **kw
    )


def check(tmp_path: Path, records: list[dict[str, Any]], **limits: int) -> Report:
    """``check_trace`` of ``records`` (seed JSONL in ``tmp_path``) under ``limits``."""
    config = AnalysisConfig(limits=Limits().merged(**limits))
    return check_trace(write_jsonl(tmp_path / "t.jsonl", records), config=config)


def patterns(report: Report) -> list[str]:
    """The patterns of a report's findings, sorted."""
    return sorted(f.pattern for f in report.findings)


def many_calls(tmp_path: Path, n: int = 20_000) -> Path:
    records = [
        call(f"r{i // 40}", 1 + i % 40 // 3, "t", {"k": i % 97, "x": "y" * (i % 5)}, f"o{i % 89}")
        for i in range(n)
    ]
    return write_jsonl(tmp_path / "many.jsonl", records)


def report_of(path: Path, **config: Any) -> dict[str, Any]:
    data = check_trace(path, config=AnalysisConfig(**config)).to_dict()
    data.pop("inputs")
    return data


def record_tools(path: Path, outputs: list[str], *, fail: bool = False) -> Path:
    """A cassette of one tool call a result of ``outputs`` (args ``{"c": 1}``, ``{"c": 2}``...),
    its recording closed ``failed: ValueError`` after them with ``fail``."""
    from tracetape import Tape

    try:
        with Tape(path, mode="record", harness_sha="t") as tape:
            for i, out in enumerate(outputs, 1):
                tape.call("tool", {"name": "w", "args": {"c": i}, "step": 1}, lambda o=out: o)
            if fail:
                raise ValueError("boom")
    except ValueError:
        pass
    return path
