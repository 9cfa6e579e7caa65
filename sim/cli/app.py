"""Command tree: run, compare, sweep, capacity, plot, catalog, scenario, trace, policies
(each a small module)."""

from __future__ import annotations

from typing import Annotated

import typer

from calibrate.cli import app as calibrate_app
from sim import version
from sim.cli import (
    capacity,
    catalog,
    compare,
    export,
    fidelity,
    plot,
    policies,
    replay_bench,
    run,
    scenario,
    sweep,
)
from traces.cli import app as trace_app

app = typer.Typer(
    name="servesim",
    help="Trace-driven discrete-event simulator of LLM serving (vLLM-exact scheduling).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"servesim {version()}")
        raise typer.Exit()


@app.callback()
def main(
    show_version: Annotated[bool, typer.Option(
        "--version", callback=_version, is_eager=True,
        help="Print the servesim version and exit.")] = False,
) -> None:
    """Trace-driven discrete-event simulator of LLM serving (vLLM-exact scheduling)."""


app.command(name="run")(run.run)
app.command(name="policies")(policies.policies)
app.command(name="sweep")(sweep.sweep)
app.command(name="replay-bench")(replay_bench.replay_bench)
app.command(name="capacity")(capacity.capacity)
app.command(name="plot")(plot.plot)
app.command(name="catalog")(catalog.catalog)
app.command(name="compare")(compare.compare)
app.command(name="fidelity")(fidelity.fidelity)
app.add_typer(scenario.app, name="scenario")
trace_app.command(name="export")(export.export)
app.add_typer(trace_app, name="trace")
app.add_typer(calibrate_app, name="calibrate")
