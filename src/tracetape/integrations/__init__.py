"""Hooks that tape agents without changing them: the ``openai``/``anthropic`` SDKs
(``sdk``) and any ``httpx``/``httpx2`` client (``http``).

Importing this package imports no SDK: each hook imports what it patches when installed.
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
