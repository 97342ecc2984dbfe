"""Texts as the pages show them: the words changed between two texts marked, and the rest
folded so that a change is never off screen.

``shown(text, other, side)`` is the inner HTML of a text box:

* with ``other`` (the counterpart in the other run) and different: the words only this side
  has are marked (``<del>`` on the baseline side ``"a"``, ``<ins>`` on the candidate side
  ``"b"``), ``CONTEXT`` lines are kept around each changed line, and each longer run of
  unchanged lines folds into ``<details class=fold>``. A line is changed on both sides when
  a word on it was removed or added, so the baseline keeps the place where the candidate
  added words in view;
* alone (the run page) or equal: a text of more than ``LONG`` lines keeps its first ``HEAD``
  and last ``TAIL`` lines and folds its middle; a shorter one is shown whole;
* a line longer than ``LINE_MAX`` characters folds by characters the same way: its start, or
  ``MARK_CONTEXT`` characters around each mark. The HTML is built from escaped pieces cut in
  the text, so no fold cuts a mark or an entity, and no mark is ever inside a fold.

A fold opens by itself (``<details>`` needs no script); ``SCRIPT`` adds an "expand all" button
to each box that holds folds. ``preformatted(text)`` says whether a text reads best in a
monospace font (logs, code, tables drawn with spaces).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

from ...views import word_diff
from .markup import esc

__all__ = ["SCRIPT", "STYLE", "preformatted", "shown"]

CONTEXT = 3  # unchanged lines kept before and after each changed line
SHOWN_RUN = 3  # a run of unchanged lines this short is shown, not folded
LONG = 30  # a text alone with more lines keeps its head and tail and folds the rest
HEAD = 12
TAIL = 5
LINE_MAX = 300  # a line with more characters folds by characters
LINE_KEEP = 160  # characters kept at the start of a long line with no change
MARK_CONTEXT = 80  # characters kept on each side of a change in a long line
SHOWN_CHARS = 40  # a stretch of unchanged characters this short is shown, not folded

# The style and script of marked and folded texts (``frame`` adds them to every page).
STYLE = """
.text{white-space:pre-wrap;overflow-wrap:anywhere}
details.fold{display:block;margin:2px 0;border-left:3px solid #d5d9df;padding-left:6px}
details.fold>summary{cursor:pointer;color:#6b7580;font:12px system-ui,sans-serif;
white-space:normal;list-style-position:inside}
details.fold[open]>summary{margin-bottom:2px}
button.expand{float:right;margin:0 0 4px 8px;font:12px system-ui,sans-serif;cursor:pointer;
padding:1px 8px;border:1px solid #c9ced5;border-radius:4px;background:#fff;color:#1d232a;
user-select:none}
"""

# Each box that holds folds gets one button opening (then closing) all of them; a page with
# no fold runs nothing.
SCRIPT = """
(()=>{
const boxes=new Set([...document.querySelectorAll('details.fold')].map(d=>d.parentElement));
boxes.forEach(box=>{
  const b=document.createElement('button');
  b.type='button';b.className='expand';b.textContent='expand all';
  b.addEventListener('click',()=>{
    const open=b.textContent==='expand all';
    box.querySelectorAll('details.fold').forEach(d=>{d.open=open;});
    b.textContent=open?'fold again':'expand all';
  });
  box.prepend(b);
});
})();
"""

# A piece of one line: ("=", text) kept, ("del"/"ins", text) marked, ("@", "") where the
# other side removed or added words (a change this side cannot show).
_Piece = tuple[str, str]


def shown(text: str, other: str | None = None, side: str = "a") -> str:
    """The inner HTML of a text box: ``text`` escaped, with the words it does not share with
    ``other`` marked and long unchanged stretches folded (see the module doc).

    >>> shown("weather in Paris", "weather in Rome", "a")
    'weather in <del>Paris</del>'
    >>> shown("<b>")
    '&lt;b&gt;'
    """
    if other is None or other == text:
        lines = [[("=", line)] if line else [] for line in text.split("\n")]
        n = len(lines)
        keep = [True] * n if n <= LONG else [i < HEAD or i >= n - TAIL for i in range(n)]
        return _render(lines, keep, "more lines")
    lines, changed = _diff_lines(text, other, side)
    near = [False] * len(lines)
    for i, hit in enumerate(changed):
        if hit:
            for j in range(max(0, i - CONTEXT), min(len(lines), i + CONTEXT + 1)):
                near[j] = True
    return _render(lines, near, "unchanged lines")


def _diff_lines(text: str, other: str, side: str) -> tuple[list[list[_Piece]], list[bool]]:
    """This side's lines as pieces, and which lines changed."""
    runs = word_diff(other, text) if side == "b" else word_diff(text, other)
    own, tag = ("+", "ins") if side == "b" else ("-", "del")
    lines: list[list[_Piece]] = [[]]
    changed = [False]
    for op, chunk in runs:
        if op not in ("=", own):
            lines[-1].append(("@", ""))
            changed[-1] = True
            continue
        kind = "=" if op == "=" else tag
        first = len(lines) - 1
        for i, part in enumerate(chunk.split("\n")):
            if i:
                lines.append([])
                changed.append(False)
            if part:
                lines[-1].append((kind, part))
                changed[-1] = changed[-1] or kind != "="
        if kind != "=" and not chunk.strip("\n"):  # only line breaks: where they were
            changed[first] = True
    return lines, changed


def _render(lines: Sequence[list[_Piece]], keep: Sequence[bool], what: str) -> str:
    """The kept lines (long ones folded by characters), each longer run of the others in one
    fold; a short run is shown as it is. Each line break stays in the text (copied text is
    the text), inside a fold when the fold ends its line."""
    out: list[str] = []
    n = len(lines)
    i = 0
    while i < n:
        j = i
        while j < n and not keep[j]:
            j += 1
        if j - i > SHOWN_RUN:
            whole = "".join(_whole(lines[k]) + _end(k, n) for k in range(i, j))
            out.append(_details(f"{j - i:,} {what}", whole))
        else:
            out.extend(_line(lines[k], _end(k, n)) for k in range(i, j))
        if j < n:
            out.append(_line(lines[j], _end(j, n)))
        i = j + 1
    return "".join(out)


def _end(k: int, n: int) -> str:
    return "\n" if k < n - 1 else ""


def _details(summary: str, inner: str) -> str:
    return f"<details class=fold><summary>{summary}</summary>{inner}</details>"


def _piece(kind: str, part: str) -> str:
    return esc(part) if kind == "=" else f"<{kind}>{esc(part)}</{kind}>"


def _whole(line: Sequence[_Piece]) -> str:
    return "".join(_piece(kind, part) for kind, part in line if part)


def _fold(part: str, end: str = "") -> str:
    return _details(f"{len(part):,} more characters", esc(part + end))


def _line(line: Sequence[_Piece], end: str) -> str:
    """One kept line and its line break; past ``LINE_MAX`` characters only its start, or the
    characters around its changes, are shown, the rest folded."""
    if sum(len(part) for _, part in line) <= LINE_MAX:
        return _whole(line) + end
    if all(kind == "=" for kind, _ in line):
        flat = "".join(part for _, part in line)
        return esc(flat[:LINE_KEEP]) + _fold(flat[LINE_KEEP:], end)
    return "".join(_around_changes(line, end))


def _around_changes(line: Sequence[_Piece], end: str) -> Iterator[str]:
    changes = [i for i, (kind, _) in enumerate(line) if kind != "="]
    for i, (kind, part) in enumerate(line):
        if kind != "=":
            yield _piece(kind, part) if part else ""
            continue
        left = MARK_CONTEXT if changes[0] < i else 0  # a change before: keep its context
        right = len(part) - MARK_CONTEXT if changes[-1] > i else len(part)
        if right - left <= SHOWN_CHARS:
            yield esc(part)
        elif right == len(part):  # the line ends folded: its break goes in the fold
            yield esc(part[:left]) + _fold(part[left:], end)
            return
        else:
            yield esc(part[:left]) + _fold(part[left:right]) + esc(part[right:])
    yield end


_FENCE = re.compile(r"^\s*(```|~~~)", re.M)
_DRAWN = re.compile(r"[\u2500-\u259f]")
_INDENTED = re.compile(r"^(\t| {2,})\S", re.M)
_ALIGNED = re.compile(r"\S(\t| {2,})\S")
_RULE = re.compile(r"^([=_\-*])\1{2,} .* \1{3,}\s*$", re.M)


def preformatted(text: str) -> bool:
    """Whether ``text`` reads best in a monospace font: code fences, box drawing, a rule like
    pytest's, or at least two lines indented or aligned in columns with spaces or tabs.

    >>> preformatted("def f():\\n    return 1\\n    # done")
    True
    >>> preformatted("The weather in Paris is sunny.")
    False
    """
    if _FENCE.search(text) or _DRAWN.search(text) or _RULE.search(text):
        return True
    lines = text.split("\n")
    indented = sum(1 for line in lines if _INDENTED.match(line))
    aligned = sum(1 for line in lines if _ALIGNED.search(line))
    return indented >= 2 or aligned >= 2
