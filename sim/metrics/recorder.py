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
some requests afterwards (the finished ones, as `vllm bench serve` reports ITL); long
runs settle them into a histogram as requests finish (sim/metrics/itl.py), so memory
follows the requests in flight. Step rows are compacted into numpy chunks every
``COMPACT_PLANS`` plans (8 bytes a value, not a Python object per plan). Token times per
request are kept in bounded form (sim/metrics/token_times.py).
``egress_s`` (engine.egress_ms) is added to the client-visible times: first token and
finish; gaps and step times stay on the engine's clock.
"""

from __future__ import annotations

import copy

import numpy as np

from sim.engine.plan import StepOutcome, StepPlan
from sim.metrics.itl import ItlStore
from sim.metrics.token_times import TokenTimes

STEP_COLUMNS = ("start_s", "duration_s", "prefill_tokens", "decode_seqs", "batch_size",
                "kv_blocks_used", "kv_tokens", "num_running", "num_waiting", "num_preempted",
                "blocked")
_PER_PLAN = ("prefill_tokens", "decode_seqs", "batch_size", "num_running", "num_preempted")
_PER_STEP = ("start_s", "duration_s", "kv_blocks_used", "kv_tokens", "num_waiting")
_PER_PLAN_ALL = (*_PER_PLAN, "plan_steps", "blocked")
COMPACT_PLANS = 8192  # plans between compactions of the step rows into numpy chunks


def expand_plans(plans: dict, steps: dict, reasons: dict) -> dict[str, np.ndarray]:
    """Per-step columns (STEP_COLUMNS) of whole plans: ``plans`` per plan (``_PER_PLAN_ALL``,
    ``blocked`` as codes of ``reasons``), ``steps`` the per-step columns already kept."""
    out = dict(steps)
    k = plans["plan_steps"]
    for c in _PER_PLAN:
        out[c] = np.repeat(plans[c], k)
    # a plan's preemptions happen before its first step only
    pre = np.zeros(int(k.sum()), dtype=np.int64)
    pre[np.concatenate(([0], np.cumsum(k)[:-1]))] = plans["num_preempted"]
    out["num_preempted"] = pre
    names = np.empty(len(reasons), dtype=object)
    for reason, code in reasons.items():
        names[code] = reason
    out["blocked"] = np.repeat(names[plans["blocked"]], k)
    return {c: out[c] for c in STEP_COLUMNS}


class Recorder:
    streamed = False  # the step rows are in memory (sim/fast/record.py StreamedRecorder)

    def __init__(self, num_requests: int, egress_s: float = 0.0):
        self.egress_s = egress_s  # step end -> the client has the token (s)
        self.tokens = TokenTimes(num_requests)
        nan = np.full(num_requests, np.nan)
        self.first_scheduled_s = nan.copy()
        self.first_token_s = nan.copy()
        self.last_token_s = nan.copy()
        self.finish_s = nan.copy()
        self.max_itl_s = np.zeros(num_requests)
        self.itl = ItlStore(num_requests)
        # rows since the last compaction: per plan Python ints, per step arrays
        self._plan_cols: dict[str, list] = {c: [] for c in _PER_PLAN_ALL}
        self._step_cols: dict[str, list[np.ndarray]] = {c: [] for c in _PER_STEP}
        # compacted rows: one numpy array per column and chunk
        self._plan_chunks: dict[str, list[np.ndarray]] = {c: [] for c in _PER_PLAN_ALL}
        self._step_chunks: dict[str, list[np.ndarray]] = {c: [] for c in _PER_STEP}
        self._reasons: dict[str, int] = {"": 0}  # why admission stopped -> code
        self.num_steps = 0
        self.num_plans = 0

    def on_plan(self, plan: StepPlan, starts: np.ndarray, durations: np.ndarray,
                outcome: StepOutcome, waiting: np.ndarray) -> None:
        """Record a committed plan; ``starts``/``durations``/``waiting`` are per step."""
        ends = starts + durations
        self._requests(plan, starts[0], ends, durations, outcome)
        self._step_rows(plan, starts, durations, outcome, waiting)

    def _requests(self, plan, start, ends, durations, outcome) -> None:
        ids = plan.req_ids
        # start times only grow, so the earliest stays: fmin keeps a set time over NaN
        self.first_scheduled_s[ids] = np.fmin(self.first_scheduled_s[ids], start)
        em = outcome.emitted
        prev = self.last_token_s[em]
        seen = ~np.isnan(prev)
        if seen.all():  # every emitter had a token before (decode steps): no masking
            gaps, idx = ends[0] - prev, em
        else:
            gaps, idx = ends[0] - prev[seen], em[seen]
        if len(gaps):
            self.itl.add_own(gaps, idx)
            self.max_itl_s[idx] = np.maximum(self.max_itl_s[idx], gaps)
        if plan.num_steps > 1:
            rest = durations[1:]
            self.itl.add_run(rest, em)
            self.max_itl_s[em] = np.maximum(self.max_itl_s[em], rest.max())
        self.last_token_s[em] = ends[-1]
        self.tokens.add(ends + self.egress_s, em)
        if len(outcome.first_tokens):
            self.first_token_s[outcome.first_tokens] = ends[0] + self.egress_s
        if len(outcome.finished):
            self.finish_s[outcome.finished] = ends[-1] + self.egress_s
            if self.itl.due:
                self.itl.settle(~np.isnan(self.finish_s))

    def _step_rows(self, plan, starts, durations, outcome, waiting) -> None:
        p, s = self._plan_cols, self._step_cols
        p["prefill_tokens"].append(plan.num_prefill_tokens)
        p["decode_seqs"].append(plan.num_decode_seqs)
        p["batch_size"].append(len(plan.req_ids))
        p["num_running"].append(outcome.num_running)
        p["num_preempted"].append(len(plan.preempted))
        p["plan_steps"].append(plan.num_steps)
        code = self._reasons.get(outcome.blocked)
        if code is None:
            code = self._reasons[outcome.blocked] = len(self._reasons)
        p["blocked"].append(code)
        s["start_s"].append(starts)
        s["duration_s"].append(durations)
        s["kv_blocks_used"].append(outcome.kv_blocks_used)
        s["kv_tokens"].append(outcome.kv_tokens)
        s["num_waiting"].append(waiting)
        self.num_steps += plan.num_steps
        self.num_plans += 1
        if len(p["plan_steps"]) >= COMPACT_PLANS:
            self._compact()

    def _compact(self) -> None:
        """Move the rows collected since the last compaction into numpy chunks."""
        if not self._plan_cols["plan_steps"]:
            return
        for c, v in self._plan_cols.items():
            self._plan_chunks[c].append(np.asarray(v, dtype=np.int64))
            v.clear()
        for c, v in self._step_cols.items():
            self._step_chunks[c].append(np.concatenate(v))
            v.clear()

    def _columns(self) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """(per-plan, per-step) columns of every plan so far."""
        self._compact()
        plans = {c: np.concatenate(v) for c, v in self._plan_chunks.items()}
        steps = {c: np.concatenate(v) for c, v in self._step_chunks.items()}
        return plans, steps

    @property
    def plan_steps(self) -> np.ndarray:
        """Steps per committed plan (decode runs fold several)."""
        if not self.num_plans:
            return np.zeros(0, dtype=np.int64)
        return self._columns()[0]["plan_steps"]

    def steps(self) -> dict[str, np.ndarray]:
        """Per-step columns (decode runs expanded)."""
        if not self.num_plans:
            out = {c: np.zeros(0) for c in STEP_COLUMNS}
            out["blocked"] = np.zeros(0, dtype=object)
            return out
        plans, out = self._columns()
        return expand_plans(plans, out, self._reasons)

    def step_settings(self) -> dict | None:
        """Per step, the engine settings it ran under where steps differ in them (a fleet's
        view, sim/fleet/views.py); None: the run's own, every step."""
        return None

    def step_chunks(self, columns=None):
        """The per-step columns in chunks (here one: every step; a streamed recorder reads
        its file in row groups)."""
        steps = self.steps()
        yield steps if columns is None else {c: steps[c] for c in columns}

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
        request or of the requests in ``mask`` (bool per request); exact for small runs,
        within sim.metrics.itl.RELATIVE_ACCURACY once settled."""
        return self.itl.samples(mask)
