"""``tracetape show`` and ``tracetape verify``: look at one cassette."""

from __future__ import annotations

import json
import sys
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

from ..canonical import changed_paths
from ..errors import CassetteError, NotACassetteError
from ..formats.cassette import Cassette, read_cassette, verify_seal
from ..matching import Match
from . import exit_codes_help
from ._common import EXIT_BAD_INPUT, EXIT_FAILED, echo_json, handle_errors, output_options


def lineage(cassette: Cassette) -> dict[str, Any]:
    """What a cassette's header and trailer say of its run beyond its records: how it ended,
    the match rules its keys ignore, and for a fork's branch its parent and fork point."""
    header = cassette.header or {}
    found: dict[str, Any] = {"ended": cassette.ended}
    for name in ("match", "parent", "fork"):
        if isinstance(header.get(name), dict):
            found[name] = header[name]
    return found


def lineage_lines(found: Mapping[str, Any]) -> list[str]:
    """``lineage`` as the lines ``show`` and ``verify`` print."""
    lines = []
    ended = found.get("ended")
    if ended and ended != "completed":
        cut = "never closed (killed)" if ended == "unfinished" else ended
        lines.append(f"the recording ended {cut}: replay stops where it stopped")
    match = found.get("match")
    if match:
        rules = "; ".join(f"{k} {', '.join(map(str, v))}" for k, v in match.items() if v)
        lines.append(f"match rules: {rules}")
    parent, fork = found.get("parent"), found.get("fork")
    if parent:
        lines.append(f"branch of {parent.get('path')} (sealed {parent.get('chain') or 'never'})")
    if fork:
        step = f" (step {fork['step']})" if fork.get("step") is not None else ""
        lines.append(f"forked at decision {fork.get('seq')}{step}: {fork.get('reason')}")
    return lines


def _decision(cassette: Cassette, seq: int) -> dict[str, Any]:
    """Decision ``seq`` of ``cassette`` whole, and what its match rules do to its input."""
    found = [r for i, r in enumerate(cassette.records, 1) if (r.seq or i) == seq]
    if not found:
        raise ValueError(
            f"{cassette.path}: no decision #{seq}; it holds {len(cassette.records)} "
            "(tracetape show lists them)"
        )
    rec = found[0]
    data: dict[str, Any] = {
        "seq": seq,
        "key": rec.key,
        "kind": rec.kind,
        "step": rec.step,
        "ms": rec.ms,
        "effect": rec.effect,
        "input": rec.input,
        "out": rec.out,
    }
    rules = Match.coerce((cassette.header or {}).get("match"))
    if rules and rec.input is not None:
        keyed = rules.keyed(rec.input)
        changes = changed_paths(rec.input, keyed, limit=1000)
        data["ignored"] = [c.path for c in changes if c.after is None]
        data["masked"] = [c.path for c in changes if c.after is not None]
    return data


def rows(path: Path) -> list[dict[str, Any]]:
    """The decisions of a cassette as table rows (seq, step, kind, name, ms, key, effect,
    tokens and usage: what the record says, None where it says nothing)."""
    return _rows(read_cassette(path))


def _rows(cassette: Cassette) -> list[dict[str, Any]]:
    return [
        {
            "seq": i if rec.seq is None else rec.seq,
            "step": rec.step,
            "kind": rec.kind,
            "name": rec.name or "",
            "ms": rec.ms,
            "key": rec.key,
            "effect": rec.effect,
            "tokens": rec.tokens,
            "usage": rec.usage,
        }
        for i, rec in enumerate(cassette.records, 1)
    ]


