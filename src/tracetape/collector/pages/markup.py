"""HTML escaping, the one rule every page part follows: every value a trace holds is escaped."""

from __future__ import annotations

import html
from typing import Any

__all__ = ["esc"]


def esc(value: Any) -> str:
    """``value`` as text safe in HTML content and in quoted attributes.

    >>> esc("<b title='x'>&</b>")
    '&lt;b title=&#x27;x&#x27;&gt;&amp;&lt;/b&gt;'
    """
    return html.escape(str(value), quote=True)
