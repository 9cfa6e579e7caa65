"""The requests the run's figures measure: those arriving at or after ``workload.warmup_s``.

An engine that starts empty serves its first requests faster than it will once a queue
and a full batch have formed; a warm-up leaves them out of the latency, throughput,
goodput and SLO figures while they still load the engine. Time-based figures (queue, KV
occupancy, stability) cover the whole run: they describe the engine, not the requests.
"""

from __future__ import annotations

import numpy as np


def warmup_s(res) -> float:
    return float(res.resolved.scenario.workload.warmup_s)


def measured(res) -> np.ndarray:
    """Per request: arrived at or after the warm-up (all True without one)."""
    return res.specs.arrival_s >= warmup_s(res)


def warmup_fields(res, mask: np.ndarray) -> dict:
    """The summary's ``requests`` keys that say what the warm-up left out (none without)."""
    if not warmup_s(res):
        return {}
    return {"warmup_s": warmup_s(res), "warmup_left_out": int((~mask).sum())}
