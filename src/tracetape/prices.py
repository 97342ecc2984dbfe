"""The price of a model call, from a maintained table (``genai-prices``, the server extra).

``cost`` says what a call cost in US dollars, or why it cannot (a model the table does not
know, no token counts, no price table installed). The report of a diff sums it per run, and
the collector's pages show it per call. This module imports nothing of tracetape's.
"""

from __future__ import annotations

from decimal import Decimal
from functools import lru_cache

__all__ = ["cost"]

# The provider table's names, as the price table names the same companies.
_PRICED = {
    "openai": "openai",
    "anthropic": "anthropic",
    "gemini": "google",
    "bedrock": "aws",
    "cohere": "cohere",
    "mistral": "mistral",
    "groq": "groq",
}


def cost(
    model: str | None, tokens_in: int | None, tokens_out: int | None, company: str | None
) -> tuple[Decimal | None, str]:
    """The price in US dollars of a model call, and how it was found: ``priced`` (from the
    ``genai-prices`` table), else why not (``unknown``: a model the table does not know, or
    no token counts; ``no price table``: the server extra is not installed)."""
    if not model or (tokens_in is None and tokens_out is None):
        return None, "unknown"
    try:
        found = _price(model, tokens_in or 0, tokens_out or 0, _PRICED.get(company or ""))
    except ImportError:
        return None, "no price table"
    return (found, "priced") if found is not None else (None, "unknown")


@lru_cache(maxsize=4096)
def _price(model: str, tokens_in: int, tokens_out: int, company: str | None) -> Decimal | None:
    from genai_prices import Usage, calc_price

    usage = Usage(input_tokens=tokens_in, output_tokens=tokens_out)
    try:
        found = calc_price(usage, model_ref=model, provider_id=company)
    except LookupError:
        return None
    return Decimal(found.total_price)
