"""Installing the hooks: each is patched in when the module it hooks is imported.

Installing never imports an SDK or an HTTP library (the SDKs take seconds to import): a
module already imported is patched at once, the others when they are imported, by a finder
at the front of ``sys.meta_path`` that wraps their loader. A program that never imports a
provider's SDK pays nothing for it; one that imports it later is taped all the same.

What is watched (``watches()``): the transports (``httpx``/``httpx2`` clients' ``send``,
``aiohttp``'s client sessions, ``urllib3``'s pools, botocore's client events), MCP's
``ClientSession``, and each provider's SDK fast path from the provider table. Each watch
names the function that patches its module; it registers what it replaces with
``patch_attr``.

Two levels share the installer, each reference counted: ``sdk`` (``patch_sdks``: every
watch) and ``http`` (``patch_http``: the transports only). A watch of group ``http`` is on
while either level is installed; one of group ``sdk`` only with the SDK level.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.machinery
import sys
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any, NamedTuple

from .._lazy import collector_paused
from .providers import providers

__all__ = ["Watch", "install", "patch_attr", "uninstall", "unpatch_all", "watches"]


class Watch(NamedTuple):
    """A module to patch when it is imported: its name, its group (``sdk`` or ``http``) and
    the patching function, ``"module:function"`` relative to ``tracetape.integrations``."""

    module: str
    group: str
    patch: str


TRANSPORTS = (
    Watch("httpx", "http", "http:patch_module"),
    Watch("httpx2", "http", "http:patch_module"),
    Watch("botocore.session", "http", "botocore_events:patch_module"),
    Watch("aiohttp", "http", "aiohttp_client:patch_module"),
    Watch("urllib3.connectionpool", "http", "urllib3_pool:patch_module"),
    Watch("mcp.client.client", "sdk", "mcp_client:patch_module"),
)


@functools.cache
def watches() -> tuple[Watch, ...]:
    """Every watch: the transports, then each provider's SDK fast path."""
    found = list(TRANSPORTS)
    with collector_paused():  # the provider table's modules, imported the first time
        table = providers()
    for prov in table:
        sdk = prov.sdk
        if sdk is None:
            continue
        found.append(Watch(sdk.package, "http", "stainless:patch_package"))
        found.append(Watch(sdk.package, "sdk", "stainless:patch_client"))
        found += [Watch(t.module, "sdk", "stainless:patch_resources") for t in sdk.targets]
    return tuple(dict.fromkeys(found))


_lock = threading.RLock()
_installs = {"sdk": 0, "http": 0}
_saved: dict[str, list[tuple[type | ModuleType, str, Any]]] = {"sdk": [], "http": []}
_waiting: set[Watch] = set()  # watches whose module is not imported yet
_group: list[str] = []  # the group of the watch being applied (the lock is held)


def _active(group: str) -> bool:
    return _installs["sdk"] > 0 or (group == "http" and _installs["http"] > 0)


def patch_attr(cls: type | ModuleType, name: str, wrapper: Callable[..., Any]) -> None:
    """Replace ``cls.name`` (a class's attribute, or a module's function) by ``wrapper``
    (called by a watch's patching function); the original is restored when the watch's group
    is uninstalled, and is reachable as ``wrapper.__tracetape_original__``."""
    original = cls.__dict__[name]
    _saved[_group[-1]].append((cls, name, original))
    wrapper.__dict__["__tracetape_original__"] = original
    setattr(cls, name, wrapper)


def _apply(watch: Watch, module: ModuleType) -> None:
    """Patch ``module`` for ``watch``; the lock is held."""
    where, _, function = watch.patch.partition(":")
    patcher = getattr(importlib.import_module(f"{__package__}.{where}"), function)
    _group.append(watch.group)
    try:
        patcher(module)
    finally:
        _group.pop()


def _imported(name: str, module: ModuleType) -> None:
    done = []
    with _lock:
        for watch in [w for w in _waiting if w.module == name]:
            _waiting.discard(watch)
            _apply(watch, module)
            done.append(watch)
    for watch in done:
        where, _, _ = watch.patch.partition(":")
        imported = getattr(importlib.import_module(f"{__package__}.{where}"), "imported", None)
        if imported is not None:
            imported(module)


class _PatchingLoader:
    """A watched module's own loader, patching the module once it has run (a loader by
    protocol: ``importlib.abc`` costs milliseconds to import)."""

    def __init__(self, loader: Any, name: str):
        self._loader = loader
        self._name = name

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        create = getattr(self._loader, "create_module", None)
        return create(spec) if create is not None else None

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        _imported(self._name, module)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)


class _PatchOnImport:
    """Finds watched modules with the other finders and wraps their loader (a meta path
    finder by protocol)."""

    def find_spec(
        self, fullname: str, path: Any = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if not any(w.module == fullname for w in _waiting):
            return None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None) if finder is not self else None
            spec: importlib.machinery.ModuleSpec | None = (
                find(fullname, path, target) if find is not None else None
            )
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _PatchingLoader(spec.loader, fullname)  # type: ignore[assignment]
                return spec
        return None


_finder = _PatchOnImport()


def install(level: str = "sdk") -> None:
    """Hook ``level`` (``"sdk"`` or ``"http"``) in, once more (reference counted)."""
    with _lock:
        before = {group: _active(group) for group in _saved}
        _installs[level] += 1
        for watch in watches():
            if before[watch.group] or not _active(watch.group):
                continue
            module = sys.modules.get(watch.module)
            if module is None:
                _waiting.add(watch)
            else:
                _apply(watch, module)
        if _waiting and _finder not in sys.meta_path:
            sys.meta_path.insert(0, _finder)


def uninstall(level: str = "sdk") -> None:
    """Undo one ``install(level)``; the last one of a group restores its originals."""
    with _lock:
        _installs[level] = max(0, _installs[level] - 1)
        for group, saved in _saved.items():
            if _active(group):
                continue
            _waiting.difference_update([w for w in _waiting if w.group == group])
            while saved:
                cls, name, original = saved.pop()
                setattr(cls, name, original)
        if not _waiting:
            with contextlib.suppress(ValueError):
                sys.meta_path.remove(_finder)


def unpatch_all() -> None:
    """Remove every hook now, whatever still holds a patch (for test teardown)."""
    with _lock:
        _installs.update(sdk=0, http=0)
        uninstall()
