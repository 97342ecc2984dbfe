"""The timeline: one bar per decision on a time scale (server-rendered SVG, no script)."""

from __future__ import annotations

from collections.abc import Sequence

from ...views import StepView
from .markup import esc

# The timeline's style (``frame`` adds it to every page).
STYLE = ""

BAR = {"llm": "#5b3cc4", "tool": "#0b6b8a", "env": "#8a6d0b"}


def timeline_svg(views: Sequence[StepView], scale_ms: float | None = None, label: str = "") -> str:
    """One bar per decision, in order, each starting where the one before ended: its length
    its latency, coloured by kind, its tokens beside it (server-rendered, no script)."""
    total = sum(v.ms or 0.0 for v in views) or 1.0
    scale = 600.0 / max(scale_ms or total, 1e-9)
    row = 16
    height = row * len(views) + 4
    bars, at = [], 0.0
    for i, v in enumerate(views):
        width = max((v.ms or 0.0) * scale, 1.5)
        x, y = 8 + at * scale, 2 + i * row
        color = BAR.get(v.kind, "#6b7580")
        title = f"#{v.index} {v.kind} {v.name} · {v.ms or 0:.0f} ms"
        note = f"{v.tokens} tok" if v.tokens is not None else ""
        bars.append(
            f"<g class='bar bar-{esc(v.kind)}'><title>{esc(title)}</title>"
            f"<rect x='{x:.1f}' y='{y}' width='{width:.1f}' height='{row - 4}' fill='{color}'/>"
            f"<text x='{x + width + 4:.1f}' y='{y + row - 6}' font-size='10' fill='#1d232a'>"
            f"{esc(note)}</text></g>"
        )
        at += v.ms or 0.0
    return (
        f"<svg class=timeline role=img aria-label='{esc(label or 'timeline')}' "
        f"viewBox='0 0 720 {height}' width='100%' preserveAspectRatio='xMinYMin meet' "
        f"xmlns='http://www.w3.org/2000/svg'>{''.join(bars)}</svg>"
    )
