"""Per-request token times, kept in bounded memory, and per-request ITL percentiles.

The recorder keeps, per committed plan, the step end times and the requests that emitted a
token (a decode run of k steps over n requests is k + n numbers, not k * n), but only while
the run's tokens stay under ``TOKEN_TIMES_LIMIT``; past it they are dropped and per-request
ITL percentiles are reported as missing (max ITL and TPOT stay exact for every run).

Token times come back in CSR form: ``offsets`` (n + 1) into ``times``, each request's times
ascending. Percentiles use numpy's default (linear) rule, as ``vllm bench serve`` does.
"""

from __future__ import annotations

import numpy as np

TOKEN_TIMES_LIMIT = 1_000_000  # output tokens per run whose times are kept (8 bytes each)
ITL_PERCENTILES = (50, 90, 99)


class TokenTimes:
    """Collects (step end times, emitting requests) per plan while under the limit."""

    def __init__(self, num_requests: int, limit: int = TOKEN_TIMES_LIMIT):
        self.n, self.limit = num_requests, limit
        self.count = 0  # tokens recorded so far
        self.kept = True  # False once the run passed the limit
        self._plans: list[tuple[np.ndarray, np.ndarray]] = []

    def add(self, ends: np.ndarray, emitted: np.ndarray) -> None:
        """Every request of ``emitted`` got a token at each of ``ends`` (seconds)."""
        if not self.kept or not len(emitted):
            return
        self.count += len(ends) * len(emitted)
        if self.count > self.limit:
            self.kept, self._plans = False, []
            return
        self._plans.append((np.array(ends, dtype=np.float64), np.array(emitted)))

    def csr(self) -> tuple[np.ndarray, np.ndarray] | None:
        """(offsets, times): request i's token times are times[offsets[i]:offsets[i+1]]."""
        if not self.kept:
            return None
        if not self._plans:
            return np.zeros(self.n + 1, dtype=np.int64), np.zeros(0)
        req = np.concatenate([np.tile(e, len(t)) for t, e in self._plans])
        times = np.concatenate([np.repeat(t, len(e)) for t, e in self._plans])
        return to_csr(req, times, self.n)


def to_csr(req: np.ndarray, times: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(offsets, times) of tokens given as (request, time) pairs in any order, for ``n``
    requests: each request's times ascending."""
    order = np.lexsort((times, req))
    counts = np.bincount(req, minlength=n)
    return np.concatenate(([0], np.cumsum(counts))), times[order]


def range_positions(lo: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """lo[i], lo[i] + 1, ..., lo[i] + lens[i] - 1 for every i, concatenated (int64)."""
    lens = np.asarray(lens, dtype=np.int64)
    starts = np.concatenate(([0], np.cumsum(lens)[:-1])) if len(lens) else lens
    return np.repeat(np.asarray(lo, dtype=np.int64) - starts, lens) + np.arange(
        int(lens.sum()), dtype=np.int64)


def gap_percentiles(offsets: np.ndarray, times: np.ndarray,
                    percentiles=ITL_PERCENTILES) -> np.ndarray:
    """[n, len(percentiles)] percentiles of each request's inter-token gaps (NaN if none)."""
    n = len(offsets) - 1
    counts = np.diff(offsets)
    req = np.repeat(np.arange(n), counts)
    same = req[1:] == req[:-1]
    gaps, greq = np.diff(times)[same], req[1:][same]
    gaps = gaps[np.lexsort((gaps, greq))]
    m = np.bincount(greq, minlength=n)  # gaps per request
    start = np.concatenate(([0], np.cumsum(m)[:-1]))
    out = np.full((n, len(percentiles)), np.nan)
    has = m > 0
    for j, p in enumerate(percentiles):
        pos = (m[has] - 1) * (p / 100.0)
        lo = np.floor(pos).astype(np.int64)
        hi = np.minimum(lo + 1, m[has] - 1)
        a, b = gaps[start[has] + lo], gaps[start[has] + hi]
        out[has, j] = a + (pos - lo) * (b - a)
    return out


def split(offsets: np.ndarray, times: np.ndarray) -> list[np.ndarray]:
    """Each request's token times as its own array."""
    return np.split(times, offsets[1:-1])
