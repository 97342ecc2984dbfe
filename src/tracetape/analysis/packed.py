"""Seed-JSONL calls packed for the analysis hot loop, in this process or in a second one.

The reader decodes a block of lines into :class:`JsonlCall` s (``formats.jsonl.read_blocks``); a
:class:`Packer` turns each block into a :class:`Packed` chunk: one column per field, and in
place of each call's arguments a small integer, its *form*, naming the tool and the
normalized arguments. Finding a call's form is the expensive part of a line (copying the raw
JSON of the args, a lookup, and for a call with a fresh request id, decoding, dropping the
volatile keys and encoding again); ``Analyzer.feed_packed`` then only does the findings.

With ``jobs=2`` (and by default for files over 8 MiB on two CPUs or more, on POSIX) the
packer runs in a second process (:class:`Worker`: a fork, or a fresh interpreter when other
threads run) and sends chunks through a pipe, so decoding and the findings use two cores.
The pipe blocks the worker while the analysis is behind: memory stays flat. Errors come back
as they would in this process: a bad line raises the same ``TraceError`` (file, line, field)
when the analysis reaches it, and lines skipped under ``skip_bad_lines`` count the same.

A form is the tool and the normalized arguments *in their key order*, so the arguments an
analysis reports for a signature are those of its first call, whichever process packed it.
"""

from __future__ import annotations

import os
import pickle
import re
import signal
import subprocess
import sys
import threading
import traceback
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, NamedTuple, cast

import orjson

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]

from ..canonical import Normalizer, canonical_json
from ..errors import TraceError
from ..formats import TraceSource
from ..formats.jsonl import CallBatch, read_blocks_of
from .normalize import MemoNormalizer

__all__ = [
    "AUTO_JOBS_BYTES",
    "Cutter",
    "FormTable",
    "Packed",
    "Packer",
    "Skips",
    "Worker",
    "use_worker",
]

AUTO_JOBS_BYTES = 8 << 20  # below this a second process costs more than it saves
_PIPE_BYTES = 1 << 20
_NONE: dict[bytes, int] = {}
_VOLATILE_CACHE = 1 << 14


def _volatile_pairs(keys: Iterable[str]) -> Callable[[bytes, bytes], bytes] | None:
    """``re.sub`` of a pattern matching the ``"key":"value"`` pairs of volatile keys whose
    value is a plain string (printable ASCII, no escapes), with the comma that joins them.

    Dropping such pairs from valid JSON leaves valid JSON (a ``"`` cannot start a match inside
    a string: it would end it), and the result normalizes as the original does, since the
    normalizer drops those keys anyway. So when the result is a raw call known to normalize
    to itself, its form is the original's. Anything else (a volatile number, an escape, odd
    spacing, a glob with a character class) misses, and the call is decoded as usual.
    """
    plain = r"[ !#-\[\]-~]"  # printable ASCII but " and \: a JSON string as it is written
    names = []
    for key in keys:
        if not key.isascii() or any(c in key for c in '[]"\\'):
            return None
        names.append(re.escape(key).replace(r"\*", plain + "*").replace(r"\?", plain))
    if not names:
        return None
    pair = f'"(?:{"|".join(names)})":"{plain}*"'.encode()
    return re.compile(rb"," + pair + rb"|(?<=\{)" + pair + rb",?").sub


def _compact(data: bytes) -> bytes:
    """A copy of ``data`` without the spare capacity orjson leaves (KiBs), to be stored."""
    return bytes(bytearray(data))


class Packed(NamedTuple):
    """Consecutive calls of one file, one column per field: call ``i`` is on ``line + i``.

    ``forms`` lists the (tool, normalized args) of the forms first used in this chunk, in
    form-number order; ``kids`` holds each call's form number.
    """

    line: int
    forms: list[tuple[str, Any]]
    runs: Sequence[str]
    kids: Sequence[int]
    steps: Sequence[int]
    outs: Sequence[str]
    effects: Sequence[str | None]
    tokens: Sequence[int]  # 0 where the line gives none

    def cut(self, lo: int, hi: int | None, forms: list[tuple[str, Any]]) -> Packed:
        """Calls ``lo`` to ``hi`` (None: to the end), introducing ``forms``."""
        part = slice(lo, hi)
        return Packed(
            self.line + lo,
            forms,
            self.runs[part],
            self.kids[part],
            self.steps[part],
            self.outs[part],
            self.effects[part],
            self.tokens[part],
        )

    def split(self, n: int) -> tuple[Packed, Packed]:
        """The first ``n`` calls (with every new form) and the rest."""
        return self.cut(0, n, self.forms), self.cut(n, None, [])


