"""Findings: one streaming pass over events finds what changed between runs and within them.

What is found (each finding carries the evidence that shows it):

1. **first divergence**: the two compared runs aligned call by call (kind, name, normalized
   args); the first position where they disagree, both sides, and the field paths that differ;
2. **repeats**: the same call (same tool, same normalized args) again in one run, with the
   same output (a retry loop or duplicate call) or a different one (unless a local write to
   the resource came in between: that is the write's echo, reported as drift);
3. **drift**: same tool and normalized args, different output fingerprint, within or across
   runs; classified with effect tags as ``write-echo`` (the read follows the run's own write to
   the same resource: the seed comment's cascade), ``external-drift``, or ``drift`` when the
   trace has no effect tags and the cause is undetermined;
4. **exploration** (same tool, many distinct args in one step) and **fanout** (calls per step
   above the bound);
5. **budgets**: calls, tokens, steps and repeats above their bounds, and a run that stopped
   exactly at its step budget;
6. **mock replay**: every unique call of the second side replayed against a mock built from
   the first side's recordings: calls never recorded, and recorded calls whose output differs.

Memory is proportional to the distinct call signatures, not to the lines: the state kept is
one entry per normalized signature (with at most ``_MAX_VARIANTS`` output variants), per-run
tables for at most ``max_open_runs`` runs at a time (a run's table is dropped when it is
finished), and the part of the two compared runs not yet aligned (the lag between them).
Findings kept as examples are capped per pattern; their counts stay exact.

The ``Analyzer`` is one class on purpose: its two hot loops (``feed`` for records,
``feed_packed`` for packed seed-JSONL columns) keep per-run state in locals and share the
finding helpers; the analysis-engine issue replaces both with one columnar path (DuckDB), so
this module is not split further. The report types live in ``report``.

Signatures are computed on normalized args (``Normalizer``) and cached on the raw call's
bytes, so the normalizer runs once per distinct raw call, not once per line. Seed-JSONL
traces come packed (``feed_packed``): the packer, maybe in a second process, has already
turned each call into a form number, which the analysis maps to a signature.
"""

from __future__ import annotations

import sys
from collections import deque
from collections.abc import Iterable
from typing import Any

import orjson

from ..canonical import canonical_json, changed_paths
from ..record import Record, call_args
from .config import AnalysisConfig
from .normalize import MemoNormalizer
from .packed import FormTable, Packed
from .report import Divergence, Finding, Report

__all__ = ["SIDE_A", "SIDE_B", "Analyzer", "Divergence", "Finding", "Report"]

SIDE_A = 1
SIDE_B = 2
_MAX_VARIANTS = 16
_VOLATILE_CACHE = 1 << 14
_WRITES = frozenset({"write", "irreversible"})
_SORT = orjson.OPT_SORT_KEYS


def _brief(args: Any, width: int = 60) -> str:
    """Arguments as a short JSON text, so lines about different calls read differently."""
    text = canonical_json(args)
    return text if len(text) <= width else text[: width - 1] + "…"


class _Sig:
    """A normalized call signature and the outputs seen for it."""

    __slots__ = ("args", "kind", "name", "outs", "resource", "sides")

    def __init__(self, kind: str, name: str, args: Any, resource: str | None):
        self.kind = kind
        self.name = name
        self.args = args
        self.resource = resource
        self.outs: dict[str | None, _Variant] = {}
        self.sides = 0


class _Variant:
    """One output of a signature: where it was first seen and whether a write preceded it.

    ``ok`` is true once the output was seen in a read not preceded by a local write to the
    resource (``clean``) in a run whose calls all carried effect tags (``certain``).
    """

    __slots__ = ("certain", "clean", "line", "ok", "run", "sides", "step", "untagged")

    def __init__(self, run: str, step: int | None, line: int, sides: int):
        self.run, self.step, self.line, self.sides = run, step, line, sides
        # ``untagged``: uncertain because the run's calls lack effect tags
        self.clean = self.certain = self.untagged = self.ok = False


