"""Hooks that put a tape under code that does not know about it: SDKs, HTTP, tools, ``run``.

The ``openai``/``anthropic`` SDK hooks (``sdk``) and the ``httpx``/``httpx2`` transports (``http``)
are re-exported here. Importing this package imports no SDK and no HTTP library: each hook
imports what it patches when it is installed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_attributes

if TYPE_CHECKING:
    from ._common import flush_pending, model_calls, next_model_step
    from .http import async_http_transport, http_transport, patch_http
    from .sdk import Patch, patch, patch_sdks, unpatch_all

# Loaded on first use: `tracetape run` and the tools import this package without the hooks.
_LAZY = {
    **dict.fromkeys(("flush_pending", "model_calls", "next_model_step"), "._common"),
    **dict.fromkeys(("async_http_transport", "http_transport", "patch_http"), ".http"),
    **dict.fromkeys(("Patch", "patch", "patch_sdks", "unpatch_all"), ".sdk"),
}
__getattr__ = lazy_attributes(__name__, _LAZY, globals())


__all__ = [
    "Patch",
    "async_http_transport",
    "flush_pending",
    "http_transport",
    "model_calls",
    "next_model_step",
    "patch",
    "patch_http",
    "patch_sdks",
    "unpatch_all",
]
