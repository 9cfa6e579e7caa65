"""`servesim compare A B`: two result folders (simulated, recorded engine run, live run)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console


def compare(
    a: Annotated[Path, typer.Argument(help="Reference result folder (e.g. a recorded engine "
                                      "run).")],
    b: Annotated[Path, typer.Argument(help="Result folder compared with it (e.g. its replay).")],
    plot: Annotated[Path | None, typer.Option(
        "--plot", help="PNG of per-request TTFT and per-step duration, B against A (default: "
        "compare.png, or compare-2.png... when that exists).")] = None,
    no_plot: Annotated[bool, typer.Option("--no-plot", help="Write no PNG.")] = False,
    json_out: Annotated[Path | None, typer.Option(
        "--json", help="Also write the tables as JSON.")] = None,
) -> None:
    """Per-request TTFT/TPOT/ITL/E2EL errors (requests matched by id), summary metrics side
    by side with B's relative error, step counts; and a PNG."""
    from sim.report.compare import compare as compare_runs
    from sim.report.compare import render
    from sim.report.outfile import check_file, free_default, write_text
    from sim.report.result_view import load_result
    from sim.report.write import finite

    if json_out is not None:
        check_file(json_out, "--json")
    if not no_plot:
        plot = plot if plot is not None else free_default("compare.png")
        check_file(plot, "--plot")
    c = compare_runs(load_result(a), load_result(b))
    console = Console()
    for table in render(c):
        console.print(table)
    if json_out is not None:
        doc = {"a": str(a), "b": str(b), "matched": c.matched,
               "per_request": None if c.per_request is None
               else c.per_request.to_dict(orient="records"),
               "summary": c.summary.to_dict(orient="records")}
        text = json.dumps(finite(doc), indent=2, allow_nan=False, default=float)
        write_text(json_out, "--json", text + "\n")
    if not no_plot:
        from sim.report.compare_plot import plot_comparison

        typer.echo(f"plot: {plot_comparison(c, plot)}")
