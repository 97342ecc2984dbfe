"""``tracetape export``: a cassette as OTLP/JSON for an OTel backend (``--otel``), or traces
as Parquet for the analysis (``--parquet``).

Exit codes: ``EXIT_CODES`` in ``cli/__init__.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from ..formats.otlp import cassette_to_otlp
from . import exit_codes_help
from ._common import handle_errors


@click.command(
    short_help="A cassette as OTLP/JSON, or traces as Parquet.", epilog=exit_codes_help("export")
)
@click.argument("traces", nargs=-1, required=True)
@click.option("--otel", "kind", flag_value="otel", help="Write one cassette as OTLP/JSON.")
@click.option(
    "--parquet",
    "kind",
    flag_value="parquet",
    help="Write the calls of every TRACE (any format, glob patterns too) as one Parquet file "
    "(needs -o).",
)
@click.option(
    "-o", "--output", type=click.Path(path_type=Path), help="Write here instead of stdout."
)
@click.option("--service-name", default="tracetape", show_default=True, help="OTel service.name.")
@handle_errors
def export(
    traces: tuple[str, ...], kind: str | None, output: Path | None, service_name: str
) -> None:
    """Export a cassette as OpenTelemetry traces (--otel CASSETTE), or traces as Parquet
    (--parquet TRACE... -o FILE.parquet).

    OTLP/JSON is an ExportTraceServiceRequest (GenAI semantic conventions): POST it to an
    OTLP/HTTP endpoint's /v1/traces, or read it back with tracetape diff. Parquet holds one
    row a call (seq, line, run, step, kind, name, args, out, effect, tokens): tracetape diff
    and check read it faster than the traces, and so does any engine that reads Parquet.
    """
    if kind is None:
        raise click.UsageError("pass --otel (a cassette as OTLP/JSON) or --parquet")
    if kind == "parquet":
        if output is None:
            raise click.UsageError("--parquet writes a binary file: name it with -o FILE")
        from ..analysis.api import export_parquet

        n = export_parquet(list(traces), output)
        click.echo(f"wrote {n} call(s) to {output}")
        return
    if len(traces) != 1:
        raise click.UsageError("--otel exports one cassette")
    cassette = Path(traces[0])
    text = json.dumps(cassette_to_otlp(cassette, service_name), ensure_ascii=False)
    if output is None:
        click.echo(text)
    else:
        output.write_text(text + "\n", encoding="utf-8")
