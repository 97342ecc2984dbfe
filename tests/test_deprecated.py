"""Tape's removed methods are deprecated aliases: the 0.1 README's examples run against today's
package, and each name warns once per use, naming what replaced it."""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.integrations.fakeserver import FakeServer
from tracetape import Tape
from tracetape.deprecated import DeprecatedTapeMethods
from tracetape.integrations import current_step, unpatch_all

OLD_README = Path(__file__).parent / "fixtures" / "readme_2ba87db.txt"
BLOCK = re.compile(r"```python\n(.*?)```", re.S)

# Each removed name, and what its warning names instead.
REPLACEMENTS = {
    "patch_sdks": "Tape.patch_sdks() is deprecated and will be removed in tracetape 0.3; use "
    "tracetape.patch_sdks(tape)",
    "patch_http": "Tape.patch_http() is deprecated and will be removed in tracetape 0.3; use "
    "tracetape.patch_http(tape)",
    "http_transport": "Tape.http_transport() is deprecated and will be removed in tracetape 0.3; "
    "use tracetape.http_transport(tape)",
    "async_http_transport": "Tape.async_http_transport() is deprecated and will be removed in "
    "tracetape 0.3; use tracetape.async_http_transport(tape)",
    "tool": "Tape.tool is deprecated and will be removed in tracetape 0.3; use "
    "tracetape.tool(..., tape=tape)",
    "env": "Tape.env() is deprecated and will be removed in tracetape 0.3; use "
    "tracetape.env(name, tape=tape)",
    "model_calls": "Tape.model_calls is deprecated and will be removed in tracetape 0.3; use "
    "tracetape.integrations.current_step(tape)",
}


@pytest.fixture(autouse=True)
def _unpatched() -> Iterator[None]:
    yield
    unpatch_all()


def _examples() -> list[str]:
    return BLOCK.findall(OLD_README.read_text(encoding="utf-8"))


def _deprecations(caught: list[warnings.WarningMessage]) -> list[warnings.WarningMessage]:
    return [w for w in caught if issubclass(w.category, DeprecationWarning)]


def test_every_tape_method_the_old_readme_names_is_an_alias() -> None:
    """Each ``tape.NAME`` the 0.1 README used is a deprecated alias with a warning of its own."""
    used = set(re.findall(r"\btape\.(\w+)", OLD_README.read_text(encoding="utf-8")))
    assert used == set(REPLACEMENTS)
    assert all(name in vars(DeprecatedTapeMethods) for name in used)


def test_the_old_readme_examples_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The 0.1 README's SDK, HTTP and tools examples record and replay as they did, each use
    of a removed name warning once, at the example's own line."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").mkdir()
    sdk, http, tools = _examples()
    server = FakeServer().start()
    namespace: dict[str, object] = {"__name__": "readme"}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            source = sdk.replace("http://127.0.0.1:8000/v1", f"{server.base_url}/v1")
            exec(compile(source, "sdk-example", "exec"), namespace)
            run = namespace["run"]
            assert callable(run)
            recorded = run("record")
        finally:
            server.stop()
        assert run("replay") == recorded  # the server is gone: the tape answers
        exec(compile(http, "http-example", "exec"), {"__name__": "readme"})
        exec(compile(tools, "tools-example", "exec"), {"__name__": "readme"})
    shown = [(w.filename, str(w.message)) for w in _deprecations(caught)]
    assert shown == [
        ("sdk-example", REPLACEMENTS["patch_sdks"]),
        ("sdk-example", REPLACEMENTS["patch_sdks"]),
        ("http-example", REPLACEMENTS["http_transport"]),
        *[("tools-example", REPLACEMENTS[name]) for name in ("model_calls", "env")] * 2,
    ]


def _uses(tape: Tape) -> dict[str, Callable[[], object]]:
    """One use of each removed name on ``tape``."""

    def patch_sdks() -> None:
        with tape.patch_sdks():
            pass

    def patch_http() -> None:
        with tape.patch_http():
            pass

    def set_model_calls() -> None:
        tape.model_calls = 2

    return {
        "patch_sdks": patch_sdks,
        "patch_http": patch_http,
        "http_transport": lambda: tape.http_transport(flavor="httpx2"),
        "async_http_transport": lambda: tape.async_http_transport(flavor="httpx2"),
        "tool": lambda: tape.tool(lambda: "out"),
        "env": lambda: tape.env("TRACETAPE_TEST_UNSET", "fallback"),
        "model_calls": set_model_calls,
    }


@pytest.mark.parametrize("name", sorted(REPLACEMENTS))
def test_each_name_warns_exactly_once_naming_its_replacement(tmp_path: Path, name: str) -> None:
    """One use of a removed name is one ``DeprecationWarning`` naming today's spelling,
    pointing at the line that used it."""
    with Tape(tmp_path / "run.jsonl", mode="record") as tape:
        use = _uses(tape)[name]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            use()
    [warning] = _deprecations(caught)
    assert str(warning.message) == REPLACEMENTS[name]
    assert warning.filename == __file__


def test_the_aliases_do_what_their_replacements_do(tmp_path: Path) -> None:
    """``tape.model_calls`` reads and sets the step tools key on, ``tape.tool`` binds a tool
    to the tape, ``tape.env`` reads through it."""
    path = tmp_path / "run.jsonl"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        with Tape(path, mode="record") as tape:
            tape.model_calls = 3
            assert tape.model_calls == current_step(tape) == 3
            assert tape.tool(lambda: "out", name="clock")() == "out"
            assert tape.env("TRACETAPE_TEST_UNSET", "fallback") == "fallback"
        with Tape(path, mode="replay") as tape:
            tape.model_calls = 3
            assert tape.tool(lambda: "live", name="clock")() == "out"
            assert tape.env("TRACETAPE_TEST_UNSET", "fallback") == "fallback"
        assert [rec.kind for rec in tape.records] == ["tool", "env"]
