"""The pages as a debugging engineer looks at them, in Chromium, at 1280 and at 390 px: the
change is on screen without scrolling inside anything, nothing overflows the page, links
lead to their rows, the filter gives one answer typed or submitted, compare works without
JavaScript, and errors are pages."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.collector.conftest import TOKEN
from tests.collector.pages.browser import CHROMIUM_ARGS, chromium
from tests.collector.pages.triage import record_triage, seed_pair
from tests.collector.test_server import serving
from tracetape.stores.client import push

SIZES = [pytest.param({"width": 1280, "height": 900}, id="1280"),
         pytest.param({"width": 390, "height": 844}, id="390")]  # fmt: skip

# Marks (changed words) that cannot be seen where they are: inside a closed details, or in
# a box that clips or scrolls (its content taller or wider than the box).
HIDDEN_MARKS = """() => [...document.querySelectorAll('ins,del')].filter(m => {
  for (let e = m.parentElement; e && e !== document.body; e = e.parentElement) {
    if (e.tagName === 'DETAILS' && !e.open && !e.classList.contains('raw')) return true;
    const s = getComputedStyle(e);
    const clips = ['auto', 'scroll', 'hidden'];
    if (clips.includes(s.overflowY) && e.scrollHeight > e.clientHeight + 1) return true;
    if (clips.includes(s.overflowX) && e.scrollWidth > e.clientWidth + 1) return true;
  }
  return false;
}).length"""
IN_VIEW = """(sel) => { const e = document.querySelector(sel); if (!e) return false;
  const r = e.getBoundingClientRect();
  return r.bottom > 0 && r.top < innerHeight && r.right > 0 && r.left < innerWidth; }"""
WIDE = "document.documentElement.scrollWidth - document.documentElement.clientWidth"


@pytest.fixture(scope="module")
def collector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A collector in its own process holding the triage pair, the seed pair and a few more
    runs of the triage agent."""
    chromium()
    folder = tmp_path_factory.mktemp("look")
    with serving(f"sqlite:///{folder / 'c.db'}") as url:
        for v in "ab":
            push(record_triage(folder / f"triage-{v}.jsonl", v), url, token=TOKEN, run_id=f"t{v}")
        for path in seed_pair(folder):
            push(path, url, token=TOKEN)
        yield url


@pytest.fixture(scope="module")
def browser(collector: str) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        launched = pw.chromium.launch(executable_path=chromium(), args=CHROMIUM_ARGS)
        yield launched
        launched.close()


def _open(browser: Any, url: str, size: dict[str, int], *, js: bool = True) -> Any:
    context = browser.new_context(viewport=size, java_script_enabled=js)
    page = context.new_page()
    page.problems = []
    page.on("console", lambda m: page.problems.append(m.text) if m.type == "error" else None)
    page.on("requestfailed", lambda r: page.problems.append(f"failed {r.url}"))
    page.goto(f"{url}?token={TOKEN}" if "?" not in url else f"{url}&token={TOKEN}")
    return page


@pytest.mark.parametrize("size", SIZES)
def test_the_change_is_on_screen_in_the_diff(browser: Any, collector: str, size: Any) -> None:
    """The diff page opens on its verdict: a changed value is in view at load; no mark is
    hidden in a closed box or a box that scrolls; the page is no wider than the screen; the
    origin link and each finding's link lead to their rows; a timeline bar leads to its row."""
    page = _open(browser, f"{collector}/diff?a=ta&b=tb", size)
    assert page.evaluate(WIDE) <= 0
    assert page.evaluate(IN_VIEW, "#changed-paths ins")
    assert page.evaluate(HIDDEN_MARKS) == 0
    assert page.locator("#final ins").count() >= 1
    page.click("#first-divergence")
    assert page.evaluate("location.hash") == "#p5"
    assert page.evaluate(IN_VIEW, "#p5")
    for link in page.locator("#findings a.row").all():
        target = link.get_attribute("href")
        link.click()
        assert page.evaluate("location.hash") == target and page.evaluate(IN_VIEW, target)
    page.locator("svg.timeline a.bar").nth(3).click()
    assert page.evaluate("location.hash") == "#p4"
    assert page.evaluate(IN_VIEW, "#p4")  # inside the folded calls: opened to show it
    assert not page.problems, page.problems
    page.context.close()


@pytest.mark.parametrize("size", SIZES)
def test_the_run_list_fits_and_shows_each_runs_numbers(
    browser: Any, collector: str, size: Any
) -> None:
    """The run list is no wider than the screen (its table scrolls in its own box); a seed
    run shows its tokens and an unknown cost; the run page fits too."""
    page = _open(browser, f"{collector}/", size)
    assert page.evaluate(WIDE) <= 0
    seed = page.locator("#runs tbody tr", has_text="seed-b")
    assert "7,212" in seed.inner_text() and "unknown" in seed.inner_text()
    assert "$0" not in seed.inner_text()
    page.goto(f"{collector}/runs/tb")
    assert page.evaluate(WIDE) <= 0
    assert not page.problems, page.problems  # the icon is there: no 404 in the console
    page.context.close()


def test_a_filter_gives_one_answer_typed_or_submitted(browser: Any, collector: str) -> None:
    """Typing a tool's name shows the runs the submitted form shows; a text nothing matches
    says so."""
    from playwright.sync_api import expect

    page = _open(browser, f"{collector}/", {"width": 1280, "height": 900})
    page.fill("#filter", "read_file")
    expect(page).to_have_url(re.compile(r"q=read_file"))
    typed = sorted(page.locator("#runs tbody a[href^='/runs/']").all_inner_texts())
    page.goto(f"{collector}/?q=read_file")
    submitted = sorted(page.locator("#runs tbody a[href^='/runs/']").all_inner_texts())
    assert typed == submitted and len(typed) == 4  # both triage runs and both seed runs
    page.fill("#filter", "no-such-tool")
    expect(page.locator("#runs tbody")).to_contain_text("no runs match these filters")
    page.context.close()


def test_compare_works_without_javascript(browser: Any, collector: str) -> None:
    """With JavaScript off, ticking two runs and pressing compare opens their diff (the
    earlier run as the baseline)."""
    page = _open(browser, f"{collector}/", {"width": 1280, "height": 900}, js=False)
    page.check("input.pick[value='tb']")
    page.check("input.pick[value='ta']")
    page.click("#compare-button")
    page.wait_for_url(re.compile(r"/diff\?a=ta&b=tb$"))
    assert (page.text_content("#verdict") or "").startswith("B diverged from A at step 3")
    page.context.close()


def test_an_error_is_a_page(browser: Any, collector: str) -> None:
    """A run that is not there is a 404 page that says so and leads home."""
    page = _open(browser, f"{collector}/runs/nope", {"width": 390, "height": 844})
    assert page.locator("h1").inner_text() == "404"
    assert "no run 'nope' in this collector" in page.inner_text("main")
    page.click("text=all runs")
    page.wait_for_url(re.compile(r"/$"))
    page.context.close()


def test_screenshots_of_each_page_come_from_the_script(tmp_path: Path) -> None:
    """``python -m examples.screenshots`` draws each page from the demo data (the README shows
    them): PNG files of each page at both widths."""
    chromium()
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[3]
    done = subprocess.run(
        [sys.executable, "-m", "examples.screenshots", "--out", str(tmp_path)],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    for name in ("runs", "run", "diff"):
        for width in (1280, 390):
            shot = tmp_path / f"{name}-{width}.png"
            assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", shot
