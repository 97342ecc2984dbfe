"""Texts on the pages: the changed words marked, the rest folded so a change is on screen."""

from __future__ import annotations

import html
from html.parser import HTMLParser

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.collector.pages.browser import CHROMIUM_ARGS, chromium
from tracetape.collector.pages import frame
from tracetape.collector.pages.markup import esc
from tracetape.collector.pages.text import (
    CONTEXT,
    HEAD,
    LINE_KEEP,
    LINE_MAX,
    LONG,
    MARK_CONTEXT,
    SHOWN_RUN,
    TAIL,
    preformatted,
    shown,
)
from tracetape.collector.pages.timeline import timeline_svg
from tracetape.views import StepView


class _Box(HTMLParser):
    """A text box read as a browser shows it with every fold closed (``closed``) and with
    every fold open (``opened``), and where its marks and folds are."""

    def __init__(self, markup: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.closed: list[str] = []
        self.opened: list[str] = []
        self.summaries: list[str] = []
        self.marks: list[str] = []  # the text of each mark, in order
        self.marks_folded = 0
        self.stack: list[str] = []
        self.feed(markup)
        self.close()
        assert self.stack == [], markup

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.stack.append(tag)
        if tag in ("ins", "del"):
            self.marks.append("")
            self.marks_folded += "details" in self.stack

    def handle_endtag(self, tag: str) -> None:
        assert self.stack and self.stack[-1] == tag, (tag, self.stack)
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        if "summary" in self.stack:
            self.summaries.append(data)
            return
        self.opened.append(data)
        if "details" not in self.stack:
            self.closed.append(data)
        if self.stack and self.stack[-1] in ("ins", "del"):
            self.marks[-1] += data

    @property
    def visible(self) -> str:
        return "".join(self.closed)

    @property
    def whole(self) -> str:
        return "".join(self.opened)


def _lines(n: int, word: str = "line") -> str:
    return "\n".join(f"{word} {i}" for i in range(n))


def _visible_lines(markup: str) -> list[str]:
    """The lines shown with the folds closed (a fold starts and ends a line)."""
    return [line for line in _Box(markup).visible.split("\n") if line]


@pytest.mark.parametrize(
    ("n", "folded"),
    [pytest.param(LONG, False, id="at-the-bound"), pytest.param(LONG + 1, True, id="one-more")],
)
def test_a_text_alone_folds_its_middle_only_past_the_bound(n: int, folded: bool) -> None:
    """A text alone of up to LONG lines is shown whole; one line more keeps its first HEAD
    and last TAIL lines and folds the rest, which the fold still holds."""
    text = _lines(n)
    out = shown(text)
    box = _Box(out)
    assert box.whole == text
    if not folded:
        assert out == esc(text)
        return
    lines = text.split("\n")
    assert _visible_lines(out) == lines[:HEAD] + lines[-TAIL:]
    assert box.summaries == [f"{n - HEAD - TAIL} more lines"]


def test_an_equal_counterpart_folds_like_no_counterpart() -> None:
    """A text equal to its counterpart is a text alone: nothing marked, its middle folded."""
    text = _lines(LONG + 10)
    assert shown(text, text, "b") == shown(text)


@pytest.mark.parametrize("side", ["a", "b"])
def test_a_change_keeps_its_context_lines_and_folds_the_rest(side: str) -> None:
    """Around a changed line, CONTEXT lines on each side are shown and the runs beyond fold,
    on the side that shows the change and on the one that does not."""
    before = _lines(40)
    after = before.replace("line 20", "line twenty")
    text, other = (before, after) if side == "a" else (after, before)
    out = shown(text, other, side)
    box = _Box(out)
    assert box.whole == text
    assert box.marks == (["20"] if side == "a" else ["twenty"])
    visible = _visible_lines(out)
    assert visible == text.split("\n")[20 - CONTEXT : 20 + CONTEXT + 1]
    assert box.summaries == [f"{20 - CONTEXT} unchanged lines", f"{19 - CONTEXT} unchanged lines"]


@pytest.mark.parametrize("side", ["a", "b"])
def test_a_line_changed_on_the_other_side_alone_keeps_its_context(side: str) -> None:
    """Words the other side alone has (added on b: the baseline shows no mark) still make
    their line changed here: its context is shown, the rest folded."""
    plain = _lines(40)
    more = plain.replace("line 20", "line 20 and more")
    text, other = (plain, more) if side == "a" else (more, plain)
    box = _Box(shown(text, other, side))
    assert (box.marks == []) == (side == "a")
    assert "line 20" in box.visible and "line 17" in box.visible and "line 23" in box.visible
    assert "line 16\n" not in box.visible and "line 24" not in box.visible


@pytest.mark.parametrize(
    ("after", "folds"),
    [
        pytest.param(SHOWN_RUN, 0, id="a-short-run-shown"),
        pytest.param(SHOWN_RUN + 1, 1, id="one-more-folded"),
    ],
)
def test_a_run_of_unchanged_lines_folds_only_when_longer_than_a_few(after: int, folds: int) -> None:
    """Unchanged lines beyond the context fold only as a run longer than SHOWN_RUN; a run
    that short stays on screen (a fold would hide as much as it saves)."""
    before = _lines(1 + CONTEXT + after)
    text = before.replace("line 0", "line zero")
    box = _Box(shown(text, before, "b"))
    assert len(box.summaries) == folds
    assert box.whole == text


def test_two_changes_far_apart_each_keep_their_context() -> None:
    """Two changes 30 lines apart each show their context, the lines between them folded."""
    before = _lines(60)
    after = before.replace("line 10", "line ten").replace("line 40", "line forty")
    out = shown(after, before, "b")
    box = _Box(out)
    assert box.marks == ["ten", "forty"]
    assert box.summaries == ["7 unchanged lines", "23 unchanged lines", "16 unchanged lines"]
    assert box.marks_folded == 0


LONG_JSON = (
    '{"items": ['
    + ", ".join(f'{{"id": {i}, "name": "item <{i}> & co"}}' for i in range(600))
    + "]}"
)


@pytest.mark.parametrize(
    ("length", "folded"),
    [
        pytest.param(LINE_MAX, False, id="at-the-bound"),
        pytest.param(LINE_MAX + 1, True, id="one-more"),
    ],
)
def test_a_long_line_folds_by_characters_past_the_bound(length: int, folded: bool) -> None:
    """A line of up to LINE_MAX characters is shown whole; a longer one shows its first
    LINE_KEEP characters and folds the rest as "N more characters"."""
    text = ("a&<b " * LINE_MAX)[:length]
    box = _Box(shown(text))
    assert box.whole == text
    if folded:
        assert box.visible == text[:LINE_KEEP]
        assert box.summaries == [f"{length - LINE_KEEP:,} more characters"]
    else:
        assert box.summaries == []


def test_a_long_single_line_shows_the_change_and_its_context_only() -> None:
    """A 20 KB JSON line with one changed value shows the mark whole with about MARK_CONTEXT
    characters each side, folds the rest, and cuts no entity (the folds hold the text)."""
    assert len(LONG_JSON) > 20_000 and "\n" not in LONG_JSON
    after = LONG_JSON.replace('"item <300> & co"', '"item <300> & friends"')
    sides = (("a", LONG_JSON, after, "co"), ("b", after, LONG_JSON, "friends"))
    for side, text, other, word in sides:
        out = shown(text, other, side)
        box = _Box(out)
        assert box.marks == [word]
        assert box.marks_folded == 0
        assert box.whole == text  # entities whole: the folds hold the text exactly
        assert len(box.visible) <= 2 * MARK_CONTEXT + len(word)
        assert [s.endswith("more characters") for s in box.summaries] == [True, True]
    assert "&amp;" in out and "&lt;" in out and "&am<" not in out


@pytest.mark.parametrize(
    ("before", "after"),
    [
        pytest.param(_lines(100), _lines(100).replace("line 50", "line fifty"), id="one-word"),
        pytest.param(_lines(50), _lines(50) + "\nan added line", id="added-line"),
        pytest.param(_lines(50), _lines(20) + "\n" + _lines(30), id="many-changes"),
        pytest.param(LONG_JSON, LONG_JSON.replace("item", "thing"), id="long-line-many-marks"),
        pytest.param(_lines(30), "x" * 5000 + "\n" + _lines(30), id="a-long-mark"),
    ],
)
def test_no_mark_is_ever_inside_a_fold(before: str, after: str) -> None:
    """On both sides, every marked word is on screen with the folds closed."""
    marks = 0
    for text, other, side in ((before, after, "a"), (after, before, "b")):
        box = _Box(shown(text, other, side))
        marks += len(box.marks)
        assert box.marks_folded == 0
        assert box.whole == text
    assert marks


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.sampled_from(["alpha", "beta", "<&>", " ", "\n", "\n\n", "x" * 90]), max_size=60),
    st.lists(st.sampled_from(["alpha", "gamma", "<&>", " ", "\n", "x" * 90]), max_size=60),
)
def test_folding_loses_nothing_and_never_hides_a_mark(one: list[str], two: list[str]) -> None:
    """Any two texts: each side's box, its folds opened, is its text exactly; no mark is
    folded; the markup is balanced."""
    a, b = "".join(one), "".join(two)
    for text, other, side in ((a, b, "a"), (b, a, "b"), (a, None, "a")):
        box = _Box(shown(text, other, side))
        assert box.whole == text
        assert box.marks_folded == 0


