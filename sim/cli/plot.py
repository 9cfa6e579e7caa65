"""`servesim plot DIR`: redraw every plot of a sweep or capacity folder (PNG and SVG)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from sim.plan.plotdir import plot_dir


def plot(
    folder: Annotated[Path, typer.Argument(help="A folder written by sweep or capacity.")],
    point: Annotated[str | None, typer.Option(
        "--point", help="point_id (points.parquet) to draw the KV timeline and CDFs for; "
        "default: the chosen point.")] = None,
) -> None:
    """Draw rate curves, the throughput-latency frontier, the KV timeline and latency CDFs."""
    for p in plot_dir(folder, point):
        typer.echo(f"{p}  (+ {p.with_suffix('.svg').name})")
