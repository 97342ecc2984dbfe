"""The price of a model call: from the maintained table, or unknown, never a guessed zero."""

from __future__ import annotations

from decimal import Decimal

from tracetape.prices import cost


def test_unknown_models_and_missing_counts_cost_unknown_never_zero() -> None:
    """A model the table does not know, or a call without token counts, costs None."""
    assert cost("gpt-test", 10, 1, "openai") == (None, "unknown")
    assert cost("gpt-4o-mini", None, None, "openai") == (None, "unknown")
    assert cost(None, 10, 1, None) == (None, "unknown")
    price, how = cost("gpt-4o-mini", 1000, 100, "openai")
    assert how == "priced" and price == Decimal("0.00021")
