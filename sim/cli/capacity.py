"""`servesim capacity SCENARIO --slo ttft_p95=500ms,tpot_p95=50ms [--grid ...]`.

For each configuration, the highest load at which every budget holds and the engine
keeps up, worst of ``--seeds``; the frontier table, the best configuration, requests/s
per GPU and (with a GPU-hour price) cost per million output tokens. Writes the probes
(DIR/points.parquet), DIR/frontier.csv, DIR/chosen.yaml (the best config as vLLM flags
with the length mix and SLOs), DIR/chosen/ (that point's full results) and DIR/plots/;
with ``--spread K``, the best's capacity on K windows or seeds (DIR/spread/).
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import Annotated

import typer
import yaml

from sim.cli.report import ReportOpt, check_room
from sim.cli.report import write as write_report
from sim.cli.run import SetOpt
from sim.cli.sweep import (
    ExecutorOpt,
    GridOpt,
    JobsOpt,
    PlotsOpt,
    QuietOpt,
    RayOpt,
    ResumeOpt,
    ScenarioArg,
    SeedsOpt,
    TraceOpt,
    executor,
    interrupted,
    load,
    say_stand_in,
)
from sim.cost import validation
from sim.plan import feasibility
from sim.plan.capacity import CapacityResult, Tolerance, run_capacity
from sim.plan.emit import chosen_doc
from sim.plan.frontier import best, frontier
from sim.plan.grid import LOAD_UNITS, RATE_KEY, Point, deterministic_workload, parse_grid
from sim.plan.plotdir import plot_dir, simulate_chosen
from sim.plan.point import Base, too_short_said
from sim.plan.slo import as_overrides, describe, parse_slo, scenario_slo
from sim.plan.spread import Spread, run_spread
from sim.plan.store import check_folder
from sim.report.plan_tables import frontier_table, show
from traces.arrival_spec import MAX_RATE, MIN_RATE
from traces.errors import InputError

MAX_SPREAD = 16  # parts of --spread: each is one more capacity search
MAX_REPLICAS = 256  # --max-replicas default: the largest fleet --target-rate tries

CHOSEN_HEAD = ("# The best configuration at its capacity, as a scenario: `servesim run\n"
               "# chosen.yaml` simulates it again (chosen/ holds that run). `locked` is what was\n"
               "# found: the `vllm serve` command that deploys what was simulated, the SLOs,\n"
               "# the capacity and the length mix of the traffic it holds for.\n")


def _chosen(res: CapacityResult, front, i: int, base: Base, price: float | None) -> dict:
    """Simulate the best configuration at its capacity into DIR/chosen; chosen.yaml's doc."""
    c, row = res.configs[i], front.loc[i]
    point = Point(c.config, res.load_key, c.lo.load, res.seeds[0])
    with warnings.catch_warnings():  # said once, after the best line, as "at the capacity"
        warnings.filterwarnings("ignore", message="the run is too short to judge")
        run = simulate_chosen(res.out, base, point)
    capacity = {
        "load_key": res.load_key, "max_load": c.lo.load,
        "next_load_failed": row["next_load_failed"],
        "tolerance": str(res.tol), "rule": f"worst of seeds {list(res.seeds)}",
        "rate_mean_req_s": float(row["rate_mean_req_s"]),
        "rate_peak_minute_req_s": float(row["rate_peak_minute_req_s"]),
        "binding": row["binding"], "req_s_per_gpu": float(row["req_s_per_gpu"]),
        "output_tok_s_per_gpu": float(row["output_tok_s_per_gpu"]),
    }
    if price:
        capacity["gpu_hour_price"] = price
        for key in ("cost_per_million_output_tokens", "cost_per_million_total_tokens",
                    "cost_per_thousand_requests"):
            capacity[key] = float(row[key])
    slo = {f"{b.name}_ms": b.ms for b in res.budgets}
    doc = chosen_doc(run.result.resolved, run.result.specs, run.config["workload_source"],
                     dict(c.config), slo, capacity, base.base_dir, res.out)
    doc["locked"]["cost_error"] = validation.band(run.result.resolved)
    return doc


def _rejected_share(probe) -> str:
    """Why rejections bind at every load: the share the budgets count as failures."""
    if probe is None or probe.binding != "rejected":
        return ""
    share = probe.worst("slo.rejected_fraction")
    return (f" ({share:.1%} of the requests rejected, counted as failures at any load: "
            "prompts of engine.max_model_len tokens or more)")


def _ties(res: CapacityResult, front, i: int) -> tuple[str, str]:
    """(after the best's name, at the end of the best line) when other configurations'
    capacity is within the search tolerance of the best's."""
    tied = front[front["tie_with_best"]]
    if tied.empty:
        return "", ""
    names = ", ".join(f"{r['config']} ({r['req_s_per_gpu']:.2f} req/s per GPU)"
                      for _, r in tied.iterrows())
    return " (tie within tolerance)", (f"; within the search tolerance ({res.tol}) of it, "
                                       f"no better or worse at that precision: {names}")


