"""What the fast core records, turned into the general engine's ``Recorder`` at the end.

During the run, O(1) per plan: the plan's columns and its steps' columns (sim/metrics/
recorder.py layout) go into int64 ``array``s (8 bytes a value); per-request events
(first scheduled, first token, finish) into float arrays. Token emission is kept as
emission runs and lone gaps (sim/fast/state.py), not per token.

At the end, everything the summary, the tables and the plots read is derived with numpy,
equal to what the general recorder holds:

* step ends ``E = start + duration`` (seconds, as the recorder adds them);
* the gap a continuing request sees at step ``g``: ``E[g] - E[g-1]`` at the first step of
  a plan (the recorder subtracts the previous token time), the step's duration inside a
  decode run (the recorder's shared run gaps);
* per request: last token time, max ITL (range maxima over its runs), token times (CSR,
  while the run stays under ``TOKEN_TIMES_LIMIT``), and ITL samples: one value per step
  weighted by the selected requests emitting there, plus the lone gaps. Exact: the ITL
  percentiles need no sketch (memory is O(steps), like the step table).
"""

from __future__ import annotations

from array import array

import numpy as np

from sim.engine.clock import NS_PER_S
from sim.metrics.recorder import _PER_PLAN_ALL, Recorder
from sim.metrics.token_times import TOKEN_TIMES_LIMIT

_PLAN = _PER_PLAN_ALL  # prefill_tokens, decode_seqs, batch_size, num_running, num_preempted,
# plan_steps, blocked
_STEP = ("start_ns", "dur_ns", "kv_blocks_used", "kv_tokens", "num_waiting")


class FastRecord:
    def __init__(self, num_requests: int, egress_s: float = 0.0):
        self.n, self.egress_s = num_requests, egress_s
        self.p = [array("q") for _ in _PLAN]  # per plan columns (8 bytes a value)
        self.st = [array("q") for _ in _STEP]  # per step columns
        nan = np.full(num_requests, np.nan)
        self.first_scheduled_s, self.first_token_s, self.finish_s = nan, nan.copy(), nan.copy()
        self.reasons: dict[str, int] = {"": 0}

    def plan(self, prefill, decode, batch, running, preempted, steps, blocked) -> None:
        code = self.reasons.get(blocked)
        if code is None:
            code = self.reasons[blocked] = len(self.reasons)
        p = self.p
        p[0].append(prefill)
        p[1].append(decode)
        p[2].append(batch)
        p[3].append(running)
        p[4].append(preempted)
        p[5].append(steps)
        p[6].append(code)

    def step(self, start, dur, used, stored, waiting) -> None:
        st = self.st
        st[0].append(start)
        st[1].append(dur)
        st[2].append(used)
        st[3].append(stored)
        st[4].append(waiting)

    def steps(self, starts, durs, used, stored, waiting) -> None:
        """A decode run's steps, column by column (iterables of ints)."""
        st = self.st
        st[0].extend(starts)
        st[1].extend(durs)
        st[2].extend(used)
        st[3].extend(stored)
        st[4].extend(waiting)

    def events(self, start: int, dur: int, scheduled, first, finished) -> None:
        """Per-request times of one step (ns): first scheduled, first token, finish."""
        s = start / NS_PER_S
        end = s + dur / NS_PER_S + self.egress_s
        for r in scheduled:
            self.first_scheduled_s[r] = s
        for r in first:
            self.first_token_s[r] = end
        for r in finished:
            self.finish_s[r] = end

    # ---- the end ------------------------------------------------------------------------
    def recorder(self, progress) -> Recorder:
        """The general engine's Recorder for this run (``progress``: sim/fast/state.py)."""
        rec = Recorder(self.n, egress_s=self.egress_s)
        plans = {c: _column(a) for c, a in zip(_PLAN, self.p)}
        st = [_column(a) for a in self.st]
        start_s, dur_s = st[0] / NS_PER_S, st[1] / NS_PER_S
        steps = {"start_s": start_s, "duration_s": dur_s, "kv_blocks_used": st[2],
                 "kv_tokens": st[3], "num_waiting": st[4]}
        rec._plan_chunks = {c: [v] for c, v in plans.items()}
        rec._step_chunks = {c: [v] for c, v in steps.items()}
        rec._reasons = dict(self.reasons)
        rec.num_plans, rec.num_steps = len(plans["plan_steps"]), len(start_s)
        rec.first_scheduled_s, rec.first_token_s = self.first_scheduled_s, self.first_token_s
        rec.finish_s = self.finish_s
        ends = start_s + dur_s
        gap = dur_s.copy()  # inside a decode run: the step's duration
        first = np.concatenate(([0], np.cumsum(plans["plan_steps"])[:-1]))[1:]
        gap[first] = ends[first] - ends[first - 1]  # a plan's first step: from the last end
        emissions = Emissions(progress, ends, gap, self.n, self.egress_s, rec.tokens.limit)
        rec.last_token_s, rec.max_itl_s = emissions.last_token(), emissions.max_gap()
        rec.itl, rec.tokens = emissions, emissions
        return rec


