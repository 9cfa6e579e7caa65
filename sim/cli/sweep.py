"""`servesim sweep`: one knob, several values, one table (and a CSV)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
import yaml
from rich.console import Console
from rich.table import Table

from sim.cli.run import SetOpt
from sim.config.load import load_scenario
from sim.sweep import sweep as run_sweep
from traces.errors import InputError


def _values(raw: str) -> list:
    vals = [yaml.safe_load(v) for v in raw.split(",") if v.strip()]
    if not vals:
        raise InputError(f"--values {raw!r}: give a comma-separated list, e.g. 32,64,128")
    return vals


# (column, header) shown on the console; the CSV has every column
SHOWN = (("ttft_p50_ms", "TTFT p50"), ("ttft_p95_ms", "TTFT p95"), ("tpot_p50_ms", "TPOT p50"),
         ("tpot_p95_ms", "TPOT p95"), ("request_per_s", "req/s"), ("output_token_per_s", "tok/s"),
         ("goodput_request_per_s", "goodput"), ("kv_used_peak", "KV peak %"),
         ("preemptions", "preempt"), ("verdict", "verdict"))


def _cell(v) -> str:
    if isinstance(v, float):
        return f"{v:,.1f}" if abs(v) >= 10 else f"{v:.3g}"
    return str(v)


def _table(df, key: str) -> Table:
    t = Table(title=f"sweep over {key} (latencies in ms)", title_justify="left")
    t.add_column(key.rsplit(".", 1)[-1], justify="right")
    for _, header in SHOWN:
        t.add_column(header, justify="right")
    for _, rec in df.iterrows():
        cells = [rec[col] * 100 if col.startswith("kv_") else rec[col] for col, _ in SHOWN]
        t.add_row(_cell(rec[key]), *(_cell(v) for v in cells))
    return t


def sweep(
    key: Annotated[str, typer.Argument(help="Scenario field to vary, e.g. engine.max_num_seqs.")],
    values: Annotated[str, typer.Argument(help="Comma-separated values, e.g. 32,64,128.")],
    scenario: Annotated[Path | None, typer.Option(
        "--scenario", "-c", help="Scenario YAML (default: the embedded default).")] = None,
    set_: SetOpt = None,
    trace: Annotated[Path | None, typer.Option("--trace", help="Replay this trace.")] = None,
    csv: Annotated[Path | None, typer.Option("--csv", help="Also write the table here.")] = None,
) -> None:
    """Simulate the scenario once per value of KEY and print one row per value."""
    loaded = load_scenario(scenario, tuple(set_ or ()), str(trace) if trace else None)
    df = run_sweep(loaded, key, _values(values))
    Console().print(_table(df, key))
    if csv is not None:
        df.to_csv(csv, index=False)
        typer.echo(f"table: {csv}")
