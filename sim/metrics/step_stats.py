"""The summary's step figures of a run whose step rows were streamed (sim/metrics/spill.py),
computed chunk by chunk as the file is read back.

The same definitions as the blocks of sim/metrics/summary.py, occupancy.py, memory.py,
batch_limits.py, schedule.py and the step areas of stability.py, over row groups instead
of whole columns. Counts, maxima and integer sums are exact; the step duration percentiles
are exact too (the order statistics are found in a second read of the durations); sums of
seconds add chunk by chunk, so a time-weighted mean can differ from the in-memory figure
in its last bits; the host-time median is the linear percentile (np.median's mean of the
middle two can differ in the last bit). A run that kept its rows in memory never comes
here, so shipped scenarios and tests keep their figures to the bit.
"""

from __future__ import annotations

import math

import numpy as np

from sim.metrics.batch_limits import KV_WAIT
from sim.metrics.itl import LogHistogram
from sim.metrics.occupancy import Window
from sim.metrics.stats import weighted_percentiles
from sim.sched.base import Status


class _Counts:
    """Distinct values and their counts, merged chunk by chunk."""

    def __init__(self):
        self.v, self.w = np.zeros(0), np.zeros(0, dtype=np.int64)

    def add(self, x: np.ndarray) -> None:
        v, w = np.unique(x, return_counts=True)
        v, inv = np.unique(np.concatenate((self.v, v)), return_inverse=True)
        self.w = np.bincount(inv, weights=np.concatenate((self.w, w)),
                             minlength=len(v)).astype(np.int64)
        self.v = v


def _order_stats(chunks, column: str, ranks: list[int]) -> list[float]:
    """The values at 0-based ``ranks`` of ``column`` sorted, in two reads: a log histogram
    finds each rank's bucket, the second read keeps that bucket's values."""
    h = LogHistogram()
    bucket = h.bucket
    for c in chunks():
        h.add(c[column])
    cum = np.cumsum(h.counts)
    want = {int(np.searchsorted(cum, r, side="right")) for r in ranks}
    keep: dict[int, list] = {b: [] for b in want}
    for c in chunks():
        x = c[column]
        b = bucket(x)
        for k in want:
            keep[k].append(x[b == k])
    out = []
    for r in ranks:
        k = int(np.searchsorted(cum, r, side="right"))
        vals = np.sort(np.concatenate(keep[k]))
        out.append(float(vals[r - (cum[k - 1] if k else 0)]))
    return out


def _percentiles(chunks, column: str, n: int, pcts) -> list[float]:
    """weighted_percentiles(x, ones, pcts) of a streamed column (the same formula)."""
    spots = []
    for p in pcts:
        rank = (n - 1) * p / 100.0
        lo = int(np.floor(rank))
        spots.append((rank, lo, min(lo + 1, n - 1)))
    ranks = sorted({r for _, lo, hi in spots for r in (lo, hi)})
    val = dict(zip(ranks, _order_stats(chunks, column, ranks)))
    return [val[lo] + (val[hi] - val[lo]) * (rank - lo) for rank, lo, hi in spots]


