"""`servesim report DIR`: one self-contained report.html in a results folder."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

ReportOpt = Annotated[bool, typer.Option(
    "--report", help="Also write DIR/report.html: summary, SLO verdict, plots, config and "
    "vllm serve flags, warnings, the cost model's error band (as servesim report).")]


def write(out: Path) -> None:
    """Write ``out``/report.html and say where (the --report of run, sweep and capacity)."""
    from sim.report.html.write import write_report

    typer.echo(f"report: {write_report(out)}")


def check_room(out: Path, report: bool) -> None:
    """With --report, refuse a foreign report.html in ``out`` before anything runs."""
    if report:
        from sim.report.html.write import check_room as check

        check(out)


def report(
    folder: Annotated[Path, typer.Argument(
        metavar="DIR", help="A results folder servesim wrote: servesim run's --out, a sweep's or a "
        "capacity search's folder, or its chosen/.")],
) -> None:
    """Write DIR/report.html: summary, SLO verdict, plots, config and flags, warnings,
    error band; one self-contained file.

    The summary and SLO verdict as the command printed them, the plots it wrote, the
    resolved config, the vllm serve flags, the warnings it stored and the cost model's
    validated error band. Nothing is simulated: the page shows what the folder holds.
    The file has no script and no link outside it (plots are embedded), so it can be
    mailed or attached as is.
    Example: servesim report results/chat-trace-capacity
    """
    write(folder)
