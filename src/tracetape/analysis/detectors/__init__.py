"""The detectors: each finding is one small query over the engine's ``calls`` table.

A detector is a module of this package with a function ``find(Context) -> None`` that adds
what it finds to ``ctx.found``: for each pattern the exact count, and the first
``max_examples`` findings in the order of their evidence in the input (the files in the order
given, then call order; per-run findings by the run's first call). Only the examples are
fetched from the engine, so a pattern found a million times costs one count, not a million
rows.

Each module declares the tables it reads (``READS``: the engine's ``calls``, ``runs``,
``sigs``, or another detector's) and creates (``CREATES``), and its ``PATTERNS``; where the
report puts them is declared too (``SEED_LINES``, ``LEADS``, ``APART``: see ``Declared``).
The order they run in and the report's order follow from those declarations, so a new rule
is one module here and its row in ``rules.RULES``:

=================  ===================================================================
module             patterns
=================  ===================================================================
``steps``          ``fanout``, ``exploration`` (step segments of each run)
``repeats``        ``duplicate-call``, ``duplicate-write``, ``repeat-changed-output``,
                   ``repeat-budget``
``budgets``        ``call-budget``, ``token-budget``, ``step-budget``, ``step-budget-hit``
``variants``       none: each signature's outputs, read by ``drift`` and ``replay``
``drift``          ``drift``, ``external-drift``, ``write-echo``
``replay``         ``replay-mismatch``, ``replay-miss`` (diff only)
``divergence``     ``divergence``, ``divergent-write`` (diff only)
=================  ===================================================================

``detect`` runs them in chains (``chains``: a detector after those whose tables it reads;
chains share no table one creates), two threads taking the chains in turn, each on a cursor
of its own (DuckDB lets go of the GIL while a query runs): the Python work of one detector
and the queries of another overlap, and a query that keeps one core busy leaves the other
to the next chain.
"""

from __future__ import annotations

import importlib
import pkgutil
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import cache, partial
from types import ModuleType
from typing import Any

from ...canonical import canonical_json
from ..config import AnalysisConfig
from ..engine import Background, Calls
from ..report import Divergence, Finding, Origin, Outcome, redacted
from ..rules import Severity

__all__ = [
    "Context",
    "Declared",
    "apart",
    "brief",
    "chains",
    "declared",
    "detect",
    "detectors",
    "leading",
    "seed_order",
]

SIDE_A = 1
SIDE_B = 2


def brief(args: Any, width: int = 60) -> str:
    """Arguments as a short JSON text, so lines about different calls read differently;
    redacted before it is cut (a secret cut short is no longer found)."""
    text = canonical_json(redacted(args))
    return text if len(text) <= width else text[: width - 1] + "…"


