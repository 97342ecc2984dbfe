"""Runs as conversations in a terminal: the changed words coloured."""

from __future__ import annotations

from rich.console import Console

from tracetape.cli._views import print_diff
from tracetape.record import Record
from tracetape.views import read_steps


def _run(city: str) -> list[Record]:
    data = {"messages": [f"weather in {city} today?"], "step": 1}
    return [Record(kind="llm", key="llm:1", input=data, out=f"{city}: sunny")]


def test_removed_words_are_red_and_struck_added_ones_green() -> None:
    console = Console(record=True, force_terminal=True, color_system="truecolor", width=100)
    print_diff(console, read_steps(_run("Paris")), read_steps(_run("Rome")))
    html = console.export_html(inline_styles=True)
    paris = html.split(">Paris<")[0].rsplit("<span", 1)[1]
    rome = html.split(">Rome<")[0].rsplit("<span", 1)[1]
    assert "line-through" in paris and "color: #800000" in paris  # red, struck through
    assert "line-through" not in rome and "color: #008000" in rome  # green
    assert ">: sunny<" in html or ": sunny" in html  # the words kept, as they are
