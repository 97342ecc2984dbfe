"""The SDK hooks' entry points: ``patch_sdks(tape)`` for a thread or task, ``patch(tape)`` for
the whole process.

Under them every provider of the table is taped, at the level each allows (see
``install.watches``): the SDK fast paths (``openai``, ``anthropic``, ``groq``), and every
model request their transports send (``httpx``/``httpx2``: Gemini, Mistral, Cohere, Ollama,
OpenAI-compatible servers; ``aiohttp``: Gemini's async client; botocore's events: Bedrock), and
MCP tool calls. The tape is resolved at call time: the tape bound in this thread or asyncio
task (``with tape:``, ``patch_sdks(tape)``), else the process-wide one of ``patch(tape)``;
with none, the SDK runs untouched. The patches themselves are process-wide and reference
counted.

A replaying tape keyed before ``KEYS_VERSION`` (its header's ``keys``: none before model steps
were read from the conversation, 2 before the quotes of flows that flatten their history were,
3 before the providers' noise was stored unkeyed) is re-keyed when a hook first takes it
(``keying.current_keys``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from ..tape import Tape
from .capture import flush_pending, hooked
from .install import install, uninstall
from .install import unpatch_all as _unpatch_all
from .keying import current_keys
from .stainless import warm_up
from .state import set_default_tape

__all__ = ["Patch", "adopt", "patch", "patch_sdks", "unpatch_all"]


def adopt(tape: Tape) -> None:
    """Make ``tape`` ready for the hooks: a replaying tape keyed before ``KEYS_VERSION`` is
    re-keyed (once), and the SDKs' replay is warmed up."""
    current_keys(tape)
    warm_up(tape)


@contextlib.contextmanager
def patch_sdks(tape: Tape) -> Iterator[Tape]:
    """Route the model calls (every provider's SDK) and MCP tool calls made in this thread or
    task through ``tape``.

    ``tape`` is this context's current tape for the block. On exit, a stream the agent left
    half-read is recorded as far as it was read.

        >>> import tracetape, tempfile, pathlib
        >>> tape = tracetape.Tape(pathlib.Path(tempfile.mkdtemp()) / "run.jsonl")
        >>> with tape, tracetape.patch_sdks(tape):
        ...     pass  # openai.OpenAI().chat.completions.create(...) is taped here
    """
    with hooked(tape):
        adopt(tape)
        yield tape


class Patch:
    """The handle ``tracetape.patch(tape)`` returns: hooks stay on until ``stop()``.

    Also a context manager (``with tracetape.patch(tape):``).
    """

    def __init__(self, tape: Tape):
        self.tape = tape
        self._stopped = False
        install()
        tape.hooks += 1
        self._previous = set_default_tape(tape)
        adopt(tape)

    def stop(self) -> None:
        """Record half-read streams, restore the previous default tape and unhook (idempotent)."""
        if self._stopped:
            return
        self._stopped = True
        self.tape.hooks -= 1
        try:
            flush_pending(self.tape)
        finally:
            set_default_tape(self._previous)
            uninstall()

    def __enter__(self) -> Patch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def patch(tape: Tape) -> Patch:
    """Tape every model call of the process, in any thread, from now on.

    A tape bound in a thread or task (``with other_tape:``) still wins there. Returns a
    ``Patch``; call ``.stop()`` (or use it as a context manager) to unhook.
    """
    return Patch(tape)


def unpatch_all() -> None:
    """Remove every hook now, whatever still holds a patch (for test teardown)."""
    _unpatch_all()
    set_default_tape(None)
