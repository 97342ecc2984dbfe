"""``tracetape show`` and ``tracetape verify``: look at one cassette."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path
from typing import Any

import click

from ..errors import CassetteError
from ..formats.cassette import read_cassette
from . import exit_codes_help
from ._common import EXIT_BAD_INPUT, EXIT_FAILED, echo_json, handle_errors, output_options


def rows(path: Path) -> list[dict[str, Any]]:
    """The decisions of a cassette as table rows (seq, step, kind, name, ms, key, effect)."""
    cassette = read_cassette(path)
    return [
        {
            "seq": i if rec.seq is None else rec.seq,
            "step": rec.step,
            "kind": rec.kind,
            "name": rec.name or "",
            "ms": rec.ms,
            "key": rec.key,
            "effect": rec.effect,
        }
        for i, rec in enumerate(cassette.records, 1)
    ]


@click.command(short_help="The decisions of a cassette as a table.", epilog=exit_codes_help("show"))
@click.argument("cassette", type=click.Path(path_type=Path))
@output_options
@handle_errors
def show(cassette: Path, fmt: str) -> None:
    """Print the decisions of CASSETTE as a table: seq, step, kind, tool or model, ms, effect,
    key."""
    data = rows(cassette)
    if fmt == "json":
        echo_json(data)
        return
    from rich.console import Console
    from rich.table import Table

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
    Console(width=None if sys.stdout.isatty() else 200).print(table)


@click.command(short_help="A cassette's integrity, in one line.", epilog=exit_codes_help("verify"))
@click.argument("cassette", type=click.Path(path_type=Path))
@output_options
def verify(cassette: Path, fmt: str) -> None:
    """Check CASSETTE's integrity and print a one-line summary."""
    problems: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            tape = read_cassette(cassette)
        except CassetteError as exc:
            problems.append(str(exc))
            tape = None
    problems += [str(w.message) for w in caught]
    summary: dict[str, Any] = {"path": str(cassette), "ok": not problems, "problems": problems}
    if tape is not None:
        kinds: dict[str, int] = {}
        for rec in tape.records:
            kinds[rec.kind] = kinds.get(rec.kind, 0) + 1
        seqs = [rec.seq for rec in tape.records if rec.seq is not None]
        if seqs != sorted(seqs) or len(set(seqs)) != len(seqs):
            problems.append("sequence numbers are not strictly increasing (records were reordered)")
            summary["ok"] = False
        summary.update(format=tape.format, records=len(tape.records), kinds=kinds)
    if fmt == "json":
        echo_json(summary)
    elif summary["ok"]:
        counts = ", ".join(f"{n} {k}" for k, n in sorted(summary["kinds"].items())) or "empty"
        click.echo(
            f"ok: {cassette}: format {summary['format']}, {summary['records']} records ({counts})"
        )
    else:
        click.echo(f"corrupt: {problems[0]}")
    if not summary["ok"]:
        missing = tape is None and not Path(cassette).is_file()
        sys.exit(EXIT_BAD_INPUT if missing else EXIT_FAILED)