class StreamedSteps:
    """Every step figure the summary and the stability verdict read, from one pass over a
    streamed recorder's row groups (``edges``: the stability windows' edges, or None)."""

    def __init__(self, res, edges: np.ndarray | None = None):
        rec = res.recorder
        self._chunks = rec.step_chunks
        total, lim = res.kv_total_blocks, res.resolved.limits
        self.total_blocks = total
        arrival = res.specs.arrival_s[res.status != Status.REJECTED]
        ai = 0  # arrivals charged so far
        n = busy = 0
        used_max = run_max = batch_max = wait_max = batch_sum = prefill = 0
        s_used = s_run = waste_num = waste_den = 0.0
        any_busy = False
        area_total, before = 0.0, 0.0
        by_reason: dict[str, float] = {}
        limits = {"at_max_num_seqs": 0.0, "kv_cache_full": 0.0, "token_budget_full": 0.0}
        host_sum, host_max, host_bound, host_none = 0.0, -math.inf, 0, False
        host = _Counts()
        pending = None  # the last step of the chunk before: (start, waiting, reason, charge)
        last_start = last_dur = None
        upto = {k: np.zeros(len(edges)) if edges is not None else None
                for k in ("busy", "running", "kv")}
        cum = {"busy": 0.0, "running": 0.0, "kv": 0.0}
        for c in rec.step_chunks():
            starts, dur = c["start_s"], c["duration_s"]
            m = len(starts)
            if not m:
                continue
            used, run, batch = c["kv_blocks_used"], c["num_running"], c["batch_size"]
            waiting, why = c["num_waiting"], c["blocked"]
            n += m
            busy += dur.sum()
            used_max, run_max = max(used_max, int(used.max())), max(run_max, int(run.max()))
            batch_max, wait_max = max(batch_max, int(batch.max())), max(wait_max,
                                                                         int(waiting.max()))
            batch_sum += int(batch.sum())
            prefill += int(c["prefill_tokens"].sum())
            s_used += (used / max(total, 1) * dur).sum()
            s_run += (run * dur).sum()
            slots = used * res.resolved.block_size
            b = slots > 0
            if b.any():
                any_busy = True
                waste = 1.0 - c["kv_tokens"][b] / np.maximum(slots[b], 1)
                waste_num += (waste * dur[b]).sum()
                waste_den += dur[b].sum()
            tokens = c["prefill_tokens"] + c["decode_seqs"]
            masks = {"at_max_num_seqs": batch >= lim.max_num_seqs,
                     "kv_cache_full": (why == KV_WAIT) | (c["num_preempted"] > 0),
                     "token_budget_full": tokens >= lim.max_num_batched_tokens}
            for k, mk in masks.items():
                limits[k] += dur[np.asarray(mk, dtype=bool)].sum()
            if res.host_times is not None and not host_none:
                h = res.host_times(tokens, batch)
                if h is None:
                    host_none = True
                else:
                    ms = np.asarray(h, dtype=np.float64) * 1e3
                    host_sum += ms.sum()
                    host_max = max(host_max, float(ms.max()))
                    host.add(ms)
                    host_bound += int((np.abs(np.asarray(dur, dtype=np.float64) - ms * 1e-3)
                                       < 1.5e-9).sum())
            # waiting: each step's interval to the next start; arrivals wait to the next start
            hi = int(np.searchsorted(arrival, starts[-1], side="right"))
            a = arrival[ai:hi]
            ai = hi
            at = np.searchsorted(starts, a, side="left")
            wait = starts[at] - a
            charge = np.bincount(at[at > 0] - 1, weights=wait[at > 0], minlength=m)
            if pending is not None:
                p_start, p_wait, p_why, p_charge = pending
                p_area = p_wait * (starts[0] - p_start) + p_charge + float(wait[at == 0].sum())
                area_total += p_area
                by_reason[p_why] = by_reason.get(p_why, 0.0) + p_area
            else:
                before += float(wait[at == 0].sum())
            area = waiting[:-1] * (starts[1:] - starts[:-1]) + charge[:-1]
            area_total += area.sum()
            for reason in set(why[:-1].tolist()):
                by_reason[reason] = by_reason.get(reason, 0.0) + area[why[:-1] == reason].sum()
            pending = (float(starts[-1]), int(waiting[-1]), why[-1], float(charge[-1]))
            last_start, last_dur = float(starts[-1]), float(dur[-1])
            if edges is not None:  # the stability windows: integrals up to each edge
                k = np.searchsorted(starts, edges, side="right") - 1
                has = k >= 0
                kk = k[has]
                inside = np.minimum(edges[has] - starts[kk], dur[kk])
                for key, vals in (("busy", None), ("running", run), ("kv", used)):
                    x = dur if vals is None else vals * dur
                    cs = np.cumsum(np.concatenate(([cum[key]], x)))
                    v = 1.0 if vals is None else vals[kk]
                    upto[key][has] = cs[kk] + v * inside
                    cum[key] = float(cs[-1])
        self.count = n
        start = float(res.specs.arrival_s[0]) if len(res.specs) else 0.0
        end = float(res.run.end_s)
        if last_start is not None:
            end = max(end, last_start + last_dur)
        self.window = Window(start, max(end, start))
        if pending is not None:  # the last step waits to the end of the run
            a = arrival[ai:]
            p_start, p_wait, p_why, p_charge = pending
            p_area = p_wait * (self.window.end_s - p_start) + p_charge + float(
                (self.window.end_s - a).sum())
            area_total += p_area
            by_reason[p_why] = by_reason.get(p_why, 0.0) + p_area
        else:
            before += float((self.window.end_s - arrival).sum())
        self.busy = float(busy)
        self._kv = (used_max, s_used, any_busy, waste_num, waste_den)
        self._run = (run_max, s_run)
        self._wait = (area_total, before, by_reason)
        self._steps = (batch_sum, batch_max, wait_max, prefill)
        self._limits = limits
        self._host = None if (res.host_times is None or host_none or not n) else (
            host_sum, host_max, host_bound, host)
        self.async_scheduling = bool(res.resolved.scenario.engine.async_scheduling)
        self.limits = lim
        self.areas = None if edges is None else {k: np.diff(v) for k, v in upto.items()}

    # ---- the summary's blocks -----------------------------------------------------------
    def kv_block(self) -> dict:
        total = self.total_blocks
        if not self.count:
            return {"total_blocks": total}
        used_max, s_used, any_busy, num, den = self._kv
        return {
            "total_blocks": total,
            "mean_used_fraction": float(s_used / self.window.length_s),
            "peak_used_fraction": float(used_max / max(total, 1)),
            "peak_used_blocks": int(used_max),
            "mean_wasted_slot_fraction": float(num / max(float(den), 1e-12)) if any_busy
            else 0.0,
        }

    def concurrency_fields(self) -> dict:
        if not self.count:
            return {"peak_concurrent_seqs": 0, "mean_concurrent_seqs": 0.0}
        run_max, s_run = self._run
        return {"peak_concurrent_seqs": int(run_max),
                "mean_concurrent_seqs": float(s_run / self.window.length_s)}

    def waiting_block(self) -> dict:
        area, before, by_reason = self._wait
        length = self.window.length_s
        out = {"mean_waiting": float((area + before) / length)}
        for reason in sorted(set(by_reason) - {""}):
            out[f"mean_waiting_on_{reason}"] = float(by_reason[reason] / length)
        return out

    def steps_block(self) -> dict:
        n = self.count
        if not n:
            return {"count": 0}
        batch_sum, batch_max, wait_max, prefill = self._steps
        p50, p99 = _percentiles(lambda: self._chunks(["duration_s"]), "duration_s", n,
                                (50, 99))
        return {
            "count": n, "busy_s": self.busy, "duration_ms_p50": p50 * 1e3,
            "duration_ms_p99": p99 * 1e3, "mean_batch_size": batch_sum / n,
            "max_batch_size": batch_max, "max_waiting": wait_max, "prefill_tokens": prefill,
        }

    def batch_limits(self) -> dict:
        if not self.busy:
            return {}
        out = {k: float(v / self.busy) for k, v in self._limits.items()}
        return {**out, "max_num_seqs": self.limits.max_num_seqs,
                "max_num_batched_tokens": self.limits.max_num_batched_tokens}

    def schedule_block(self) -> dict:
        if self._host is None:
            return {}
        host_sum, host_max, bound, counts = self._host
        n = self.count
        p50, p99 = weighted_percentiles(counts.v, counts.w, (50, 99))
        out = {"host_ms_per_step": {"mean": float(host_sum / n), "median": p50, "p99": p99,
                                    "max": host_max},
               "host_share_of_busy_time": float(host_sum * 1e-3 / self.busy),
               "async_scheduling": self.async_scheduling}
        if self.async_scheduling:
            out["host_bound_step_share"] = bound / n
        return out
