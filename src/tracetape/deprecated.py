"""``Tape``'s removed methods, kept for one minor release as deprecated aliases.

The README of 0.1 taught ``tape.patch_sdks()``, ``tape.patch_http()``,
``tape.http_transport()``, ``tape.async_http_transport()``, ``tape.tool``, ``tape.env()`` and
``tape.model_calls``; they became module functions that take the tape
(``tracetape.patch_sdks(tape)``...) and steps read from the conversation. Each alias here warns
once per use (``DeprecationWarning``, naming its replacement) and calls today's function, so a
program written against that README runs unchanged while it is moved over. They go in 0.3.

They load the hooks by name when called (``_hook``), not when ``tracetape.tape`` is
imported: the tape and this module, below the hooks, import none of them.

    >>> import tempfile, pathlib, warnings
    >>> from tracetape import Tape
    >>> tape = Tape(pathlib.Path(tempfile.mkdtemp()) / "run.jsonl", mode="record")
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     with tape, tape.patch_sdks():
    ...         pass
    >>> print(caught[0].message)
    Tape.patch_sdks() is deprecated and will be removed in tracetape 0.3; use \
tracetape.patch_sdks(tape)
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from typing import Any, ParamSpec, TypeVar, cast

from ._enums import Effect

__all__ = ["DeprecatedTapeMethods", "deprecated"]

P = ParamSpec("P")
R = TypeVar("R")

REMOVED_IN = "0.3"


def _hook(module: str, name: str) -> Any:
    """``tracetape.integrations.MODULE.NAME``, loaded when an alias is called (by name: the
    hooks sit above the tape, which must not import them)."""
    return getattr(importlib.import_module(f"tracetape.integrations.{module}"), name)


def deprecated(old: str, new: str) -> None:
    """Warn that ``old`` is deprecated in favour of ``new``, pointing at the caller's caller
    (the line that used the alias).

        >>> import warnings
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     deprecated("Tape.env()", "tracetape.env(name, tape=tape)")
        >>> caught[0].category.__name__
        'DeprecationWarning'
    """
    warnings.warn(
        f"{old} is deprecated and will be removed in tracetape {REMOVED_IN}; use {new}",
        DeprecationWarning,
        stacklevel=3,
    )


class DeprecatedTapeMethods:
    """The mixin ``Tape`` inherits its removed methods from: each warns, then calls the
    function that replaced it with this tape."""

    def patch_sdks(self) -> AbstractContextManager[Any]:
        """Deprecated: ``tracetape.patch_sdks(tape)``."""
        deprecated("Tape.patch_sdks()", "tracetape.patch_sdks(tape)")
        patch_sdks = _hook("sdk", "patch_sdks")
        return cast(AbstractContextManager[Any], patch_sdks(self._as_tape()))

    def patch_http(self) -> AbstractContextManager[Any]:
        """Deprecated: ``tracetape.patch_http(tape)``."""
        deprecated("Tape.patch_http()", "tracetape.patch_http(tape)")
        patch_http = _hook("http", "patch_http")
        return cast(AbstractContextManager[Any], patch_http(self._as_tape()))

    def http_transport(self, inner: Any = None, *, flavor: Any = None) -> Any:
        """Deprecated: ``tracetape.http_transport(tape, inner, flavor=...)``."""
        deprecated("Tape.http_transport()", "tracetape.http_transport(tape)")
        http_transport = _hook("http", "http_transport")
        return http_transport(self._as_tape(), inner, flavor=flavor)

    def async_http_transport(self, inner: Any = None, *, flavor: Any = None) -> Any:
        """Deprecated: ``tracetape.async_http_transport(tape, inner, flavor=...)``."""
        deprecated("Tape.async_http_transport()", "tracetape.async_http_transport(tape)")
        async_http_transport = _hook("http", "async_http_transport")
        return async_http_transport(self._as_tape(), inner, flavor=flavor)

    def tool(
        self,
        func: Callable[P, R] | None = None,
        *,
        effect: str | Effect = Effect.READ,
        name: str | None = None,
        stub: Callable[..., Any] | None = None,
        ignore: Iterable[str] = (),
    ) -> Any:
        """Deprecated: ``tracetape.tool(..., tape=tape)``."""
        deprecated("Tape.tool", "tracetape.tool(..., tape=tape)")
        tool = _hook("tools", "tool")
        return tool(func, effect=effect, name=name, stub=stub, ignore=ignore, tape=self._as_tape())

    def env(self, name: str, default: str | None = None) -> str | None:
        """Deprecated: ``tracetape.env(name, default, tape=tape)``."""
        deprecated("Tape.env()", "tracetape.env(name, tape=tape)")
        env = _hook("tools", "env")
        return cast("str | None", env(name, default, tape=self._as_tape()))

    @property
    def model_calls(self) -> int:
        """Deprecated: the step of this flow's latest model call,
        ``tracetape.integrations.current_step(tape)``."""
        deprecated("Tape.model_calls", "tracetape.integrations.current_step(tape)")
        current_step = _hook("state", "current_step")
        return int(current_step(self._as_tape()))

    @model_calls.setter
    def model_calls(self, count: int) -> None:
        """Deprecated: say a model call of step ``count`` was made in this flow (tools called
        now key on it); steps are read from the conversation now."""
        deprecated("Tape.model_calls", "tracetape.integrations.current_step(tape)")
        state_of = _hook("state", "state_of")
        state_of(self._as_tape()).steps.saw(count)

    def _as_tape(self) -> Any:
        """This object as the ``Tape`` it is a part of (typed loosely: this module is below
        ``tape``, which imports it)."""
        return cast(Any, self)
