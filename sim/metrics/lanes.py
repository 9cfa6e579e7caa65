"""Per-lane breakdown of a run (interactive vs batch, or any lane tags the trace has)."""

from __future__ import annotations

from sim.metrics.latency import latency_block
from sim.sched.base import Status


def lane_blocks(res) -> dict:
    """Latency and counts per lane; empty when the run has a single lane."""
    s = res.specs
    if len(s.lane_names) < 2:
        return {}
    out = {}
    done = res.status == Status.FINISHED
    for code, name in enumerate(s.lane_names):
        mask = s.lane == code
        out[name] = {
            "requests": int(mask.sum()),
            "finished": int((mask & done).sum()),
            "preemptions": int(res.num_preemptions[mask].sum()),
            "latency_ms": latency_block(res, mask & done, itl=False),
        }
    return out