@dataclass
class Context:
    """What the detectors share: the calls, the settings, the runs compared, and the
    findings so far (``counts`` exact, ``examples`` capped per pattern)."""

    calls: Calls
    config: AnalysisConfig
    compare: bool
    baseline: str | None = None
    candidate: str | None = None
    counts: dict[str, int] = field(default_factory=dict)
    examples: dict[str, list[Finding]] = field(default_factory=dict)
    divergence: Divergence | None = None
    aligned: int = 0
    replay: dict[str, int] | None = None
    roots: list[Origin] = field(default_factory=list)
    outcome: Outcome | None = None

    @property
    def limit(self) -> int:
        """The examples kept per pattern."""
        return self.config.max_examples

    def count(self, pattern: str, n: int) -> None:
        """Add ``n`` findings of ``pattern`` to the exact count."""
        if n:
            self.counts[pattern] = self.counts.get(pattern, 0) + n

    def add(
        self,
        pattern: str,
        message: str,
        run: str | None,
        step: int | None,
        *,
        call: int | None = None,
        severity: Severity | None = None,
        fix: str | None = None,
        evidence: dict[str, Any] | None = None,
        **more: Any,
    ) -> None:
        """Keep one example finding of ``pattern`` (counted by ``count``), in order: at
        ``call`` (the call's position in its run) and ``step``, of the rule table's severity
        and fix unless given, with ``evidence`` (and ``more`` of it)."""
        kept = self.examples.setdefault(pattern, [])
        if len(kept) < self.limit:
            rule = self.config.rules[pattern]
            kept.append(
                Finding(
                    pattern,
                    severity or rule.severity,
                    message,
                    fix or rule.fix,
                    run,
                    step,
                    {**(evidence or {}), **more},
                    call,
                )
            )

    def positions(self, calls: list[tuple[int, int]]) -> dict[int, int]:
        """The position of each call (its ord, and its run's first call: ``rf``) in its run
        (1-based, in call order: how a diff counts calls)."""
        if not calls:
            return {}
        firsts = sorted({rf for _, rf in calls})
        # A run whose calls are one stretch of its input (no other run's between them) gives
        # a call's position from its ord; the others', from one window over their calls.
        packed = {
            rf
            for rf, whole in self.calls.rows(
                "SELECT first, last - first + 1 = calls FROM runs "
                "WHERE first IN (SELECT unnest($1::BIGINT[]))",
                [firsts],
            )
            if whole
        }
        out = {o: o - rf + 1 for o, rf in calls if rf in packed}
        rest = sorted({o for o, rf in calls if rf not in packed})
        if rest:
            out |= dict(
                self.calls.rows(
                    """
                    SELECT ord, pos FROM (
                        SELECT ord, row_number() OVER (PARTITION BY rf ORDER BY ord) AS pos
                        FROM calls WHERE rf IN (SELECT unnest($2::BIGINT[])))
                    WHERE ord IN (SELECT unnest($1::BIGINT[]))
                    """,
                    [rest, sorted({rf for o, rf in calls if rf not in packed})],
                )
            )
        return out


Detector = Callable[[Context], None]

# The tables ``Calls.prepare`` builds for the detectors (``calls``, ``runs``, ``sigs``).
ENGINE_TABLES = frozenset({"calls", "runs", "sigs"})


@dataclass(frozen=True)
class Declared:
    """A detector module as it declares itself: the tables it reads and creates, the
    patterns it finds, and where the report puts them (``SEED_LINES``: the seed's text
    report printed these first, numbered across modules; ``LEADS``: first among the
    findings of a severity; ``APART``: the text report shows them in a section of their
    own)."""

    name: str
    find: Detector
    reads: frozenset[str]
    creates: frozenset[str]
    patterns: tuple[str, ...]
    seed_lines: dict[str, int]
    leads: bool
    apart: bool

    @classmethod
    def of(cls, module: ModuleType) -> Declared:
        """The declaration of a detector module (its ``READS``, ``CREATES``, ``PATTERNS``,
        ``find``; ``SEED_LINES``, ``LEADS`` and ``APART`` where it has them)."""
        name = module.__name__.rsplit(".", 1)[-1]
        try:
            find, reads, creates = module.find, module.READS, module.CREATES
            patterns = module.PATTERNS
        except AttributeError as exc:
            raise TypeError(
                f"detector module {name!r} must declare READS, CREATES, PATTERNS and find: {exc}"
            ) from None
        return cls(
            name,
            find,
            frozenset(reads),
            frozenset(creates),
            tuple(patterns),
            dict(getattr(module, "SEED_LINES", {})),
            bool(getattr(module, "LEADS", False)),
            bool(getattr(module, "APART", False)),
        )


@cache
def declared() -> tuple[Declared, ...]:
    """Every module of this package, as it declares itself, by name. Each module is
    imported here, when asked."""
    modules = sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.ispkg)
    return tuple(Declared.of(importlib.import_module(f"{__name__}.{m}")) for m in modules)


