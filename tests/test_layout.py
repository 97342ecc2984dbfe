"""The layout of the package and of its tests: how large each module is, a test module per
module with behaviour of its own, and no SDK in the tests of the ground floor.

The mirror: the tests of ``src/tracetape/P/name.py`` are ``tests/P/test_name.py``, a private
module's leading underscore dropped (``formats/_source.py``: ``tests/formats/test_source.py``);
those of a package's ``__init__.py`` are named after the package, in its folder
(``formats/__init__.py``: ``tests/formats/test_formats.py``). ``NO_TESTS`` names the modules with
no behaviour of their own. A test module may hold more than its module's tests (stories across
modules), and a topic may have a module of its own (``tests/collector/test_limits.py``).

The ground floor: the modules that reach no SDK. ``tracetape.integrations`` hooks the SDKs (it
names them as modules to patch once installed, so no import of theirs shows it); a module that
imports an SDK, or any module of ``tracetape.integrations``, directly or through the tracetape
modules it imports (anywhere in them; the package's root aside, which every import runs), is
above it. The test module of a ground-floor module imports no SDK, nor do the test
helpers it imports or the scripts it runs: those tests run where no SDK is installed.
"""

from __future__ import annotations

import ast
import re
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "tracetape"

# A module longer than this says why it is one module (its docstring: "Why one module: ...").
MAX_LINES = 600
WHY_ONE_MODULE = re.compile(r"Why one module:\s+\S+(\s+\S+){3}")  # and a reason of some words

# Modules with no behaviour of their own, hence no test module: each says why. A key ending in
# "/" stands for every module under that folder.
NO_TESTS: dict[str, str] = {
    "__init__.py": "the public API, re-exported and loaded lazily (tests/test_exports.py holds "
    "__all__ to it, tests/test_lazy.py the lazy loading)",
    "__main__.py": "python -m tracetape: calls cli.main (the collector tests run it as a process)",
    "analysis/__init__.py": "re-exports the analysis API (its docstring's example is a doctest)",
    "analysis/db.py": "imports DuckDB, its extension alone where the package ships one",
    "canonical/__init__.py": "re-exports the keying code of text.py and keys.py (its docstring's "
    "example is a doctest)",
    "collector/__init__.py": "re-exports create_app and Settings, loaded lazily",
    "collector/routers/__init__.py": "the routers' package (each router has its tests)",
    "collector/push.py": "re-exports the client where 0.1 kept it (tests/stores/test_client.py "
    "checks the names)",
    "integrations/__init__.py": "re-exports the hooks' entry points, loaded lazily",
    "span/__init__.py": "re-exports the span API (its docstring's example is a doctest)",
    "stores/__init__.py": "the RecordStore protocol (types only), FileStore re-exported",
    "stores/migrations/env.py": "Alembic's environment, run by migrations.upgrade "
    "(tests/stores/migrations/test_migrations.py)",
    "stores/migrations/versions/": "the schema's revisions, run in order by migrations.upgrade "
    "(tests/stores/migrations/test_migrations.py upgrades through each)",
}

# The SDKs, as they are imported: the provider SDKs and agent frameworks the hooks are tested
# against (pyproject's dev, frameworks, instructor and strands extras). Not httpx or aiohttp
# (transports: tracetape's own client of the collector, and the hooks' lowest level), nor
# google.protobuf (the OTLP format's schema).
SDKS = frozenset(
    {
        "agents",
        "anthropic",
        "boto3",
        "botocore",
        "cohere",
        "google.genai",
        "google.generativeai",
        "groq",
        "instructor",
        "langchain",
        "langchain_core",
        "langchain_openai",
        "langgraph",
        "litellm",
        "mcp",
        "mistralai",
        "ollama",
        "openai",
        "pydantic_ai",
        "strands",
    }
)
# The package that hooks the SDKs. It names them as modules to patch once installed, so no
# import of theirs shows it: a module reaching it is not on the ground floor.
HOOKS = "tracetape.integrations"


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def _name(path: Path) -> str:
    """``path``'s module name relative to the package (``formats/cassette.py``)."""
    return path.relative_to(PACKAGE).as_posix()


def mirror(module: str) -> str:
    """The test module of ``module`` (a path relative to ``src/tracetape``), relative to the
    repository.

    >>> mirror("formats/cassette.py"), mirror("formats/_source.py")
    ('tests/formats/test_cassette.py', 'tests/formats/test_source.py')
    >>> mirror("analysis/detectors/__init__.py")
    'tests/analysis/detectors/test_detectors.py'
    """
    *folders, file = module.split("/")
    stem = file.removesuffix(".py")
    if stem == "__init__":
        stem = folders[-1] if folders else "tracetape"
    name = stem.strip("_")
    return "/".join(["tests", *folders, f"test_{name}.py"])