@dataclass
class FormTable:
    """The analysis side of one packer: each form's (tool, args) and signature id (-1: not
    interned yet; a form is interned at its first call in a run the analysis keeps)."""

    forms: list[tuple[str, Any]] = field(default_factory=list)
    sids: list[int] = field(default_factory=list)

    def add(self, forms: list[tuple[str, Any]]) -> None:
        """Register the forms a chunk introduces."""
        self.forms += forms
        self.sids += [-1] * len(forms)


class Packer:
    """Turn blocks of raw calls into :class:`Packed` chunks (see the module docstring).

    Its caches mirror the analysis's: raw calls that normalize to themselves are kept for
    good, those with a volatile part (a fresh id or time) share a small cache dropped when
    full. Memory follows the distinct calls, not the lines.
    """

    def __init__(self, normalizer: Normalizer):
        self._memo = MemoNormalizer(normalizer)
        self._strip = _volatile_pairs(normalizer.volatile_keys)
        self._raw: dict[str, dict[bytes, int]] = {}  # tool -> raw args -> form (no tuple a line)
        self._volatile: dict[tuple[str, bytes], int] = {}
        self._forms: dict[tuple[str, bytes], int] = {}
        self._new: list[tuple[str, Any]] = []

    def pack(self, batches: Iterable[CallBatch]) -> Generator[Packed, None, None]:
        """The chunks of ``batches``; a line whose args are not JSON goes to ``batch.bad``."""
        for batch in batches:
            yield from self.pack_batch(batch)

    def pack_batch(self, batch: CallBatch) -> Iterator[Packed]:
        """The chunks of one block (more than one only around bad lines)."""
        calls = batch.calls
        raw, none = self._raw.get, _NONE
        kids = [raw(c.name, none).get(bytes(c.args)) for c in calls]  # (fastest form measured)
        bad: list[int] = []
        start = 0
        while True:
            try:
                i = kids.index(None, start)
            except ValueError:
                break
            start = i + 1
            key = (calls[i].name, bytes(calls[i].args))
            kid = self._volatile.get(key)
            if kid is None and self._strip is not None:
                # Most such calls are a known call plus a fresh id or time: drop those pairs
                # from the text and look again (see _volatile_pairs), without decoding.
                rest = self._strip(b"", key[1])
                if len(rest) < len(key[1]):
                    kid = self._raw.get(key[0], _NONE).get(rest)
            if kid is None:
                try:
                    kid = self._kid(key)
                except orjson.JSONDecodeError as exc:
                    batch.bad(f"line is not valid JSON ({exc})", batch.line + i)
                    bad.append(i)
                    continue
            kids[i] = kid
        runs = [c.run for c in calls]
        # One str object per run in the chunk: pickled once, compared by identity.
        firsts: dict[str, str] = {}
        same = firsts.setdefault
        forms, self._new = self._new, []
        whole = Packed(
            batch.line,
            forms,
            list(map(same, runs, runs)),
            cast(list[int], kids),  # bad lines (still None) are cut out below
            [c.step for c in calls],
            [c.out for c in calls],
            [c.effect for c in calls],
            [c.tokens or 0 for c in calls],
        )
        if not bad:
            yield whole
            return
        lo = 0
        for hi in [*bad, len(kids)]:
            if hi > lo:
                yield whole.cut(lo, hi, forms)
                forms = []
            lo = hi + 1
        if forms:  # every line after the new forms was bad: keep them for the next chunk
            self._new = forms

    def _kid(self, key: tuple[str, bytes]) -> int:
        name, raw = key
        args = orjson.loads(raw)
        rest = self._memo.without_volatile_keys(args)
        if rest is args:
            return self._form_of(key, args)
        # A call that repeats a known one but for a fresh volatile key (a request id): find
        # that one by the raw JSON of the rest, which normalizes the same.
        try:
            rest_key = (name, orjson.dumps(rest))
        except TypeError:
            kid = self._form(name, self._memo(rest))
        else:
            known = self._raw.get(name, _NONE).get(rest_key[1])
            kid = self._form_of(rest_key, rest) if known is None else known
        self._remember_volatile(key, kid)
        return kid

    def _form_of(self, key: tuple[str, bytes], args: Any) -> int:
        normalized = self._memo(args)
        kid = self._form(key[0], normalized)
        if normalized == args:
            self._raw.setdefault(key[0], {})[_compact(key[1])] = kid
        else:
            self._remember_volatile(key, kid)
        return kid

    def _form(self, name: str, normalized: Any) -> int:
        try:
            text = orjson.dumps(normalized)  # key order kept: see the module docstring
        except TypeError:
            text = canonical_json(normalized).encode()
        kid = self._forms.get((name, text))
        if kid is None:
            kid = self._forms[(name, _compact(text))] = len(self._forms)
            self._new.append((name, normalized))
        return kid

    def _remember_volatile(self, key: tuple[str, bytes], kid: int) -> None:
        if len(self._volatile) >= _VOLATILE_CACHE:
            self._volatile.clear()
        self._volatile[(key[0], _compact(key[1]))] = kid