@pytest.mark.parametrize(
    "hostile",
    [
        pytest.param("</details><script>alert(1)</script>", id="closes-a-fold"),
        pytest.param("<summary>x</summary></div><img src=x onerror=alert(1)>", id="img"),
        pytest.param("&lt;ins&gt; & &amp; </del>", id="entities"),
    ],
)
def test_hostile_texts_stay_inert(hostile: str) -> None:
    """A text that holds markup is shown as text, alone, diffed and folded: the only
    elements are the box's own (folds and marks)."""
    long = _lines(40) + "\n" + hostile * 50 + "\n" + _lines(40)
    other = long.replace("line 30", "line <b>30</b>")
    for out in (shown(hostile), shown(long), shown(long, other, "a"), shown(other, long, "b")):
        box = _Box(out)
        assert set(box.tags) <= {"details", "summary", "ins", "del"}
        assert "<script" not in out and "<img" not in out
    assert _Box(shown(long, other, "a")).whole == long
    assert html.unescape(shown(hostile)) == hostile


@pytest.mark.parametrize(
    ("text", "mono"),
    [
        pytest.param("a.py::x PASSED    [ 50%]\na.py::y FAILED    [100%]", True, id="log"),
        pytest.param("========= test session starts =========\nplatform linux", True, id="rule"),
        pytest.param("Traceback (most recent):\n  File 'a.py'\n    f()", True, id="traceback"),
        pytest.param("def f():\n\treturn 1\n\t# done", True, id="tabs"),
        pytest.param("Here:\n```python\nprint(1)\n```", True, id="code-fence"),
        pytest.param("┌──┐\n│ok│\n└──┘", True, id="box-drawing"),
        pytest.param("The weather in Paris is sunny and 21°C.", False, id="one-sentence"),
        pytest.param("First paragraph.\n\nSecond one.\n- a point\n- another", False, id="prose"),
        pytest.param("A list:\n  - one indented item", False, id="one-indented-line"),
    ],
)  # fmt: skip
def test_preformatted_texts_are_told_apart_from_prose(text: str, mono: bool) -> None:
    """Logs, code, tracebacks and drawn tables read best in monospace; prose does not."""
    assert preformatted(text) is mono