def _size_report() -> tuple[list[tuple[int, str]], str]:
    sizes = sorted(
        ((len(p.read_text(encoding="utf-8").splitlines()), _name(p)) for p in _modules()),
        key=lambda size: (-size[0], size[1]),
    )
    width = max(len(name) for _, name in sizes)
    lines = [f"{name:<{width}}  {count:5d}" for count, name in sizes]
    total = sum(count for count, _ in sizes)
    lines.append(f"{'total (' + str(len(sizes)) + ' modules)':<{width}}  {total:5d}")
    return sizes, "\n".join(lines)


def test_module_sizes(record_property: Callable[[str, object], None]) -> None:
    """Every module's line count is printed, largest first (``pytest -s``, and the report's
    ``module_sizes`` property); a module over 600 lines says why it is one module in its
    docstring (``Why one module:`` and the reason)."""
    sizes, table = _size_report()
    print(f"\nsrc/tracetape modules by lines:\n{table}")
    record_property("module_sizes", table)
    unexplained = [
        f"{name} ({count} lines)"
        for count, name in sizes
        if count > MAX_LINES
        and not WHY_ONE_MODULE.search(
            ast.get_docstring(ast.parse((PACKAGE / name).read_text())) or ""
        )
    ]
    assert not unexplained, (
        f"over {MAX_LINES} lines with no 'Why one module: <reason>' in the module docstring: "
        + ", ".join(unexplained)
        + " (split the module, or say in its docstring why it is one)"
    )


def _allowed(name: str) -> str | None:
    """Why ``name`` has no test module, if ``NO_TESTS`` says."""
    for key, why in NO_TESTS.items():
        if name == key or (key.endswith("/") and name.startswith(key)):
            return why
    return None


def test_every_module_has_its_test_module() -> None:
    """Each module with behaviour of its own has its mirror test module (the module docstring
    says where); ``NO_TESTS`` names the others and why."""
    missing = [
        f"{name}: expected {mirror(name)}"
        for name in map(_name, _modules())
        if _allowed(name) is None and not (ROOT / mirror(name)).is_file()
    ]
    assert not missing, "modules without their test module (or a reason in NO_TESTS):\n" + (
        "\n".join(missing)
    )


def test_no_two_modules_share_a_test_module() -> None:
    """The mirror is one to one (``x.py`` and ``_x.py`` in one package would share one)."""
    seen: dict[str, str] = {}
    for name in map(_name, _modules()):
        other = seen.setdefault(mirror(name), name)
        assert other == name, f"{other} and {name} both map to {mirror(name)}"


def test_the_allowlist_names_modules_that_exist() -> None:
    """``NO_TESTS`` names only modules that exist and have no test module (a stale entry would
    hide a module added later under its name)."""
    names = set(map(_name, _modules()))
    for key in NO_TESTS:
        covered = [n for n in names if n == key or (key.endswith("/") and n.startswith(key))]
        assert covered, f"NO_TESTS names {key}, which holds no module"
        for name in covered:
            assert not (ROOT / mirror(name)).is_file(), (
                f"{name} has {mirror(name)}: drop it from NO_TESTS"
            )


# -- ground floor ---------------------------------------------------------------------------


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(("tracetape", *(parts[:-1] if parts[-1] == "__init__" else parts)))


def _imported(tree: ast.AST, module: str, is_package: bool) -> set[str]:
    """Every module ``tree`` imports anywhere (module level or in a function), absolute."""
    package = module if is_package else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join([*parts[: len(parts) - node.level + 1], *filter(None, [base])])
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def _is_sdk(module: str) -> bool:
    return any(module == sdk or module.startswith(sdk + ".") for sdk in SDKS)


def ground_floor() -> set[str]:
    """The modules (paths relative to ``src/tracetape``) that reach no SDK: neither they nor
    any tracetape module they import, at any depth, is in ``tracetape.integrations`` or
    imports an SDK (the package's root, which every import runs, aside)."""
    paths = {_module_name(p): p for p in _modules()}
    imports = {
        name: _imported(ast.parse(path.read_text()), name, path.name == "__init__.py")
        for name, path in paths.items()
    }
    reaches_sdk = {
        name
        for name, found in imports.items()
        if name.startswith(HOOKS) or any(map(_is_sdk, found))
    }
    edges = {
        name: {m for m in found if m in paths and m != "tracetape"}
        for name, found in imports.items()
    }
    changed = True
    while changed:
        before = len(reaches_sdk)
        reaches_sdk |= {name for name, targets in edges.items() if targets & reaches_sdk}
        changed = len(reaches_sdk) != before
    return {_name(path) for name, path in paths.items() if name not in reaches_sdk}


