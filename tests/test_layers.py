"""The package's imports run one way, downward: boundary -> key -> record -> store / format
-> replay / analysis -> report (the layout in README.md's Development section)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "tracetape"

# Lower numbers are lower layers; a module may import its own layer and the ones below.
LAYERS: dict[str, int] = {
    "_version": 0,
    "_lazy": 0,
    "_enums": 0,
    "canonical": 0,
    "record": 0,
    "errors": 0,
    "config": 1,
    "redact": 1,
    "prices": 1,
    "matching": 1,
    "formats": 2,
    "stores": 3,
    "harness": 3,
    "guard": 3,
    "diagnose": 3,
    "tape": 4,
    "deprecated": 4,
    "integrations": 5,
    "analysis": 5,
    "testing": 6,
    "views": 6,
    "migrate": 6,
    "span": 6,
    "cli": 7,
    "collector": 7,
    "pytest_plugin": 7,
    "__init__": 8,
    "__main__": 8,
}

# Upward imports allowed at call time only: the deprecated aliases of Tape's removed methods
# (``tape.patch_sdks()``...) load the hooks when called; they go in 0.3, and this with them.
LAZY_UPWARD: set[tuple[str, str]] = {("deprecated", "integrations")}


def _layer(module: str) -> str:
    return module.split(".", maxsplit=1)[0]


def _imports(path: Path) -> list[tuple[str, bool]]:
    """The tracetape modules ``path`` imports, and whether each import is at module level."""
    relative = path.relative_to(PACKAGE).with_suffix("")
    package = list(relative.parts[:-1])
    found: list[tuple[str, bool]] = []
    tree = ast.parse(path.read_text())
    top = set(map(id, tree.body))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package[: len(package) - node.level + 1]
            target = ".".join([*base, *(node.module or "").split(".")]).strip(".")
            names = (
                [target] if node.module else [f"{target}.{a.name}".strip(".") for a in node.names]
            )
            found += [(name or "__init__", id(node) in top) for name in names]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tracetape."):
            found.append((node.module.removeprefix("tracetape."), id(node) in top))
    return found


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_run_downward(path: Path) -> None:
    """No module imports a higher layer (the hooks' lazy loading by ``Tape`` excepted)."""
    own = _layer(str(path.relative_to(PACKAGE).with_suffix("")).replace("/", "."))
    if own == "bootstrap":
        return
    for target, module_level in _imports(path):
        other = _layer(target)
        if other not in LAYERS or own not in LAYERS or LAYERS[other] <= LAYERS[own]:
            continue
        assert not module_level and (own, other) in LAZY_UPWARD, (
            f"{path.relative_to(PACKAGE)} imports {target} (layer {LAYERS[other]}) from "
            f"layer {LAYERS[own]}"
        )


def test_every_module_has_a_layer() -> None:
    """Each top-level module or package of tracetape is placed in a layer."""
    names = {p.relative_to(PACKAGE).parts[0].removesuffix(".py") for p in _modules()}
    assert names - {"py.typed"} <= set(LAYERS)
