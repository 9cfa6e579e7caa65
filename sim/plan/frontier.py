"""The capacity frontier: one row per configuration, the best one, per GPU, per token cost.

Every figure at the capacity is the worst over seeds (highest latency, KV occupancy and
preemptions; lowest throughput); the rate is the load axis value found by the search.
For a replayed trace it is reported twice: as the mean rate of the scaled trace and as
its busiest minute (the most arrivals in any 60 s window), which is what the engine had to survive.
"""

from __future__ import annotations

import math

import pandas as pd

from sim.plan.capacity import CapacityResult, ConfigCapacity, Tolerance
from sim.plan.grid import RATE_KEY

SECONDS_PER_HOUR = 3600.0


def cost_per_million(price_per_gpu_hour: float | None, per_s_per_gpu: float) -> float:
    """Price of a million units (output tokens, prompt + output tokens, requests) at full
    load, from their rate per GPU (per second; currency of the price)."""
    if not price_per_gpu_hour or not per_s_per_gpu or math.isnan(per_s_per_gpu):
        return math.nan
    return price_per_gpu_hour / (per_s_per_gpu * SECONDS_PER_HOUR) * 1e6


def costs(price: float | None, lo) -> dict:
    """Cost at the capacity per million output tokens, per million tokens processed (prompt
    + output, as APIs bill both) and per thousand requests served (worst seed)."""
    rate = (lambda col: lo.worst(col, min)) if lo else (lambda col: math.nan)
    return {
        "cost_per_million_output_tokens": cost_per_million(
            price, rate("output_token_per_s_per_gpu")),
        "cost_per_million_total_tokens": cost_per_million(
            price, rate("total_token_per_s_per_gpu")),
        "cost_per_thousand_requests": cost_per_million(
            price, rate("request_per_s_per_gpu")) / 1e3,
    }


def _rates(c: ConfigCapacity, load_key: str) -> tuple[float, float]:
    """(mean rate, busiest-minute rate) at the capacity, req/s."""
    lo = c.lo
    if lo is None:
        return 0.0, 0.0
    mean = lo.load if load_key == RATE_KEY else lo.worst("offered_rate_mean", min)
    return mean, lo.worst("offered_rate_peak_minute")


def frontier_row(c: ConfigCapacity, res: CapacityResult, price: float | None) -> dict:
    lo = c.lo
    mean, peak = _rates(c, res.load_key)
    gpus = int(lo.worst("gpus")) if lo else 1
    out_tok = lo.worst("output_token_per_s_per_gpu", min) if lo else math.nan
    row = {
        "config": c.label, "status": c.status,
        "max_load": lo.load if lo else 0.0, "next_load_failed": c.hi.load if c.hi else None,
        "rate_mean_req_s": mean, "rate_peak_minute_req_s": peak,
    }
    for b in res.budgets:
        row[f"{b.name}_ms"] = lo.worst(b.column) if lo else math.nan
    row.update({
        "kv_peak_pct": 100 * lo.worst("kv_cache.peak_used_fraction") if lo else math.nan,
        "preemptions": int(lo.worst("preemption.count")) if lo else 0,
        "binding": c.binding or "-", "gpus": gpus, "req_s_per_gpu": mean / gpus,
        "output_tok_s_per_gpu": out_tok, **costs(price, lo), "probes": c.probes,
    })
    return row


def frontier(res: CapacityResult, price: float | None = None) -> pd.DataFrame:
    table = pd.DataFrame([frontier_row(c, res, price) for c in res.configs])
    i = best(table) if len(table) else None
    tied = set(ties(table, i, res.tol)) if i is not None else set()
    table["tie_with_best"] = [j in tied for j in table.index]
    return table


def ties(table: pd.DataFrame, i: int, tol: Tolerance) -> list[int]:
    """Rows other than the best (``i``) whose capacity is within the search tolerance of
    the best's: requests/s per GPU at most the tolerance's width below it (the width at the
    best's first failing load, in its load units, turned into requests/s per GPU). The
    bisection cannot tell them apart: each answer is only known to that width."""
    b = table.loc[i]
    top = b["next_load_failed"]
    top = b["max_load"] if top is None or pd.isna(top) else top
    per_load = b["req_s_per_gpu"] / b["max_load"] if b["max_load"] else 0.0
    width = tol.width(float(top)) * per_load
    return [int(j) for j, r in table.iterrows()
            if j != i and r["status"] != "none"
            and b["req_s_per_gpu"] - r["req_s_per_gpu"] <= width * (1 + 1e-9)]


def best(table: pd.DataFrame) -> int | None:
    """Row index of the best configuration: most requests/s per GPU, then lowest first budget."""
    usable = table[table["status"] != "none"]
    if usable.empty:
        return None
    budget = next(c for c in table.columns if c.endswith("_ms"))
    ranked = usable.sort_values(["req_s_per_gpu", budget], ascending=[False, True], kind="stable")
    return int(ranked.index[0])
