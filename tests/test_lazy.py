"""``lazy_attributes``: a package's attributes imported the first time they are asked for."""

from __future__ import annotations

import gc
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tracetape._lazy import collector_paused, lazy_attributes


def test_an_attribute_is_imported_once_and_kept() -> None:
    """The first lookup imports the module (relative to the package) and keeps the value in
    the namespace, where later lookups find it without the hook."""
    namespace: dict[str, Any] = {}
    getattr_ = lazy_attributes(
        "email", {"Parser": ".parser", "message_from_string": "."}, namespace
    )
    from email.parser import Parser

    assert getattr_("Parser") is Parser
    assert namespace == {"Parser": Parser}
    import email

    assert getattr_("message_from_string") is email.message_from_string


def test_a_lazy_attribute_is_imported_with_the_collector_paused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The module behind a lazy attribute runs with the cyclic garbage collector paused, and
    the collector is on again afterwards."""
    (tmp_path / "lazy_probe.py").write_text("import gc\nSEEN = gc.isenabled()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    getattr_ = lazy_attributes("lazy_probe", {"SEEN": "lazy_probe"}, {})
    assert getattr_("SEEN") is False
    assert gc.isenabled()


def test_a_paused_collector_is_left_as_it_was() -> None:
    """``collector_paused`` turns a collector that was already off neither on nor off."""
    gc.disable()
    try:
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_name_not_in_the_table_is_an_attribute_error_naming_the_package() -> None:
    """Anything else is the ``AttributeError`` a module gives, so ``hasattr`` stays false."""
    getattr_ = lazy_attributes("tracetape.collector", {}, {})
    with pytest.raises(
        AttributeError, match=r"^module 'tracetape\.collector' has no attribute 'nope'$"
    ):
        getattr_("nope")


@pytest.mark.parametrize(
    ("package", "attribute", "module"),
    [
        pytest.param(
            "tracetape.collector", "create_app", "tracetape.collector.app", id="collector"
        ),
        pytest.param(
            "tracetape.integrations", "patch_sdks", "tracetape.integrations.sdk", id="hooks"
        ),
        pytest.param("tracetape", "Tape", "tracetape.tape", id="root"),
    ],
)
def test_a_package_imports_its_module_only_when_asked(
    package: str, attribute: str, module: str
) -> None:
    """In a fresh interpreter, importing the package leaves the module unimported; asking for
    the attribute imports it."""
    code = (
        f"import sys, importlib; p = importlib.import_module({package!r}); "
        f"print({module!r} in sys.modules); getattr(p, {attribute!r}); "
        f"print({module!r} in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "True"]