def chains(modules: Sequence[Declared]) -> list[list[Declared]]:
    """The detectors in chains: a detector that reads a table another creates runs after it,
    in the same chain; chains share no table one of them creates, so they may run at once.
    Each chain in a topological order (ties by name), the longest chain first (ties by its
    first detector's name). A table read that neither the engine nor a detector creates, a
    table two detectors create, or a circle is an error."""
    maker: dict[str, Declared] = {}
    for d in modules:
        for table in d.creates:
            if table in maker or table in ENGINE_TABLES:
                other = maker[table].name if table in maker else "the engine"
                raise TypeError(f"detectors {other!r} and {d.name!r} both create {table!r}")
            maker[table] = d
    before: dict[str, set[str]] = {d.name: set() for d in modules}
    for d in modules:
        for table in d.reads:
            if table not in maker and table not in ENGINE_TABLES:
                raise TypeError(f"detector {d.name!r} reads {table!r}, which nothing creates")
            if table in maker and maker[table] is not d:
                before[d.name].add(maker[table].name)
    # Chains: the detectors joined by a table, one creating it and one reading it.
    group = {d.name: d.name for d in modules}

    def root(name: str) -> str:
        while group[name] != name:
            name = group[name]
        return name

    for name, firsts in before.items():
        for first in firsts:
            group[root(name)] = root(first)
    by_name = {d.name: d for d in modules}
    ordered: dict[str, list[Declared]] = {}
    waiting = {name: set(firsts) for name, firsts in before.items()}
    while waiting:
        ready = sorted(name for name, firsts in waiting.items() if not firsts)
        if not ready:
            raise TypeError(f"detectors wait on each other in a circle: {sorted(waiting)}")
        for name in ready:
            del waiting[name]
            ordered.setdefault(root(name), []).append(by_name[name])
            for firsts in waiting.values():
                firsts.discard(name)
    return sorted(ordered.values(), key=lambda chain: (-len(chain), chain[0].name))


@cache
def detectors() -> tuple[tuple[Detector, ...], ...]:
    """Every detector, in chains that create no table another chain reads (``chains``)."""
    return tuple(tuple(d.find for d in chain) for chain in chains(declared()))


@cache
def seed_order() -> tuple[str, ...]:
    """The patterns the text report lists first, in the seed's order (``SEED_LINES``)."""
    lines = {p: n for d in declared() for p, n in d.seed_lines.items()}
    return tuple(sorted(lines, key=lines.__getitem__))


@cache
def leading() -> frozenset[str]:
    """The patterns the report puts first among the findings of a severity (``LEADS``)."""
    return frozenset(p for d in declared() if d.leads for p in d.patterns)


@cache
def apart() -> frozenset[str]:
    """The patterns the text report shows in sections of their own (``APART``)."""
    return frozenset(p for d in declared() if d.apart for p in d.patterns)


# The threads that run chains at once: two keep two cores busy (a third thread made the
# queries of the others wait).
_WORKERS = 2


def detect(ctx: Context) -> None:
    """Run every detector on ``ctx``: when the engine allows it (``Calls.concurrent``), two
    threads take the chains in turn, each thread on a cursor of its own (a chain that ends
    early leaves its thread to the next); else one chain after another. The report does not
    depend on which finishes first: each pattern is one detector's, and findings are
    ordered by their evidence."""
    chains = detectors()
    if not ctx.calls.concurrent:
        for chain in chains:
            for find in chain:
                find(ctx)
        return
    pending = iter(chains)
    lock = threading.Lock()
    forks = [replace(ctx, calls=ctx.calls.fork()) for _ in range(_WORKERS)]

    def work(sub: Context) -> None:
        try:
            while True:
                with lock:
                    chain = next(pending, None)
                if chain is None:
                    return
                for find in chain:
                    find(sub)
        finally:
            sub.calls.con.close()

    jobs = [Background(partial(work, sub)) for sub in forks]
    failures = []
    for job in jobs:  # every thread ends before any failure is raised
        try:
            job.wait()
        except BaseException as exc:
            failures.append(exc)
    if failures:
        raise failures[0]
    for sub in forks:  # what a detector sets besides its findings
        ctx.divergence = ctx.divergence or sub.divergence
        ctx.aligned = ctx.aligned or sub.aligned
        ctx.replay = ctx.replay or sub.replay
        ctx.roots = ctx.roots or sub.roots
        ctx.outcome = ctx.outcome or sub.outcome
