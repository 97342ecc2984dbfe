"""Texts as the pages show them: the words changed between two texts marked."""

from __future__ import annotations

from collections.abc import Sequence

from ...views import word_diff
from .markup import esc

# The style and script of marked and folded texts (``frame`` adds them to every page).
STYLE = ""
SCRIPT = ""


def marked(runs: Sequence[tuple[str, str]], side: str) -> str:
    """One side of a word diff: the words kept, and the ones this side alone has marked
    (``<del>`` on the baseline, ``<ins>`` on the candidate)."""
    out = []
    for op, text in runs:
        if op == "=":
            out.append(esc(text))
        elif op == "-" and side == "a":
            out.append(f"<del>{esc(text)}</del>")
        elif op == "+" and side == "b":
            out.append(f"<ins>{esc(text)}</ins>")
    return "".join(out)


def diffed(text: str, other: str | None, side: str) -> str:
    if other is None or other == text:
        return esc(text)
    runs = word_diff(other, text) if side == "b" else word_diff(text, other)
    return marked(runs, side)
