"""The timeline as a map: a time axis, named bars that link to their rows, the origin marked."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from tracetape.collector.pages.timeline import BAR, NAME_MAX, duration, ticks, timeline_svg
from tracetape.views import StepView

SVG = "{http://www.w3.org/2000/svg}"


def _views(*calls: tuple[str, str, float | None]) -> list[StepView]:
    return [
        StepView(i, kind, name, None, ms, None, tokens_in=10 * i, tokens_out=i)
        for i, (kind, name, ms) in enumerate(calls, 1)
    ]


AGENT = _views(
    ("llm", "gpt-4o-mini", 812.0),
    ("tool", "read_file", 40.0),
    ("llm", "gpt-4o-mini", 2300.0),
    ("env", "time.time", 0.0),
    ("tool", "run_pytest", 3100.0),
    ("llm", "gpt-4o-mini", 1204.0),
)


def _svg(markup: str) -> ET.Element:
    return ET.fromstring(markup)


def _pc(value: str | None) -> float:
    assert value is not None and value.endswith("%"), value
    return float(value[:-1])


def _bars(svg: ET.Element) -> list[ET.Element]:
    return svg.findall(f"{SVG}a")


def _tick_labels(svg: ET.Element) -> list[str]:
    return [
        t.text or "" for g in svg.findall(f"{SVG}g[@class='tick']") for t in g.iter(f"{SVG}text")
    ]


@pytest.mark.parametrize(
    ("scale", "labels"),
    [
        pytest.param(7456.0, ["0", "2 s", "4 s", "6 s"], id="seconds"),
        pytest.param(450.0, ["0", "100 ms", "200 ms", "300 ms", "400 ms"], id="milliseconds"),
        pytest.param(3.0, ["0", "1 ms", "2 ms", "3 ms"], id="a-few-ms"),
        pytest.param(2500.0, ["0", "500 ms", "1 s", "1.5 s", "2 s", "2.5 s"], id="half-seconds"),
    ],
)
def test_the_axis_has_round_ticks_labelled_in_ms_or_s(scale: float, labels: list[str]) -> None:
    """The axis ticks fall on round times (1, 2 or 5 × 10^k ms) up to the scale, labelled in
    ms below a second and in s above."""
    svg = _svg(timeline_svg(_views(("llm", "m", scale))))
    assert _tick_labels(svg) == labels
    assert [duration(t) for t in ticks(scale)] == labels


def test_each_bar_starts_where_the_one_before_ended_on_the_shared_scale() -> None:
    """Bars follow one another, each as long as its call took; on a scale twice the run's
    length, the run ends at half the width."""
    total = sum(v.ms or 0.0 for v in AGENT)
    for scale in (total, 2 * total):
        rects = [a.find(f"{SVG}rect") for a in _bars(_svg(timeline_svg(AGENT, scale)))]
        at = 0.0
        for rect, v in zip(rects, AGENT, strict=True):
            assert rect is not None
            assert _pc(rect.get("x")) == pytest.approx(100 * at / scale, abs=0.01)
            if v.ms:
                assert _pc(rect.get("width")) == pytest.approx(
                    max(100 * v.ms / scale, 0.4), abs=0.01
                )
            at += v.ms or 0.0
        last = rects[-1]
        assert last is not None
        end = _pc(last.get("x")) + _pc(last.get("width"))
        assert end == pytest.approx(100 * total / scale, abs=0.02)  # 100, then 50


@pytest.mark.parametrize("anchor", ["d", "p"])
def test_each_bar_links_to_its_row_names_its_call_and_has_a_title(anchor: str) -> None:
    """Each bar is a link to its row (``#d3`` on a run page, ``#p3`` on a diff), coloured by
    kind, with its name drawn on the map and a title saying kind, name, time and tokens."""
    svg = _svg(timeline_svg(AGENT, anchor=anchor))
    bars = _bars(svg)
    assert [a.get("href") for a in bars] == [f"#{anchor}{v.index}" for v in AGENT]
    for a, v in zip(bars, AGENT, strict=True):
        rect, name, title = a.find(f"{SVG}rect"), a.find(f"{SVG}text"), a.find(f"{SVG}title")
        assert rect is not None and rect.get("fill") == BAR[v.kind]
        assert name is not None and (name.text or "").startswith(v.name)
        assert title is not None and title.text is not None
        assert title.text.startswith(f"#{v.index} {v.kind} {v.name} · ")
        assert f"{v.tokens} tokens" in title.text


def test_the_map_does_not_scale_its_text_with_the_page() -> None:
    """No viewBox: positions are percentages and text keeps its pixel size at any width."""
    markup = timeline_svg(AGENT)
    svg = _svg(markup)
    assert "viewBox" not in markup and svg.get("width") == "100%"
    assert all(r.get("x", "").endswith("%") for r in svg.iter(f"{SVG}rect"))


def test_the_origin_is_outlined_and_marked_by_a_labelled_line_at_its_start() -> None:
    """With an origin, its bar is outlined and a line labelled with its index stands at the
    bar's start; without one, nothing is marked."""
    svg = _svg(timeline_svg(AGENT, origin=3))
    rects = [a.find(f"{SVG}rect") for a in _bars(svg)]
    outlined = [
        i for i, r in enumerate(rects, 1) if r is not None and "origin" in r.get("class", "")
    ]
    assert outlined == [3]
    marker = svg.find(f"{SVG}g[@class='origin']")
    assert marker is not None
    line, label = marker.find(f"{SVG}line"), marker.find(f"{SVG}text")
    assert line is not None and label is not None and label.text == "origin #3"
    assert rects[2] is not None and line.get("x1") == rects[2].get("x")
    plain = timeline_svg(AGENT)
    assert "origin" not in plain


def test_an_origin_past_the_last_call_is_marked_at_the_run_end() -> None:
    """A run that stopped before the call where the other diverged shows the origin where it
    ended, saying it has no such call."""
    svg = _svg(timeline_svg(AGENT[:3], 2 * 3152.0, origin=4))
    marker = svg.find(f"{SVG}g[@class='origin']")
    assert marker is not None
    label, line = marker.find(f"{SVG}text"), marker.find(f"{SVG}line")
    assert label is not None and label.text == "origin #4: no call"
    assert line is not None and _pc(line.get("x1")) == pytest.approx(50.0, abs=0.02)


@pytest.mark.parametrize("ms", [pytest.param(None, id="none"), pytest.param(0.0, id="zero")])
def test_calls_without_times_still_get_visible_labelled_bars(ms: float | None) -> None:
    """A seed trace's calls (no times) are drawn call by call: each bar has a width, its name
    and its link, and the axis says that no times were recorded."""
    views = _views(("llm", "claude", ms), ("tool", "grep", ms), ("env", "os.environ", ms))
    markup = timeline_svg(views)
    svg = _svg(markup)
    assert "no times recorded" in markup
    assert _tick_labels(svg) == []
    for a, v in zip(_bars(svg), views, strict=True):
        rect, name = a.find(f"{SVG}rect"), a.find(f"{SVG}text")
        assert rect is not None and _pc(rect.get("width")) > 10
        assert name is not None and name.text == v.name


def test_an_instant_call_among_timed_ones_still_shows() -> None:
    """A call of no time in a timed run keeps a thin bar, outlined, and its name."""
    svg = _svg(timeline_svg(AGENT))
    a = _bars(svg)[3]
    rect, name = a.find(f"{SVG}rect"), a.find(f"{SVG}text")
    assert rect is not None and _pc(rect.get("width")) > 0 and "none" in rect.get("class", "")
    assert name is not None and (name.text or "").startswith("time.time")


def test_long_names_are_cut_on_the_map_and_whole_in_the_title() -> None:
    """A name longer than NAME_MAX is cut with an ellipsis on the map; the title has it all."""
    name = "anthropic.claude-3-5-sonnet-20240620-v1:0"
    a = _bars(_svg(timeline_svg(_views(("llm", name, 500.0)))))[0]
    text, title = a.find(f"{SVG}text"), a.find(f"{SVG}title")
    assert text is not None and (text.text or "").startswith(name[: NAME_MAX - 1] + "…")
    assert title is not None and name in (title.text or "")


def test_names_and_labels_are_escaped() -> None:
    """A hostile tool name or label is text in the SVG, never markup."""
    views = _views(("tool", "<script>alert(1)</script>", 10.0), ("tool", "a'b\"c&", 5.0))
    markup = timeline_svg(views, label="<img src=x onerror=alert(1)>", anchor="d")
    assert "<script" not in markup and "<img" not in markup
    svg = _svg(markup)
    assert svg.get("aria-label") == "<img src=x onerror=alert(1)>"
    assert "a'b\"c&" in (_bars(svg)[1].findtext(f"{SVG}title") or "")
