"""Time-weighted means over the whole run: KV occupancy, running and waiting requests.

The window is the run's: first arrival to the end of the run (the last step's end,
or the horizon). Idle time counts: the engine is idle only when nothing runs, so
KV blocks in use and running requests are 0 then, while requests may well wait
(static batching filling a batch, a horizon run whose queue no step admits).

Waiting requests W(t) change at plan times (admissions) and arrivals. Each step
records the requests still waiting after its admissions; an arrival waits from
its arrival to the next step start, where it is admitted or counted. So, with S
the step starts (S_n = end of run) and a the arrivals that were not rejected:

    integral of W = sum_j W_j (S_{j+1} - S_j) + sum_a (S(a) - a),
    S(a) = the first step start at or after a (the end of the run if none).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim.sched.base import Status


@dataclass(frozen=True)
class Window:
    """The span time-weighted means divide by (s)."""

    start_s: float  # first arrival
    end_s: float  # end of the run (>= the last step's end)

    @property
    def length_s(self) -> float:
        return max(self.end_s - self.start_s, 1e-12)


def run_window(res, steps: dict) -> Window:
    start = float(res.specs.arrival_s[0]) if len(res.specs) else 0.0
    end = float(res.run.end_s)
    if len(steps["start_s"]):
        end = max(end, float(steps["start_s"][-1] + steps["duration_s"][-1]))
    return Window(start, max(end, start))


def busy_mean(x: np.ndarray, steps: dict, window: Window) -> float:
    """Mean of a per-step quantity that is 0 while the engine is idle."""
    return float((x * steps["duration_s"]).sum() / window.length_s)


def waiting_area(res, steps: dict, window: Window) -> tuple[np.ndarray, float]:
    """Request-seconds of waiting charged to each step (its interval up to the next step
    start, idle time included), and those before the first step (s)."""
    starts, waiting = steps["start_s"], steps["num_waiting"]
    nxt = np.append(starts[1:], window.end_s) if len(starts) else np.zeros(0)
    area = waiting * (nxt - starts)
    arrival = res.specs.arrival_s[res.status != Status.REJECTED]
    # requests that arrive after the window (an engine that stopped: they are aborted
    # unseen) wait in no queue of it
    arrival = arrival[arrival <= window.end_s]
    at = np.searchsorted(starts, arrival, side="left")  # index of S(a)
    wait = np.append(starts, window.end_s)[at] - arrival
    before = float(wait[at == 0].sum())
    # an arrival in (S_{j-1}, S_j] waits until S_j: charged to step j - 1
    area = area + np.bincount(at[at > 0] - 1, weights=wait[at > 0], minlength=len(starts))
    return area, before
