"""`servesim compare A B [MORE...]`: result folders (simulated, recorded engine run, live run).

A and B side by side; when several folders are recorded repeats of one case (record.py
--repeats), also the engine-vs-engine spread per metric, and a simulated folder's error to
the repeats' mean judged against that spread (sim/report/spread.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console


def compare(
    a: Annotated[Path, typer.Argument(help="Reference result folder (e.g. a recorded engine "
                                      "run).")],
    b: Annotated[Path, typer.Argument(help="Result folder compared with it (e.g. its replay, "
                                      "or a repeat of the recording).")],
    more: Annotated[list[Path] | None, typer.Argument(
        help="More repeats of A's case (recorded engine runs); at most one folder in all "
        "that is not one is compared with A.")] = None,
    plot: Annotated[Path | None, typer.Option(
        "--plot", help="PNG of per-request TTFT and per-step duration, B against A (default: "
        "compare.png, or compare-2.png... when that exists).")] = None,
    no_plot: Annotated[bool, typer.Option("--no-plot", help="Write no PNG.")] = False,
    json_out: Annotated[Path | None, typer.Option(
        "--json", help="Also write the tables as JSON.")] = None,
) -> None:
    """Per-request TTFT/TPOT/ITL/E2EL errors (requests matched by id), summary metrics side
    by side with B's relative error, step counts; and a PNG. Given repeats of a recorded
    case, also their spread per metric (the engine's noise floor)."""
    from calibrate import hardware_check
    from sim.cli.run import say_hardware
    from sim.report.compare import compare as compare_runs
    from sim.report.compare import render
    from sim.report.outfile import check_file, free_default, write_text
    from sim.report.result_view import load_result
    from sim.report.spread import render as render_spread
    from sim.report.spread import views_table
    from sim.report.write import finite

    if json_out is not None:
        check_file(json_out, "--json")
    if not no_plot:
        plot = plot if plot is not None else free_default("compare.png")
        check_file(plot, "--plot")
    folders = [a, b, *(more or [])]
    views = [load_result(p) for p in folders]
    repeats, candidate = _split(views)
    notes = hardware_check.compare_notes(folders)  # said once the tables are out
    c = compare_runs(views[0], candidate if candidate is not None else views[1])
    console = Console()
    for table in render(c):
        console.print(table)
    spread = views_table(repeats, candidate) if len(repeats) > 1 else None
    if spread is not None:
        console.print(render_spread(spread, [v.name for v in repeats],
                                    candidate.name if candidate is not None else None))
    if json_out is not None:
        doc = {"a": str(a), "b": str(c.b.path), "matched": c.matched,
               "per_request": None if c.per_request is None
               else c.per_request.to_dict(orient="records"),
               "summary": c.summary.to_dict(orient="records"),
               "repeats": [str(v.path) for v in repeats] if spread is not None else None,
               "spread": None if spread is None else spread.to_dict(orient="records")}
        text = json.dumps(finite(doc), indent=2, allow_nan=False, default=float)
        write_text(json_out, "--json", text + "\n")
    if not no_plot:
        from sim.report.compare_plot import plot_comparison

        typer.echo(f"plot: {plot_comparison(c, plot)}")
    say_hardware(notes)


def _split(views: list) -> tuple[list, object | None]:
    """(A and its repeats, the one other folder or None); more than one folder that is not
    a repeat of A is a one-line error (compare them two at a time)."""
    from sim.report.spread import repeats_of
    from traces.errors import InputError, clip_path

    repeats = repeats_of(views[0], views[1:])
    rest = [v for v in views[1:] if not any(v is r for r in repeats)]
    if len(views) > 2 and len(rest) > 1:
        raise InputError(f"compare: {clip_path(rest[1].path)} is not a recorded repeat of "
                         f"{clip_path(views[0].path)}'s case, nor is {clip_path(rest[0].path)}; "
                         "give repeats of one case and at most one other folder")
    return repeats, rest[0] if rest else None
