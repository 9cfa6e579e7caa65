"""Ingress and egress delays of a recorded engine run (engine.ingress_ms / egress_ms).

* ingress: client send -> the engine core has the request (its input thread received it;
  the next step start, or at once when idle, lets the scheduler see it);
* egress: the modelled end of the step that made a token (its start plus its interval, the
  step duration servesim prices) -> the client has the token.

Each request's k-th token is matched to the k-th step that gave it a token (steps log the
requests that got none: prefill chunks). The delays are trimmed means (the 2 % tails on each
side dropped: a client coroutine that wakes late, a merged delta), since the mean latency
metrics move with the mean delay.
"""

from __future__ import annotations

import numpy as np

from sim.report.recorded import RecordedRun, step_intervals, token_times

TRIM = 0.02


def trimmed_mean(x: np.ndarray, trim: float = TRIM) -> float:
    x = np.sort(np.asarray(x, dtype=np.float64))
    k = int(len(x) * trim)
    return float(x[k:len(x) - k].mean()) if len(x) > 2 * k else float("nan")


def ingress_samples(run: RecordedRun) -> np.ndarray:
    """Engine-core receipt minus client send, per request (s)."""
    return np.array([r["seen_s"] - r["send_s"] for r in run.requests
                     if r.get("seen_s") is not None])


def egress_samples(run: RecordedRun) -> np.ndarray:
    """Client token time minus the modelled end of the step that made it, per token (s)."""
    ends = np.array([s["start_s"] for s in run.steps]) + step_intervals(run.steps)
    made: dict[str, list[int]] = {}
    for i, s in enumerate(run.steps):
        skip = set(s.get("no_token", ()))
        for rid in s["tokens"]:
            if rid not in skip:
                made.setdefault(rid, []).append(i)
    out = []
    for req, times in zip(run.requests, token_times(run)):
        steps = made.get(req["request_id"], [])
        k = min(len(steps), len(times))
        out.append(times[:k] - ends[steps[:k]])
    return np.concatenate(out) if out else np.zeros(0)


def fit_delays(runs: list[RecordedRun]) -> tuple[float, float]:
    """(ingress, egress) in seconds over all runs (trimmed means, never below 0)."""
    ing = np.concatenate([ingress_samples(r) for r in runs])
    eg = np.concatenate([egress_samples(r) for r in runs])
    return max(trimmed_mean(ing), 0.0), max(trimmed_mean(eg), 0.0)
