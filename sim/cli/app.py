"""Command tree: run, compare, sweep, capacity, check, report, plot, catalog, scenario, trace,
policies (each a small module).

Subcommand modules are imported when their command runs (or shows its own help), not at
start: `servesim --help` lists the commands from the short help below without importing
numpy, pandas, pydantic or the simulator (issue: CLI start under 0.5 s).
"""

from __future__ import annotations

import importlib
from typing import Annotated

import click
import typer
from typer.core import TyperGroup

from sim import version

# name -> (module, attribute: a command function or a Typer app, short help for the listing)
LAZY: dict[str, tuple[str, str, str]] = {
    "run": ("sim.cli.run", "run", "Simulate SCENARIO and write summary.json, requests/steps "
            "parquet, config.json, plots."),
    "policies": ("sim.cli.policies", "policies", "List schedulers, KV policies and cost "
                 "models (the names scenarios may use)."),
    "sweep": ("sim.cli.sweep", "sweep", "Simulate SCENARIO at every combination of --grid "
              "values, loads and seeds."),
    "replay-bench": ("sim.cli.replay_bench", "replay_bench", "Simulate the benchmark's "
                     "requests under its arrival process; print both side by side."),
    "capacity": ("sim.cli.capacity", "capacity", "Find each configuration's highest "
                 "sustainable load under the SLOs."),
    "check": ("sim.cli.check", "check", "Re-simulate a locked chosen.yaml on new traffic: "
              "does it still hold, and how far did rate and lengths move?"),
    "report": ("sim.cli.report", "report", "Write DIR/report.html: summary, SLO verdict, "
               "plots, config and flags, warnings, error band; one self-contained file."),
    "plot": ("sim.cli.plot", "plot", "Draw rate curves, the throughput-latency frontier, the "
             "KV timeline and latency CDFs."),
    "catalog": ("sim.cli.catalog", "app", "List catalog models and GPUs (memory, "
                "bandwidth, shipped calibrations); `catalog import` reads a config.json."),
    "compare": ("sim.cli.compare", "compare", "Per-request TTFT/TPOT/ITL/E2EL errors "
                "(requests matched by id), summary metrics side by side with B's relative "
                "error, step counts; and a PNG."),
    "fidelity": ("sim.cli.fidelity", "fidelity", "Fit the step-time model on this device, "
                 "run SCENARIO with it and live, compare."),
    "scenario": ("sim.cli.scenario", "app", "Validate scenarios and show them resolved."),
    "trace": ("traces.cli", "app", "Inspect request traces: formats, arrival and "
              "length statistics."),
    "calibrate": ("calibrate.cli", "app", "Calibrate step times: time kernels, fit, "
                  "validate, import databases."),
}


def load_command(name: str) -> click.Command:
    """Import subcommand ``name`` and build its click command."""
    module, attr, _ = LAZY[name]
    obj = getattr(importlib.import_module(module), attr)
    if name == "trace":  # `trace export` lives with the simulator (it builds workloads)
        from sim.cli import export

        if "export" not in {c.name for c in obj.registered_commands}:
            obj.command(name="export")(export.export)
    # mounted on a throwaway group exactly as the eager tree mounted it (no completion
    # options, the same context settings), then taken out of it
    host = typer.Typer(add_completion=False, pretty_exceptions_enable=False,
                       rich_markup_mode=None)
    host.callback()(_nothing)
    if isinstance(obj, typer.Typer):
        host.add_typer(obj, name=name)
    else:
        host.command(name=name)(obj)
    return typer.main.get_command(host).commands[name]


def _nothing() -> None:
    """(the throwaway group's callback)"""


class _Listed(click.Command):
    """A command not imported yet, as the top-level help lists it."""

    def __init__(self, name: str, short_help: str):
        super().__init__(name, help=short_help, short_help=short_help)


class LazyGroup(TyperGroup):
    """Commands from ``LAZY``: listed from their short help, imported when resolved."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [*super().list_commands(ctx), *(n for n in LAZY if n not in self.commands)]

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        cmd = super().get_command(ctx, name)
        if cmd is None and name in LAZY:
            return _Listed(name, LAZY[name][2])
        return cmd

    def resolve_command(self, ctx: click.Context, args: list[str]):
        name = click.utils.make_str(args[0]) if args else None
        if name in LAZY and name not in self.commands:
            self.add_command(load_command(name), name)
        return super().resolve_command(ctx, args)


app = typer.Typer(
    name="servesim",
    help="Trace-driven discrete-event simulator of LLM serving (vLLM-exact scheduling).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    cls=LazyGroup,
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
