"""``tracetape export --otel CASSETTE``: write a cassette as OTLP/JSON for an OTel backend.

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
    short_help="A cassette as OpenTelemetry traces (OTLP/JSON).", epilog=exit_codes_help("export")
)
@click.argument("cassette", type=click.Path(path_type=Path))
@click.option(
    "--otel", is_flag=True, required=True, help="Write OTLP/JSON (the only export format)."
)
@click.option(
    "-o", "--output", type=click.Path(path_type=Path), help="Write here instead of stdout."
)
@click.option("--service-name", default="tracetape", show_default=True, help="OTel service.name.")
@handle_errors
def export(cassette: Path, otel: bool, output: Path | None, service_name: str) -> None:
    """Export CASSETTE as OpenTelemetry traces (OTLP/JSON, GenAI semantic conventions).

    The output is an ExportTraceServiceRequest: POST it to an OTLP/HTTP endpoint's
    /v1/traces, or read it back with tracetape diff.
    """
    text = json.dumps(cassette_to_otlp(cassette, service_name), ensure_ascii=False)
    if output is None:
        click.echo(text)
    else:
        output.write_text(text + "\n", encoding="utf-8")