def _spread(loaded, res: CapacityResult, front, k: int, ex, sets, resume: bool,
            quiet: bool) -> Spread | None:
    """The best configuration's capacity on k parts (sim.plan.spread), or None."""
    i = best(front) if k else None
    if i is None or res.configs[i].lo is None:
        return None
    c = res.configs[i]
    per_load = float(front.loc[i, "rate_mean_req_s"]) / c.lo.load  # 1: generated arrivals
    return run_spread(loaded, c.config, c.lo.load, res.budgets, res.tol, k, res.out / "spread",
                      ex, rate_per_load=per_load, sets=sets, resume=resume, quiet=quiet)


def _within(front, i: int, sp: Spread) -> str:
    """'; within it: CONFIG (x req/s)' for other configurations whose capacity lies inside
    the best's spread (requests/s, one GPU each as the spread is)."""
    gpus = front.loc[i, "gpus"]
    inside = [f"{r['config']} ({r['rate_mean_req_s']:.2f} req/s)"
              for j, r in front.iterrows() if j != i and r["status"] != "none"
              and r["gpus"] == gpus and r["rate_mean_req_s"] >= sp.low]
    return f"; within that range, so no better or worse: {', '.join(inside)}" if inside \
        else ""


def _too_short(probe) -> str:
    """The warning of a run at the capacity too short to judge ('' when each was long
    enough): a count fixed whatever the rate gets shorter as the search raises the rate."""
    for r in probe.records if probe else ():
        if r["metrics"].get("stability.long_enough") is False:
            return too_short_said(r["metrics"].get("sim.warnings"))
    return ""


def _best_line(res: CapacityResult, row, price: float | None, tie=("", "")) -> str:
    unit = "" if res.load_key == RATE_KEY else \
        f" ({LOAD_UNITS[res.load_key]} {row['max_load']:g})"
    cost = (f", {row['cost_per_million_output_tokens']:.3f} per million output tokens "
            f"({row['cost_per_million_total_tokens']:.3f} per million prompt + output tokens, "
            f"{row['cost_per_thousand_requests']:.3f} per thousand requests) at {price:g} per "
            "GPU-hour" if price else "")
    return (f"best: {row['config']}{tie[0]}: {row['rate_mean_req_s']:.2f} req/s{unit}, busiest "
            f"minute {row['rate_peak_minute_req_s']:.2f} req/s; {row['req_s_per_gpu']:.2f} req/s "
            f"and {row['output_tok_s_per_gpu']:,.0f} output tok/s per GPU{cost}; {_limit(row)}"
            f"{tie[1]}")


def _limit(row) -> str:
    """What stopped the search: the failing load, or none (every load tried held)."""
    failed = row["next_load_failed"]
    if failed is None or (isinstance(failed, float) and math.isnan(failed)):
        return (f"every load tried held (up to {row['max_load']:g}, the top of the search "
                "range): the SLOs do not bind")
    return f"limited by {row['binding']} at {failed:g}"


