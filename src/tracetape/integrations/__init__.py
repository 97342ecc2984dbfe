"""Hooks that put a tape under code that does not know about it: SDKs, HTTP, tools, MCP, ``run``.

The layout: ``providers/`` is the provider table (one small module per provider: what only it
knows); the mechanism lives once beside it: ``install`` (hooks patched in when their module is
imported), ``capture`` (keying a request, recording its response as it is read, replaying it),
``framing`` (SSE, NDJSON, the AWS event stream), ``steps`` (a model call's step from its
conversation, a tool call's from the answer that asked for it), ``state`` (what the hooks keep
per tape), the transports (``http``: httpx and httpx2), the SDK fast path (``stainless``), the
entry points (``sdk``: ``patch_sdks``, ``patch``), ``tools`` (``tool``, ``env``), ``network``
(the replay guard) and ``runner`` (``tracetape run``).

Importing this package imports no SDK and no HTTP library: each hook imports what it patches
when it is installed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_attributes

if TYPE_CHECKING:
    from .capture import flush_pending
    from .http import async_http_transport, http_transport, patch_http
    from .sdk import Patch, patch, patch_sdks, unpatch_all
    from .state import current_step

# Loaded on first use: `tracetape run` and the tools import this package without the hooks.
_LAZY = {
    "flush_pending": ".capture",
    "current_step": ".state",
    **dict.fromkeys(("async_http_transport", "http_transport", "patch_http"), ".http"),
    **dict.fromkeys(("Patch", "patch", "patch_sdks", "unpatch_all"), ".sdk"),
}
__getattr__ = lazy_attributes(__name__, _LAZY, globals())


__all__ = [
    "Patch",
    "async_http_transport",
    "current_step",
    "flush_pending",
    "http_transport",
    "patch",
    "patch_http",
    "patch_sdks",
    "unpatch_all",
]
