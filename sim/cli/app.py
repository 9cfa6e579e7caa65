"""Command tree: run, scenario, trace, policies (each a small module)."""

from __future__ import annotations

import typer

from calibrate.cli import app as calibrate_app
from sim.cli import fidelity, policies, run, scenario, sweep
from traces.cli import app as trace_app

app = typer.Typer(
    name="servesim",
    help="Trace-driven discrete-event simulator of LLM serving (vLLM-exact scheduling).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.command(name="run")(run.run)
app.command(name="policies")(policies.policies)
app.command(name="sweep")(sweep.sweep)
app.command(name="fidelity")(fidelity.fidelity)
app.add_typer(scenario.app, name="scenario")
app.add_typer(trace_app, name="trace")
app.add_typer(calibrate_app, name="calibrate")
