"""`servesim run`: simulate a scenario and write its results."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from calibrate import hardware_check
from sim import pipeline
from sim.cli import live as live_cli
from sim.cli.report import ReportOpt
from sim.cli.report import write as write_report
from sim.config.load import format_sets, load_scenario
from sim.report.console import print_summary
from sim.report.outpath import check_out, default_out
from sim.timing import PhaseTimer, format_wall
from traces.loaders import ALLOWED

SetOpt = Annotated[list[str] | None, typer.Option(
    "--set", "-s", help="Override a scenario field, e.g. --set engine.max_num_seqs=64.")]


class _SimProgress:
    """A progress bar over simulated time, drawn only for runs long enough to need one."""

    def __init__(self, progress: Progress, total_s: float):
        self.p, self.total = progress, max(total_s, 1e-9)
        self.task = progress.add_task("simulating", total=self.total)
        self.calls = 0

    def __call__(self, now: float) -> None:
        self.calls += 1
        if self.calls % 512 == 0:
            self.p.update(self.task, completed=min(now, self.total))


def run(
    scenario: Annotated[Path | None, typer.Argument(
        help="Scenario YAML (default: the embedded scenarios/default.yaml).")] = None,
    set_: SetOpt = None,
    trace: Annotated[Path | None, typer.Option(
        "--trace", help="Replay this trace file: it replaces the workload's file, "
        "keeping its rate_scale, window_s and tags (see README).")] = None,
    fmt: Annotated[str | None, typer.Option(
        "--format", help=f"Trace format for --trace: {ALLOWED}.")
    ] = None,
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", help="Results folder (default: results/<scenario name>, plus the "
        "--set overrides and --trace file when given). Only a folder servesim wrote is ever "
        "replaced.")] = None,
    step_log: Annotated[bool, typer.Option(
        "--step-log", help="Also write steps.jsonl, one JSON object per engine step.")] = False,
    plots: Annotated[bool, typer.Option(help="Write the PNG plots.")] = True,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No summary table.")] = False,
    verbose: Annotated[bool, typer.Option(
        "--verbose", "-v", help="Also print the wall time of each phase.")] = False,
    live: Annotated[bool, typer.Option(
        "--live", help="Execute every step for real (cost: {name: live}) and measure it.")
    ] = False,
    device: Annotated[str | None, typer.Option(
        "--device", help="Live mode: cpu (torch paths) or cuda (Triton kernels).")] = None,
    report: ReportOpt = False,
) -> None:
    """Simulate SCENARIO and write summary.json, requests/steps parquet, config.json, plots."""
    sets = tuple(set_ or ()) + format_sets(fmt)
    timer = PhaseTimer()
    with timer.phase("load"):
        loaded = load_scenario(scenario, live_cli.live_sets(scenario, live, device) + sets,
                               str(trace) if trace else None)
        if out is None:
            out = default_out(loaded.scenario.name, live_cli.out_name_parts(live, device) + sets,
                              str(trace) if trace else None)
        check_out(out)  # a bad --out fails before any trace is read
        prepared = pipeline.prepare(loaded)  # fail fast, before the progress bar
    notes = hardware_check.scenario_notes(loaded)  # said after the run: a failure is one line
    console = Console(stderr=True)
    if live_cli.is_live(loaded):
        with live_cli.live_bar(console, quiet) as bar:
            res = pipeline.run(loaded, out, step_log=step_log, plots=plots, prepared=prepared,
                               executor=live_cli.live_executor(prepared[0], bar), timer=timer)
        _report(res, quiet, verbose, notes, report)
        return
    specs = prepared[1]
    horizon = float(specs.arrival_s[-1]) if len(specs) else 0.0
    with Progress(TextColumn("{task.description}"), BarColumn(),
                  TextColumn("{task.completed:,.0f}/{task.total:,.0f} s simulated"),
                  TimeElapsedColumn(), console=console, transient=True,
                  disable=quiet) as progress:
        res = pipeline.run(loaded, out, step_log=step_log, plots=plots,
                           progress=_SimProgress(progress, horizon), prepared=prepared,
                           timer=timer)
    _report(res, quiet, verbose, notes, report)


def say_hardware(lines: list[str]) -> None:
    """The fit-vs-hardware lines (calibrate/hardware_check.py), on stderr; never fatal."""
    for line in lines:
        typer.echo(line, err=True)


def _report(res, quiet: bool, verbose: bool, notes: list[str], page: bool = False) -> None:
    say_hardware(notes)
    if not quiet:
        print_summary(res.summary, res.config["derived"])
    if verbose:
        typer.echo(format_wall(res.summary["sim"]["wall_s"]))
    typer.echo(f"results: {_shown(res.out_dir)}")
    if page:  # after the commit, under the result's lock (sim.report.html.write)
        write_report(res.out_dir)


def _shown(path: Path) -> str:
    """The path relative to the current folder when it lies inside it."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)
