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

A run past ``STREAM_STEPS`` steps (sim/metrics/spill.py) streams instead: every
``STREAM_STEPS`` steps (at a plan's end) the rows go to the spill file and the emission
runs closed so far are settled (``_flush``): last token times and max ITL per request are
updated, the gaps of finished requests go into the ITL histogram (sim/metrics/itl.py
``SettledItl``, within its 0.1 %), those of requests in flight stay exact until they
finish. Only the current chunk and per-request arrays stay in memory (and the token
times while the run has at most ``TOKEN_TIMES_LIMIT`` tokens, as in memory).
"""

from __future__ import annotations

from array import array

import numpy as np

from sim.engine.clock import NS_PER_S
from sim.metrics.itl import SettledItl
from sim.metrics.recorder import _PER_PLAN_ALL, STEP_COLUMNS, Recorder, expand_plans
from sim.metrics.spill import READ_ROWS, STREAM_STEPS, StepSpill
from sim.metrics.token_times import TOKEN_TIMES_LIMIT, range_positions, to_csr

_PLAN = _PER_PLAN_ALL  # prefill_tokens, decode_seqs, batch_size, num_running, num_preempted,
# plan_steps, blocked
_STEP = ("start_ns", "dur_ns", "kv_blocks_used", "kv_tokens", "num_waiting")
PIECE = READ_ROWS  # steps a flush writes and settles at a time


class FastRecord:
    def __init__(self, num_requests: int, egress_s: float = 0.0, *, kv_total_blocks: int = 0,
                 stream: bool = True, spill_dir=None, judged: np.ndarray | None = None):
        """``stream``: past ``STREAM_STEPS`` steps, stream the rows (module docstring) into a
        file in ``spill_dir``; ``judged``: the requests a summary measures (warm-up)."""
        self.n, self.egress_s = num_requests, egress_s
        self.p = [array("q") for _ in _PLAN]  # per plan columns (8 bytes a value)
        self.st = [array("q") for _ in _STEP]  # per step columns
        nan = np.full(num_requests, np.nan)
        self.first_scheduled_s, self.first_token_s, self.finish_s = nan, nan.copy(), nan.copy()
        self.reasons: dict[str, int] = {"": 0}
        # streaming: rows kept before a flush (never: a huge number), and the state kept
        self.stream_at = STREAM_STEPS if stream else 1 << 62
        self.kv_total_blocks, self.spill_dir, self.judged = kv_total_blocks, spill_dir, judged
        self.spill: StepSpill | None = None
        self.g0 = self.plans_done = 0  # steps and plans flushed
        self.prev_end = 0.0  # the end of the last flushed step (s)

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

    # ---- streaming ----------------------------------------------------------------------
    def flush(self, progress) -> None:
        """Stream the rows kept so far and settle the emission runs they close (module
        docstring); called at a plan's end. The rows go in pieces of at most ``PIECE``
        steps (whole plans), so a flush holds a piece's columns, not the chunk's."""
        if self.spill is None:
            self.spill = StepSpill(self.kv_total_blocks, self.spill_dir)
            self.last_token_s = np.full(self.n, np.nan)
            self.max_itl_s = np.zeros(self.n)
            self.itl = SettledItl(self.n, self.judged)
            self.tokens = _TokenPieces(self.n, self.egress_s, TOKEN_TIMES_LIMIT)
        plans, st = _take(self.p), _take(self.st)
        runs, gaps = _take(progress.runs), _take(progress.gaps)
        run_start = progress.run_start  # the runs open after the last step kept
        still = (np.array(list(run_start), dtype=np.int64),
                 np.array(list(run_start.values()), dtype=np.int64))
        k = plans[5]  # plan_steps
        if not len(k):  # no step kept: still the runs closed at the very end
            self._piece({c: x for c, x in zip(_PLAN, plans)}, st, runs, gaps, still)
            return
        ends_at = np.cumsum(k)
        a = s0 = 0
        while a < len(k):
            b = max(a + 1, int(np.searchsorted(ends_at, s0 + PIECE, side="right")))
            s1 = int(ends_at[b - 1])
            runs, gaps = self._piece({c: x[a:b] for c, x in zip(_PLAN, plans)},
                                     [x[s0:s1] for x in st], runs, gaps, still)
            a, s0 = b, s1

    def _piece(self, plans: dict, st: list, runs, gaps, still):
        """Write one piece of whole plans and settle what it closes; returns the runs and
        lone gaps that end after it."""
        g0, m = self.g0, len(st[0])
        ends = gap = np.zeros(0)
        if m:
            steps = _expand(plans, st, self.reasons)
            self.spill.write(steps)
            self.g0, self.plans_done = g0 + m, self.plans_done + len(plans["plan_steps"])
            ends = steps["start_s"] + steps["duration_s"]
            gap = steps["duration_s"].copy()  # inside a decode run: the step's duration
            first = np.cumsum(plans["plan_steps"])[:-1]  # a plan's first step: from the
            gap[first] = ends[first] - ends[first - 1]  # last end
            if g0:
                gap[0] = ends[0] - self.prev_end
            del steps
        g1 = g0 + m
        rr, ra, rb = runs
        now = rb < g1  # closed within this piece; the others are open through it
        gr, gg, gp = gaps
        here = gg < g1
        self._emissions(g0, ends, gap, (rr[now], ra[now], rb[now]),
                        (gr[here], gg[here], gp[here]),
                        (np.concatenate((rr[~now], still[0])),
                         np.concatenate((ra[~now], still[1]))))
        if m:
            self.prev_end = float(ends[-1])
        return (rr[~now], ra[~now], rb[~now]), (gr[~here], gg[~here], gp[~here])

    def _emissions(self, g0: int, ends: np.ndarray, gap: np.ndarray, closed, lone_gaps,
                   open_runs) -> None:
        """Settle the runs closed in a piece (``closed``: request, first, last step), its
        lone gaps (request, step, previous emitting step) and the open runs' steps
        (``open_runs``: request, first step) in it."""
        rr, ra, rb = closed
        gr, gg, gp = lone_gaps
        open_r, open_a = open_runs
        g1 = g0 + len(ends)

        def end_of(step: np.ndarray, req: np.ndarray) -> np.ndarray:
            """End of each emitting step; before this piece: the request's last token
            (settled before), or the last flushed step's end."""
            inside = step >= g0
            out = np.where(step == g0 - 1, self.prev_end, self.last_token_s[req])
            out[inside] = ends[step[inside] - g0]
            return out

        lone = ends[gg - g0] - end_of(gp, gr)  # before last_token_s moves on
        if len(rr):
            order = np.lexsort((rb, rr))  # each request's latest run last
            self.last_token_s[rr[order]] = end_of(rb[order], rr[order])
        req = np.concatenate((rr, open_r))
        lo = np.maximum(np.concatenate((ra, open_a)) + 1, g0) - g0
        hi = np.concatenate((rb, np.full(len(open_r), g1 - 1, dtype=np.int64))) - g0
        has = lo <= hi
        req, lo, hi = req[has], lo[has], hi[has]
        if len(req):
            x = np.append(gap, -np.inf)
            idx = np.empty(2 * len(lo), dtype=np.int64)
            idx[0::2], idx[1::2] = lo, hi + 1
            np.maximum.at(self.max_itl_s, req, np.maximum.reduceat(x, idx)[0::2])
        np.maximum.at(self.max_itl_s, gr, lone)
        self.itl.add(gap, req, lo, hi, gr, lone, ~np.isnan(self.finish_s))
        if self.tokens.kept:  # token times, while the run has few enough
            treq = np.concatenate((rr, open_r))
            tlo = np.maximum(np.concatenate((ra, open_a)), g0) - g0
            thi = np.concatenate((rb, np.full(len(open_r), g1 - 1, dtype=np.int64))) - g0
            on = tlo <= thi
            self.tokens.add(ends, treq[on], tlo[on], thi[on])

    # ---- the end ------------------------------------------------------------------------
    def recorder(self, progress):
        """The general engine's Recorder for this run (``progress``: sim/fast/state.py), or
        a ``StreamedRecorder`` when the rows were streamed."""
        if self.spill is not None:
            self.flush(progress)
            self.spill.close()
            return StreamedRecorder(self)
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


def _take(arrays) -> tuple[np.ndarray, ...]:
    """int64 copies of ``arrays`` (array('q') columns), which are emptied."""
    out = tuple(np.array(a, dtype=np.int64) for a in arrays)
    for a in arrays:
        del a[:]
    return out


def _expand(plans: dict, st: list, reasons: dict) -> dict[str, np.ndarray]:
    """Recorder.steps() of a chunk of whole plans."""
    steps = {"start_s": st[0] / NS_PER_S, "duration_s": st[1] / NS_PER_S,
             "kv_blocks_used": st[2], "kv_tokens": st[3], "num_waiting": st[4]}
    return expand_plans(plans, steps, reasons)


class _TokenPieces:
    """A streamed run's token times, kept chunk by chunk while the run has at most
    ``limit`` tokens (``csr``: as Emissions.csr)."""

    def __init__(self, n: int, egress_s: float, limit: int):
        self.n, self.egress_s, self.limit = n, egress_s, limit
        self.count, self.kept = 0, True
        self._req: list[np.ndarray] = []
        self._times: list[np.ndarray] = []

    def add(self, ends: np.ndarray, req: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> None:
        """Request ``req[i]`` got a token at the end of steps ``lo[i]..hi[i]`` of a chunk."""
        if not self.kept:
            return
        lens = hi - lo + 1
        total = int(lens.sum())
        self.count += total
        if self.count > self.limit:
            self.kept, self._req, self._times = False, [], []
            return
        steps = range_positions(lo, lens)
        self._req.append(np.repeat(req, lens))
        self._times.append(ends[steps] + self.egress_s)

    def csr(self) -> tuple[np.ndarray, np.ndarray] | None:
        if not self.kept:
            return None
        req = np.concatenate([np.zeros(0, dtype=np.int64), *self._req])
        times = np.concatenate([np.zeros(0), *self._times])
        return to_csr(req, times, self.n)


class StreamedRecorder:
    """The Recorder of a run whose step rows were streamed (sim/metrics/spill.py): the same
    per-request arrays and ITL samples (settled: sim/metrics/itl.py ``SettledItl``); the
    steps are read back from the file (``step_chunks``; ``steps()`` reads them all)."""

    streamed = True

    def __init__(self, fr: FastRecord):
        self.egress_s = fr.egress_s
        self.first_scheduled_s, self.first_token_s = fr.first_scheduled_s, fr.first_token_s
        self.finish_s, self.last_token_s, self.max_itl_s = (fr.finish_s, fr.last_token_s,
                                                            fr.max_itl_s)
        self.itl, self.tokens, self.spill = fr.itl, fr.tokens, fr.spill
        self.num_steps, self.num_plans = fr.g0, fr.plans_done

    @property
    def plan_steps(self) -> np.ndarray:
        raise ValueError("a streamed run keeps no per-plan rows")

    def step_chunks(self, columns=None):
        """The per-step columns (``STEP_COLUMNS``, or those named), chunk by chunk."""
        return self.spill.chunks(list(columns or STEP_COLUMNS))

    def steps(self) -> dict[str, np.ndarray]:
        parts = list(self.step_chunks())
        return {c: np.concatenate([p[c] for p in parts]) for c in STEP_COLUMNS}

    def head(self, m: int) -> StreamedRecorder:
        return Recorder.head(self, m)

    def itl_samples(self, mask: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        return self.itl.samples(mask)


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
        times = self.ends[range_positions(self.ra, lens)] + self.egress_s
        return to_csr(req, times, self.n)
