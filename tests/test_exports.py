"""The public API is exactly what `tracetape.__all__` lists."""

from __future__ import annotations

import subprocess
import sys

import tracetape


def test_all_is_sorted_and_complete() -> None:
    """__all__ is sorted and names every public top-level attribute that is not a module."""
    for name in tracetape.__all__:
        getattr(tracetape, name)  # loads the lazily imported integrations too
    public = {
        name
        for name, value in vars(tracetape).items()
        if not name.startswith("_")
        and type(value).__name__ not in {"module", "_Feature"}
        and name not in {"TYPE_CHECKING", "Any", "importlib"}
    }
    assert tracetape.__all__ == sorted(tracetape.__all__)
    assert set(tracetape.__all__) - {"__version__"} == public


def test_exported_members_say_they_belong_to_tracetape() -> None:
    """Every exported class and function has a docstring."""
    for name in tracetape.__all__:
        if name != "__version__":
            assert getattr(tracetape, name).__doc__, name


def test_import_stays_light() -> None:
    """Importing tracetape pulls in no CLI, analysis, HTTP or model-SDK library, and not even
    the core's: its names load when first used (the command line imports its command's
    modules with the garbage collector paused, which a core imported before would miss)."""
    heavy = (
        "('click', 'rich', 'httpx', 'httpx2', 'openai', 'anthropic', 'pydantic', "
        "'duckdb', '_duckdb', 'tracetape.analysis', 'tracetape.formats.jsonl', "
        "'msgspec', 'orjson', 'tracetape.record', 'tracetape.canonical')"
    )
    code = f"import sys, tracetape; print(sorted(m for m in {heavy} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
