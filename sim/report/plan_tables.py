"""Console tables of sweeps, capacity frontiers and the catalog.

``show`` fits a table to the terminal (the configuration column wraps, numbers never
do); piped into a file or another program, the table is printed at its natural width
so no cell is cut or folded.
"""

from __future__ import annotations

import math

import pandas as pd
from rich.console import Console
from rich.table import Table
from rich.text import Text

from sim.plan.grid import CONC_KEY, LOAD_UNITS, RATE_KEY


def show(table: Table, console: Console | None = None) -> None:
    console = console or Console()
    need = console.measure(table, options=console.options.update_width(10_000)).maximum
    if not console.is_terminal:
        console = Console(file=console.file, width=max(80, need), no_color=True)
    elif need > console.width:
        _narrow(table, console.width)
    console.print(table)


def _narrow(table: Table, width: int) -> None:
    """Wrap headers and labels rather than cut them, when the numbers still fit whole;
    else leave rich's own squeezing (ellipses) so the table fits the terminal."""
    widest = [max((len(Text.from_markup(str(c)).plain) for c in col._cells), default=1)
              for col in table.columns]
    if sum(widest[1:]) + 12 + 5 * len(widest) > width:  # room for headers to wrap
        return
    for i, col in enumerate(table.columns):
        col.no_wrap, col.overflow = False, "fold"
        col.min_width = None if i == 0 else widest[i]


def cell(v, digits: int = 1) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:,.{digits}f}" if abs(v) >= 10 else f"{v:.3g}"
    return f"{v:,}" if isinstance(v, int) else str(v)


def table(title: str, columns: list[str], wrap_first: bool = True) -> Table:
    t = Table(title=title, title_justify="left")
    for i, c in enumerate(columns):
        if i == 0:
            t.add_column(c, overflow="fold" if wrap_first else "ellipsis", no_wrap=not wrap_first)
        else:
            t.add_column(c, justify="right", no_wrap=True)
    return t


def sweep_table(df: pd.DataFrame, budgets, load_key: str | None, seeds: int) -> Table:
    """One row per configuration and load (the worst seed of each column)."""
    lat = [(b.column, f"{b.label} ms") for b in budgets] or [
        ("latency_ms.ttft.p95", "TTFT p95 ms"), ("latency_ms.tpot.p95", "TPOT p95 ms")]
    load = LOAD_UNITS.get(load_key)
    cols = ["config", *([f"load ({load})"] if load else []), *(h for _, h in lat),
            "served req/s", "out tok/s", "KV peak %", "preempt", "engine", "SLO"]
    worst = "" if seeds == 1 else f", worst of {seeds} seeds"
    t = table(f"sweep: {len(df):,} points (latencies in ms{worst})", cols)
    for (_, load_v), g in df.groupby(["config_id", "load"], sort=False, dropna=False):
        ok = bool(g["engine_sustains"].all())
        slo = all(b.holds(m) for m in g.to_dict("records") for b in budgets)  # failures count
        shown = int(load_v) if load_key == CONC_KEY else load_v
        row = [g["config"].iloc[0], *([cell(shown)] if load else []),
               *(cell(g[c].max()) if c in g else "-" for c, _ in lat),
               cell(g["throughput.request_per_s"].min()),
               cell(g["throughput.output_token_per_s"].min()),
               cell(100 * g["kv_cache.peak_used_fraction"].max()),
               cell(int(g["preemption.count"].max())),
               "keeps up" if ok else "[red]cannot keep up[/]",
               ("met" if slo else "[red]missed[/]") if budgets else "-"]
        t.add_row(*row)
    return t


def frontier_table(front: pd.DataFrame, budgets, load_key: str, tol: str) -> Table:
    """One row per configuration: its capacity and what limits it."""
    scale = load_key != RATE_KEY  # a rate_scale or clients: the answer, then its rates
    cols = ["config", f"max {LOAD_UNITS[load_key]}", *(["mean req/s"] * scale),
            "peak-minute req/s", *(f"{b.label} ms" for b in budgets), "KV peak %", "preempt",
            "binding", "req/s per GPU", "out tok/s per GPU"]
    priced = bool(front["cost_per_million_output_tokens"].notna().any())
    cols += ["cost / M out tok", "cost / M tok", "cost / 1k req"] if priced else []
    t = table(f"capacity frontier (worst of seeds; tolerance {tol})", cols)
    for _, r in front.iterrows():
        top = "+" if r["status"] == "above range" else ""
        best = cell(int(r["max_load"])) if load_key == CONC_KEY else cell(r["max_load"], 3)
        t.add_row(r["config"], best + top,
                  *([cell(r["rate_mean_req_s"], 2)] * scale), cell(r["rate_peak_minute_req_s"], 2),
                  *(cell(r[f"{b.name}_ms"]) for b in budgets), cell(r["kv_peak_pct"]),
                  cell(r["preemptions"]), r["binding"], cell(r["req_s_per_gpu"], 2),
                  cell(r["output_tok_s_per_gpu"]),
                  *([cell(r["cost_per_million_output_tokens"], 3),
                     cell(r["cost_per_million_total_tokens"], 3),
                     cell(r["cost_per_thousand_requests"], 3)] if priced else []))
    return t
