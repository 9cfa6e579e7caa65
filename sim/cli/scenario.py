"""`servesim scenario validate|show`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
import yaml

from sim.cli.run import SetOpt
from sim.config.load import load_scenario
from sim.pipeline import resolve_loaded, resolved_config

app = typer.Typer(help="Validate scenarios and show them resolved.", no_args_is_help=True)

FileArg = Annotated[Path | None, typer.Argument(
    help="Scenario YAML (default: the embedded default scenario).")]


@app.command()
def validate(scenario: FileArg = None, set_: SetOpt = None) -> None:
    """Check a scenario (schema, catalog names, and that it fits the GPU)."""
    loaded = load_scenario(scenario, tuple(set_ or ()))
    r = resolve_loaded(loaded)
    typer.echo(f"{loaded.source}: ok ({r.memory.usable_blocks:,} KV blocks, "
               f"{r.kv_capacity_tokens:,} tokens of KV capacity)")


@app.command()
def show(scenario: FileArg = None, set_: SetOpt = None) -> None:
    """Print the scenario with every default filled in and the derived values."""
    loaded = load_scenario(scenario, tuple(set_ or ()))
    cfg = resolved_config(resolve_loaded(loaded), loaded.scenario.workload.trace or "synthetic")
    typer.echo(yaml.safe_dump(cfg, sort_keys=False))
