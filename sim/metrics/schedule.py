"""CPU-side schedule time per step, the signal the article asks planners to watch.

The cost model's host part of each step's price (CostModel.host_times: scheduling, input
preparation and the step's launch; not the kernels): its distribution over the steps and
its share of the engine's busy time. A share that grows with the batch says the host, not
the GPU, sets the step rate. Only models that separate it report it (fitted and roofline;
a linear model or a steps-kind fit leaves the block empty). Under async scheduling vLLM
plans step N + 1 while step N runs, so with a fitted profile the host time hides behind the
kernels (sim/cost/fitted.py ``_overlap``) except in steps it outlasts them:
``host_bound_step_share`` is the share of steps whose duration is the host's (the host sets
the pace there: the signal to watch).
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
    out = {"host_ms_per_step": {"mean": float(ms.mean()), "median": float(np.median(ms)),
                                "p99": float(np.percentile(ms, 99)), "max": float(ms.max())},
           "host_share_of_busy_time": float(ms.sum() * 1e-3 / dur.sum()),
           "async_scheduling": bool(res.resolved.scenario.engine.async_scheduling)}
    if out["async_scheduling"]:  # the host overlaps the kernels: where does it bind?
        bound = np.abs(np.asarray(dur, dtype=np.float64) - ms * 1e-3) < 1.5e-9
        out["host_bound_step_share"] = float(bound.mean())
    return out