_BROWSER_VIEWS = [
    StepView(1, "llm", "gpt-4o-mini-2024-07-18", 1, 812.0, None, tokens_in=900, tokens_out=50),
    StepView(2, "tool", "read_file", 1, 40.0, None),
    StepView(3, "llm", "gpt-4o-mini", 2, 2300.0, None),
    StepView(4, "env", "time.time", 2, 0.0, None),
    StepView(5, "tool", "run_pytest", 3, 3100.0, None),
    StepView(6, "llm", "gpt-4o-mini", 3, 1204.0, None),
]

# What each row's box holds: a long answer changed at line 40, a pytest log, a 20 KB JSON
# line changed in its middle, long texts alone.
_PROSE = "\n".join(
    f"line {i}: the agent read the file and found nothing of note" for i in range(60)
)
_LOG = "\n".join(f"tests/test_x.py::test_{i:03d} PASSED      [{i:3d}%]" for i in range(50))


def _box(inner: str) -> str:
    label = "<span class=label>answer</span>"
    return f"<div class='part answer'>{label}<div class=text>{inner}</div></div>"


def _browser_page() -> str:
    after = _PROSE.replace("line 40: the agent read", "line 40: the agent wrote")
    boxes = [
        shown(after, _PROSE, "b"),
        shown(LONG_JSON.replace("<300>", "<three hundred>"), LONG_JSON, "b"),
        shown(_LOG),
        shown(_PROSE),
        shown(_PROSE + "\n" + _LOG),
        shown("</details><script>alert(1)</script>" + _PROSE),
    ]
    rows = "".join(
        f"<tr class=decision id=d{v.index}><td class=head>#{v.index}</td>"
        f"<td class=what>{_box(inner)}</td></tr>"
        for v, inner in zip(_BROWSER_VIEWS, boxes, strict=True)
    )
    body = (
        timeline_svg(_BROWSER_VIEWS, label="timeline of r1", origin=3)
        + timeline_svg([StepView(i, "llm", "claude", None, None, None) for i in (1, 2, 3)])
        + f"<table class=decisions><tbody>{rows}</tbody></table>"
    )
    return frame.page("folds", body)


