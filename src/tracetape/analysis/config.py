"""Analysis settings: normalization, invariant bounds and severity overrides.

Read from ``pyproject.toml``; an option given on the command line wins over the file, the file
over the documented defaults::

    [tool.tracetape.normalize]
    volatile_keys = ["ts", "*_at", "request_id"]   # replaces the default list
    extra_volatile_keys = ["nonce"]                 # or extends it
    masks = { "sess-[0-9a-f]+" = "<session>" }      # regex = replacement, on every string

    [tool.tracetape.check]
    max_calls_per_step = 10    # fanout bound
    max_repeats = 2            # same call repeated at most this often in a run
    max_tokens = 200000        # per run
    max_steps = 50             # per run
    max_calls = 500            # per run
    exploration = 4            # distinct args of one tool in one step before it is exploration
    resource_keys = ["path", "file", "url", "id"]  # args naming the resource a call touches

    [tool.tracetape.severity]
    duplicate-call = "fatal"

    [tool.tracetape.analysis]
    memory_limit = "640MB"     # the engine's memory; beyond it, work spills to a temp folder
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from ..canonical import DEFAULT_VOLATILE_KEYS, Normalizer
from ..config import ConfigError, find_pyproject, load_config
from .rules import Rule, classify_table

__all__ = ["DEFAULT_RESOURCE_KEYS", "AnalysisConfig", "Limits"]

DEFAULT_RESOURCE_KEYS: tuple[str, ...] = (
    "resource",
    "path",
    "file",
    "filename",
    "file_path",
    "url",
    "uri",
    "key",
    "id",
    "record_id",
    "table",
    "repo",
    "issue",
)


@dataclass(frozen=True)
class Limits:
    """Bounds of one run; the defaults are the documented ones."""

    max_calls_per_step: int = 10
    max_repeats: int = 2
    max_tokens: int = 200_000
    max_steps: int = 50
    max_calls: int = 500
    exploration: int = 4

    def merged(self, **given: int | None) -> Limits:
        """Return a copy with the non-``None`` values of ``given`` applied."""
        return replace(self, **{k: v for k, v in given.items() if v is not None})


@dataclass(frozen=True)
class AnalysisConfig:
    """Everything the analysis needs besides the events."""

    normalizer: Normalizer = field(default_factory=Normalizer)
    limits: Limits = field(default_factory=Limits)
    rules: Mapping[str, Rule] = field(default_factory=classify_table)
    resource_keys: tuple[str, ...] = DEFAULT_RESOURCE_KEYS
    max_examples: int = 200
    # The engine's memory (a DuckDB size); beyond it, work spills to a temporary directory.
    # Chosen to keep check of a 3M-line trace under 1 GiB without spilling more than it must
    # (benchmarks/README.md, "Measurements behind the analysis": memory limit).
    memory_limit: str = "640MB"

    @classmethod
    def load(cls, start: Path | None = None, **limits: int | None) -> AnalysisConfig:
        """Read ``[tool.tracetape.normalize|check|severity]``; ``limits`` override the file.

        Raises ``ConfigError`` naming the file and the field of a value of the wrong type.
        """
        where = find_pyproject(start) or Path("pyproject.toml")
        norm = load_config("normalize", start)
        check = load_config("check", start)
        severity = load_config("severity", start)
        engine = load_config("analysis", start)
        keys = _strings(norm, "volatile_keys", where, "normalize")
        extra = _strings(norm, "extra_volatile_keys", where, "normalize") or ()
        masks = norm.get("masks", {})
        if not isinstance(masks, dict) or not all(isinstance(v, str) for v in masks.values()):
            raise ConfigError(
                f"{where}: [tool.tracetape.normalize] masks must be a table of regex = replacement"
            )
        normalizer = Normalizer.from_config((*(keys or DEFAULT_VOLATILE_KEYS), *extra), masks)
        values: dict[str, int] = {}
        names = {f.name for f in fields(Limits)}
        for name, value in check.items():
            if name == "resource_keys":
                continue
            if name not in names:
                known = ", ".join(sorted([*names, "resource_keys"]))
                raise ConfigError(
                    f"{where}: [tool.tracetape.check] unknown field {name!r}; fields: {known}"
                )
            if type(value) is not int or value < 0:
                raise ConfigError(
                    f"{where}: [tool.tracetape.check] {name} must be a non-negative integer, "
                    f"not {value!r}"
                )
            values[name] = value
        try:
            rules = classify_table(severity)
        except ValueError as exc:
            raise ConfigError(f"{where}: {exc}") from None
        resource = _strings(check, "resource_keys", where, "check")
        unknown = sorted(set(engine) - {"memory_limit"})
        if unknown:
            raise ConfigError(
                f"{where}: [tool.tracetape.analysis] unknown field {unknown[0]!r}; fields: "
                "memory_limit"
            )
        memory = engine.get("memory_limit", cls.memory_limit)
        if not isinstance(memory, str) or not re.fullmatch(r"\d+(\.\d+)?\s*[KMGT]i?B", memory):
            raise ConfigError(
                f"{where}: [tool.tracetape.analysis] memory_limit must be a size such as "
                f"'512MB' or '2GiB', not {memory!r}"
            )
        return cls(
            memory_limit=memory,
            normalizer=normalizer,
            limits=Limits(**values).merged(**limits),
            rules=rules,
            resource_keys=tuple(resource) if resource is not None else DEFAULT_RESOURCE_KEYS,
        )


def _strings(
    table: Mapping[str, Any], name: str, where: Path, section: str
) -> tuple[str, ...] | None:
    value = table.get(name)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(
            f"{where}: [tool.tracetape.{section}] {name} must be a list of strings, not {value!r}"
        )
    return tuple(value)
