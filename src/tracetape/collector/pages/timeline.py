"""The timeline: a map of a run, one bar per decision on a time axis (server-rendered SVG, no
script).

Each bar starts where the one before ended, its length its latency, coloured by kind, named
on it (or beside it, on the wider free side of its row), and links to its row on the page
(``#d3`` on the run page, ``#p3`` on the diff page). Two runs share one scale (``scale_ms``),
and the call where they diverge is outlined, with a labelled line at its start.

The SVG has no ``viewBox``: positions are percentages of its width and text keeps its pixel
size, so a label reads the same at 390 px as at 1280 px. A run whose calls took no recorded
time (a seed trace) is drawn call by call, one equal slot each, so that every bar still shows.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ...views import StepView
from .markup import esc

__all__ = ["BAR", "STYLE", "duration", "ticks", "timeline_svg"]

# The timeline's style (``frame`` adds it to every page).
STYLE = """
svg.timeline{overflow:hidden;padding:0 6px;box-sizing:border-box}
svg.timeline text{font:11px system-ui,sans-serif;fill:#1d232a}
svg.timeline .tick text,svg.timeline .note{fill:#6b7580}
svg.timeline .tick line{stroke:#e3e6ea}
svg.timeline .name{paint-order:stroke;stroke:#fff;stroke-width:3px;stroke-linejoin:round}
svg.timeline a:hover rect,svg.timeline a:focus rect{stroke:#1d232a;stroke-width:2px}
svg.timeline a:hover .name{text-decoration:underline}
svg.timeline .origin line{stroke:#c62828;stroke-width:2px;stroke-dasharray:4 3}
svg.timeline .origin text{fill:#c62828;font-weight:600}
svg.timeline rect.origin{stroke:#c62828;stroke-width:3px}
svg.timeline rect.none{stroke-width:2px}
"""

BAR = {"llm": "#5b3cc4", "tool": "#0b6b8a", "env": "#8a6d0b"}
ROW = 20  # pixels per decision
BAR_HEIGHT = 13
AXIS = 18  # pixels above the rows for the axis labels
MARKER = 16  # pixels above the rows for the origin's label, when there is one
NAME_MAX = 18  # characters of a name drawn on the map (the whole one is in the title)
MIN_WIDTH = 0.004  # of the scale: the narrowest bar, so a call of no time still shows


def timeline_svg(
    views: Sequence[StepView],
    scale_ms: float | None = None,
    label: str = "",
    *,
    anchor: str = "d",
    origin: int | None = None,
) -> str:
    """One bar per decision, in order, each a link to ``#{anchor}{index}``, on a time axis of
    ``scale_ms`` (default: this run's total; give two runs the same to compare them); the
    view whose ``index`` is ``origin`` is outlined and marked.

    >>> from tracetape.views import StepView
    >>> svg = timeline_svg([StepView(1, "llm", "gpt-4o", None, 812.0, None)])
    >>> "href='#d1'" in svg and "gpt-4o" in svg and "800 ms" in svg
    True
    """
    total = sum(v.ms or 0.0 for v in views)
    scale = max(scale_ms or 0.0, total)
    timed = scale > 0
    top = AXIS + (MARKER if origin is not None else 0)
    height = top + ROW * len(views) + 4
    parts = [_axis(scale, top, height) if timed else _untimed_note()]
    at, marker = 0.0, ""
    for i, v in enumerate(views):
        ms = v.ms or 0.0
        start = at / scale if timed else i / max(len(views), 1)
        width = ms / scale if timed else 1 / max(len(views), 1)
        start = min(start, 1.0 - MIN_WIDTH)
        width = min(max(width, MIN_WIDTH), 1.0 - start)
        at += ms
        is_origin = v.index == origin
        parts.append(
            _bar(v, start, width, y=top + i * ROW, anchor=anchor, is_origin=is_origin, timed=timed)
        )
        if is_origin:
            marker = _marker(start, f"origin #{v.index}", height)
    if origin is not None and not marker and origin == len(views) + 1:
        end = min(at / scale, 1.0) if timed else 1.0
        marker = _marker(end, f"origin #{origin}: no call", height)
    return (
        f"<svg class='timeline' role='group' aria-label='{esc(label or 'timeline')}' "
        f"width='100%' height='{height}' xmlns='http://www.w3.org/2000/svg'>"
        f"{marker}{''.join(parts)}</svg>"
    )


def _pc(fraction: float) -> str:
    return f"{fraction * 100:.2f}%"


def duration(ms: float) -> str:
    """A time as the axis writes it: ms below a second, else seconds.

    >>> duration(250), duration(1504), duration(0)
    ('250 ms', '1.5 s', '0')
    """
    if ms == 0:
        return "0"
    if ms < 1000:
        return f"{ms:.3g} ms" if ms < 10 else f"{ms:.0f} ms"
    return f"{ms / 1000:.3g} s" if ms < 100_000 else f"{ms / 1000:.0f} s"


def ticks(scale_ms: float, most: int = 5) -> list[float]:
    """Round times from 0 up to ``scale_ms``, at most ``most`` steps of 1, 2 or 5 × 10^k ms.

    >>> ticks(7456)
    [0.0, 2000.0, 4000.0, 6000.0]
    """
    raw = scale_ms / most
    power = 10.0 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    count = int(scale_ms / step + 1e-9)
    return [round(k * step, 9) for k in range(count + 1)]


def _axis(scale: float, top: int, height: int) -> str:
    out = []
    for t in ticks(scale):
        x = t / scale
        where = "start" if x < 0.05 else "end" if x > 0.9 else "middle"
        out.append(
            f"<g class='tick'><line x1='{_pc(x)}' x2='{_pc(x)}' y1='{AXIS - 4}' y2='{height}'/>"
            f"<text x='{_pc(x)}' y='{AXIS - 6}' text-anchor='{where}'>{esc(duration(t))}</text>"
            "</g>"
        )
    return "".join(out)


def _untimed_note() -> str:
    return f"<text class='note' x='0' y='{AXIS - 6}'>no times recorded: calls in order</text>"


def _bar(
    v: StepView,
    start: float,
    width: float,
    *,
    y: int,
    anchor: str,
    is_origin: bool,
    timed: bool,
) -> str:
    color = BAR.get(v.kind, "#6b7580")
    ms = "no time recorded" if v.ms is None else duration(v.ms)
    tokens = f" · {v.tokens:,} tokens" if v.tokens is not None else ""
    title = f"#{v.index} {v.kind} {v.name} · {ms}{tokens}"
    name = v.name if len(v.name) <= NAME_MAX else v.name[: NAME_MAX - 1] + "…"
    # The label goes where its row has the most room: right of the bar, left of it, or on it.
    left, right = start, 1.0 - start - width
    if right >= left and right >= width:
        x, dx, where = start + width, 4, "start"
    elif left >= width:
        x, dx, where = start, -4, "end"
    else:
        x, dx, where = start, 4, "start"
    if timed and v.ms is not None and max(left, right, width) >= 0.45:
        name = f"{name} · {ms}"
    cls = ("origin " if is_origin else "") + ("none" if not v.ms else "some")
    return (
        f"<a class='bar bar-{esc(v.kind)}' href='#{esc(anchor)}{v.index}'><title>{esc(title)}"
        f"</title><rect class='{cls}' x='{_pc(start)}' "
        f"y='{y + (ROW - BAR_HEIGHT) // 2}' width='{_pc(width)}' height='{BAR_HEIGHT}' "
        f"fill='{color}' stroke='{color}' stroke-width='0'/>"
        f"<text class='name' x='{_pc(x)}' dx='{dx}' y='{y + ROW - 6}' text-anchor='{where}'>"
        f"{esc(name)}</text></a>"
    )


def _marker(x: float, text: str, height: int) -> str:
    where = "end" if x > 0.7 else "start"
    dx = -4 if x > 0.7 else 4
    return (
        f"<g class='origin'><line x1='{_pc(x)}' x2='{_pc(x)}' y1='{AXIS}' y2='{height}'/>"
        f"<text x='{_pc(x)}' dx='{dx}' y='{AXIS + MARKER - 4}' text-anchor='{where}'>"
        f"{esc(text)}</text></g>"
    )
