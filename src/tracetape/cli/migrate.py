"""``tracetape migrate``: bring cassettes to the current format and keying, in place."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..errors import TapeError
from . import exit_codes_help
from ._common import EXIT_BAD_INPUT, EXIT_FAILED, echo_json, output_options


@click.command(
    short_help="Re-key and re-seal cassettes of older formats, in place.",
    epilog=exit_codes_help("migrate"),
)
@click.argument("cassettes", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--check", is_flag=True, help="Only list what would change; exit 1 if anything would (CI)."
)
@click.option("--no-backup", is_flag=True, help="Do not keep the old file as PATH.bak.")
@click.option(
    "--trust-edits",
    is_flag=True,
    help="Migrate a sealed cassette edited by hand as it is (sealing the edits) instead of "
    "refusing it.",
)
@output_options
def migrate(
    cassettes: tuple[Path, ...], check: bool, no_backup: bool, trust_edits: bool, fmt: str
) -> None:
    """Rewrite CASSETTES of older formats and older keying into the current ones.

    Each record is re-keyed from its stored input as replay keys it now (steps from the
    conversation, the project's [tool.tracetape.match] rules, else the cassette's own), the
    chain is sealed again, and the new cassette must replay the same outputs in the same
    order before it replaces the old one (atomically; the old one is kept as PATH.bak). A
    sealed cassette edited by hand is refused (exit 2), unless --trust-edits.

    \b
        tracetape migrate tests/cassettes/*/*.jsonl
        tracetape migrate --check tests/cassettes/*/*.jsonl
    """
    from ..migrate import migrate_cassette

    results, failures = [], []
    for path in cassettes:
        try:
            results.append(
                migrate_cassette(path, check=check, backup=not no_backup, trust_edits=trust_edits)
            )
        except (TapeError, OSError, ValueError) as exc:
            failures.append({"path": str(path), "error": str(exc)})
    changed = [m for m in results if m.changes]
    if fmt == "json":
        echo_json(
            {
                "check": check,
                "cassettes": [m.as_json() for m in results],
                "errors": failures,
            }
        )
    else:
        for m in results:
            if not m.changes:
                click.echo(f"current: {m.path}")
                continue
            verb = "would change" if check else "migrated"
            saved = f" (the old one is {m.backup})" if m.backup else ""
            click.echo(f"{verb}: {m.path}: {'; '.join(m.changes)}{saved}")
        for failure in failures:
            click.echo(f"tracetape: error: {failure['error']}", err=True)
    if failures:
        sys.exit(EXIT_BAD_INPUT)
    if check and changed:
        sys.exit(EXIT_FAILED)
