"""Module attributes loaded on first use, so importing a package stays light; and imports made
with the cyclic garbage collector paused, since each one is paid for at every start.

An import makes thousands of long-lived objects (functions, classes, their dictionaries) and
next to no garbage; the collections its allocations trigger walk them, and everything else the
process holds, for nothing. A lazily loaded module, a command's modules (``tracetape.cli``)
and the hooks (``testing``) are imported inside ``collector_paused()``.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
from collections.abc import Callable, Iterator, Mapping
from typing import Any

__all__ = ["collector_paused", "lazy_attributes"]


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector for the block; it is as it was afterwards.

    >>> import gc
    >>> with collector_paused():
    ...     gc.isenabled()
    False
    >>> gc.isenabled()
    True
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def lazy_attributes(
    package: str, table: Mapping[str, str], namespace: dict[str, Any]
) -> Callable[[str], Any]:
    """A module ``__getattr__`` importing ``table[name]`` (relative to ``package``) the first
    time ``name`` is asked for, and keeping it in ``namespace`` (the module's globals).

    >>> getattr_ = lazy_attributes("json", {"JSONDecoder": ".decoder"}, {})
    >>> getattr_("JSONDecoder").__name__
    'JSONDecoder'
    """

    def __getattr__(name: str) -> Any:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        with collector_paused():
            value = getattr(importlib.import_module(module, package), name)
        namespace[name] = value
        return value

    return __getattr__
