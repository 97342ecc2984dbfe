"""Tool calls and environment reads of SDK agents, routed through a tape.

An agent built on the ``openai`` or ``anthropic`` SDK makes three kinds of decisions: model
requests (taped by ``patch_sdks``), tool calls and environment reads. ``tool`` and ``env`` tape
the other two, so a replayed run executes no tool and reads no live environment::

    >>> import tempfile, pathlib
    >>> from tracetape import Tape
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "run.jsonl"
    >>> @tool(effect="read")
    ... def lookup(city: str, units: str = "metric") -> dict[str, object]:
    ...     return {"city": city, "temp": 21}
    >>> with Tape(path, mode="record"):
    ...     lookup("Oslo")
    {'city': 'Oslo', 'temp': 21}
    >>> with Tape(path, mode="replay"):
    ...     lookup(city="Oslo")
    {'city': 'Oslo', 'temp': 21}

A tool call's key payload is ``{"name": <function name>, "args": <bound arguments, defaults
applied>, "step": <step>}``: calling ``lookup("Oslo")`` or ``lookup(city="Oslo")`` is the same
decision, and the step is that of the model call that asked for the tool (``steps``: the answer
that asked for this name and these arguments; else the latest model call of the thread or
task). ``self``
and ``cls`` are left out of ``args`` (their ``repr`` holds an address), as is every name in
``ignore``. Arguments are serialized when the call is made, never kept by reference.

A tool that raises records the exception (its type, ``args`` and message) and replay raises it
again, so an agent that turns tool errors into messages for the model replays too. Outputs
must be JSON data; replay returns them as JSON (a tuple comes back as a list).

With no tape given and none active (``current_tape()``), the function simply runs: decorate
tools once at import and they are taped only inside ``with Tape(...)``, ``tracetape run`` or
the pytest ``tape`` fixture.
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, cast, overload

from ..errors import TapeError
from ..record import RAISED, raised_record, reraise
from ..tape import Effect, current_tape
from .capture import passing
from .state import state_of

if TYPE_CHECKING:
    from ..tape import Tape

__all__ = ["RAISED", "env", "raised_record", "reraise", "tool"]

P = ParamSpec("P")
R = TypeVar("R")


class _ToolSpec:
    """What ``tool`` knows about one decorated function."""

    def __init__(
        self,
        func: Callable[..., Any],
        *,
        effect: Effect,
        name: str | None,
        stub: Callable[..., Any] | None,
        ignore: Iterable[str],
        tape: Tape | None,
    ):
        self.func = func
        self.effect = effect
        self.name = name or func.__name__
        self.stub = stub
        self.signature = inspect.signature(func)
        params = list(self.signature.parameters)
        self.ignore = frozenset(ignore) | (
            {params[0]} if params and params[0] in ("self", "cls") else set()
        )
        self.tape = tape

    def active(self) -> Tape | None:
        return self.tape if self.tape is not None else current_tape()

    def payload(self, tape: Tape, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        bound = self.signature.bind(*args, **kwargs)
        bound.apply_defaults()
        arguments = {k: v for k, v in bound.arguments.items() if k not in self.ignore}
        step = state_of(tape).steps.tool_step(self.name, arguments)
        return {"name": self.name, "args": arguments, "step": step}


def _wrap(spec: _ToolSpec) -> Callable[..., Any]:
    func, stub = spec.func, spec.stub

    if inspect.iscoroutinefunction(func):

        async def run_async(*args: Any, **kwargs: Any) -> Any:
            tape = spec.active()
            if tape is None:
                return await func(*args, **kwargs)
            payload = spec.payload(tape, args, kwargs)
            raised: list[Exception] = []

            async def do() -> Any:
                try:
                    with passing(""):  # taped here: what it reaches is heard
                        return await func(*args, **kwargs)
                except TapeError:
                    raise
                except Exception as exc:
                    raised.append(exc)
                    return raised_record(exc)

            async def do_stub() -> Any:
                assert stub is not None
                return await stub(*args, **kwargs)

            out = await tape.acall(
                "tool", payload, do, effect=spec.effect, stub=do_stub if stub else None
            )
            if raised:
                raise raised[0]
            return reraise(out) if tape.replaying else out

        return functools.wraps(func)(run_async)

    def run(*args: Any, **kwargs: Any) -> Any:
        tape = spec.active()
        if tape is None:
            return func(*args, **kwargs)
        payload = spec.payload(tape, args, kwargs)
        raised: list[Exception] = []

        def do() -> Any:
            try:
                with passing(""):  # taped here: what it reaches is heard
                    return func(*args, **kwargs)
            except TapeError:
                raise
            except Exception as exc:
                raised.append(exc)
                return raised_record(exc)

        def do_stub() -> Any:
            assert stub is not None
            return stub(*args, **kwargs)

        out = tape.call("tool", payload, do, effect=spec.effect, stub=do_stub if stub else None)
        if raised:
            raise raised[0]
        return reraise(out) if tape.replaying else out

    return functools.wraps(func)(run)


@overload
def tool(
    func: Callable[P, R],
    *,
    effect: str | Effect = ...,
    name: str | None = ...,
    stub: Callable[P, R] | None = ...,
    ignore: Iterable[str] = ...,
    tape: Tape | None = ...,
) -> Callable[P, R]: ...


@overload
def tool(
    func: None = ...,
    *,
    effect: str | Effect = ...,
    name: str | None = ...,
    stub: Callable[..., Any] | None = ...,
    ignore: Iterable[str] = ...,
    tape: Tape | None = ...,
) -> Callable[[Callable[P, R]], Callable[P, R]]: ...


def tool(
    func: Callable[P, R] | None = None,
    *,
    effect: str | Effect = Effect.READ,
    name: str | None = None,
    stub: Callable[..., Any] | None = None,
    ignore: Iterable[str] = (),
    tape: Tape | None = None,
) -> Callable[P, R] | Callable[[Callable[P, R]], Callable[P, R]]:
    """Route a function (sync or async) through a tape as a ``tool`` decision.

    ``effect`` is ``"read"``, ``"write"`` or ``"irreversible"``; an irreversible tool runs
    ``stub`` (same arguments) instead of the function while recording, unless the tape has
    ``allow_irreversible=True``. ``name`` replaces the function's name in the key, ``ignore``
    names arguments left out of it (a client object, a logger). ``tape`` binds the tool to one
    tape; without it the tape active at call time is used, and none means a plain call.

        >>> @tool(effect="write", ignore=["client"])
        ... def save(client: object, text: str) -> str:
        ...     return "saved"
        >>> save(None, "hi")
        'saved'
    """
    parsed = Effect.parse(effect)
    ignored = tuple(ignore)

    def decorate(f: Callable[P, R]) -> Callable[P, R]:
        if inspect.isgeneratorfunction(f) or inspect.isasyncgenfunction(f):
            raise TypeError(
                f"{f.__qualname__} is a generator function; a taped tool must return its "
                "output (return a list instead of yielding)"
            )
        if stub is not None and inspect.iscoroutinefunction(f) != inspect.iscoroutinefunction(stub):
            raise TypeError(
                f"the stub of {f.__qualname__} must be async exactly when the tool is async"
            )
        spec = _ToolSpec(f, effect=parsed, name=name, stub=stub, ignore=ignored, tape=tape)
        return cast("Callable[P, R]", _wrap(spec))

    return decorate if func is None else decorate(func)


@overload
def env(name: str, default: str, *, tape: Tape | None = ...) -> str: ...


@overload
def env(name: str, default: None = ..., *, tape: Tape | None = ...) -> str | None: ...


def env(name: str, default: str | None = None, *, tape: Tape | None = None) -> str | None:
    """Read an environment variable as an ``env`` decision: replay returns the recorded value.

    The key payload is ``{"name": name}``; the output is stored as ``{name: value}`` so a
    variable whose name marks a secret (``*_API_KEY``, ``*PASSWORD*``, ``*TOKEN*``...) is
    redacted by field name even when its value has no known shape. An unset variable records
    ``None`` and returns ``default``.

        >>> env("TRACETAPE_DOC_UNSET", "fallback")
        'fallback'
    """
    active = tape if tape is not None else current_tape()
    if active is None:
        return os.environ.get(name, default)
    out = active.call("env", {"name": name}, lambda: {name: os.environ.get(name)})
    value = out.get(name) if isinstance(out, dict) else None
    return default if value is None else str(value)
