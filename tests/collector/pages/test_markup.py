"""Escaping: every value a trace holds is text in the pages, in content and in attributes."""

from __future__ import annotations

import html

from hypothesis import given
from hypothesis import strategies as st

from tracetape.collector.pages.markup import esc


@given(st.text())
def test_an_escaped_value_holds_no_markup_and_reads_back_whole(text: str) -> None:
    """No ``<``, ``>``, quote or bare ``&`` survives, and unescaping gives the value back."""
    shown = esc(text)
    assert not set("<>\"'") & set(shown)
    assert html.unescape(shown) == text


def test_values_of_any_type_are_escaped_as_their_text() -> None:
    """A number or None is shown as its text."""
    assert (esc(3), esc(None), esc("a&b")) == ("3", "None", "a&amp;b")
