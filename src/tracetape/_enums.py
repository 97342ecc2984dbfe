"""``LoudEnum``: the str enums of tracetape (modes, effects, severities, formats), and
``Effect``, which every layer reads (the tape records it, formats check it, the analysis and
span replay ask whether a call writes).

Like vcrpy's ``RecordMode``, a value that is not a member is a ``ValueError`` that lists the
valid ones, so a typo in code, config or on the command line says how to fix itself.
"""

from __future__ import annotations

from enum import Enum
from typing import Self

__all__ = ["EFFECTS", "EFFECT_NAMES", "WRITES", "Effect", "LoudEnum"]


class LoudEnum(str, Enum):
    """A str enum with ``parse()``: ``Mode.parse("rec")`` lists the valid modes."""

    @classmethod
    def label(cls) -> str:
        """What a value of this enum is called in error messages (default: the class name)."""
        return cls.__name__.lower()

    @classmethod
    def parse(cls, value: str | Enum) -> Self:
        """Return the member for ``value`` or raise ``ValueError`` listing the valid values."""
        try:
            return cls(value)
        except ValueError:
            valid = ", ".join(repr(m.value) for m in cls)
            raise ValueError(
                f"{value!r} is not a valid {cls.label()}; use one of {valid}"
            ) from None

    def __str__(self) -> str:
        return str(self.value)


class Effect(LoudEnum):
    """What a tool call does to the world. Replay never executes any of them."""

    READ = "read"
    WRITE = "write"
    IRREVERSIBLE = "irreversible"


# The effects as the texts a trace holds, and those that change the world.
EFFECTS = frozenset(e.value for e in Effect)
WRITES = frozenset({Effect.WRITE.value, Effect.IRREVERSIBLE.value})
# How an error names the valid effects: 'read', 'write', 'irreversible'.
EFFECT_NAMES = ", ".join(repr(e.value) for e in Effect)
