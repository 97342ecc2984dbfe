"""The detectors as they declare themselves: chains, their order and the report's order
follow from each module's ``READS``, ``CREATES`` and ``PATTERNS``, and the declarations are
true to the module's SQL."""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from types import ModuleType

import pytest

from tests.analysis.helpers import call, write_jsonl
from tracetape.analysis import AnalysisConfig, check_trace, detectors
from tracetape.analysis.detectors import ENGINE_TABLES, Declared, chains, declared
from tracetape.analysis.rules import RULES


def _names(chain_list: list[list[Declared]]) -> list[list[str]]:
    return [[d.name for d in chain] for chain in chain_list]


def _module(name: str, **attributes: object) -> ModuleType:
    module = ModuleType(f"tracetape.analysis.detectors.{name}")
    module.find = lambda ctx: None  # type: ignore[attr-defined]
    module.__dict__.update(attributes)
    return module


def test_the_chains_follow_from_the_tables() -> None:
    """variants creates what drift and replay read, so they run after it in its chain; the
    others share no table and run in chains of their own, the longest chain first."""
    assert _names(chains(declared())) == [
        ["variants", "drift", "replay"],
        ["budgets"],
        ["divergence"],
        ["repeats"],
        ["steps"],
    ]


def test_each_chain_reads_only_what_comes_before_it_and_creates_apart() -> None:
    every = chains(declared())
    for i, chain in enumerate(every):
        seen: set[str] = set()
        for d in chain:
            for table in d.reads - ENGINE_TABLES:
                assert table in seen, f"{d.name} reads {table} before it is created"
            seen |= d.creates
        others = {t for j, c in enumerate(every) if j != i for e in c for t in e.reads | e.creates}
        assert not (seen & others), f"chain {i} creates a table another chain uses"


_TABLE_WORDS = re.compile(r"\b(?:FROM|JOIN)\s+([a-z_][a-z0-9_]*)", re.IGNORECASE)
_CREATED = re.compile(r"CREATE\s+TABLE\s+([a-z_][a-z0-9_]*)", re.IGNORECASE)


@pytest.mark.parametrize("d", declared(), ids=lambda d: d.name)
def test_a_declaration_is_true_to_its_sql(d: Declared) -> None:
    """Every table the module's SQL creates is declared in CREATES (and no other), and every
    table of the analysis it reads (the engine's or a detector's) in READS."""
    source = inspect.getsource(inspect.getmodule(d.find))  # type: ignore[arg-type]
    assert set(_CREATED.findall(source)) == set(d.creates)
    known = ENGINE_TABLES | {t for e in declared() for t in e.creates}
    read = {t for t in _TABLE_WORDS.findall(source) if t in known} - d.creates
    if "facts(" in source:
        read.add("calls")  # Calls.facts reads the calls it is given
    assert read == set(d.reads)


def test_every_pattern_is_one_modules_and_has_its_row() -> None:
    owners: dict[str, str] = {}
    for d in declared():
        for pattern in d.patterns:
            assert pattern not in owners, f"{pattern} in {owners.get(pattern)} and {d.name}"
            owners[pattern] = d.name
    assert set(owners) == set(RULES)


def test_the_report_order_follows_the_declarations() -> None:
    assert detectors.seed_order() == (
        "duplicate-call",
        "duplicate-write",
        "repeat-changed-output",
        "write-echo",
        "external-drift",
        "drift",
        "model-drift",
    )
    assert detectors.leading() == {"divergence", "divergent-write"}
    assert detectors.apart() == {"divergence", "divergent-write", "replay-mismatch", "replay-miss"}


def test_a_new_module_finds_its_place() -> None:
    """A detector that reads what repeats creates joins repeats' chain, after it; one that
    reads only the engine's tables runs in a chain of its own."""
    added = [
        Declared.of(_module("zlate", READS=("repeats", "calls"), CREATES=(), PATTERNS=())),
        Declared.of(_module("alone", READS=("runs",), CREATES=("mine",), PATTERNS=())),
    ]
    assert _names(chains([*declared(), *added])) == [
        ["variants", "drift", "replay"],
        ["repeats", "zlate"],
        ["alone"],
        ["budgets"],
        ["divergence"],
        ["steps"],
    ]


@pytest.mark.parametrize(
    ("modules", "said"),
    [
        (
            [
                _module("a", READS=("b_t",), CREATES=("a_t",)),
                _module("b", READS=("a_t",), CREATES=("b_t",)),
            ],
            "circle",
        ),
        ([_module("a", READS=("nobody",), CREATES=())], "reads 'nobody', which nothing creates"),
        (
            [_module("a", READS=(), CREATES=("t",)), _module("b", READS=(), CREATES=("t",))],
            "both create 't'",
        ),
        ([_module("a", READS=(), CREATES=("calls",))], "'the engine' and 'a' both create 'calls'"),
    ],
)
def test_a_wrong_declaration_is_refused(modules: list[ModuleType], said: str) -> None:
    for module in modules:
        module.PATTERNS = ()  # type: ignore[attr-defined]
    with pytest.raises(TypeError, match=re.escape(said)):
        chains([Declared.of(m) for m in modules])


def test_a_module_that_declares_nothing_is_named() -> None:
    with pytest.raises(TypeError, match="detector module 'bare' must declare READS"):
        Declared.of(_module("bare"))


def test_examples_are_capped_but_counts_are_exact(tmp_path: Path) -> None:
    """Past max_examples a pattern's findings are counted but not all kept; the first ones
    in the input are kept."""
    records = [call(f"r{r:02d}", s, "s", {}, "o") for r in range(20) for s in (1, 2)]
    path = write_jsonl(tmp_path / "t.jsonl", records)
    report = check_trace(path, config=AnalysisConfig(max_examples=5))
    assert report.counts["duplicate-call"] == 20
    assert [f.run for f in report.findings] == ["r00", "r01", "r02", "r03", "r04"]
