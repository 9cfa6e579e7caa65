"""Is the run sustainable? The stability verdict, its rule and the numbers behind it.

Measured over the arrival period [first arrival, last arrival] (the span), cut into
``WINDOWS`` equal windows:

* **utilization**: the fraction of the span the engine spent in steps. Continuous
  batching is busy nearly all the time at any load that keeps one request running,
  so a high utilization alone is not saturation; next to a queue it means no slack.
* **queue**: requests that arrived and have not started yet (never scheduled;
  rejected requests never queue), time-averaged per window; **running**: requests
  running, time-averaged per window. By Little's law, queue / running is the time
  requests wait to start over the time they are being served. Behind a concurrency cap
  on an open stream a request arrives when its client is ready (``waiting_from``).
* **queue growth**: the Theil-Sen slope (median of the pairwise slopes, so one
  burst does not make a trend) of the windows' queue, as a fraction of the arrival
  rate: the share of offered requests that pile up (1 - 1/rho at rho x capacity).
* **drain**: from the last arrival until every arrived request had started (to the
  end of the run if some never did), as a fraction of the span (about rho - 1 for a
  steady overload; a burst the engine absorbs drains in a small fraction).

Verdicts (thresholds below):

* ``unstable``: the modelled engine stopped (vLLM v0 out of CPU swap space), or the
  run reached its safety limit with requests unfinished; or the
  queue grows (growth >= 10% of the arrival rate), does not drain (drain >= 10% of
  the span) and reached ``MIN_QUEUE`` requests: the offered load exceeds capacity by
  about 10% or more and latency grows without bound;
* ``saturated``: not unstable, the engine was busy >= 95% of the span, and in some
  window at least ``MIN_QUEUE`` requests waited to start, at least half as many as
  were running: requests waited to start at least half as long as they took to be
  served. At capacity: latency depends on the load's peaks and the run's length;
  there is no headroom (a max_num_seqs-bound engine gets there near 90% of the load
  it can serve). The reason says *overloaded at its peak* when that window's queue
  reached ``OVERLOADED_QUEUE_TO_RUNNING`` times the running requests (each waited
  longer than it took to be served: the peaks exceed capacity, the mean does not);
* ``stable``: otherwise.

Other code asks :func:`is_sustainable` (a run summary) or reads
:func:`assess_stability` (a run result); both stay stable in name and fields.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from sim.metrics.latency import request_latencies, unresolved
from sim.sched.base import Status

STABLE, SATURATED, UNSTABLE = "stable", "saturated", "unstable"
WINDOWS = 10  # equal windows of the arrival period
UNSTABLE_GROWTH = 0.10  # queue growth / arrival rate
UNSTABLE_DRAIN = 0.10  # drain time / span
SATURATED_BUSY = 0.95  # busy fraction of the span
SATURATED_QUEUE_TO_RUNNING = 0.5  # window mean queue / window mean running
MIN_QUEUE = 10  # requests: smaller queues are noise
MIN_JUDGE_S = 60.0  # arrivals spanning less than a minute cannot show a trend (s)
MIN_LIFETIMES = 10  # nor fewer than this many median request lifetimes (E2EL)
OVERLOADED_QUEUE_TO_RUNNING = 1.0  # waits beyond the service time: overloaded, not at capacity


@dataclass(frozen=True)
class Stability:
    """The verdict and its numbers (the summary's ``stability`` block)."""

    verdict: str  # stable | saturated | unstable
    reason: str  # one line: which rule decided, with the numbers
    sustainable: bool  # verdict == "stable": keeps up with the load, with headroom
    utilization: float  # busy fraction of the arrival span
    queue_growth: float  # Theil-Sen slope of the windows' queue / arrival rate
    queue_growth_per_s: float  # the same slope (requests/s)
    drain_s: float  # last arrival -> every arrived request started (s)
    drain_fraction: float  # drain_s / span
    peak_queue: float  # largest window mean of requests waiting to start (requests)
    peak_queue_to_running: float  # that window's queue / running (wait vs service)
    window_s: float  # length of one window (s)
    window_queue: tuple[float, ...]  # mean requests waiting to start, per window
    window_running: tuple[float, ...]  # mean requests running, per window
    long_enough: bool = True  # the arrivals span MIN_JUDGE_S and MIN_LIFETIMES lifetimes

    def as_dict(self) -> dict:
        out = asdict(self)
        out["window_queue"] = list(self.window_queue)
        out["window_running"] = list(self.window_running)
        return out


def is_sustainable(summary: dict) -> bool:
    """The one question sweeps and capacity searches ask of a run summary: did the engine
    keep up with headroom (verdict ``stable``)? ``saturated`` and ``unstable`` did not."""
    return summary["stability"]["verdict"] == STABLE


def stability(res, areas: dict | None = None, lat: dict | None = None) -> dict:
    """The summary block: :func:`assess_stability` as a dict."""
    return assess_stability(res, areas, lat).as_dict()


def stability_edges(res) -> np.ndarray | None:
    """The windows' edges (s), or None when fewer than two arrival times span the run."""
    arrival = waiting_from(res)
    if len(arrival) < 2 or arrival[-1] <= arrival[0]:
        return None
    t0, t1 = float(arrival[0]), float(arrival[-1])
    return t0 + (t1 - t0) * np.arange(WINDOWS + 1) / WINDOWS


def assess_stability(res, areas: dict | None = None, lat: dict | None = None) -> Stability:
    """The verdict for a run result (``sim.runner.RunResult``), by the module's rule;
    ``areas``: the windows' integrals of busy time, running requests and KV blocks used
    (``busy``, ``running``, ``kv``) when the steps were read already (a streamed run,
    sim/metrics/step_stats.py), else computed from ``recorder.steps()``."""
    arrival = waiting_from(res)
    failure = _failure(res)
    if len(arrival) < 2 or arrival[-1] <= arrival[0]:
        # no span to cut into windows: nothing to judge a trend by (too_short says so
        # always: a zero span is under a minute); the drain is still measured (a burst
        # at one instant waits for it), its fraction of a zero span is left 0
        verdict = UNSTABLE if failure else STABLE
        short = too_short(res, lat)
        drain = _drain_s(res, float(arrival[-1])) if len(arrival) else 0.0
        reason = (failure or "fewer than two arrival times") + (f"; {short}" if short else "")
        return Stability(verdict, reason, verdict == STABLE, 0.0, 0.0, 0.0, drain, 0.0, 0.0,
                         0.0, 0.0, (), (), long_enough=not short)
    t0, t1 = float(arrival[0]), float(arrival[-1])
    span = t1 - t0
    edges = t0 + span * np.arange(WINDOWS + 1) / WINDOWS
    width = span / WINDOWS
    if areas is None:
        steps = res.recorder.steps()
        areas = {"busy": _step_area(steps, np.ones(len(steps["start_s"])), edges),
                 "running": _step_area(steps, steps["num_running"], edges),
                 "kv": _step_area(steps, steps["kv_blocks_used"], edges)}
    busy = areas["busy"]
    running = areas["running"] / width
    # integrals of counts are >= 0; cumulative sums of times leave ~1e-10 below (-6.8e-10)
    queue = np.maximum(_queue_area(res, edges) / width, 0.0)
    rate = (len(arrival) - 1) / span
    slope = _theil_sen((edges[:-1] + edges[1:]) / 2, queue)
    drain = _drain_s(res, t1)
    ratio = queue / np.maximum(running, 1.0)
    peak = int(np.argmax(queue))
    numbers = dict(
        utilization=float(busy.sum() / span), queue_growth=slope / rate,
        queue_growth_per_s=slope, drain_s=drain, drain_fraction=drain / span,
        peak_queue=float(queue[peak]), peak_queue_to_running=float(ratio[peak]),
        window_s=width, window_queue=tuple(float(x) for x in queue),
        window_running=tuple(float(x) for x in running))
    saturated_windows = (queue >= MIN_QUEUE) & (ratio >= SATURATED_QUEUE_TO_RUNNING)
    verdict, reason = _verdict(numbers, failure, saturated_windows, _in_use(res, areas, edges))
    if verdict != STABLE and arrival is not res.specs.arrival_s:
        reason += ("; requests held back client-side by workload.arrival.concurrency count "
                   "as waiting from when they were ready")
    short = too_short(res, lat)
    return Stability(verdict, reason + (f"; {short}" if short else ""), verdict == STABLE,
                     **numbers, long_enough=not short)


def waiting_from(res) -> np.ndarray:
    """When each request starts waiting (s): its arrival; under a concurrency cap on an
    open stream (``vllm bench serve --request-rate R --max-concurrency C``), the time its
    client was ready to send it (sent - client_queue_s). The cap holds requests back
    client-side: sends keep pace with finishes, so the server's own queue stays short while
    the clients' grows without bound at a rate the capped system cannot serve, and the
    offered load is R. A closed loop's clients are ready at 0 (its load is its clients),
    and so is a replay of ``--request-rate inf``: judged from their sends."""
    arrival = res.specs.arrival_s
    queued = getattr(res, "client_queue_s", None)
    process = getattr(res.resolved.scenario.workload.arrival, "process", "closed")
    if queued is None or process == "closed":
        return arrival
    ready = arrival - queued
    return ready if len(ready) > 1 and ready.max() > ready.min() else arrival


def held_back(res) -> bool:
    """A concurrency cap holds an open stream back client-side (``waiting_from`` is not the
    arrivals): the clients' queue is part of the verdict."""
    return waiting_from(res) is not res.specs.arrival_s


def too_short(res, lat: dict | None = None) -> str:
    """'' when the arrivals span enough time to judge a trend, else what is missing: a
    minute, and MIN_LIFETIMES median request lifetimes (so queues can build and drain).
    The summary repeats it as a warning (``sim.warnings``), which the console prints."""
    arrival = res.specs.arrival_s
    span = float(arrival[-1] - arrival[0]) if len(arrival) else 0.0
    e2el = (request_latencies(res) if lat is None else lat)["e2el"]
    e2el = e2el[np.isfinite(e2el)]
    life = float(np.median(e2el)) if len(e2el) else 0.0
    need = max(MIN_JUDGE_S, MIN_LIFETIMES * life)
    if span >= need:
        return ""
    return (f"too short to judge: {span:,.1f} s of arrivals, under {need:,.0f} s (a minute "
            f"and {MIN_LIFETIMES} median request lifetimes of {life:,.1f} s): send more "
            "requests (workload.duration_s; without a count a generated workload runs 5 "
            "minutes or more, up to a million requests)")


def _failure(res) -> str:
    """Why the run failed outright ('' = it did not): the engine stopped, or the safety
    limit of a run without horizon cut requests off."""
    stopped = res.counters.get("engine_stopped", "")
    if stopped:
        return f"the engine stopped: {stopped}"
    unfinished = int(unresolved(res).sum())
    if res.run.stopped_at_limit and res.resolved.scenario.horizon_s is None and unfinished:
        return f"safety limit reached with {unfinished} requests unfinished"
    return ""


def _in_use(res, areas: dict, edges: np.ndarray) -> str:
    """What the busy engine held on average over the span: sequences of max_num_seqs and the
    KV cache (continuous batching steps whenever one request runs, so busy is not full)."""
    span = edges[-1] - edges[0]
    running = areas["running"].sum() / span
    kv = areas["kv"].sum() / span
    return (f"{running:.1f} of {res.resolved.limits.max_num_seqs} sequences and "
            f"{kv / max(res.kv_total_blocks, 1):.0%} of the KV cache in use on average")


def _verdict(n: dict, failure: str, saturated_windows: np.ndarray, in_use: str):
    if failure:
        return UNSTABLE, failure
    if (n["queue_growth"] >= UNSTABLE_GROWTH and n["drain_fraction"] >= UNSTABLE_DRAIN
            and n["peak_queue"] >= MIN_QUEUE):
        return UNSTABLE, (
            f"the queue of requests waiting to start grew by {n['queue_growth']:.0%} of the "
            f"arrivals ({n['queue_growth_per_s']:.2f} req/s) and took {n['drain_s']:.1f} s "
            f"({n['drain_fraction']:.0%} of the arrival span) to drain after the last "
            "arrival: offered load exceeds capacity")
    busy = f"steps ran {n['utilization']:.0%} of the arrival span ({in_use})"
    if n["utilization"] >= SATURATED_BUSY and saturated_windows.any():
        k = int(np.argmax(np.where(saturated_windows, n["window_queue"], -1)))
        q, r = n["window_queue"][k], n["window_running"][k]
        waited = (f"in window {k + 1}/{WINDOWS} {q:,.0f} requests waited to start beside "
                  f"{r:,.0f} running")
        if q >= OVERLOADED_QUEUE_TO_RUNNING * max(r, 1.0):
            return SATURATED, (
                f"overloaded at its peak: {waited} (each waited about {q / max(r, 1.0):.1f}x "
                f"its service time: queueing dominates latency); the queue drained "
                f"{n['drain_s']:.1f} s after the last arrival: the load's peaks exceed "
                f"capacity, its mean does not; {busy}")
        return SATURATED, f"at capacity, no headroom: {waited}; {busy}"
    return STABLE, (
        f"{busy}; queue peaked at {n['peak_queue']:.0f} requests "
        f"({n['peak_queue_to_running']:.1f}x running), grew {n['queue_growth']:.1%} of the "
        f"arrivals, drained {n['drain_s']:.1f} s after the last arrival")


def _step_area(steps: dict, values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Integral over each window of a per-step value (0 while idle): value x seconds."""
    starts, dur = steps["start_s"], steps["duration_s"]
    if not len(starts):
        return np.zeros(len(edges) - 1)
    cum = np.concatenate(([0.0], np.cumsum(values * dur)))
    k = np.searchsorted(starts, edges, side="right") - 1  # last step starting by the edge
    inside = np.where(k >= 0, np.minimum(edges - starts[np.maximum(k, 0)],
                                         dur[np.maximum(k, 0)]), 0.0)
    upto = cum[np.maximum(k, 0)] + np.where(k >= 0, values[np.maximum(k, 0)] * inside, 0.0)
    return np.diff(upto)


def _queue_area(res, edges: np.ndarray) -> np.ndarray:
    """Integral over each window of the requests that arrived and had not started."""
    keep = res.status != Status.REJECTED
    arrived = waiting_from(res)[keep]
    if not (arrived[1:] >= arrived[:-1]).all():  # arrivals are in order: no sorted copy
        arrived = np.sort(arrived)
    started = res.recorder.first_scheduled_s[keep]  # a copy: sorted in place
    started[np.isnan(started)] = np.inf
    started.sort()
    return np.diff(_count_area(arrived, edges) - _count_area(started, edges))


def _count_area(times: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Integral up to each edge of #{times <= t} (``times`` sorted; inf never counts)."""
    finite = times[:np.searchsorted(times, np.inf, side="left")]  # the infs are last
    c = np.searchsorted(finite, edges, side="right")
    cum = np.cumsum(finite)
    before = np.where(c > 0, cum[np.maximum(c - 1, 0)] if len(cum) else 0.0, 0.0)
    return c * edges - before


def _drain_s(res, last_arrival: float) -> float:
    keep = res.status != Status.REJECTED
    started = res.recorder.first_scheduled_s[keep]
    if np.isnan(started).any():  # some never started: at least until the run ended
        end = float(res.run.end_s)
    else:
        end = float(started.max()) if len(started) else last_arrival
    return max(end - last_arrival, 0.0)


def _theil_sen(x: np.ndarray, y: np.ndarray) -> float:
    i, j = np.triu_indices(len(x), k=1)
    return float(np.median((y[j] - y[i]) / (x[j] - x[i])))
