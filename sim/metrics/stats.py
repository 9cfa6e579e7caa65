"""Percentile summaries with `vllm bench serve`'s conventions (numpy linear percentiles)."""

from __future__ import annotations

import math

import numpy as np

PERCENTILES = (50, 90, 95, 99)


def describe_ms(values_s: np.ndarray, weights: np.ndarray | None = None) -> dict:
    """mean/std/median/p90/p95/p99/max of seconds, reported in ms (NaNs dropped).

    With ``weights`` (integer multiplicities) the result equals that of the
    expanded sample, without expanding it, and depends on the sample only, not on how it
    is split into (value, weight) pairs: equal values are grouped and the mean and std
    sums are exact (math.fsum), so the two simulation cores (sim/fast), which keep the
    same ITL sample differently, report the same figures.
    """
    v = np.asarray(values_s, dtype=np.float64)
    if weights is None:
        return _describe_plain_ms(v)
    w = np.asarray(weights)
    keep = ~np.isnan(v) & (w > 0)
    v, w = v[keep], w[keep]
    if not len(v):
        return {"count": 0}
    # the same sample may come as different (value, weight) lists: group, sum exactly
    v, inv = np.unique(v, return_inverse=True)
    w = np.bincount(inv, weights=w).astype(np.int64)
    n, fw = int(w.sum()), w.astype(np.float64)
    mean = math.fsum((v * fw).tolist()) / n
    std = math.sqrt(math.fsum((fw * (v - mean) ** 2).tolist()) / n)
    out = {"count": n, "mean": mean, "std": std}
    for p, val in zip(PERCENTILES, weighted_percentiles(v, w, PERCENTILES)):
        out["median" if p == 50 else f"p{p}"] = val
    out["max"] = float(v.max())
    return {k: (x * 1e3 if k != "count" else x) for k, x in out.items()}


def _describe_plain_ms(v: np.ndarray) -> dict:
    """describe_ms of unweighted values: the same figures as with unit weights (v * 1 is v,
    the stable argsort's order is np.sort's values, unit weights' cumulative counts put
    rank i at position i), in one sorted copy of the values."""
    nan = np.isnan(v)
    if nan.any():
        v = v[~nan]
    del nan
    if not len(v):
        return {"count": 0}
    n = len(v)
    mean = float(v.sum() / n)
    d = v - mean
    np.square(d, out=d)  # (v - mean) ** 2, in place
    std = float(np.sqrt(d.sum() / n))
    del d
    out = {"count": n, "mean": mean, "std": std}
    s = np.sort(v)
    for p in PERCENTILES:
        rank = (n - 1) * p / 100.0
        lo = int(np.floor(rank))
        hi = min(lo + 1, n - 1)
        a, b = s[lo], s[hi]
        out["median" if p == 50 else f"p{p}"] = float(a + (b - a) * (rank - lo))
    out["max"] = float(s[-1])
    return {k: (x * 1e3 if k != "count" else x) for k, x in out.items()}


def weighted_percentiles(v: np.ndarray, w: np.ndarray, pcts) -> list[float]:
    """np.percentile(np.repeat(v, w), pcts) (linear interpolation), computed without repeat."""
    order = np.argsort(v, kind="stable")
    v, cum = v[order], np.cumsum(w[order])
    n = int(cum[-1])
    out = []
    for p in pcts:
        rank = (n - 1) * p / 100.0
        lo = int(np.floor(rank))
        hi = min(lo + 1, n - 1)
        a = v[np.searchsorted(cum, lo, side="right")]
        b = v[np.searchsorted(cum, hi, side="right")]
        out.append(float(a + (b - a) * (rank - lo)))
    return out
