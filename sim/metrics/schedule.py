"""CPU-side schedule time per step, the signal the article asks planners to watch.

The cost model's host part of each step's price (CostModel.host_times: scheduling, input
preparation and the step's launch; not the kernels): its distribution over the steps and
its share of the engine's busy time. A share that grows with the batch says the host, not
the GPU, sets the step rate. Only models that separate it report it (fitted and roofline;
a linear model or a steps-kind fit leaves the block empty). Under async scheduling vLLM
plans step N + 1 while step N runs; the price servesim charges is the same (the block says
which scheduler ran).
"""

from __future__ import annotations

import numpy as np


def schedule_block(res, steps: dict) -> dict:
    """The summary's ``schedule`` block (empty when the model gives no host time or the
    run took no step)."""
    dur = steps["duration_s"]
    if res.host_times is None or not len(dur):
        return {}
    host = res.host_times(steps["prefill_tokens"] + steps["decode_seqs"], steps["batch_size"])
    if host is None:
        return {}
    ms = np.asarray(host, dtype=np.float64) * 1e3
    return {"host_ms_per_step": {"mean": float(ms.mean()), "median": float(np.median(ms)),
                                 "p99": float(np.percentile(ms, 99)), "max": float(ms.max())},
            "host_share_of_busy_time": float(ms.sum() * 1e-3 / dur.sum()),
            "async_scheduling": bool(res.resolved.scenario.engine.async_scheduling)}
