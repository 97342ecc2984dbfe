"""Running a span's tool live: a command as a subprocess, a Python tool through a named
callable, a ``write`` tool only through a stub; and the environment it runs in.

A command runs with the recorded ``timeout_s`` (default 30 s) and ``cwd``, in this process's
environment, or only the pinned variables with ``pure_env``, plus the pinned ones
(``Live.env``). Its result has the seed's shape: ``{"exit_code", "stdout", "stderr"}`` (text,
undecodable bytes replaced); a run cut by its timeout has ``exit_code`` ``None`` and
``"timed_out": true``, and its whole process group is killed (a shell's children too).

A Python tool's callable gets the recorded arguments (keywords from an object, positions from
a list); what it returns is turned into JSON data as the tape stores outputs, and an exception
becomes the record the tape writes for a tool that raised, so both compare with the recording.

Live output is redacted with the tape's rules before anything compares or prints it: the
recording holds placeholders, and the same secret gives the same placeholder.

The environment: a cassette's header keeps a keyed digest (HMAC, as the tape writes it) of
each variable the tape was told to allow (``tool_call.env``); each is compared with the
variable's value now. A span that carries only ``tool_call.env_digest`` is compared with
``env_digest(names)`` over the variables named by ``tool_call.env_names`` or ``env_allow``.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import inspect
import os
import signal
import subprocess
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from ..canonical import canonical_json
from ..config import load_config
from ..errors import SpanError
from ..record import raised_record
from ..redact import Redactor, RedactRules
from .model import Span

__all__ = ["DEFAULT_TIMEOUT_S", "Live", "env_digest", "load_callable"]

DEFAULT_TIMEOUT_S = 30.0


def load_callable(spec: str, what: str = "--call") -> Callable[..., Any]:
    """The function ``module:function`` names (``module:Class.method`` too).

    Raises ``SpanError`` saying what could not be found.
    """
    module_name, sep, qualname = spec.partition(":")
    if not sep or not module_name or not qualname:
        raise SpanError(f"{what} {spec!r}: name a function as module:function")
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise SpanError(f"{what} {spec!r}: cannot import {module_name}: {exc}") from None
    for part in qualname.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise SpanError(f"{what} {spec!r}: {module_name} has no {qualname}") from None
    if not callable(target):
        raise SpanError(f"{what} {spec!r}: {qualname} is not callable")
    return target  # type: ignore[no-any-return]


def env_digest(
    names: Iterable[str], environ: Mapping[str, str] | None = None, redactor: Redactor | None = None
) -> str:
    """A digest of the variables ``names`` (unset ones included as unset), keyed as the tape
    keys environment values, so equal environments give equal digests and no value leaks.

    >>> env_digest(["HOME"], {"HOME": "/h"}) == env_digest(["HOME"], {"HOME": "/h"})
    True
    >>> env_digest(["HOME"], {"HOME": "/h"}) == env_digest(["HOME"], {"HOME": "/x"})
    False
    """
    environ = os.environ if environ is None else environ
    redactor = redactor or Redactor()
    values = {n: _env_value(environ.get(n), redactor) for n in sorted(set(names))}
    return "sha256:" + hashlib.sha256(canonical_json(values).encode()).hexdigest()[:16]


def _env_value(value: str | None, redactor: Redactor) -> str | None:
    """One variable's digest, exactly as ``Tape`` writes it in a cassette header."""
    return None if value is None else f"hmac:{redactor.mac(value, 16)}"