class _Run:
    """Per-run state, dropped when the run is finished."""

    __slots__ = (
        "calls",
        "id",
        "max_step",
        "repeats",
        "seen",
        "side",
        "step",
        "step_calls",
        "step_first_line",
        "steps",
        "tokens",
        "track",
        "untagged",
        "writes",
    )

    def __init__(self, run_id: str, side: int, track: int):
        self.id = run_id
        self.side = side
        self.track = track
        self.calls = 0
        self.tokens = 0
        self.steps = 0
        self.max_step = 0
        self.step: int | None = None
        self.step_calls: list[int] = []
        self.step_first_line = 0
        self.seen: dict[int, tuple[Any, ...]] = {}  # sid -> (step, out, line, effect)
        self.repeats: dict[int, list[Any]] = {}
        self.writes: dict[str | None, int | None] = {}
        self.untagged = False


class Analyzer:
    """Stream events through ``feed`` and get a ``Report`` from ``finish``.

    ``compare`` turns on the two-sided findings (divergence and mock replay). Records are
    fed per side (``SIDE_A`` is the baseline, ``SIDE_B`` the candidate); ``baseline`` and
    ``candidate`` name the runs aligned for the first divergence (default: the first run seen
    on each side). With ``runs=(A, B)`` and ``side=None``, one file's events are split: run A
    is side A, run B side B, other runs are ignored.

    >>> from tracetape import Record
    >>> an = Analyzer(compare=False)
    >>> calls = [Record(kind="tool", run="r", step=1, name="ls", input={"args": {"d": "/"}},
    ...                 out_digest="x", line=i) for i in (1, 2)]
    >>> an.feed(calls, SIDE_A)
    2
    >>> [f.message for f in an.finish().findings]
    ['repeat: r step 1 == step 1 (same args, same output)']
    """

    def __init__(
        self,
        config: AnalysisConfig | None = None,
        *,
        compare: bool = True,
        baseline: str | None = None,
        candidate: str | None = None,
        runs: tuple[str, str] | None = None,
        inputs: Iterable[str] = (),
    ):
        self.config = config or AnalysisConfig()
        self.compare = compare
        self.inputs = list(inputs)
        self.select = runs
        self.baseline = runs[0] if runs else baseline
        self.candidate = runs[1] if runs else candidate
        self._raw: dict[bytes, int] = {}
        self._raw_volatile: dict[bytes, int] = {}
        self._ids: dict[bytes, int] = {}
        self._normalize = MemoNormalizer(self.config.normalizer)
        self._resource_rank: dict[str, int] = {}
        for i, name in enumerate(self.config.resource_keys):
            self._resource_rank.setdefault(name, i)  # earlier resource keys win
        self._sigs: list[_Sig] = []
        self._outs: list[dict[str | None, _Variant]] = []  # _sigs[sid].outs, one lookup less
        # Per signature id, what the hot loops read of _sigs (lists: no object to fetch).
        self._names: list[str] = []
        self._resources: list[str | None] = []
        # Per signature id, one output whose variant is settled (stored and clean for good)
        # and the sides it was seen on: a line with that output on such a side needs no
        # variant work, and the check touches no dict.
        self._settled_out: list[str | None] = []
        self._settled_sides = bytearray()
        self._runs: dict[tuple[int | None, str], _Run] = {}
        self._reopened = 0
        self._events = 0
        self._nruns = 0
        self._findings: dict[str, list[Finding]] = {}
        self._counts: dict[str, int] = {}
        self._queues: dict[int, deque[tuple[int, Record]]] = {SIDE_A: deque(), SIDE_B: deque()}
        self._aligned = 0
        self._divergence: Divergence | None = None
        self._stats: dict[int, dict[str, Any]] = {}
        self._seen_runs: dict[str, int] = {}
        limits = self.config.limits
        self._step_min = min(limits.max_calls_per_step, limits.exploration)
        self.skipped = 0
        self.skipped_examples: list[str] = []

    @property
    def seen_runs(self) -> dict[str, int]:
        """Every run id seen so far and the sides it was seen on (a bit mask; 0: ignored)."""
        return self._seen_runs

    # -- signatures ----------------------------------------------------------------------------

    def _resource(self, args: Any) -> str | None:
        if isinstance(args, dict):
            rank = self._resource_rank
            best: tuple[int, str] | None = None
            for name, value in args.items():
                r = rank.get(name)
                if (
                    r is not None
                    and (best is None or r < best[0])
                    and isinstance(value, str | int)
                    and not isinstance(value, bool)
                ):
                    best = (r, str(value))
            return best[1] if best else None
        return None

    def _intern(self, kind: str, name: str, normalized: Any) -> int:
        """The id of a normalized signature, a new one the first time it is seen."""
        try:
            key = orjson.dumps((kind, name, normalized), option=_SORT)
        except TypeError:
            key = canonical_json((kind, name, normalized)).encode()
        sid = self._ids.get(key)
        if sid is None:
            sid = self._ids[bytes(bytearray(key))] = len(self._sigs)
            sig = _Sig(kind, sys.intern(name), normalized, self._resource(normalized))
            self._sigs.append(sig)
            self._outs.append(sig.outs)
            self._names.append(sig.name)
            self._resources.append(sig.resource)
            self._settled_out.append(None)
            self._settled_sides.append(0)
        return sid

    def _sig(self, raw: bytes, kind: str, name: str, args: Any) -> int:
        """Intern a call's normalized signature (slow path: once per distinct raw call)."""
        normalized = self._normalize(args)
        sid = self._intern(kind, name, normalized)
        # Raw calls that normalization left unchanged recur (they are the call itself); those
        # it changed carry a fresh UUID or time and rarely do, so they share a small cache that
        # is dropped when full. Memory stays proportional to the distinct signatures.
        if normalized == args:
            cache = self._raw
        else:
            cache = self._raw_volatile
            if len(cache) >= _VOLATILE_CACHE:
                cache.clear()
        # orjson's bytes keep their over-allocated buffer (KiBs): store a compact copy.
        cache[bytes(bytearray(raw))] = sid
        return sid

    # -- the hot loop --------------------------------------------------------------------------

    def feed(self, events: Iterable[Record], side: int | None) -> int:
        """Consume events of one side (``None``: split by run as ``runs`` says); count them."""
        # The hot loop: per-run fields live in locals and are written back on a run switch.
        raw_cache, volatile_cache = self._raw, self._raw_volatile
        sigs, dumps = self._sigs, orjson.dumps
        runs = self._runs
        writes_kinds = _WRITES
        step_min = self._step_min
        last_id: str | None = None
        r: _Run | None = None
        seen: dict[int, Any] = {}
        step_calls: list[int] = []
        rside = track = 0
        cur_step: int | None = None
        untagged = False
        n = 0
        for ev in events:
            run_id, step, kind, line = ev.run or "", ev.step, ev.kind, ev.line
            effect, tokens, out = ev.effect, ev.tokens, ev.out_digest
            name, args = ev.name or kind, call_args(ev)
            n += 1
            if run_id is not last_id and run_id != last_id:
                if r is not None:
                    r.step = cur_step
                # The same run id in both files names two runs: key runs by side too.
                rkey = (side, run_id)
                r = runs.get(rkey)
                if r is None:
                    r = self._open(rkey, run_id, side)
                else:
                    # Keep the dict in last-touched order so eviction finds the stalest run.
                    del runs[rkey]
                    runs[rkey] = r
                last_id = run_id
                seen, step_calls = r.seen, r.step_calls
                rside, track, cur_step, untagged = r.side, r.track, r.step, r.untagged
            if not rside:
                continue
            try:
                raw = dumps((kind, name, args), option=_SORT)
            except TypeError:
                raw = canonical_json((kind, name, args)).encode()
            sid = raw_cache.get(raw)
            if sid is None:
                sid = volatile_cache.get(raw)
                if sid is None:
                    sid = self._sig(raw, kind, name, args)
            if step != cur_step:
                assert r is not None
                self._new_step(r, step, line, step_min)
                cur_step = step
            step_calls.append(sid)
            if tokens:
                r.tokens += tokens  # type: ignore[union-attr]
            if effect is None and not untagged:
                untagged = r.untagged = True  # type: ignore[union-attr]
            sig = sigs[sid]
            v = sig.outs.get(out)
            if v is None:
                v = self._variant(sid, r, step, line, out)  # type: ignore[arg-type]
            elif not v.ok:
                self._check_clean(v, sig, r)  # type: ignore[arg-type]
            v.sides |= rside
            prev = seen.get(sid)
            if prev is None:
                seen[sid] = (step, out, line, effect)
            else:
                self._repeat(r, sid, prev, step, out)  # type: ignore[arg-type]
            if effect in writes_kinds:
                r.writes[sig.resource] = step  # type: ignore[union-attr]
            if track:
                self._align(track, sid, ev)
        if r is not None:
            r.step = cur_step
        self._events += n
        return n

    def feed_packed(self, chunks: Iterable[Packed], side: int | None, table: FormTable) -> int:
        """``feed`` for the seed-JSONL fast path: packed chunks instead of events.

        The findings are ``feed``'s, computed the same way (a test holds the two equal); only
        the per-line work is cheaper: the packer found each call's normalized form already
        (``table`` maps forms to signature ids), there is no ``Record`` per line, the per-run
        state lives in locals, and a line whose output variant is already settled for its
        signature on its side skips the variant work.
        """
        forms, sid_of = table.forms, table.sids
        outs_of, sigs, resources = self._outs, self._sigs, self._resources
        settled_out, settled_sides = self._settled_out, self._settled_sides
        runs = self._runs
        writes_kinds = _WRITES
        step_min = self._step_min
        last_id: str | None = None
        r: _Run | None = None
        seen: dict[int, Any] = {}
        step_calls: list[int] = []
        rside = track = tokens_sum = 0
        cur_step: int | None = None
        untagged = False
        n = 0
        for chunk in chunks:
            if chunk.forms:
                table.add(chunk.forms)
            start = chunk.line
            n += len(chunk.kids)
            for line, run_id, kid, step, out, effect, tokens in zip(
                range(start, start + len(chunk.kids)),
                chunk.runs,
                chunk.kids,
                chunk.steps,
                chunk.outs,
                chunk.effects,
                chunk.tokens,
                strict=True,
            ):
                if run_id is not last_id and run_id != last_id:
                    if r is not None:
                        r.tokens = tokens_sum
                    rkey = (side, run_id)
                    r = runs.get(rkey)
                    if r is None:
                        r = self._open(rkey, run_id, side)
                    else:
                        # Keep the dict in last-touched order so eviction finds the stalest.
                        del runs[rkey]
                        runs[rkey] = r
                    last_id = run_id
                    seen, step_calls = r.seen, r.step_calls
                    rside, track, cur_step, untagged = r.side, r.track, r.step, r.untagged
                    tokens_sum = r.tokens
                if not rside:
                    continue
                assert r is not None
                sid = sid_of[kid]
                if sid < 0:
                    sid = sid_of[kid] = self._intern("tool", *forms[kid])
                if step != cur_step:
                    # A new step (``_new_step``, inlined: a third of the lines start one).
                    if len(step_calls) > step_min:
                        self._end_step(r)
                    r.calls += len(step_calls)
                    step_calls.clear()
                    r.step = cur_step = step
                    r.steps += 1
                    r.step_first_line = line
                    r.max_step = max(r.max_step, step)
                step_calls.append(sid)
                tokens_sum += tokens
                if effect is None and not untagged:
                    untagged = r.untagged = True
                if not (settled_sides[sid] & rside and out == settled_out[sid]):
                    outs = outs_of[sid]
                    v = outs.get(out)
                    if v is None:
                        v = self._variant(sid, r, step, line, out)
                    elif not v.ok:
                        self._check_clean(v, sigs[sid], r)
                    v.sides |= rside
                    if v.ok and outs.get(out) is v:
                        # Settled: stored, clean for good, and seen on these sides.
                        settled_out[sid] = out
                        settled_sides[sid] = v.sides
                first = (step, out, line, effect)
                prev = seen.setdefault(sid, first)
                if prev is not first:
                    self._repeat(r, sid, prev, step, out)
                if effect in writes_kinds:
                    r.writes[resources[sid]] = step
                if track:
                    name = forms[kid][0]
                    fields = {"run": run_id, "name": name, "step": step, "line": line}
                    ev = Record(kind="tool", out_digest=out, effect=effect, **fields)
                    self._align(track, sid, ev)
        if r is not None:
            r.tokens = tokens_sum
        self._events += n
        return n

    def _new_step(self, r: _Run, step: int | None, line: int, step_min: int) -> None:
        if len(r.step_calls) > step_min:
            self._end_step(r)
        r.calls += len(r.step_calls)
        r.step_calls.clear()
        r.step = step
        r.steps += 1
        r.step_first_line = line
        if step is not None and step > r.max_step:
            r.max_step = step

    def _open(self, rkey: tuple[int | None, str], run_id: str, side: int | None) -> _Run:
        seen = self._seen_runs
        # A run seen before (on this side) but not open was closed: it comes back split.
        if (run_id in seen) if side is None else (seen.get(run_id, 0) & side):
            self._reopened += 1
        if side is None:
            sel = self.select
            if run_id in seen:
                side = seen[run_id]
            elif sel is not None:
                side = SIDE_A if run_id == sel[0] else SIDE_B if run_id == sel[1] else 0
            else:
                side = SIDE_A if not seen else SIDE_B if len(seen) == 1 else 0
        track = 0
        if side and self.compare:
            if side == SIDE_A and (self.baseline == run_id or self.baseline is None):
                self.baseline, track = run_id, SIDE_A
            elif side == SIDE_B and (self.candidate == run_id or self.candidate is None):
                self.candidate, track = run_id, SIDE_B
        if side and not seen.get(run_id, 0) & side:
            self._nruns += 1
        seen[run_id] = seen.get(run_id, 0) | side
        r = _Run(run_id, side, track)
        self._runs[rkey] = r
        if len(self._runs) > self.config.max_open_runs:
            self._close(self._runs.pop(next(iter(self._runs))))
        return r

    def _variant(self, sid: int, r: _Run, step: int | None, line: int, out: str | None) -> _Variant:
        sig = self._sigs[sid]
        v = _Variant(r.id, step, line, 0)
        if len(sig.outs) < _MAX_VARIANTS:
            sig.outs[out] = v
        self._check_clean(v, sig, r)
        return v

    def _check_clean(self, v: _Variant, sig: _Sig, r: _Run) -> None:
        writes = r.writes
        if writes and sig.resource is not None and sig.resource in writes:
            return  # this read follows the run's own write to the same resource
        v.clean = True
        if not writes or (sig.resource is not None and None not in writes):
            # No write came first, or only writes to other named resources.
            v.certain = v.certain or not r.untagged
            v.untagged = v.untagged or r.untagged
        v.ok = v.certain

    def _repeat(
        self, r: _Run, sid: int, first: tuple[Any, ...], step: int | None, out: str | None
    ) -> None:
        rep = r.repeats.get(sid)
        if rep is None:
            # [count, first step, first out, first line, steps (<= 5), same output, effect,
            #  an output change no local write explains]
            fstep, fout, fline, feffect = first
            rep = r.repeats[sid] = [1, fstep, fout, fline, [fstep], True, feffect, False]
        rep[0] += 1
        if len(rep[4]) < 5:
            rep[4].append(step)
        if out != rep[2]:
            rep[5] = False
            resource = self._sigs[sid].resource
            writes = r.writes
            if not (writes and (None in writes or (resource is not None and resource in writes))):
                rep[7] = True

    def _end_step(self, r: _Run) -> None:
        calls = r.step_calls
        limits = self.config.limits
        if len(calls) > limits.max_calls_per_step:
            names: dict[str, int] = {}
            for sid in calls:
                nm = self._names[sid]
                names[nm] = names.get(nm, 0) + 1
            self._add(
                "fanout",
                f"fanout: {r.id} step {r.step}: {len(calls)} tool calls "
                f"(max_calls_per_step {limits.max_calls_per_step})",
                r.id,
                r.step,
                calls=len(calls),
                bound=limits.max_calls_per_step,
                by_tool=names,
                line=r.step_first_line,
            )
        # Exploration needs more than ``exploration`` distinct args of one tool, so first more
        # than that many distinct calls at all, and then of one tool (counted in C).
        bound = limits.exploration
        if len(calls) <= bound:
            return
        unique = set(calls)
        tools = list(map(self._names.__getitem__, unique)) if len(unique) > bound else []
        if tools and max(map(tools.count, set(tools))) > bound:
            distinct: dict[str, set[int]] = {}
            for sid in calls:
                distinct.setdefault(self._names[sid], set()).add(sid)
            for nm, sids in distinct.items():
                if len(sids) > limits.exploration:
                    self._add(
                        "exploration",
                        f"exploration: {r.id} step {r.step}: {nm} called with {len(sids)} "
                        f"different args (bound {limits.exploration})",
                        r.id,
                        r.step,
                        tool=nm,
                        distinct_args=len(sids),
                        bound=limits.exploration,
                        examples=[self._sigs[s].args for s in list(sids)[:3]],
                    )

    # -- alignment -----------------------------------------------------------------------------

    def _align(self, track: int, sid: int, ev: Record) -> None:
        if self._divergence is not None:
            return
        other = self._queues[SIDE_B if track == SIDE_A else SIDE_A]
        if not other:
            self._queues[track].append((sid, ev))
            return
        osid, oev = other.popleft()
        if osid == sid:
            self._aligned += 1
            return
        a, b = ((sid, ev), (osid, oev)) if track == SIDE_A else ((osid, oev), (sid, ev))
        self._diverge(a, b)

    def _call(self, sid: int, ev: Record) -> dict[str, Any]:
        sig = self._sigs[sid]
        return {
            "run": ev.run,
            "step": ev.step,
            "line": ev.line,
            "kind": sig.kind,
            "name": sig.name,
            "args": sig.args,
            "out": ev.out_digest,
            "effect": ev.effect,
        }

    def _diverge(self, a: tuple[int, Record] | None, b: tuple[int, Record] | None) -> None:
        position = self._aligned + 1
        ca = self._call(*a) if a else None
        cb = self._call(*b) if b else None
        if ca and cb:
            before = {"kind": ca["kind"], "name": ca["name"], "args": ca["args"]}
            after = {"kind": cb["kind"], "name": cb["name"], "args": cb["args"]}
            changes = changed_paths(before, after, limit=20)
        else:
            changes = []
        self._divergence = Divergence(position, ca, cb, changes)
        writes = any(c and c["effect"] in _WRITES for c in (ca, cb))
        if ca and cb:
            what = ", ".join(c.path for c in changes[:3]) or "the call"
            text = f"{ca['name']} (step {ca['step']}) vs {cb['name']} (step {cb['step']})"
            text += f"; changed: {what}"
        elif ca:
            text = f"{self.candidate} ended; {self.baseline} goes on with {ca['name']}"
            text += f" (step {ca['step']})"
        else:
            assert cb is not None
            text = f"{self.baseline} ended; {self.candidate} goes on with {cb['name']}"
            text += f" (step {cb['step']})"
        self._add(
            "divergent-write" if writes else "divergence",
            f"first divergence: call #{position}: {text}",
            (cb or ca or {}).get("run"),
            (cb or ca or {}).get("step"),
            **self._divergence.to_dict(),
        )
        self._queues[SIDE_A].clear()
        self._queues[SIDE_B].clear()

    # -- run end -------------------------------------------------------------------------------

    def _close(self, r: _Run) -> None:
        if len(r.step_calls) > self._step_min:
            self._end_step(r)
        r.calls += len(r.step_calls)
        r.step_calls.clear()
        if r.side == 0:
            return
        limits = self.config.limits
        if r.track:
            self._stats[r.track] = {
                "run": r.id,
                "calls": r.calls,
                "steps": r.steps,
                "max_step": r.max_step,
                "tokens": r.tokens,
            }
        for sid, (count, first, out, line, steps, same, effect, unexplained) in r.repeats.items():
            if count < 2:
                continue
            sig = self._sigs[sid]
            if count - 1 > limits.max_repeats:
                self._add(
                    "repeat-budget",
                    f"repeat budget: {r.id} {sig.name} {_brief(sig.args)} ran {count} times "
                    f"(max_repeats {limits.max_repeats})",
                    r.id,
                    first,
                    tool=sig.name,
                    args=sig.args,
                    count=count,
                    steps=steps,
                    bound=limits.max_repeats,
                )
            if same:
                pattern, what = (
                    ("duplicate-write" if effect in _WRITES else "duplicate-call"),
                    "same",
                )
            elif unexplained:
                pattern, what = "repeat-changed-output", "different"
            else:
                continue  # the output changed after a local write: drift reports the echo
            ev_steps = " == ".join(f"step {s}" for s in steps)
            times = f" ({count} calls)" if count > len(steps) or count > 2 else ""
            self._add(
                pattern,
                f"repeat: {r.id} {ev_steps}{times} (same args, {what} output)",
                r.id,
                first,
                tool=sig.name,
                args=sig.args,
                count=count,
                steps=steps,
                output=out,
                line=line,
                effect=effect,
            )
        steps_taken = max(r.max_step, r.steps)
        if r.calls > limits.max_calls:
            self._add(
                "call-budget",
                f"call budget: {r.id} made {r.calls} calls (max_calls {limits.max_calls})",
                r.id,
                None,
                calls=r.calls,
                bound=limits.max_calls,
            )
        if r.tokens > limits.max_tokens:
            self._add(
                "token-budget",
                f"token budget: {r.id} used {r.tokens} tokens (max_tokens {limits.max_tokens})",
                r.id,
                None,
                tokens=r.tokens,
                bound=limits.max_tokens,
            )
        if steps_taken > limits.max_steps:
            self._add(
                "step-budget",
                f"step budget: {r.id} took {steps_taken} steps (max_steps {limits.max_steps})",
                r.id,
                None,
                steps=steps_taken,
                bound=limits.max_steps,
            )
        elif steps_taken == limits.max_steps:
            self._add(
                "step-budget-hit",
                f"step budget hit: {r.id} stopped at step {steps_taken} = max_steps",
                r.id,
                None,
                steps=steps_taken,
                bound=limits.max_steps,
            )

    def _add(
        self, pattern: str, message: str, run: str | None, step: int | None, **evidence: Any
    ) -> None:
        self._counts[pattern] = self._counts.get(pattern, 0) + 1
        kept = self._findings.setdefault(pattern, [])
        if len(kept) >= self.config.max_examples:
            return
        rule = self.config.rules[pattern]
        kept.append(Finding(pattern, rule.severity, message, rule.fix, run, step, evidence))

    def _drift(self) -> None:
        for sig in self._sigs:
            if len(sig.outs) < 2:
                continue
            variants = list(sig.outs.items())
            clean = [o for o, v in variants if v.clean]
            if len(clean) <= 1:
                pattern, cause = "write-echo", "the changed output follows the run's own write"
            elif all(sig.outs[o].certain for o in clean):
                pattern, cause = "external-drift", "no local write to the resource came first"
            else:
                pattern = "drift"
                if any(sig.outs[o].untagged for o in clean):
                    cause = (
                        "undetermined: the trace has no effect tags (read/write) for these calls"
                    )
                else:
                    cause = (
                        "undetermined: a write came first in the run, and the call or the write "
                        "names no resource (see resource_keys)"
                    )
            runs = {v.run for _, v in variants}
            self._add(
                pattern,
                f"drift: {sig.name} -> {len(variants)} distinct outputs",
                variants[0][1].run if len(runs) == 1 else None,
                None,
                tool=sig.name,
                kind=sig.kind,
                args=sig.args,
                resource=sig.resource,
                within_run=len(runs) == 1,
                cause=cause,
                outputs=[
                    {
                        "out": o,
                        "run": v.run,
                        "step": v.step,
                        "line": v.line,
                        "after_write": not v.clean,
                    }
                    for o, v in variants
                ],
            )

    def _replay(self) -> dict[str, int]:
        unique = mismatches = unrecorded = 0
        miss_examples: list[dict[str, Any]] = []
        mismatch_examples: list[dict[str, Any]] = []
        for sig in self._sigs:
            in_b = [o for o, v in sig.outs.items() if v.sides & SIDE_B]
            if not in_b:
                continue
            unique += 1
            in_a = {o for o, v in sig.outs.items() if v.sides & SIDE_A}
            call = {"tool": sig.name, "kind": sig.kind, "args": sig.args}
            if not in_a:
                unrecorded += 1
                if len(miss_examples) < 10:
                    miss_examples.append(call)
            elif any(o not in in_a for o in in_b):
                mismatches += 1
                if len(mismatch_examples) < 10:
                    mismatch_examples.append(
                        {**call, "recorded": sorted(map(str, in_a)), "live": sorted(map(str, in_b))}
                    )
        if mismatches:
            self._add(
                "replay-mismatch",
                f"replay: {mismatches} recorded call(s) of the baseline return another output "
                "in the candidate",
                None,
                None,
                mismatches=mismatches,
                examples=mismatch_examples,
            )
        if unrecorded:
            self._add(
                "replay-miss",
                f"replay: {unrecorded} call(s) of the candidate were never recorded in the "
                "baseline",
                None,
                None,
                unrecorded=unrecorded,
                examples=miss_examples,
            )
        return {"unique": unique, "mismatches": mismatches, "unrecorded": unrecorded}

    def finish(self) -> Report:
        """Close every open run, compute the cross-run findings and return the report."""
        for r in list(self._runs.values()):
            self._close(r)
        self._runs.clear()
        replay = None
        if self.compare:
            qa, qb = self._queues[SIDE_A], self._queues[SIDE_B]
            if self._divergence is None and (qa or qb):
                self._diverge(qa[0] if qa else None, qb[0] if qb else None)
            replay = self._replay()
        self._drift()
        order = {"divergent-write": 0, "divergence": 0}
        findings = [f for kept in self._findings.values() for f in kept]
        findings.sort(key=lambda f: (-f.severity.rank, order.get(f.pattern, 1), f.pattern))
        limits = self.config.limits
        return Report(
            inputs=self.inputs,
            findings=findings,
            counts=dict(sorted(self._counts.items())),
            runs=self._nruns,
            events=self._events,
            baseline=self._stats.get(SIDE_A) or ({"run": self.baseline} if self.compare else None),
            candidate=self._stats.get(SIDE_B)
            or ({"run": self.candidate} if self.compare else None),
            divergence=self._divergence,
            aligned=self._aligned,
            replay=replay,
            skipped=self.skipped,
            skipped_examples=self.skipped_examples,
            reopened_runs=self._reopened,
            limits={k: getattr(limits, k) for k in limits.__dataclass_fields__},
            signatures=len(self._sigs),
        )