def test_in_chromium_the_change_is_on_screen_and_the_map_leads_to_rows() -> None:
    """Chromium at 390 and 1280 px, under the pages' CSP: the first mark is in the viewport
    on load and not folded, nothing scrolls sideways, the timeline's text is at least 9 px
    and inside the map, a bar's link moves to its row, and "expand all" opens a box."""
    executable = chromium()
    from playwright.sync_api import ConsoleMessage, Dialog, Route, sync_playwright

    markup = _browser_page()

    def serve(route: Route) -> None:
        if route.request.url.rstrip("/") == "http://pages.test":
            route.fulfill(
                body=markup,
                content_type="text/html",
                headers={"content-security-policy": frame.CSP},
            )
        else:
            route.fulfill(status=204)

    errors: list[str] = []  # console errors (a CSP violation is one) and dialogs

    def console(message: ConsoleMessage) -> None:
        if message.type == "error":
            errors.append(message.text)

    def dialog(opened: Dialog) -> None:
        errors.append(opened.message)
        opened.dismiss()

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        for width, height in ((390, 844), (1280, 800)):
            page = browser.new_page(viewport={"width": width, "height": height})
            page.on("console", console)
            page.on("dialog", dialog)
            page.route("http://pages.test/**", serve)
            page.goto("http://pages.test/")
            mark = page.evaluate(
                """() => {const m = document.querySelector('ins, del');
                const r = m.getBoundingClientRect();
                return {top: r.top, bottom: r.bottom, left: r.left, right: r.right,
                        folded: m.closest('details') !== null, text: m.textContent};}"""
            )
            assert mark["text"] == "wrote" and not mark["folded"], mark
            assert mark["top"] >= 0 and mark["bottom"] <= height, (width, mark)
            assert mark["left"] >= 0 and mark["right"] <= width, (width, mark)
            sideways = page.evaluate(
                "[document.documentElement.scrollWidth, document.documentElement.clientWidth]"
            )
            assert sideways[0] <= sideways[1], (width, sideways)
            labels = page.evaluate(
                """() => [...document.querySelectorAll('svg.timeline text')].map(t => {
                  const r = t.getBoundingClientRect();
                  const svg = t.ownerSVGElement.getBoundingClientRect();
                  return {size: parseFloat(getComputedStyle(t).fontSize), height: r.height,
                          inside: r.left >= svg.left - 1 && r.right <= svg.right + 1,
                          text: t.textContent};})"""
            )
            assert labels and all(t["size"] >= 9 and t["height"] >= 9 for t in labels), labels
            outside = [t["text"] for t in labels if not t["inside"]]
            assert outside == [], (width, outside)
            page.locator("svg.timeline a[href='#d5'] rect").click()
            assert page.evaluate("location.hash") == "#d5"
            top = page.evaluate("document.getElementById('d5').getBoundingClientRect().top")
            assert -2 <= top < height / 2, (width, top)
            first = page.locator("#d1 .text")
            assert first.locator("button.expand").count() == 1
            assert "line 0:" not in first.inner_text()
            first.locator("button.expand").click()
            assert page.evaluate(
                "[...document.querySelectorAll('#d1 details.fold')].every(d => d.open)"
            )
            assert "line 0:" in first.inner_text()
            assert "</details><script>alert(1)</script>line 0" in page.locator("#d6").inner_text()
            page.close()
        browser.close()
    assert errors == [], errors