@click.command(short_help="The decisions of a cassette as a table.", epilog=exit_codes_help("show"))
@click.argument("cassette", type=click.Path(path_type=Path))
@click.option(
    "--decision",
    "seq",
    type=click.IntRange(min=1),
    default=None,
    metavar="SEQ",
    help="Print one decision whole (its input and output as recorded), with the paths the "
    "cassette's match rules leave out of its key or mask.",
)
@click.option(
    "--view",
    type=click.Choice(["conversation", "table"]),
    default=None,
    help="conversation: each decision as it reads (what was said, the answer, the calls, the "
    "results); table: a row per decision. Default: conversation on a terminal 100 columns "
    "wide or more, else table.",
)
@output_options
@handle_errors
def show(cassette: Path, seq: int | None, view: str | None, fmt: str) -> None:
    """Print the decisions of CASSETTE as a table: seq, step, kind, tool or model, ms, effect,
    key; above it, how the recording ended (when not completed), its match rules, and for a
    fork's branch its parent and fork point (``--format json``: the rows; ``verify --format
    json`` has the rest)."""
    tape = read_cassette(cassette)
    if seq is not None:
        click.echo(json.dumps(_decision(tape, seq), indent=2, ensure_ascii=False, default=str))
        return
    data = _rows(tape)
    if fmt == "json":
        echo_json(data)
        return
    from rich.console import Console
    from rich.table import Table

    from ._views import default_view, print_steps

    if (view or default_view()) == "conversation":
        from ..views import read_steps

        console = Console(width=None if sys.stdout.isatty() else 120)
        for line in lineage_lines(lineage(tape)):
            console.print(line, markup=False, highlight=False)
        print_steps(console, read_steps(tape.records))
        return

    table = Table(title=str(cassette), title_justify="left")
    for column, justify in [
        ("seq", "right"),
        ("step", "right"),
        ("kind", "left"),
        ("tool / model", "left"),
        ("ms", "right"),
        ("effect", "left"),
        ("key", "left"),
    ]:
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    for row in data:
        ms = row["ms"]
        table.add_row(
            str(row["seq"]),
            "" if row["step"] is None else str(row["step"]),
            row["kind"],
            row["name"],
            "" if ms is None else f"{ms:.1f}",
            row["effect"] or "",
            row["key"],
        )
    console = Console(width=None if sys.stdout.isatty() else 200)
    for line in lineage_lines(lineage(tape)):
        console.print(line, markup=False, highlight=False)
    console.print(table)


@click.command(short_help="A cassette's integrity, in one line.", epilog=exit_codes_help("verify"))
@click.argument("cassette", type=click.Path(path_type=Path))
@output_options
def verify(cassette: Path, fmt: str) -> None:
    """Check CASSETTE's integrity and print a one-line summary.

    A cassette of format 2 is sealed: each record's digest chains to the one before and the
    trailer holds the count, so a changed, deleted, inserted or reordered record is found at its
    line. One without a trailer never closed (unfinished, a killed run); one of format 1 or the
    seed's format 0 carries no digests (unsealed): both are sound as far as can be told, and
    the line says so.
    """
    problems: list[str] = []
    notes: list[str] = []
    not_a_cassette = False
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            tape = read_cassette(cassette)
        except CassetteError as exc:
            problems.append(str(exc))
            not_a_cassette = isinstance(exc, NotACassetteError)
            tape = None
    notes += [str(w.message) for w in caught]
    summary: dict[str, Any] = {"path": str(cassette), "ok": not problems, "problems": problems}
    if tape is not None:
        seal = verify_seal(cassette)
        summary["seal"] = seal.state
        if seal.state == "broken":
            problems.append(f"{cassette}:{seal.line}: {seal.reason}")
        elif seal.state != "sealed":
            if seal.state == "unfinished":  # the torn line is said once, by the seal
                notes = [n for n in notes if "torn last line" not in n]
            notes.append(SEAL_NOTES[seal.state].format(reason=seal.reason))
        kinds: dict[str, int] = {}
        for rec in tape.records:
            kinds[rec.kind] = kinds.get(rec.kind, 0) + 1
        seqs = [rec.seq for rec in tape.records if rec.seq is not None]
        if seqs != sorted(seqs) or len(set(seqs)) != len(seqs):
            problems.append("sequence numbers are not strictly increasing (records were reordered)")
        summary.update(format=tape.format, records=len(tape.records), kinds=kinds)
        summary.update(lineage(tape))
        notes += lineage_lines(lineage(tape))
        summary["ok"] = not problems
    summary["notes"] = notes
    if fmt == "json":
        echo_json(summary)
    elif summary["ok"]:
        counts = ", ".join(f"{n} {k}" for k, n in sorted(summary["kinds"].items())) or "empty"
        state = "sealed" if summary["seal"] == "sealed" else summary["seal"]
        click.echo(
            f"ok: {cassette}: format {summary['format']}, {summary['records']} records "
            f"({counts}), {state}" + "".join(f"; {note}" for note in notes)
        )
    else:
        click.echo(f"corrupt: {problems[0]}")
    if not summary["ok"]:
        missing = tape is None and not Path(cassette).is_file()
        sys.exit(EXIT_BAD_INPUT if missing or not_a_cassette else EXIT_FAILED)


SEAL_NOTES = {
    "unsealed": "its records carry no digests ({reason}), so an edit cannot be found: "
    "re-record it to seal it",
    "unfinished": "the recording never closed ({reason}); the records it has chain intact",
}
