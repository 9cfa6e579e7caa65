"""The plots of a sweep or capacity search (one point per configuration, load and seed).

* ``rate_curves``: each latency budget's metric (TTFT p95, TPOT p95, ...) vs offered rate,
  one line per configuration, the budget drawn, points where the engine could not keep
  up marked. Seeds are folded into their worst value, as capacity search judges them.
* ``frontier_plot``: output tokens/s per GPU vs tokens/s per user (1 / TPOT median) for
  every point the engine sustained, the Pareto front highlighted: what a GPU delivers
  at each interactivity level.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator

from sim.report.plots import plain_log_axis, save, wrapped

MARKERS = "osD^v<>phP*X"


def worst_by_load(df: pd.DataFrame, x_col: str) -> pd.DataFrame:
    """One row per (configuration, load): the worst seed of every column."""
    lat = [c for c in df.columns if c.startswith("latency_ms.")]
    agg = {"engine_sustains": "all", **{c: "max" for c in lat}}
    if x_col != "load":
        agg[x_col] = "mean"
    for c in ("output_token_per_s_per_gpu", "user_output_token_per_s"):
        agg[c] = "min"
    order = {c: i for i, c in enumerate(dict.fromkeys(df["config_id"]))}  # grid order
    g = df.groupby(["config_id", "config", "load"], sort=False, dropna=False).agg(agg)
    g = g.reset_index()
    g["_order"] = g["config_id"].map(order)
    return g.sort_values(["_order", x_col], kind="stable").drop(columns="_order")


def rate_curves(df: pd.DataFrame, budgets, path: Path | None, *, x_col: str, x_label: str,
                title: str, formats: tuple[str, ...] = ()) -> Figure:
    panels = [(b.column, b.label, b.ms) for b in budgets] or [
        ("latency_ms.ttft.p95", "TTFT p95", None), ("latency_ms.tpot.p95", "TPOT p95", None)]
    w = worst_by_load(df, x_col)
    fig = Figure(figsize=(5.2 * len(panels), 4.4))
    axes = np.atleast_1d(fig.subplots(1, len(panels)))
    for ax, (col, label, limit) in zip(axes, panels):
        for i, (cfg, g) in enumerate(w.groupby("config", sort=False)):
            ax.plot(g[x_col], g[col], marker=MARKERS[i % len(MARKERS)], ms=4, lw=1, label=cfg)
            bad = g[~g["engine_sustains"].astype(bool)]
            ax.plot(bad[x_col], bad[col], "x", color="tab:red", ms=9, mew=2,
                    label="engine cannot keep up" if i == 0 else None)
        if limit:
            ax.axhline(limit, color="black", ls="--", lw=1, label=f"budget {limit:g} ms")
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(LogLocator(subs=(1, 2, 5)))
        plain_log_axis(ax.yaxis)
        ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
        ax.set_xlabel(x_label)
        ax.set_ylabel(f"{label} (ms, worst seed)")
        ax.grid(alpha=0.3, which="both")
    axes[0].legend(fontsize=7, loc="upper left")
    fig.suptitle(wrapped(title, 110), fontsize=10)
    save(fig, path, formats)
    return fig


def pareto(points: pd.DataFrame, x: str, y: str) -> pd.DataFrame:
    """Points no other point beats on both x and y (both larger is better), by x."""
    front, best_y = [], -np.inf
    for idx, r in points.sort_values([x, y], ascending=[False, False]).iterrows():
        if r[y] > best_y:
            front.append(idx)
            best_y = r[y]
    return points.loc[front].sort_values(x)


def frontier_plot(df: pd.DataFrame, path: Path | None, *, title: str,
                  formats: tuple[str, ...] = ()) -> Figure:
    x, y = "user_output_token_per_s", "output_token_per_s_per_gpu"
    w = worst_by_load(df, "load").dropna(subset=[x, y])
    fig = Figure(figsize=(7.5, 5))
    ax = fig.subplots()
    for i, (cfg, g) in enumerate(w.groupby("config", sort=False)):
        ok = g["engine_sustains"].astype(bool)
        m = MARKERS[i % len(MARKERS)]
        line = ax.plot(g.loc[ok, x], g.loc[ok, y], m, ms=5, label=cfg)[0]
        ax.plot(g.loc[~ok, x], g.loc[~ok, y], m, ms=5, mfc="none", color=line.get_color())
    ok = w[w["engine_sustains"].astype(bool)]
    if len(ok):
        f = pareto(ok, x, y)
        ax.plot(f[x], f[y], "-", color="black", lw=2, alpha=0.6, zorder=0, label="Pareto front")
    ax.set_xlabel("output tokens/s per user (1 / TPOT median)")
    ax.set_ylabel("output tokens/s per GPU")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, title="hollow: engine cannot keep up", title_fontsize=7)
    ax.set_title(wrapped(title), fontsize=10)
    save(fig, path, formats)
    return fig
