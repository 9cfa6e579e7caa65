"""Per-lane breakdown of a run (interactive vs batch, or any lane tags the trace has).

Each lane gets the run-level definitions restricted to its requests: counts,
TTFT/TPOT/E2EL distributions, output throughput and goodput (over the run's
duration, so lanes add up to the run's totals), and the SLO verdict against the
scenario's budgets (one set of budgets: a batch lane failing an interactive TTFT
budget is expected and shown, not hidden).
"""

from __future__ import annotations

import numpy as np

from sim.metrics.latency import latency_block, request_latencies
from sim.sched.base import Status


def _duration(res, done: np.ndarray) -> float:
    """The run's duration as the summary defines it: first arrival to last finish (s)."""
    first = float(res.specs.arrival_s[0]) if len(res.specs) else 0.0
    end = float(np.nanmax(res.recorder.finish_s)) if done.any() else res.run.end_s
    return max(end - first, 1e-12)


def lane_blocks(res) -> dict:
    """Latency, throughput, goodput and SLO verdict per lane; empty with a single lane."""
    from sim.metrics.summary import _goodput_mask, _slo_verdict  # summary imports this module

    s = res.specs
    if len(s.lane_names) < 2:
        return {}
    out = {}
    done = res.status == Status.FINISHED
    lat = request_latencies(res)
    good = _goodput_mask(res, lat, done)
    duration = _duration(res, done)
    for code, name in enumerate(s.lane_names):
        mask = s.lane == code
        mine = mask & done
        out[name] = {
            "requests": int(mask.sum()),
            "finished": int(mine.sum()),
            "preemptions": int(res.num_preemptions[mask].sum()),
            "throughput": {
                "output_token_per_s": int(res.generated[mine].sum()) / duration,
                "goodput_request_per_s": int((good & mask).sum()) / duration,
            },
            "latency_ms": latency_block(res, mine, itl=False),
            "slo": _slo_verdict(res, lat, mine),
        }
    return out
