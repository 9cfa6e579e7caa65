"""Records what happened, per request and per step, as the engine commits plans.

Per request (arrays indexed by request index): first scheduled, first token,
last token, finish time, largest inter-token gap. Per step: start, duration,
prefill tokens, decode requests, batch size, KV blocks used, running, waiting,
preemptions. Steps are stored per plan (a decode run's constant columns once,
with its step count) and expanded on demand, so recording costs O(1) Python
work per plan. Inter-token latencies are kept as weighted samples: in a decode
run of k steps over n requests, each step's duration after the first is one
gap for each of the n requests, stored once with weight n (exact, and k*n
times smaller), together with the n requests, so the samples can be restricted to
some requests afterwards (the finished ones, as `vllm bench serve` reports ITL).
Token times per request are kept in bounded form (sim/metrics/token_times.py).
``egress_s`` (engine.egress_ms) is added to the client-visible times: first token and
finish; gaps and step times stay on the engine's clock.
"""

from __future__ import annotations

import copy

import numpy as np

from sim.engine.plan import StepOutcome, StepPlan
from sim.metrics.token_times import TokenTimes

STEP_COLUMNS = ("start_s", "duration_s", "prefill_tokens", "decode_seqs", "batch_size",
                "kv_blocks_used", "kv_tokens", "num_running", "num_waiting", "num_preempted",
                "blocked")
_PER_PLAN = ("prefill_tokens", "decode_seqs", "batch_size", "num_running", "num_preempted")
_PER_STEP = ("start_s", "duration_s", "kv_blocks_used", "kv_tokens", "num_waiting")


class Recorder:
    def __init__(self, num_requests: int, egress_s: float = 0.0):
        self.egress_s = egress_s  # step end -> the client has the token (s)
        self.tokens = TokenTimes(num_requests)
        nan = np.full(num_requests, np.nan)
        self.first_scheduled_s = nan.copy()
        self.first_token_s = nan.copy()
        self.last_token_s = nan.copy()
        self.finish_s = nan.copy()
        self.max_itl_s = np.zeros(num_requests)
        # (gaps, requests, shared): shared=False: gap i belongs to requests[i]; shared=True:
        # every gap is one gap of each request in requests (a decode run)
        self._itl: list[tuple[np.ndarray, np.ndarray, bool]] = []
        self._plan_cols: dict[str, list[int]] = {c: [] for c in _PER_PLAN}
        self._step_cols: dict[str, list[np.ndarray]] = {c: [] for c in _PER_STEP}
        self._plan_steps: list[int] = []
        self._blocked: list[str] = []  # why admission stopped, per plan
        self.num_steps = 0

    def on_plan(self, plan: StepPlan, starts: np.ndarray, durations: np.ndarray,
                outcome: StepOutcome, waiting: np.ndarray) -> None:
        """Record a committed plan; ``starts``/``durations``/``waiting`` are per step."""
        ends = starts + durations
        self._requests(plan, starts[0], ends, durations, outcome)
        self._step_rows(plan, starts, durations, outcome, waiting)

    def _requests(self, plan, start, ends, durations, outcome) -> None:
        ids = plan.req_ids
        fs = self.first_scheduled_s[ids]
        if np.isnan(fs).any():
            self.first_scheduled_s[ids[np.isnan(fs)]] = start
        em = outcome.emitted
        prev = self.last_token_s[em]
        seen = ~np.isnan(prev)
        gaps = ends[0] - prev[seen]
        if len(gaps):
            idx = em[seen]
            self._itl.append((gaps, idx, False))
            self.max_itl_s[idx] = np.maximum(self.max_itl_s[idx], gaps)
        if plan.num_steps > 1:
            rest = durations[1:]
            self._itl.append((rest, em, True))
            self.max_itl_s[em] = np.maximum(self.max_itl_s[em], rest.max())
        self.last_token_s[em] = ends[-1]
        self.tokens.add(ends + self.egress_s, em)
        if len(outcome.first_tokens):
            self.first_token_s[outcome.first_tokens] = ends[0] + self.egress_s
        if len(outcome.finished):
            self.finish_s[outcome.finished] = ends[-1] + self.egress_s

    def _step_rows(self, plan, starts, durations, outcome, waiting) -> None:
        p, s = self._plan_cols, self._step_cols
        p["prefill_tokens"].append(plan.num_prefill_tokens)
        p["decode_seqs"].append(plan.num_decode_seqs)
        p["batch_size"].append(plan.batch_size)
        p["num_running"].append(outcome.num_running)
        p["num_preempted"].append(len(plan.preempted))
        s["start_s"].append(starts)
        s["duration_s"].append(durations)
        s["kv_blocks_used"].append(outcome.kv_blocks_used)
        s["kv_tokens"].append(outcome.kv_tokens)
        s["num_waiting"].append(waiting)
        self._blocked.append(outcome.blocked)
        self._plan_steps.append(plan.num_steps)
        self.num_steps += plan.num_steps

    def steps(self) -> dict[str, np.ndarray]:
        """Per-step columns (decode runs expanded)."""
        if not self._plan_steps:
            out = {c: np.zeros(0) for c in STEP_COLUMNS}
            out["blocked"] = np.zeros(0, dtype=object)
            return out
        k = np.asarray(self._plan_steps)
        out = {c: np.concatenate(v) for c, v in self._step_cols.items()}
        for c, v in self._plan_cols.items():
            out[c] = np.repeat(np.asarray(v, dtype=np.int64), k)
        # a plan's preemptions happen before its first step only
        first = np.concatenate(([0], np.cumsum(k)[:-1]))
        pre = np.zeros(self.num_steps, dtype=np.int64)
        pre[first] = self._plan_cols["num_preempted"]
        out["num_preempted"] = pre
        out["blocked"] = np.repeat(np.asarray(self._blocked, dtype=object), k)
        return {c: out[c] for c in STEP_COLUMNS}

    def head(self, m: int) -> Recorder:
        """The same record with the per-request arrays cut to requests [0, m) (the steps
        and inter-token samples are kept whole: requests >= m never ran)."""
        out = copy.copy(self)
        for name in ("first_scheduled_s", "first_token_s", "last_token_s", "finish_s",
                     "max_itl_s"):
            setattr(out, name, getattr(self, name)[:m])
        return out

    def itl_samples(self, mask: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Inter-token latencies (seconds) and their weights (gaps per value), of every
        request or of the requests in ``mask`` (bool per request)."""
        own = [(g, r) for g, r, shared in self._itl if not shared]
        runs = [(g, r) for g, r, shared in self._itl if shared]
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
        return np.concatenate(vals), np.concatenate((w_own, w_runs))
