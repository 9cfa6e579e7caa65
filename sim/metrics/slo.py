"""Goodput and the SLO verdict against the scenario's latency budgets (ms).

Goodput counts finished requests within every budget (`vllm bench serve --goodput`).
The verdict judges every request that arrived in the run and was not rejected: a
request that did not finish (never started, cut by the horizon or the safety limit,
aborted) fails every budget, as its user got no complete answer. A budget is met
when the scenario's percentile of its metric over the judged requests is within it;
the value is None when that percentile falls among the failures (more than
100 - percentile % of the judged requests did not finish).
"""

from __future__ import annotations

import numpy as np

from sim.metrics.latency import unresolved
from sim.sched.base import Status

BUDGETS = ("ttft", "tpot", "e2el")


def goodput_mask(res, lat: dict, done: np.ndarray) -> np.ndarray:
    """Finished requests within every SLO budget (`vllm bench serve --goodput`)."""
    slo, ok = res.resolved.scenario.slo, done.copy()
    for key in BUDGETS:
        budget = getattr(slo, f"{key}_ms")
        if budget is not None:
            v = lat[key]
            ok &= np.isnan(v) | (v * 1e3 <= budget)
    return ok


def slo_verdict(res, lat: dict, judged: np.ndarray) -> dict:
    """Each budget at the scenario's percentile over the requests in ``judged``; those of
    them that did not finish count as failures of every budget."""
    slo = res.resolved.scenario.slo
    failed = judged & unresolved(res)
    done = judged & (res.status == Status.FINISHED)
    out = {"percentile": slo.percentile, "judged": int(judged.sum()),
           "unfinished_as_failures": int(failed.sum()),
           "good": int((goodput_mask(res, lat, done)).sum())}
    met = True
    for key in BUDGETS:
        budget = getattr(slo, f"{key}_ms")
        if budget is None:
            continue
        v = np.where(failed, np.inf, lat[key])[judged]
        value = percentile_with_failures(v[~np.isnan(v)], slo.percentile)
        ok = value is not None and value * 1e3 <= budget
        out[f"{key}_ms"] = {"budget": budget, "value": None if value is None else value * 1e3,
                            "met": bool(ok)}
        met &= bool(ok)
    out["met"] = met
    return out


def percentile_with_failures(v: np.ndarray, pct: float) -> float | None:
    """numpy's linear percentile of ``v`` (inf = a failure); None where it involves a
    failure, NaN for no values."""
    if not len(v):
        return float("nan")
    v = np.sort(v)
    rank = (len(v) - 1) * pct / 100.0
    lo = int(np.floor(rank))
    hi = min(lo + 1, len(v) - 1)
    if np.isinf(v[lo]) or (rank > lo and np.isinf(v[hi])):
        return None
    return float(v[lo] + (v[hi] - v[lo]) * (rank - lo))