class Cutter:
    """Hands out the chunks of a file ``size`` calls at a time, as they come.

    Two files are fed ``size`` calls each in turn whatever the format, so the findings kept
    as examples (the first ones found) do not depend on how a reader cuts its blocks. The
    chunks are not collected first: the analysis starts on a group while it is read.
    """

    def __init__(self, chunks: Iterator[Packed]):
        self._chunks = chunks
        self._pending: Packed | None = None
        self.more = True  # false once a take came back short: the file is done

    def take(self, size: int) -> Iterator[Packed]:
        """The next ``size`` calls (fewer at the end of the file; -1: all of them)."""
        room = size
        while room:
            chunk = self._pending or next(self._chunks, None)
            if chunk is None:
                self.more = False
                return
            self._pending = None
            if 0 < room < len(chunk.kids):
                chunk, self._pending = chunk.split(room)
            room -= len(chunk.kids)
            yield chunk


# -- the second process ------------------------------------------------------------------------


@dataclass
class Skips:
    """What ``skip_bad_lines`` dropped in a worker, as ``TraceSource`` counts it."""

    skipped: int = 0
    first_skipped: list[str] = field(default_factory=list)


def use_worker(path: Path, jobs: int | None) -> bool:
    """Whether to pack ``path`` in a second process: ``jobs`` 2 (or more) says yes, 1 no,
    None (auto) yes for a file over ``AUTO_JOBS_BYTES`` on a machine with two CPUs or more.
    Only on POSIX systems (the worker inherits a pipe's file descriptor)."""
    if jobs is not None and jobs < 1:
        raise ValueError(f"jobs must be 1 or more, not {jobs}")
    if os.name != "posix":
        return False
    if jobs is not None:
        return jobs > 1
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    try:
        size = path.stat().st_size
    except OSError:
        return False  # the reader reports the missing file
    return cpus > 1 and size >= AUTO_JOBS_BYTES


def _send(conn: Any, message: Any) -> None:
    conn.send_bytes(pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL))


def _worker(
    paths: list[str], normalizer: Normalizer, skip_bad_lines: bool, group: int | None, conn: Any
) -> None:
    """The second process: read and pack ``paths`` in the order the analysis takes them.

    With ``group`` None (one file) the whole file is one turn; else each file gives
    ``group`` calls a turn, in path order, as the analysis feeds them. Messages are
    ``("chunks", chunks, bytes read, end)`` of about a block each; ``end`` is None but on a
    turn's last message: then (whether the file goes on, its skip counts). A ``TraceError``
    or a crash is sent in place of the data it stopped.
    """
    sources: list[TraceSource] = []
    positions = [0] * len(paths)

    def batches(i: int) -> Iterator[CallBatch]:
        def progress(done: int) -> None:
            positions[i] = done

        return read_blocks_of(
            paths[i],
            normalizer=normalizer,
            skip_bad_lines=skip_bad_lines,
            progress=progress,
            sources=sources,
        )

    def turn(i: int, chunks: Iterable[Packed], more: Callable[[], bool]) -> None:
        held: list[Packed] = []
        for chunk in chunks:
            if held:
                _send(conn, ("chunks", held, positions[i], None))
            held = [chunk]
        src = sources[i]
        _send(conn, ("chunks", held, positions[i], (more(), src.skipped, src.first_skipped)))

    try:
        cutters = [Cutter(Packer(normalizer).pack(batches(i))) for i in range(len(paths))]
        if group is None:
            turn(0, cutters[0].take(-1), lambda: False)
        else:
            while any(c.more for c in cutters):
                for i, cut in enumerate(cutters):
                    if cut.more:
                        turn(i, cut.take(group), lambda: cut.more)  # noqa: B023 - called at once
    except TraceError as exc:
        _send(conn, ("error", exc))
    except BaseException:  # the analysis reports it, with the traceback
        _send(conn, ("crash", traceback.format_exc()))
    finally:
        conn.close()


def _forkable() -> bool:
    """Whether forking is safe here: not once other threads run (one may hold a lock the
    child would wait on forever). Otherwise a fresh interpreter is started instead."""
    return hasattr(os, "fork") and threading.active_count() == 1


