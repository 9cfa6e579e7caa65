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

from sim.metrics.token_times import range_positions

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

    def bucket(self, values: np.ndarray) -> np.ndarray:
        """The bucket of each value (values outside the range clamped into it)."""
        v = np.clip(values, _MIN_S, _MAX_S) / _MIN_S
        idx = np.ceil(np.log(v) / self._log_gamma).astype(np.int64)
        return np.clip(idx, 0, len(self.counts) - 1, out=idx)

    def add(self, values: np.ndarray, weights: np.ndarray | int = 1) -> None:
        idx = self.bucket(values)
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


class SettledItl:
    """The ITL samples of a run whose step rows were streamed (sim/metrics/spill.py): gaps
    are handed over chunk by chunk (``add``); those of finished requests go into a
    ``LogHistogram`` (within ``RELATIVE_ACCURACY``), one for the requests in ``judged`` (the
    requests a summary measures: all of them without a warm-up) and one for the others, so a
    mask of the finished (and judged) requests is answered; gaps of requests still in
    flight stay exact until they finish."""

    exact = False

    def __init__(self, num_requests: int, judged: np.ndarray | None = None):
        self.hist, self.hist_out = LogHistogram(), LogHistogram()
        self.settled = np.zeros(num_requests, dtype=bool)
        self.judged = judged  # None: every request
        self._held_v, self._held_r = np.zeros(0), np.zeros(0, dtype=np.int64)

    def _classes(self, reqs: np.ndarray) -> list[tuple[LogHistogram, np.ndarray]]:
        if self.judged is None:
            return [(self.hist, np.ones(len(reqs), dtype=bool))]
        j = self.judged[reqs]
        return [(self.hist, j), (self.hist_out, ~j)]

    def _settle(self, values: np.ndarray, reqs: np.ndarray) -> None:
        for hist, sel in self._classes(reqs):
            if sel.any():
                hist.add(values[sel])
        self.settled[reqs] = True

    def add(self, gap: np.ndarray, req: np.ndarray, lo: np.ndarray, hi: np.ndarray,
            lone_req: np.ndarray, lone: np.ndarray, finished: np.ndarray) -> None:
        """Request ``req[i]`` emitted a token after each of steps ``lo[i]..hi[i]`` of this
        chunk (gaps ``gap``, chunk positions, inclusive); ``lone`` are gaps of
        ``lone_req`` (after a pause); ``finished``: bool per request, those done emitting."""
        fin = finished[req]
        for hist, sel in self._classes(req):  # finished requests: weights per step
            sel = sel & fin
            if sel.any():
                m = len(gap)
                w = np.cumsum(np.bincount(lo[sel], minlength=m + 1)
                              - np.bincount(hi[sel] + 1, minlength=m + 1))[:m]
                on = w > 0
                hist.add(gap[on], w[on])
        self.settled[req[fin]] = True
        lfin = finished[lone_req]
        if lfin.any():
            self._settle(lone[lfin], lone_req[lfin])
        # requests in flight: their gaps exactly, with what was held already
        u = ~fin
        n = hi[u] - lo[u] + 1
        idx = range_positions(lo[u], n)
        hv = np.concatenate((self._held_v, gap[idx], lone[~lfin]))
        hr = np.concatenate((self._held_r, np.repeat(req[u], n), lone_req[~lfin]))
        done = finished[hr]
        if done.any():
            self._settle(hv[done], hr[done])
        self._held_v, self._held_r = hv[~done], hr[~done]

    def samples(self, mask: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(gaps in seconds, weights) of every request, or of those in ``mask``: the
        settled requests of each histogram must be all in the mask or all out of it."""
        parts = []
        for hist, sel in self._classes(np.flatnonzero(self.settled)):
            ids = np.flatnonzero(self.settled)[sel]
            if not len(ids):
                continue
            if mask is not None:
                inside = mask[ids]
                if not inside.any():
                    continue
                if not inside.all():
                    raise ValueError("ITL samples of settled requests are pooled; a mask "
                                     "must keep every finished (and measured) request or none")
            parts.append(hist.samples())
        keep = np.ones(len(self._held_r), dtype=bool) if mask is None else mask[self._held_r]
        parts.append((self._held_v[keep], np.ones(int(keep.sum()), dtype=np.int64)))
        return (np.concatenate([v for v, _ in parts]),
                np.concatenate([w for _, w in parts]).astype(np.int64))
