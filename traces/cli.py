"""`servesim trace ...`: inspect trace files (the main CLI mounts `app`).

Bad input raises traces.errors.InputError subclasses, which the main CLI turns into one line
and exit status 2; nothing is caught here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from traces.errors import TraceError
from traces.limits import check_span
from traces.loaders import ALLOWED, open_trace
from traces.rng import Streams
from traces.stats import format_stats, trace_stats

app = typer.Typer(help="Inspect request traces: formats, arrival and length statistics.")


@app.callback()
def main() -> None:
    """Inspect request traces."""


@app.command()
def stats(
    file: Annotated[Path, typer.Argument(help="trace file (CSV, JSONL or Parquet)")],
    format: Annotated[str, typer.Option("--format", "-f", help=f"one of: {ALLOWED}")] = "auto",
    as_json: Annotated[bool, typer.Option("--json", help="print JSON instead of a table")] = False,
) -> None:
    """Print rows, span, rate, inter-arrival CV, length percentiles and prefix-cache hits.

    Formats without arrival times (lengths) report the arrival statistics as n/a.
    """
    trace, fmt = open_trace(file, format, streams=Streams(0))
    result = trace_stats(trace, arrivals=fmt.timed)
    if as_json:
        typer.echo(json.dumps(result, indent=2))
    else:
        Console().print(format_stats(result))
    if fmt.timed:  # described as it is, but said when `run` would refuse it
        try:
            check_span(trace)
        except TraceError as e:
            typer.echo(f"warning: servesim run refuses this trace: {e}", err=True)
