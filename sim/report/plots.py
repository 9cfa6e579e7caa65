"""The two plots every run writes.

* ``ttft_cdf.png``: the TTFT distribution (what interactive users feel).
* ``kv_vs_waiting.png``: KV blocks used / total next to requests waiting, over
  time: the seed article's practical check. Low occupancy with a growing queue
  points at fragmentation or over-conservative reservations; pegged occupancy
  with a growing queue means the KV cache is the bottleneck.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure  # no pyplot: no global backend state to disturb

MAX_POINTS = 2000  # time bins for long runs: the plot stays readable and small


def ttft_cdf(requests: pd.DataFrame, path: Path, title: str = "") -> None:
    fig = Figure(figsize=(6, 4))
    ax = fig.subplots()
    for lane, grp in requests.groupby("lane"):
        v = np.sort(grp["ttft_s"].dropna().to_numpy() * 1e3)
        if len(v):
            ax.plot(v, np.arange(1, len(v) + 1) / len(v), label=str(lane))
    ax.set_xlabel("TTFT (ms)")
    ax.set_ylabel("fraction of requests")
    ax.set_xscale("symlog", linthresh=10)
    ax.grid(alpha=0.3)
    if requests["lane"].nunique() > 1:
        ax.legend()
    ax.set_title(title or "Time to first token")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def _binned(steps: pd.DataFrame) -> pd.DataFrame:
    if len(steps) <= MAX_POINTS:
        return steps
    bins = pd.cut(steps["start_s"], MAX_POINTS, labels=False)
    g = steps.groupby(bins)
    return pd.DataFrame({"start_s": g["start_s"].first(),
                         "kv_used_fraction": g["kv_used_fraction"].max(),
                         "num_waiting": g["num_waiting"].max()})


def kv_vs_waiting(steps: pd.DataFrame, path: Path, title: str = "") -> None:
    fig = Figure(figsize=(8, 4))
    ax = fig.subplots()
    if len(steps):
        b = _binned(steps)
        ax.plot(b["start_s"], 100 * b["kv_used_fraction"], color="tab:blue", lw=1)
        ax2 = ax.twinx()
        ax2.plot(b["start_s"], b["num_waiting"], color="tab:red", lw=1)
        ax2.set_ylim(0, max(1.0, 1.05 * float(b["num_waiting"].max())))
        ax2.set_ylabel("requests waiting", color="tab:red")
    ax.set_ylim(0, 105)
    ax.set_xlabel("simulated time (s)")
    ax.set_ylabel("KV blocks used (%)", color="tab:blue")
    ax.set_title(title or "KV occupancy vs waiting queue")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
