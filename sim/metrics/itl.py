"""Inter-token latencies (ITL), kept in memory bounded by what is in flight.

The recorder hands over, per committed plan, weighted gap samples:

    own:  gaps[i] is one gap of request reqs[i]
    run:  every gap is one gap of each request in reqs (a decode run: k - 1 gaps shared by
          n requests, stored as k - 1 + n numbers, not (k - 1) * n)

Small runs keep every record, so ITL percentiles are exact (``EXACT_NUMBERS``, about
32 MB). Past it, records are *settled*: the gaps of requests that have finished (they
never emit again) move into a log-bucketed histogram (``LogHistogram``, relative accuracy
``RELATIVE_ACCURACY``), and only the gaps of requests still in flight stay as records. So
memory follows the requests in flight, not the length of the run, while the samples can
still be restricted to the finished requests (``vllm bench serve`` reports the ITL of
finished requests only): any mask that keeps every settled request is answered.
"""

from __future__ import annotations

import math

import numpy as np

EXACT_NUMBERS = 4_000_000  # stored numbers (8 bytes each) kept exactly before settling
RELATIVE_ACCURACY = 1e-3  # histogram values (and percentiles) within 0.1 % of the exact ones
_MIN_S, _MAX_S = 1e-9, 1e7  # histogram range (s); gaps outside are clamped into it


class LogHistogram:
    """Counts per bucket (gamma^(i-1), gamma^i] * _MIN_S, gamma = (1 + a) / (1 - a): every
    value is represented by 2 gamma^i / (gamma + 1) * _MIN_S, within a relative ``a`` of it
    (DDSketch's mapping, fixed range). Linear interpolation between two represented order
    statistics stays within ``a`` of interpolating the exact ones."""

    def __init__(self, accuracy: float = RELATIVE_ACCURACY):
        self.gamma = (1 + accuracy) / (1 - accuracy)
        self._log_gamma = math.log(self.gamma)
        size = int(math.ceil(math.log(_MAX_S / _MIN_S) / self._log_gamma)) + 1
        self.counts = np.zeros(size, dtype=np.int64)

    def add(self, values: np.ndarray, weights: np.ndarray | int = 1) -> None:
        v = np.clip(values, _MIN_S, _MAX_S) / _MIN_S
        idx = np.ceil(np.log(v) / self._log_gamma).astype(np.int64)
        np.clip(idx, 0, len(self.counts) - 1, out=idx)
        w = np.broadcast_to(np.asarray(weights, dtype=np.int64), idx.shape)
        self.counts += np.bincount(idx, weights=w, minlength=len(self.counts)).astype(np.int64)

    def samples(self) -> tuple[np.ndarray, np.ndarray]:
        """(represented values, counts) of the non-empty buckets."""
        nz = np.flatnonzero(self.counts)
        values = 2.0 * np.power(self.gamma, nz) / (self.gamma + 1.0) * _MIN_S
        return values, self.counts[nz]


class ItlStore:
    """Per-plan gap records, settled into a histogram once the run outgrows
    ``exact_numbers``."""

    def __init__(self, num_requests: int, exact_numbers: int | None = None):
        exact_numbers = EXACT_NUMBERS if exact_numbers is None else exact_numbers
        self._own: list[tuple[np.ndarray, np.ndarray]] = []
        self._runs: list[tuple[np.ndarray, np.ndarray]] = []
        self._stored = 0  # numbers held in records
        self._limit = exact_numbers  # settle when _stored passes it
        self.exact_numbers = exact_numbers
        self.hist: LogHistogram | None = None  # created at the first settling
        self.settled = np.zeros(num_requests, dtype=bool)  # gaps moved into hist

    @property
    def exact(self) -> bool:
        """Every sample is kept exactly (no settling happened)."""
        return self.hist is None

    def add_own(self, gaps: np.ndarray, reqs: np.ndarray) -> None:
        self._own.append((gaps, reqs))
        self._stored += 2 * len(gaps)

    def add_run(self, gaps: np.ndarray, reqs: np.ndarray) -> None:
        self._runs.append((gaps, reqs))
        self._stored += len(gaps) + len(reqs)

    @property
    def due(self) -> bool:
        """The records outgrew the limit: time to settle."""
        return self._stored > self._limit

    def settle(self, finished: np.ndarray) -> None:
        """Move the gaps of finished requests (``finished``: bool per request, those that
        emit no more) into the histogram (see the module docstring)."""
        if self.hist is None:
            self.hist = LogHistogram()
        if self._own:
            g = np.concatenate([g for g, _ in self._own])
            r = np.concatenate([r for _, r in self._own])
            fin = finished[r]
            self.hist.add(g[fin])
            self.settled[r[fin]] = True
            self._own = [(g[~fin], r[~fin])] if not fin.all() else []
        if self._runs:
            self._runs = self._settle_runs(finished)
        self._stored = sum(2 * len(g) for g, _ in self._own) + sum(
            len(g) + len(r) for g, r in self._runs)
        self._limit = max(self.exact_numbers, 2 * self._stored)

    def _settle_runs(self, finished: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
        gaps = np.concatenate([g for g, _ in self._runs])
        members = np.concatenate([r for _, r in self._runs])
        n_runs = len(self._runs)
        gap_run = np.repeat(np.arange(n_runs), [len(g) for g, _ in self._runs])
        sizes = np.array([len(r) for _, r in self._runs])
        member_run = np.repeat(np.arange(n_runs), sizes)
        fin = finished[members]
        done_per_run = np.bincount(member_run, weights=fin, minlength=n_runs).astype(np.int64)
        self.hist.add(gaps, done_per_run[gap_run])
        self.settled[members[fin]] = True
        kept = []
        for i in np.flatnonzero(done_per_run < sizes).tolist():
            g, r = self._runs[i]
            kept.append((g, r[~finished[r]]))
        return kept

    def samples(self, mask: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(gaps in seconds, weights) of every request, or of those in ``mask`` (bool per
        request; after settling it must keep every settled request)."""
        if mask is not None and self.settled[: len(mask)].any() and not mask[
                self.settled[: len(mask)]].all():
            raise ValueError("ITL samples of settled requests are pooled; a mask must keep "
                             "every finished request")
        own, runs = self._own, self._runs
        vals = [np.zeros(0)] + [g for g, _ in own] + [g for g, _ in runs]
        reqs = np.concatenate([np.zeros(0, dtype=np.int64)] + [r for _, r in own])
        w_own = np.ones(len(reqs), dtype=np.int64) if mask is None else mask[reqs].astype(
            np.int64)
        w_runs = np.zeros(0, dtype=np.int64)
        if runs:  # per run: how many of its requests count, once per gap
            sizes = np.array([len(r) for _, r in runs])
            counts = sizes
            if mask is not None:
                members = np.concatenate([r for _, r in runs])
                counts = np.bincount(np.repeat(np.arange(len(runs)), sizes),
                                     weights=mask[members], minlength=len(runs))
            w_runs = np.repeat(counts.astype(np.int64), [len(g) for g, _ in runs])
        values, weights = np.concatenate(vals), np.concatenate((w_own, w_runs))
        if self.hist is not None:
            hv, hw = self.hist.samples()
            values, weights = np.concatenate((hv, values)), np.concatenate((hw, weights))
        return values, weights