def _test_imports(path: Path, seen: set[Path] | None = None) -> set[str]:
    """What a test module imports anywhere in it, what the Python scripts it holds as strings
    import (a subprocess's or pytester's code), and what the test helpers it imports
    (``tests.*`` modules) import in turn."""
    seen = set() if seen is None else seen
    seen.add(path)
    relative = path.relative_to(ROOT).with_suffix("").parts if path.is_relative_to(ROOT) else ()
    name = ".".join(relative[:-1] if relative[-1:] == ("__init__",) else relative) or "test_x"
    tree = ast.parse(path.read_text())
    found = _imported(tree, name, path.name == "__init__.py")
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and "import" in node.value
        ):
            try:
                script = ast.parse(textwrap.dedent(node.value))
            except SyntaxError:
                continue
            found |= _imported(script, name, False)
    for helper in sorted(_helpers(path, found) - seen):
        found |= _test_imports(helper, seen)
    return found


def _helpers(path: Path, imported: set[str]) -> set[Path]:
    """The test helpers among ``imported``: ``tests.*`` modules, and modules found by a bare
    name in the test's folder or above it within ``tests`` (a ``conftest.py`` puts its folder
    on ``sys.path``)."""
    folders = [f for f in path.parents if f.is_relative_to(ROOT / "tests")]
    found: set[Path] = set()
    for module in imported:
        parts = module.split(".")
        bases = [ROOT.joinpath(*parts)] if parts[0] == "tests" else []
        bases += [folder.joinpath(*parts) for folder in folders if parts[0] != "tests"]
        found |= {
            helper
            for base in bases
            for helper in (base.with_suffix(".py"), base / "__init__.py")
            if helper.is_file()
        }
    return found


def test_ground_floor_tests_import_no_sdk() -> None:
    """The test module of each ground-floor module (see the module docstring) imports no SDK:
    not at module level, not in a test's body, not through a ``tests.*`` helper, not in a
    script it runs. A test that drives an SDK belongs with the hooks' tests
    (``tests/integrations``)."""
    floor = ground_floor()
    assert "canonical/keys.py" in floor and "integrations/sdk.py" not in floor
    found = {
        mirror(name): sorted(filter(_is_sdk, _test_imports(ROOT / mirror(name))))
        for name in sorted(floor)
        if (ROOT / mirror(name)).is_file()
    }
    assert {test: sdks for test, sdks in found.items() if sdks} == {}


def test_the_sdk_check_sees_imports_in_bodies_and_scripts(tmp_path: Path) -> None:
    """An SDK imported in a function, by ``from``, or in a script held as a string is seen;
    a name that only starts like an SDK's is not."""
    test = tmp_path / "test_x.py"
    test.write_text(
        textwrap.dedent(
            '''
            import openai_like
            from google import protobuf
            SCRIPT = """
            import os
            from anthropic import Anthropic
            """

            def test_it():
                import google.genai
                from mistralai import Mistral
            '''
        )
    )
    assert sorted(filter(_is_sdk, _test_imports(test))) == [
        "anthropic",
        "anthropic.Anthropic",
        "google.genai",
        "mistralai",
        "mistralai.Mistral",
    ]
    state = ROOT / "tests" / "integrations" / "test_state.py"  # openai through sdk_clients
    direct = _imported(ast.parse(state.read_text()), "tests.integrations.test_state", False)
    assert "openai" not in direct and "openai" in _test_imports(state)


@pytest.mark.parametrize(
    ("docstring", "explained"),
    [
        pytest.param("Why one module: ``Tape`` is one state machine.", True, id="a-reason"),
        pytest.param("Intro.\n\nWhy one module: it is the format,\nwhole.", True, id="wrapped"),
        pytest.param("Why one module:", False, id="no-reason"),
        pytest.param("Why one module: because.", False, id="one-word"),
        pytest.param("why one module: it is the format.", False, id="another-phrase"),
    ],
)
def test_a_module_says_why_it_is_one_with_a_reason(docstring: str, explained: bool) -> None:
    """The phrase, then a reason of at least four words."""
    assert bool(WHY_ONE_MODULE.search(docstring)) is explained
