"""Summary statistics of a trace, with the definitions of /work/shared/traces/README.md.

span = last - first arrival; rate = (rows - 1) / span; inter-arrival CV = population std
(ddof=0) / mean of the gaps between consecutive sorted arrivals, zero gaps included (this
reproduces the README's 1.0941699818437756 for Azure conv). Percentiles are numpy linear.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
from rich.table import Table

from traces.hashes import cache_hit_ratios
from traces.schema import Trace


def _dist(values: np.ndarray) -> dict[str, float]:
    p50, p90, p99 = np.percentile(values, [50, 90, 99])
    return {
        "p50": float(p50),
        "p90": float(p90),
        "p99": float(p99),
        "max": float(values.max()),
        "min": float(values.min()),
        "mean": float(values.mean()),
    }


def _arrival_stats(t: np.ndarray) -> dict[str, float | None]:
    span = float(t[-1] - t[0])
    gaps = np.diff(t)
    mean = float(gaps.mean()) if gaps.size else None
    return {
        "span_s": span,
        "rate_per_s": (len(t) - 1) / span if span > 0 else None,
        "iat_mean_s": mean,
        "iat_cv": float(gaps.std() / mean) if mean else None,
    }


def trace_stats(trace: Trace, *, arrivals: bool = True) -> dict[str, Any]:
    """Rows, arrival stats (None when `arrivals` is False or undefined), length percentiles,
    lane counts and, when prefix chains exist, block-level cache hit ratios."""
    no_times = {"span_s": None, "rate_per_s": None, "iat_mean_s": None, "iat_cv": None}
    stats: dict[str, Any] = {
        "source": trace.source,
        "rows": len(trace),
        **(_arrival_stats(trace.arrival_s) if arrivals else no_times),
        "prompt_tokens": _dist(trace.prompt_tokens),
        "output_tokens": _dist(trace.output_tokens),
        "lanes": dict(sorted(Counter(trace.lanes.tolist()).items())),
        "prefix": None,
    }
    chains = trace.df["prefix_hashes"].tolist()
    with_chains = sum(c is not None for c in chains)
    if with_chains:
        stats["prefix"] = {
            "hash_block_size": trace.hash_block_size,
            "requests_with_hashes": with_chains,
            **cache_hit_ratios(chains),
        }
    return stats


def _num(value: float | None, digits: int = 3) -> str:
    if value is None:
        return "n/a"
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.{digits}f}"


def _quantiles(d: dict[str, float]) -> str:
    return " / ".join(_num(round(d[k])) for k in ("p50", "p90", "p99", "max"))


def format_stats(stats: dict[str, Any]) -> Table:
    """A two-column rich table of `trace_stats` output."""
    table = Table(title=stats["source"], show_header=True)
    table.add_column("stat")
    table.add_column("value", justify="right")
    table.add_row("rows", _num(stats["rows"]))
    table.add_row("span (s)", _num(stats["span_s"], 1))
    table.add_row("mean rate (req/s)", _num(stats["rate_per_s"]))
    table.add_row("mean inter-arrival (s)", _num(stats["iat_mean_s"]))
    table.add_row("inter-arrival CV", _num(stats["iat_cv"], 2))
    for name in ("prompt", "output"):
        d = stats[f"{name}_tokens"]
        table.add_row(f"{name} tokens p50 / p90 / p99 / max", _quantiles(d))
        table.add_row(f"{name} tokens mean / min", f"{d['mean']:,.1f} / {_num(d['min'])}")
    table.add_row("lanes", ", ".join(f"{k}: {v:,}" for k, v in stats["lanes"].items()))
    prefix = stats["prefix"]
    if prefix:
        table.add_row("hash block size (tokens)", _num(prefix["hash_block_size"]))
        blocks = f"{prefix['blocks']:,} / {prefix['unique_blocks']:,}"
        table.add_row("blocks / distinct ids", blocks)
        table.add_row("infinite-cache hit ratio", f"{prefix['hit_ratio']:.3f}")
        table.add_row("prefix-cache hit ratio", f"{prefix['prefix_hit_ratio']:.3f}")
    return table
