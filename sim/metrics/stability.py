"""Did the waiting queue grow without bound? The verdict, and the numbers behind it.

Backlog B(t) = requests arrived by t minus requests finished or rejected by t.
Over the second half of the arrival period, a stable system's backlog does not
trend upward; an over-capacity one grows at (offered - served) requests/s. The
verdict is "unstable" when, over that half, the backlog grew by more than 5% of
the requests that arrived in it and ends above 10 requests, or when the run
was cut short by its safety limit with requests unfinished.
"""

from __future__ import annotations

import numpy as np

from sim.sched.base import Status

GROWTH_FRACTION = 0.05  # backlog growth / arrivals over the second half
MIN_BACKLOG = 10  # requests: smaller backlogs are noise


def backlog_at(arrival: np.ndarray, done_s: np.ndarray, t: float) -> int:
    """Requests arrived by ``t`` and not yet done (``done_s`` sorted, NaN-free)."""
    return int(np.searchsorted(arrival, t, side="right") - np.searchsorted(done_s, t, "right"))


def stability(res) -> dict:
    arrival = res.specs.arrival_s
    if len(arrival) < 2:
        return {"verdict": "stable", "reason": "fewer than two requests"}
    fin = res.recorder.finish_s.copy()
    fin[res.status == Status.REJECTED] = arrival[res.status == Status.REJECTED]
    done_s = np.sort(fin[~np.isnan(fin)])
    t0, t1 = float(arrival[0]), float(arrival[-1])
    mid = t0 + (t1 - t0) / 2
    b_mid, b_end = backlog_at(arrival, done_s, mid), backlog_at(arrival, done_s, t1)
    arrived = int(np.searchsorted(arrival, t1, "right") - np.searchsorted(arrival, mid, "right"))
    growth = (b_end - b_mid) / max(arrived, 1)
    rate = (b_end - b_mid) / max(t1 - mid, 1e-12)
    unfinished = int(((res.status == Status.WAITING) | (res.status == Status.RUNNING)).sum())
    cut = res.run.stopped_at_limit and res.resolved.scenario.horizon_s is None and unfinished
    unstable = bool(cut) or (growth > GROWTH_FRACTION and b_end > MIN_BACKLOG)
    if cut:
        reason = f"safety limit reached with {unfinished} requests unfinished"
    elif unstable:
        reason = (f"backlog grew from {b_mid} to {b_end} requests over the second half of the "
                  f"arrivals ({rate:.2f} req/s): offered load exceeds capacity")
    else:
        reason = f"backlog {b_mid} -> {b_end} requests over the second half of the arrivals"
    return {"verdict": "unstable" if unstable else "stable", "reason": reason,
            "backlog_mid": b_mid, "backlog_end": b_end, "backlog_growth_per_s": rate}
