"""``tracetape.collector.push``: the collector's client, where 0.1 kept it.

The client lives in ``tracetape.stores.client`` now (one client, one backoff, for
``tracetape push`` and ``Tape(push=...)``); these names stay importable from here.
"""

from __future__ import annotations

from ..stores.client import DEFAULT_URL, Pushed, PushError, push

__all__ = ["DEFAULT_URL", "PushError", "Pushed", "push"]
