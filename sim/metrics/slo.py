"""Goodput and the SLO verdict against the scenario's latency budgets (ms).

Goodput counts finished requests within every budget (`vllm bench serve --goodput`).
The verdict judges every request that arrived in the run: a request that was rejected
(a prompt of max_model_len tokens or more; ``sim.sched.lengths``) or did not finish
(never started, cut by the horizon or the safety limit, aborted) fails every budget, as
its user got no first token within the budget, and no complete answer. A budget is met
when the scenario's percentile of its metric over the judged requests is within it; the
value is None when that percentile falls among the failures (more than 100 - percentile
% of the judged requests failed). A metric no judged request has (TPOT when every output
is one token, none failed) meets its budget, as goodput counts it, with a note.

``with_failures_ms`` has every statistic a capacity budget may name (mean, median, p90,
p95, p99, max) of TTFT, TPOT and E2EL over the judged requests, counted the same way
(None where it falls among the failures: the mean and max with any failure), so
capacity search judges its ``--slo`` budgets as a run judges its own.
"""

from __future__ import annotations

import numpy as np

from sim.metrics.latency import unresolved
from sim.sched.base import Status

BUDGETS = ("ttft", "tpot", "e2el")
STATS = {"median": 50.0, "p90": 90.0, "p95": 95.0, "p99": 99.0}


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
    them rejected or unfinished count as failures of every budget."""
    slo = res.resolved.scenario.slo
    rejected = judged & (res.status == Status.REJECTED)
    failed = judged & (unresolved(res) | rejected)
    done = judged & (res.status == Status.FINISHED)
    n = int(judged.sum())
    out = {"percentile": slo.percentile, "judged": n,
           "rejected_as_failures": int(rejected.sum()),
           "rejected_fraction": float(rejected.sum() / n) if n else 0.0,
           "unfinished_as_failures": int((failed & ~rejected).sum()),
           "good": int((goodput_mask(res, lat, done)).sum())}
    met = True
    for key in BUDGETS:
        budget = getattr(slo, f"{key}_ms")
        if budget is None:
            continue
        value = percentile_with_failures(_judged(lat[key], failed, judged), slo.percentile)
        if value is not None and np.isnan(value):  # no judged request has one (TPOT of
            # one-token outputs): met, as goodput counts such requests
            out[f"{key}_ms"] = {"budget": budget, "value": None, "met": True,
                                "note": "no judged request has one"}
            continue
        ok = value is not None and value * 1e3 <= budget
        out[f"{key}_ms"] = {"budget": budget, "value": None if value is None else value * 1e3,
                            "met": bool(ok)}
        met &= bool(ok)
    out["met"] = met
    out["with_failures_ms"] = {key: with_failures_ms(_judged(lat[key], failed, judged))
                               for key in BUDGETS}
    return out


def _judged(v: np.ndarray, failed: np.ndarray, judged: np.ndarray) -> np.ndarray:
    """The judged requests' values, failures as inf, undefined ones (NaN) left out."""
    v = np.where(failed, np.inf, v)[judged]
    return v[~np.isnan(v)]


def with_failures_ms(v: np.ndarray) -> dict:
    """mean, median, p90, p95, p99 and max (ms) of ``v`` (inf = a failure): None where a
    failure decides it, absent with no values."""
    if not len(v):
        return {}
    failed = bool(np.isinf(v).any())
    out = {"mean": None if failed else float(v.mean()) * 1e3}
    v = np.sort(v)  # once for every statistic
    for name, pct in STATS.items():
        value = percentile_with_failures(v, pct, presorted=True)
        out[name] = None if value is None else value * 1e3
    out["max"] = None if failed else float(v.max()) * 1e3
    return out


def percentile_with_failures(v: np.ndarray, pct: float, presorted: bool = False
                             ) -> float | None:
    """numpy's linear percentile of ``v`` (inf = a failure); None where it involves a
    failure, NaN for no values."""
    if not len(v):
        return float("nan")
    if not presorted:
        v = np.sort(v)
    rank = (len(v) - 1) * pct / 100.0
    lo = int(np.floor(rank))
    hi = min(lo + 1, len(v) - 1)
    if np.isinf(v[lo]) or (rank > lo and np.isinf(v[hi])):
        return None
    if rank == lo:  # on a value: a failure after it weighs nothing (inf x 0 is no number)
        return float(v[lo])
    return float(v[lo] + (v[hi] - v[lo]) * (rank - lo))
