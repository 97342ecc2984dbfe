"""Hooks that put a tape under code that does not know about it: SDKs, HTTP, tools, ``run``.

The ``openai``/``anthropic`` SDK hooks (``sdk``) and the ``httpx``/``httpx2`` transports (``http``)
are re-exported here. Importing this package imports no SDK and no HTTP library: each hook
imports what it patches when it is installed.
"""

from __future__ import annotations

from ._common import flush_pending, model_calls, next_model_step
from .http import async_http_transport, http_transport, patch_http
from .sdk import Patch, patch, patch_sdks, unpatch_all

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