def capacity(
    scenario: ScenarioArg = None,
    slo: Annotated[str | None, typer.Option(
        "--slo", help="Budgets, e.g. ttft_p95=500ms,tpot_p95=50ms (metrics ttft, tpot, itl, "
        "e2el; stats mean, p50, p90, p95, p99, max; limits in ms or s, a bare number is ms). "
        "Default: the scenario's slo.")] = None,
    grid: GridOpt = None,
    seeds: SeedsOpt = 3,
    tol: Annotated[str, typer.Option(
        "--tol", help="Stop bisecting when the bracket is this narrow: a percentage of the "
        "answer (2%) or a load step (0.5).")] = "2%",
    executor_name: ExecutorOpt = "local",
    jobs: JobsOpt = None,
    ray_address: RayOpt = None,
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", help="Folder (default: results/<scenario name>-capacity).")] = None,
    resume: ResumeOpt = False,
    emit: Annotated[str | None, typer.Option(
        "--emit", help="Print the chosen config for a server: vllm.")] = None,
    price: Annotated[float | None, typer.Option(
        "--gpu-hour-price", help="Price per GPU-hour (sets gpu_hour_price).")] = None,
    set_: SetOpt = None,
    trace: TraceOpt = None,
    plots: PlotsOpt = True,
    quiet: QuietOpt = False,
    target_rate: Annotated[float | None, typer.Option(
        "--target-rate", min=MIN_RATE, help="Size a fleet instead: the fewest cluster.replicas "
        "(with the scenario's router) that hold the SLOs at this rate (requests/s); prints "
        "GPUs and, with --gpu-hour-price, cost per hour.")] = None,
    max_replicas: Annotated[int | None, typer.Option(
        "--max-replicas", min=1, max=4096, help="Largest fleet --target-rate tries "
        f"(replicas; default {MAX_REPLICAS}).")] = None,
    spread: Annotated[int, typer.Option(
        "--spread", help="An uncertainty: search the best configuration "
        "again on K disjoint windows of a replayed trace, or K seeds one at a time, and "
        "print min / median / max (0: off; parts).")] = 0,
    report: ReportOpt = False,
) -> None:
    """Find each configuration's highest sustainable load under the SLOs.

    With --target-rate: the fewest cluster.replicas that hold them at that load."""
    if emit not in (None, "vllm"):
        raise InputError(f"--emit {emit!r}: the only target is vllm")
    if price is not None and not 0 < price < math.inf:
        raise InputError(f"--gpu-hour-price {price!r}: must be > 0 and finite (a price per "
                         "GPU-hour)")
    if target_rate is not None and not target_rate <= MAX_RATE:  # NaN and inf too
        raise InputError(f"--target-rate {target_rate!r}: must be at most {MAX_RATE:,.0f} "
                         "requests/s")
    budgets = parse_slo(slo) if slo is not None else None  # '' is no budget: refused
    sets = (*(set_ or ()), *(as_overrides(budgets) if budgets else ()),
            *((f"gpu_hour_price={price}",) if price else ()))
    loaded = load(scenario, sets, trace)
    budgets = budgets or scenario_slo(loaded.scenario)
    tolerance = Tolerance.parse(tol)
    if seeds < 1:
        raise InputError(f"--seeds {seeds}: must be at least 1")
    if spread == 1 or not 0 <= spread <= MAX_SPREAD:
        raise InputError(f"--spread {spread}: give 2 to {MAX_SPREAD} parts (or 0 for none)")
    if seeds > 1 and deterministic_workload(loaded.scenario):
        warnings.warn("the workload replays its trace unchanged, so seeds change nothing: "
                      "using one seed", stacklevel=1)
        seeds = 1
    out = out or Path("results") / f"{loaded.scenario.name}-capacity"
    if target_rate is not None and grid:
        raise InputError("--target-rate searches cluster.replicas itself; drop --grid")
    if max_replicas is not None and target_rate is None:
        raise InputError(f"--max-replicas {max_replicas}: bounds the fleet --target-rate "
                         "sizes; give --target-rate too, or drop it")
    check_folder(out)  # before anything runs
    check_room(out, report)
    seed_list = tuple(loaded.scenario.seed + i for i in range(seeds))
    if target_rate is not None:
        from sim.cli.sizing import size

        size(loaded, target_rate, budgets, seed_list, out, max_replicas or MAX_REPLICAS,
             (executor_name, jobs, ray_address), resume, quiet, sets)
        say_stand_in(loaded)
        if report:
            write_report(out)
        return
    price = loaded.scenario.gpu_hour_price
    sets_run = sets + ((f"trace={trace.name}",) if trace else ())
    try:
        with executor(executor_name, jobs, ray_address) as ex:
            res = run_capacity(loaded, parse_grid(grid), budgets, seed_list, tolerance, out, ex,
                               resume=resume, quiet=quiet, sets=sets_run)
            front = frontier(res, price)
            sp = _spread(loaded, res, front, spread, ex, sets_run, resume, quiet)
    except KeyboardInterrupt:
        raise interrupted(out) from None
    front.to_csv(out / "frontier.csv", index=False)
    if not quiet:
        typer.echo(f"SLO: {describe(budgets)}; engine must keep up; worst of {seeds} seed(s)")
        show(frontier_table(front, budgets, res.load_key, str(tolerance)))
    i = best(front)
    if i is None:
        c = res.configs[0]
        typer.echo(f"no configuration sustains any load tried (down to {c.hi.load:g}); "
                   f"limited by {c.binding}{_rejected_share(c.hi)}")
        typer.echo(feasibility.explain_none(Base.of(loaded, sets), c.config, budgets))
    else:
        doc = _chosen(res, front, i, Base.of(loaded, sets), price)
        if sp is not None:
            doc["locked"]["capacity"]["uncertainty"] = sp.as_dict()
        (out / "chosen.yaml").write_text(CHOSEN_HEAD + yaml.safe_dump(doc, sort_keys=False))
        typer.echo(_best_line(res, front.loc[i], price, _ties(res, front, i)))
        if sp is not None:
            typer.echo(sp.line() + _within(front, i, sp))
        elif front["tie_with_best"].any():
            parts = "windows of the trace" if res.load_key != RATE_KEY else "seeds"
            typer.echo(f"note: for ties, --spread 4 searches the best again on 4 {parts} "
                       "to show how far its capacity moves")
        short = _too_short(res.configs[i].lo)
        if short:
            typer.echo(f"note: at the capacity, {short}")
        typer.echo(validation.describe(doc["locked"]["cost_error"]))
        for note in feasibility.note_close(Base.of(loaded, sets), res.configs[i].config,
                                           budgets):
            typer.echo(note)
        if emit == "vllm":
            typer.echo(doc["locked"]["vllm_serve"])
            for note in doc["locked"]["notes"]:
                typer.echo(f"# note: {note}")
        typer.echo(f"chosen: {out / 'chosen.yaml'}")
    if plots:
        typer.echo(f"plots: {out / 'plots'} ({len(plot_dir(out))} PNG + SVG)")
    typer.echo(f"probes: {out / 'points.parquet'} ({res.ran:,} simulated, {res.reused:,} "
               f"reused, {res.wall_s:.1f} s)")
    say_stand_in(loaded)
    if sp is not None:
        typer.echo(f"spread probes: {out / 'spread' / 'points.parquet'}")
    if report:
        write_report(out)