def _main() -> None:  # pragma: no cover - runs in the fresh interpreter of _start
    """The fresh interpreter's side: arguments on stdin, messages to the inherited fd."""
    paths, normalizer, skip_bad_lines, group = pickle.load(sys.stdin.buffer)
    _worker(paths, normalizer, skip_bad_lines, group, Connection(int(sys.argv[1]), readable=False))


def _widen(fd: int) -> None:
    """Let the pipe hold about 10,000 packed calls (Linux: 64 KiB by default), so the
    worker packs the next group while the analysis works on the current one."""
    set_size = getattr(fcntl, "F_SETPIPE_SZ", None) if fcntl is not None else None
    if set_size is not None:
        with suppress(OSError):  # capped by /proc/sys/fs/pipe-max-size
            fcntl.fcntl(fd, set_size, _PIPE_BYTES)


class Worker:
    """A second process packing seed-JSONL files for one analysis (see ``_worker``).

    ``group`` is None for one file read through, else the calls per turn of files fed in
    turn; ``turn`` gives a turn's chunks, called in the order the files are fed. Progress
    callbacks get the bytes read; ``skips`` get each file's skip counts at its end. ``close``
    stops the process, whatever state it is in.
    """

    def __init__(
        self,
        paths: list[Path],
        *,
        normalizer: Normalizer,
        skip_bad_lines: bool,
        group: int | None,
        progress: list[Callable[[int], None] | None],
        skips: list[Skips],
    ):
        self.paths = paths
        self.progress = progress
        self.skips = skips
        self.more = [True] * len(paths)
        receive, send = os.pipe()
        _widen(receive)
        args = ([str(p) for p in paths], normalizer, skip_bad_lines, group)
        self._popen: subprocess.Popen[bytes] | None = None
        if _forkable():
            # fork, not multiprocessing: nothing of __main__ is imported again, and it works
            # in a daemonic process too.
            self.pid = os.fork()
            if self.pid == 0:  # pragma: no cover - the child; coverage does not follow it
                os.close(receive)
                try:
                    _worker(*args, Connection(send, readable=False))
                finally:
                    os._exit(0)
        else:
            # A fresh interpreter importing this very package (whatever put it on sys.path).
            root = str(Path(__file__).resolve().parents[2])
            code = f"import sys; sys.path.insert(0, {root!r}); import {__name__} as m; m._main()"
            self._popen = subprocess.Popen(
                [sys.executable, "-c", code, str(send)], stdin=subprocess.PIPE, pass_fds=[send]
            )
            self.pid = self._popen.pid
            assert self._popen.stdin is not None
            with self._popen.stdin as stdin:
                pickle.dump(args, stdin, protocol=pickle.HIGHEST_PROTOCOL)
        os.close(send)
        self._receive = Connection(receive, writable=False)
        self._status: int | None = None

    @property
    def exitcode(self) -> int | None:
        """The worker's exit code (negative: killed by that signal), None while it runs."""
        if self._status is None:
            if self._popen is not None:
                self._status = self._popen.poll()
            else:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
                if pid:
                    self._status = os.waitstatus_to_exitcode(status)
        return self._status

    def _wait(self) -> int:
        """Wait for the worker to exit (it is exiting once its end of the pipe is closed)."""
        if self._status is None:
            if self._popen is not None:
                self._status = self._popen.wait()
            else:
                self._status = os.waitstatus_to_exitcode(os.waitpid(self.pid, 0)[1])
        return self._status

    def _next(self) -> Any:
        try:
            message = pickle.loads(self._receive.recv_bytes())
        except EOFError:
            raise RuntimeError(
                f"the process reading {', '.join(map(str, self.paths))} stopped without a "
                f"word (exit code {self._wait()}); run again with --jobs 1 to read "
                "in this process"
            ) from None
        if message[0] == "error":
            raise message[1]
        if message[0] == "crash":
            raise RuntimeError(f"the process reading {self.paths[0]} failed:\n{message[1]}")
        return message

    def turn(self, i: int) -> Iterator[Packed]:
        """The chunks of file ``i``'s next turn (see ``_worker``); ``more[i]`` then says
        whether the file goes on."""
        while True:
            _, chunks, position, end = self._next()
            yield from chunks
            on_progress = self.progress[i]
            if on_progress is not None:
                on_progress(position)
            if end is not None:
                self.more[i], self.skips[i].skipped, self.skips[i].first_skipped = end
                return

    def close(self) -> None:
        """Stop the process (at once if it is still packing) and close the pipe."""
        self._receive.close()
        if self.exitcode is None:
            with suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGTERM)
        self._wait()
