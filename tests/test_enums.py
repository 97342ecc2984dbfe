"""``LoudEnum``: a value that is not a member is an error listing the valid ones; ``Effect`` and
the sets of effects every layer reads."""

from __future__ import annotations

from enum import Enum
from typing import cast

import pytest

from tracetape._enums import EFFECT_NAMES, EFFECTS, WRITES, Effect, LoudEnum


class Colour(LoudEnum):
    RED = "red"
    GREEN = "green"


class Speed(LoudEnum):
    SLOW = "slow"

    @classmethod
    def label(cls) -> str:
        return "speed setting"


def test_parse_returns_the_member_of_a_value_or_a_member() -> None:
    """A member's value, or the member itself, parses to the member."""
    assert Colour.parse("red") is Colour.RED
    assert Colour.parse(Colour.GREEN) is Colour.GREEN


@pytest.mark.parametrize(
    ("enum", "value", "said"),
    [
        pytest.param(
            Colour,
            "blue",
            "'blue' is not a valid colour; use one of 'red', 'green'",
            id="class-name",
        ),
        pytest.param(
            Speed, "fast", "'fast' is not a valid speed setting; use one of 'slow'", id="own-label"
        ),
        pytest.param(Colour, "Red", "'Red' is not a valid colour", id="case-counts"),
    ],
)
def test_a_value_that_is_no_member_lists_the_valid_ones(
    enum: type[LoudEnum], value: str, said: str
) -> None:
    """The error names the value, what it should have been (``label``) and every valid value,
    in their order, and hides the enum's own traceback (``from None``)."""
    with pytest.raises(ValueError, match="^" + said.replace("(", r"\(")) as raised:
        enum.parse(value)
    assert raised.value.__cause__ is None and raised.value.__suppress_context__


def test_a_member_of_another_enum_is_refused() -> None:
    """A member of another enum whose value is not one of ours is refused like its value."""

    class Other(str, Enum):
        BLUE = "blue"

    with pytest.raises(ValueError, match="not a valid colour"):
        Colour.parse(Other.BLUE)


def test_a_member_is_its_value_as_text() -> None:
    """``str()`` and formatting give the value, and a member equals its value."""
    assert str(Colour.RED) == "red" and f"{Colour.RED}" == "red"
    assert cast(str, Colour.RED) == "red"


def test_the_effects_are_the_three_and_two_write() -> None:
    """Read, write and irreversible; the writes are those that change the world; errors name
    them quoted, in their order."""
    assert [e.value for e in Effect] == ["read", "write", "irreversible"]
    assert sorted(EFFECTS) == ["irreversible", "read", "write"]
    assert sorted(WRITES) == ["irreversible", "write"] and WRITES < EFFECTS
    assert EFFECT_NAMES == "'read', 'write', 'irreversible'"
    with pytest.raises(ValueError, match=f"use one of {EFFECT_NAMES}$"):
        Effect.parse("delete")
