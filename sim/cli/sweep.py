"""`servesim sweep SCENARIO --grid KEY=V1,V2 ... --rate A:B:STEP`: a grid of simulations.

Writes DIR/points.parquet (one row per point: parameters + every summary metric), a file
per point as it finishes (so ``--resume`` continues a killed sweep), the plots of
`servesim plot`, and prints one row per configuration and load.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Annotated

import typer

from sim.cli.report import ReportOpt, check_room
from sim.cli.report import write as write_report
from sim.cli.run import SetOpt
from sim.config.load import LoadedScenario, load_scenario
from sim.plan.executors import EXECUTORS, make_executor
from sim.plan.grid import make_plan
from sim.plan.peaks import stand_in_warning
from sim.plan.plotdir import budgets_of, plot_dir
from sim.plan.point import too_short_said
from sim.plan.store import check_folder, load_points
from sim.plan.sweep import run_sweep
from sim.report.plan_tables import show, sweep_table
from traces.errors import InputError

ScenarioArg = Annotated[Path | None, typer.Argument(
    help="Scenario YAML (default: the embedded scenarios/default.yaml).")]
GridOpt = Annotated[list[str] | None, typer.Option(
    "--grid", "-g", help="KEY=V1,V2,... of a scenario field; several --grid make a cross "
    "product, e.g. --grid engine.max_num_seqs=64,256.")]
SeedsOpt = Annotated[int, typer.Option(
    "--seeds", help="Seeds per point: the scenario seed, seed + 1, ... (count).")]
ExecutorOpt = Annotated[str, typer.Option(
    "--executor", help=f"Where points run: {', '.join(EXECUTORS.names())}.")]
JobsOpt = Annotated[int | None, typer.Option(
    "--jobs", "-j", help="Points run at once (default: the CPU count).")]
RayOpt = Annotated[str | None, typer.Option(
    "--ray-address", help="Ray cluster to run on (e.g. ray://head:10001); default: a local "
    "Ray started for this command.")]
ResumeOpt = Annotated[bool, typer.Option(
    "--resume", help="Continue the sweep in --out: run only the points without a result.")]
TraceOpt = Annotated[Path | None, typer.Option(
    "--trace", help="Replay this trace file: it replaces the workload's file, "
        "keeping its rate_scale, window_s and tags (see README).")]
PlotsOpt = Annotated[bool, typer.Option(help="Write the plots (PNG and SVG) into DIR/plots.")]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="No table, no progress bar.")]


def load(scenario: Path | None, sets: tuple[str, ...], trace: Path | None) -> LoadedScenario:
    return load_scenario(scenario, sets, str(trace) if trace else None)


def say_stand_in(loaded: LoadedScenario) -> None:
    """Whether generated arrivals stand in for a bursty trace: said with the results, after
    every input was checked (a bad flag, --out or --grid value stays one line)."""
    msg = stand_in_warning(loaded)
    if msg:
        warnings.warn(msg, stacklevel=1)


def say_too_short(df) -> None:
    """Once, the points too short to judge (their runs warned in the workers, unseen)."""
    if "stability.long_enough" not in df:
        return
    short = df[df["stability.long_enough"].eq(False)]
    if len(short):
        what = too_short_said(short["sim.warnings"].iloc[0])
        warnings.warn(f"{len(short):,} of {len(df):,} points; the first of them: {what}",
                      stacklevel=1)


def executor(name: str, jobs: int | None, address: str | None):
    return make_executor(name, jobs if jobs is not None else os.cpu_count() or 1, address)


def interrupted(out: Path) -> typer.Exit:
    typer.echo(f"interrupted: finished points are in {out}; continue with --resume", err=True)
    return typer.Exit(130)


def sweep(
    scenario: ScenarioArg = None,
    grid: GridOpt = None,
    rate: Annotated[str | None, typer.Option(
        "--rate", help="Arrival rates (req/s): START:STOP:STEP or V1,V2,... "
        "(generated arrivals).")] = None,
    rate_scale: Annotated[str | None, typer.Option(
        "--rate-scale", help="Replay speed-ups: START:STOP:STEP or V1,V2,... "
        "(a replayed trace).")] = None,
    seeds: SeedsOpt = 1,
    executor_name: ExecutorOpt = "local",
    jobs: JobsOpt = None,
    ray_address: RayOpt = None,
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", help="Sweep folder (default: results/<scenario name>-sweep).")] = None,
    resume: ResumeOpt = False,
    set_: SetOpt = None,
    trace: TraceOpt = None,
    plots: PlotsOpt = True,
    quiet: QuietOpt = False,
    report: ReportOpt = False,
    legacy: Annotated[Path | None, typer.Option("--scenario", "-c", hidden=True)] = None,
) -> None:
    """Simulate SCENARIO at every combination of --grid values, loads and seeds."""
    if legacy is not None:
        raise InputError("sweep: -c/--scenario was removed; the scenario is the first argument "
                         "as in `run`: servesim sweep my.yaml --grid engine.max_num_seqs=64,256")
    sets = tuple(set_ or ()) + ((f"trace={trace.name}",) if trace else ())
    loaded = load(scenario, tuple(set_ or ()), trace)
    plan = make_plan(loaded.scenario, grid, rate, rate_scale, seeds)
    out = out or Path("results") / f"{loaded.scenario.name}-sweep"
    check_folder(out)  # before anything runs
    check_room(out, report)
    try:
        with executor(executor_name, jobs, ray_address) as ex:
            res = run_sweep(loaded, plan, out, ex, resume=resume, quiet=quiet, sets=sets)
    except KeyboardInterrupt:
        raise interrupted(out) from None
    manifest, df = load_points(out)
    if not quiet:
        show(sweep_table(df, budgets_of(manifest), plan.load_key, len(plan.seeds)))
    if plots:  # the chosen point's run, simulated again here, says what it warns of
        typer.echo(f"plots: {out / 'plots'} ({len(plot_dir(out))} PNG + SVG)")
    else:
        say_too_short(df)
    typer.echo(f"points: {out / 'points.parquet'} ({res.ran:,} simulated, {res.reused:,} "
               f"reused, {res.wall_s:.1f} s)")
    say_stand_in(loaded)
    if report:
        write_report(out)
