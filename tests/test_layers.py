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
    "options": 3,
    "replay": 3,
    "recorder": 3,
    "session": 3,
    "tape": 4,
    "calls": 4,
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
    """No module imports a higher layer, at module level or in a function."""
    own = _layer(str(path.relative_to(PACKAGE).with_suffix("")).replace("/", "."))
    if own == "bootstrap":
        return
    for target, _ in _imports(path):
        other = _layer(target)
        if other not in LAYERS or own not in LAYERS or LAYERS[other] <= LAYERS[own]:
            continue
        raise AssertionError(
            f"{path.relative_to(PACKAGE)} imports {target} (layer {LAYERS[other]}) from "
            f"layer {LAYERS[own]}"
        )


def test_every_module_has_a_layer() -> None:
    """Each top-level module or package of tracetape is placed in a layer."""
    names = {p.relative_to(PACKAGE).parts[0].removesuffix(".py") for p in _modules()}
    assert names - {"py.typed"} <= set(LAYERS)


def _file(target: str) -> Path | None:
    """The module file an import names (``integrations.capture``; a package: its
    ``__init__.py``; a name imported from a module: that module)."""
    parts = target.split(".")
    while parts:
        base = PACKAGE.joinpath(*parts)
        if base.with_suffix(".py").is_file():
            return base.with_suffix(".py")
        if (base / "__init__.py").is_file():
            return base / "__init__.py"
        parts.pop()
    return None


def test_no_module_imports_itself_back() -> None:
    """No circle of imports, counting every import (in a function, or for types only): a
    module reached from another never reaches it back."""
    graph = {
        path: {found for t, _ in _imports(path) if (found := _file(t)) and found != path}
        for path in _modules()
    }
    index: dict[Path, int] = {}
    low: dict[Path, int] = {}
    stack: list[Path] = []
    circles: list[list[str]] = []

    def visit(node: Path) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            part = []
            while True:
                top = stack.pop()
                part.append(str(top.relative_to(PACKAGE)))
                if top == node:
                    break
            if len(part) > 1:
                circles.append(sorted(part))

    for node in graph:
        if node not in index:
            visit(node)
    assert circles == []
