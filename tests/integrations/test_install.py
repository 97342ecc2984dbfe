"""Installing the hooks: an SDK is patched as it is imported (installing imports none), levels are
counted, and leaving the last block restores every original."""

from __future__ import annotations

import json
from pathlib import Path

import anthropic
import httpx2
import openai
import pytest

import tracetape
from tracetape import Tape

pytestmark = pytest.mark.usefixtures("no_leftover_patch")


def test_patch_is_removed_on_exit(tmp_path: Path) -> None:
    """Leaving the last patch block restores the SDK methods and httpx send untouched."""
    chat = openai.resources.chat.completions.Completions
    before = (chat.create, anthropic.resources.messages.Messages.stream, httpx2.Client.send)
    with Tape(tmp_path / "a.jsonl") as tape, tracetape.patch_sdks(tape):
        with tracetape.patch_sdks(tape):
            assert chat.create is not before[0]
        assert chat.create is not before[0]
        with tracetape.patch_http(tape):
            assert httpx2.Client.send is not before[2]
        assert httpx2.Client.send is not before[2]  # the SDK level's safety net
    with Tape(tmp_path / "b.jsonl") as tape, tracetape.patch_http(tape):
        assert httpx2.Client.send is not before[2]
        assert chat.create is before[0]  # the HTTP level alone leaves the SDKs alone
    after = (chat.create, anthropic.resources.messages.Messages.stream, httpx2.Client.send)
    assert after == before


IMPORT_LATER = """
import sys, json, tempfile, pathlib
import tracetape

tape = tracetape.Tape(pathlib.Path(tempfile.mkdtemp()) / "t.jsonl", harness_sha="x")
report = {}
with tape, tracetape.patch_sdks(tape):
    report["imported_by_patch"] = sorted(
        m for m in ("openai", "anthropic", "httpx", "httpx2", "pydantic") if m in sys.modules
    )
    import openai
    from openai.resources.chat.completions import AsyncCompletions, Completions
    import anthropic
    from anthropic.resources.messages import Messages

    def patched(cls, name="create"):
        return "__tracetape_original__" in getattr(cls.__dict__[name], "__dict__", {})

    report["patched_on_import"] = [
        patched(Completions), patched(AsyncCompletions), patched(Messages),
        patched(sys.modules["httpx2"].Client, "send"),
    ]
report["restored"] = not any(
    patched(c) for c in (Completions, AsyncCompletions, Messages)
)

report["finder_left"] = [f for f in map(repr, sys.meta_path) if "PatchOnImport" in f]
print(json.dumps(report))
"""


def test_the_hooks_patch_sdks_when_imported_and_never_import_them(tmp_path: Path) -> None:
    """Installing the SDK hooks imports no SDK; an SDK imported later is patched as it loads,
    and leaving the patch restores it and removes the import hook."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", IMPORT_LATER], capture_output=True, text=True, check=True,
        cwd=tmp_path,
    )  # fmt: skip
    report = json.loads(done.stdout)
    assert report == {
        "imported_by_patch": [],
        "patched_on_import": [True, True, True, True],
        "restored": True,
        "finder_left": [],
    }


def test_every_watch_names_a_patching_function_and_a_module_that_exists() -> None:
    """Each watched module (the transports', each provider's SDK fast path) can be found by
    the import system here, and the function that patches it exists in the integrations."""
    import importlib
    import importlib.util

    from tracetape.integrations.install import watches

    found = watches()
    assert {w.module for w in found} >= {"httpx", "httpx2", "botocore.session", "aiohttp"}
    assert {w.group for w in found} == {"sdk", "http"}
    for watch in found:
        where, _, function = watch.patch.partition(":")
        patcher = getattr(importlib.import_module(f"tracetape.integrations.{where}"), function)
        assert callable(patcher), watch
        assert importlib.util.find_spec(watch.module) is not None, watch


def test_the_http_level_alone_patches_no_sdk() -> None:
    """``patch_http`` installs the transports only; the SDK fast paths wait for the SDK level,
    and each level counts its blocks."""
    from tracetape.integrations.install import install, uninstall

    chat = openai.resources.chat.completions.Completions
    create, send = chat.create, httpx2.Client.send
    install("http")
    install("http")
    try:
        assert httpx2.Client.send is not send and chat.create is create
        uninstall("http")
        assert httpx2.Client.send is not send  # one http block is still open
    finally:
        uninstall("http")
    assert httpx2.Client.send is send and chat.create is create
