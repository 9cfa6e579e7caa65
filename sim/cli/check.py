"""`servesim check CHOSEN --trace NEW [--set ...] [--json]`: does the locked config still
hold for new traffic? One summary line, then the traffic and the budgets compared."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from sim.cli.run import SetOpt
from sim.cli.sweep import JobsOpt, executor
from sim.config.load import format_sets
from sim.plan.drift import Check, _num
from sim.plan.drift import check as run_check
from sim.report.plan_tables import show
from traces.loaders import ALLOWED


def _tables(c: Check) -> tuple[Table, Table]:
    traffic = Table("traffic", "locked", "new", "new / locked", title=None)
    for x in c.measures:
        unit = f" ({x.unit})" if x.unit else ""
        traffic.add_row(x.name + unit, _num(x.locked), _num(x.new),
                        "-" if x.ratio is None else f"{x.ratio:.2f}x")
    budgets = Table("budget", "limit (ms)", "finished (ms)", "judged (ms)", "holds")
    for b, value, judged in c.budgets:
        budgets.add_row(b.label, f"{b.ms:g}", _num(value),
                        "failures" if judged == float("inf") else _num(judged),
                        "yes" if b.holds(c.metrics) else "no")
    return traffic, budgets


def check(
    chosen: Annotated[Path, typer.Argument(
        help="The chosen.yaml servesim capacity wrote (its locked section: SLOs, capacity, "
        "length mix).")],
    trace: Annotated[Path, typer.Option(
        "--trace", help="The new traffic: a trace file replayed as recorded (its times and "
        "lengths); it replaces the chosen workload (lane, priority and tenant tags kept).")],
    fmt: Annotated[str | None, typer.Option(
        "--format", help=f"Trace format of --trace: {ALLOWED}.")] = None,
    set_: SetOpt = None,
    as_json: Annotated[bool, typer.Option(
        "--json", help="Print the result as one JSON object instead.")] = False,
    with_capacity: Annotated[bool, typer.Option(
        "--capacity", help="Also search the config's capacity on the new traffic (as "
        "servesim capacity, tolerance 2%) and say how far it moved.")] = False,
    jobs: JobsOpt = None,
) -> None:
    """Re-simulate a locked chosen.yaml on new traffic: does it still hold, and how far
    did rate and lengths move?

    The chosen scenario replays TRACE as recorded (--set applies on top), is judged against
    the locked SLOs as capacity judged it, and the traffic is compared with the locked mix.
    Exits 0 whether it holds or not (the verdict is in the output), 2 on bad input.
    Example: servesim check out/chosen.yaml --trace new.csv --set workload.prompt_scale=4
    """
    sets = tuple(set_ or ()) + format_sets(fmt)
    if not with_capacity:
        c = run_check(chosen, trace, sets)
    else:
        with tempfile.TemporaryDirectory(prefix="servesim-check-") as tmp, \
                executor("local", jobs, None) as ex:
            c = run_check(chosen, trace, sets, capacity_out=Path(tmp) / "capacity",
                          executor=ex)
    if as_json:
        typer.echo(json.dumps(c.as_dict(), allow_nan=False))
        return
    typer.echo(c.line)
    for table in _tables(c):
        show(table)