def _column(a: array) -> np.ndarray:
    """The column as int64, sharing the array's memory (nothing appends to it any more)."""
    return np.frombuffer(a, dtype=np.int64) if len(a) else np.zeros(0, dtype=np.int64)


class Emissions:
    """Token emission of every request as runs of consecutive steps plus lone gaps; answers
    the recorder's ``itl.samples(mask)`` and ``tokens.csr()``."""

    def __init__(self, progress, ends: np.ndarray, gap: np.ndarray, n: int, egress_s: float,
                 token_limit: int = TOKEN_TIMES_LIMIT):
        def arr(a):
            return np.frombuffer(a, dtype=np.int64) if len(a) else np.zeros(0, np.int64)

        self.rr, self.ra, self.rb = (arr(a) for a in progress.runs)
        gr, gg, gp = (arr(a) for a in progress.gaps)
        self.ends, self.gap, self.n, self.egress_s = ends, gap, n, egress_s
        self.limit = token_limit  # token times kept while the run has at most this many
        self.lone_req, self.lone = gr, ends[gg] - ends[gp]
        self.exact = True

    def last_token(self) -> np.ndarray:
        last = np.full(self.n, -1, dtype=np.int64)
        np.maximum.at(last, self.rr, self.rb)
        out = np.full(self.n, np.nan)
        has = last >= 0
        out[has] = self.ends[last[has]]
        return out

    def max_gap(self) -> np.ndarray:
        m = np.zeros(self.n)
        np.maximum.at(m, self.lone_req, self.lone)
        inner = self.rb > self.ra
        if inner.any():
            lo, hi = self.ra[inner] + 1, self.rb[inner] + 1  # gaps at steps lo..hi-1
            x = np.append(self.gap, -np.inf)
            idx = np.empty(2 * len(lo), dtype=np.int64)
            idx[0::2], idx[1::2] = lo, hi
            np.maximum.at(m, self.rr[inner], np.maximum.reduceat(x, idx)[0::2])
        return m

    def samples(self, mask: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(gaps in seconds, weights) of every request, or of those in ``mask``."""
        sel = self.rb > self.ra
        lone = np.ones(len(self.lone_req), dtype=bool)
        if mask is not None:
            sel &= mask[self.rr]
            lone = mask[self.lone_req]
        g = len(self.gap)
        diff = (np.bincount(self.ra[sel] + 1, minlength=g + 1)
                - np.bincount(self.rb[sel] + 1, minlength=g + 1))
        w = np.cumsum(diff)[:g]
        on = w > 0
        return (np.concatenate((self.gap[on], self.lone[lone])),
                np.concatenate((w[on], np.ones(int(lone.sum()), dtype=np.int64))))

    def csr(self) -> tuple[np.ndarray, np.ndarray] | None:
        """(offsets, times) of every request's token times (sim/metrics/token_times.py)."""
        lens = self.rb - self.ra + 1
        total = int(lens.sum())
        if total > self.limit:
            return None
        req = np.repeat(self.rr, lens)
        steps = np.repeat(self.ra - np.concatenate(([0], np.cumsum(lens)[:-1])), lens) \
            + np.arange(total)
        times = self.ends[steps] + self.egress_s
        order = np.lexsort((times, req))
        counts = np.bincount(req, minlength=self.n)
        return np.concatenate(([0], np.cumsum(counts))), times[order]