@dataclass
class Live:
    """How a span's tool runs live: a callable for a Python tool (``call``), a ``stub`` for a
    ``write`` one, pinned variables (``env``), only those (``pure_env``), a ``cwd`` or
    ``timeout_s`` that replace the recorded ones, and the variables compared (``env_allow``).
    """

    call: Callable[..., Any] | None = None
    stub: Callable[..., Any] | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    pure_env: bool = False
    cwd: str | None = None
    timeout_s: float | None = None
    env_allow: tuple[str, ...] = ()
    redactor: Redactor = field(
        default_factory=lambda: Redactor(RedactRules.coerce(load_config("redact") or None))
    )

    def environ(self) -> dict[str, str]:
        """The environment the tool runs in."""
        base = {} if self.pure_env else dict(os.environ)
        return {**base, **self.env}

    def environment_drift(self, span: Span) -> list[str]:
        """How the environment the tool would run in differs from the recorded one."""
        call, environ = span.tool_call, self.environ()
        drift: list[str] = []
        recorded = call.get("env")
        if isinstance(recorded, dict):
            for name in sorted(set(recorded) | set(self.env_allow)):
                if name not in recorded:
                    drift.append(f"environment variable {name} was not recorded in this span")
                elif _env_value(environ.get(name), self.redactor) != recorded[name]:
                    drift.append(
                        f"environment variable {name} has a different value than when recorded"
                    )
        digest = call.get("env_digest")
        if isinstance(digest, str):
            names = call.get("env_names")
            names = [str(n) for n in names] if isinstance(names, list) else list(self.env_allow)
            if not names:
                drift.append(
                    f"env_digest {digest} is recorded but no variables are named to compare it "
                    "with (record tool_call.env_names, or pass --env-allow NAME)"
                )
            else:
                now = env_digest(names, environ, self.redactor)
                if now != digest:
                    drift.append(
                        f"environment digest differs over {', '.join(sorted(set(names)))}: "
                        f"recorded {digest}, now {now}"
                    )
        return drift

    def run(self, span: Span) -> tuple[Any, str | None]:
        """Run the span's tool once; return its (redacted) result and a note (a timeout)."""
        if span.writes:
            raise SpanError(_refusal(span))
        if self.call is not None:
            return self.redacted(_call(self.call, span.args)), None
        argv = span.argv
        if argv is None:
            raise SpanError(
                f"span {span.span_id} is a Python tool ({span.tool}) recorded through the "
                "tape: name the function to run it live, --call module:function"
            )
        result, note = self._command(span, argv)
        return self.redacted(result), note

    def stub_arguments(self, span: Span) -> Any:
        """What the stub is called with, as ``run_stub`` reports what it received: the
        recorded arguments of a Python tool (an object as keywords, else positions), or
        ``{"argv", "cwd"}`` of a command."""
        if span.argv is None:
            positional, keywords = _as_call(span.args)
            return keywords or positional
        return {"argv": span.argv, "cwd": self.cwd or span.tool_call.get("cwd")}

    def run_stub(self, span: Span) -> tuple[Any, Any]:
        """Call the stub with the recorded arguments; return (the arguments it received, as
        JSON data, and what it returned), both redacted."""
        assert self.stub is not None
        received: list[Any] = []
        stub = self.stub

        def spy(*args: Any, **kwargs: Any) -> Any:
            received.append(kwargs or list(args))
            return stub(*args, **kwargs)

        out = _call(spy, self.stub_arguments(span))
        got = _jsonable(received[0]) if received else None
        return self.redacted(got), self.redacted(out)

    def redacted(self, value: Any) -> Any:
        """``value`` with secrets replaced as the tape replaces them."""
        return self.redactor.redact_value(value)[0]

    def _command(self, span: Span, argv: list[str]) -> tuple[dict[str, Any], str | None]:
        call = span.tool_call
        timeout = self.timeout_s
        if timeout is None:
            recorded = call.get("timeout_s")
            timeout = DEFAULT_TIMEOUT_S
            if isinstance(recorded, int | float) and type(recorded) is not bool and recorded > 0:
                timeout = float(recorded)
        cwd = self.cwd or call.get("cwd")
        if cwd is not None and not Path(str(cwd)).is_dir():
            raise SpanError(
                f"span {span.span_id}: the recorded cwd {cwd} is not a folder here; run it "
                "elsewhere with --cwd DIR"
            )
        try:
            proc = subprocess.Popen(
                argv,
                cwd=None if cwd is None else str(cwd),
                env=self.environ(),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except FileNotFoundError:
            raise SpanError(
                f"span {span.span_id}: the command {argv[0]!r} is not installed here (not "
                "found on PATH): install it, or pin the recorded PATH with --env PATH=..."
            ) from None
        except PermissionError:
            raise SpanError(f"span {span.span_id}: {argv[0]!r} is not executable") from None
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill(proc)
            out, err = proc.communicate()
            result: dict[str, Any] = {
                "exit_code": None,
                "stdout": _text(out),
                "stderr": _text(err),
                "timed_out": True,
            }
            return result, f"timed out after {timeout:g} s (the whole process group was killed)"
        done = {"exit_code": proc.returncode, "stdout": _text(out), "stderr": _text(err)}
        return done, None


def _kill(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


def _text(data: bytes | None) -> str:
    return (data or b"").decode("utf-8", "replace")


def _call(fn: Callable[..., Any], args: Any) -> Any:
    """Call ``fn`` with recorded arguments; its result (or its exception) as JSON data."""
    positional, keywords = _as_call(args)
    try:
        out = fn(*positional, **keywords)
        if inspect.isawaitable(out):
            import asyncio  # only an async tool needs it

            out = asyncio.run(_awaited(out))
    except Exception as exc:  # a tool that raises is recorded as its exception
        return raised_record(exc)
    return _jsonable(out)


def _as_call(args: Any) -> tuple[list[Any], dict[str, Any]]:
    """Recorded arguments as a call: an object gives keywords, a list positions, ``None``
    nothing, any other value one position."""
    if isinstance(args, dict):
        return [], {str(k): v for k, v in args.items()}
    if isinstance(args, list):
        return list(args), {}
    return ([] if args is None else [args]), {}


def _jsonable(value: Any) -> Any:
    """``value`` as the JSON data the tape would store."""
    return orjson.loads(canonical_json(value))


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


def _refusal(span: Span) -> str:
    return (
        f"span {span.span_id} ({span.tool}) has effect {span.effect!r}: running it live would "
        "do it again, so it is never run; pass a stub that takes the recorded arguments "
        "(--stub module:function) and the arguments it receives are compared instead"
    )
