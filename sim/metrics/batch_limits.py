"""What capped the running batch, from the step records: the share of the engine's busy
time spent in steps that ran at a limit.

* ``at_max_num_seqs``: the step ran max_num_seqs requests (no seat for another)
* ``kv_cache_full``: admission stopped for lack of KV blocks before the step, or the step
  preempted to free blocks
* ``token_budget_full``: the step's tokens (prefill chunks + one per decode) filled
  max_num_batched_tokens

Shares are of busy time (step durations), so a limit hit during a few long prefill steps
weighs what those steps cost. They name the cause behind a latency budget that fails
(capacity's ``binding``): a batch pinned at max_num_seqs is a seat limit, not the GPU.
"""

from __future__ import annotations

import numpy as np

KV_WAIT = "kv_memory"  # the steps' ``blocked`` reason for admission stopped by KV memory


def batch_limits(res, steps: dict, per_step: dict | None = None) -> dict:
    """The summary's ``batch_limits`` block (empty for a run with no steps). ``per_step``:
    each step's own max_num_seqs and max_num_batched_tokens (a fleet whose pools differ in
    them); else the run's."""
    dur = steps["duration_s"]
    busy = float(dur.sum())
    if not busy:
        return {}
    lim = res.resolved.limits
    seqs, budget = ((lim.max_num_seqs, lim.max_num_batched_tokens) if per_step is None else
                    (per_step["max_num_seqs"], per_step["max_num_batched_tokens"]))
    tokens = steps["prefill_tokens"] + steps["decode_seqs"]
    masks = {
        "at_max_num_seqs": steps["batch_size"] >= seqs,
        "kv_cache_full": (steps["blocked"] == KV_WAIT) | (steps["num_preempted"] > 0),
        "token_budget_full": tokens >= budget,
    }
    out = {k: float(dur[np.asarray(m, dtype=bool)].sum() / busy) for k, m in masks.items()}
    return {**out, "max_num_seqs": lim.max_num_seqs,
            "max_num_batched_tokens": lim.max_num_batched_tokens}
