"""Summary blocks of the memory policies: swap traffic, prefix caching, concurrency.

Counters come from ``RunResult.counters`` (scheduler + ``kv.counters()``); a key a
policy does not report reads as zero, so every run has the same summary shape.
"""

from __future__ import annotations

import numpy as np

from sim.metrics.occupancy import busy_mean

SWAP_KEYS = ("swap_out_events", "swap_in_events", "swap_out_bytes", "swap_in_bytes",
             "swap_space_exhausted", "swap_fallbacks")


def swap_fields(counters: dict) -> dict:
    """Preemption mode and swap traffic (events, bytes); swap_space_exhausted = victims that
    did not fit the host swap space, swap_fallbacks = those of them recomputed instead
    (``engine.swap_space_full: recompute``)."""
    out = {"mode": counters.get("preemption_mode", "recompute")}
    out.update({k: int(counters.get(k, 0)) for k in SWAP_KEYS})
    return out


def prefix_cache_block(counters: dict) -> dict:
    """vLLM's prefix-cache stats in tokens: hit_rate = hits / queries over first lookups;
    lookups by preempted requests re-admitted are counted apart; saved_prefill_tokens =
    every hit token (not recomputed)."""
    c = {k: int(counters.get(f"prefix_{k}", 0))
         for k in ("queries", "hits", "preempted_queries", "preempted_hits", "evictions")}
    return {"enabled": bool(counters.get("prefix_caching", False)), **c,
            "hit_rate": c["hits"] / c["queries"] if c["queries"] else 0.0,
            "saved_prefill_tokens": c["hits"] + c["preempted_hits"]}


def concurrency_fields(steps: dict, window) -> dict:
    """Requests running at once (after each step's admissions): peak, and the mean over the
    whole run (time-weighted; none run while the engine is idle)."""
    run = steps["num_running"]
    if not len(run):
        return {"peak_concurrent_seqs": 0, "mean_concurrent_seqs": 0.0}
    return {"peak_concurrent_seqs": int(np.max(run)),
            "mean_concurrent_seqs": busy_mean(run, steps, window)}
