"""Records what happened, per request and per step, as the engine commits plans.

Per request (arrays indexed by request index): first scheduled, first token,
last token, finish time, largest inter-token gap. Per step: start, duration,
prefill tokens, decode requests, batch size, KV blocks used, running, waiting,
preemptions. Inter-token latencies are kept as weighted samples: in a decode run
of k steps over n requests, each step's duration after the first is one gap for
each of the n requests, stored once with weight n (exact, and k*n times smaller).
"""

from __future__ import annotations

import numpy as np

from sim.engine.plan import StepOutcome, StepPlan

STEP_COLUMNS = ("start_s", "duration_s", "prefill_tokens", "decode_seqs", "batch_size",
                "kv_blocks_used", "num_running", "num_waiting", "num_preempted")


class Recorder:
    def __init__(self, num_requests: int):
        nan = np.full(num_requests, np.nan)
        self.first_scheduled_s = nan.copy()
        self.first_token_s = nan.copy()
        self.last_token_s = nan.copy()
        self.finish_s = nan.copy()
        self.max_itl_s = np.zeros(num_requests)
        self._itl: list[tuple[np.ndarray, np.ndarray]] = []
        self._steps: dict[str, list[np.ndarray]] = {c: [] for c in STEP_COLUMNS}
        self.num_steps = 0

    def on_plan(self, plan: StepPlan, starts: np.ndarray, durations: np.ndarray,
                outcome: StepOutcome, waiting: np.ndarray) -> None:
        """Record a committed plan; ``starts``/``durations``/``waiting`` are per step."""
        ends = starts + durations
        self._requests(plan, starts[0], ends, durations, outcome)
        self._step_rows(plan, starts, durations, outcome, waiting)

    def _requests(self, plan, start, ends, durations, outcome) -> None:
        ids = plan.req_ids
        new = ids[np.isnan(self.first_scheduled_s[ids])]
        self.first_scheduled_s[new] = start
        em = outcome.emitted
        prev = self.last_token_s[em]
        seen = ~np.isnan(prev)
        gaps = ends[0] - prev[seen]
        if len(gaps):
            self._itl.append((gaps, np.ones(len(gaps), dtype=np.int64)))
            np.maximum.at(self.max_itl_s, em[seen], gaps)
        if plan.num_steps > 1:
            rest = durations[1:]
            self._itl.append((rest, np.full(len(rest), len(em), dtype=np.int64)))
            self.max_itl_s[em] = np.maximum(self.max_itl_s[em], rest.max())
        self.last_token_s[em] = ends[-1]
        self.first_token_s[outcome.first_tokens] = ends[0]
        self.finish_s[outcome.finished] = ends[-1]

    def _step_rows(self, plan, starts, durations, outcome, waiting) -> None:
        k = plan.num_steps
        cols = self._steps
        cols["start_s"].append(starts)
        cols["duration_s"].append(durations)
        cols["prefill_tokens"].append(np.full(k, plan.num_prefill_tokens, dtype=np.int32))
        cols["decode_seqs"].append(np.full(k, plan.num_decode_seqs, dtype=np.int32))
        cols["batch_size"].append(np.full(k, plan.batch_size, dtype=np.int32))
        cols["kv_blocks_used"].append(outcome.kv_blocks_used.astype(np.int32))
        cols["num_running"].append(np.full(k, outcome.num_running, dtype=np.int32))
        cols["num_waiting"].append(waiting.astype(np.int32))
        pre = np.zeros(k, dtype=np.int32)
        pre[0] = len(plan.preempted)
        cols["num_preempted"].append(pre)
        self.num_steps += k

    def steps(self) -> dict[str, np.ndarray]:
        """Per-step columns, concatenated."""
        return {c: (np.concatenate(v) if v else np.zeros(0)) for c, v in self._steps.items()}

    def itl_samples(self) -> tuple[np.ndarray, np.ndarray]:
        """Inter-token latencies (seconds) and their weights."""
        if not self._itl:
            return np.zeros(0), np.zeros(0, dtype=np.int64)
        vals, weights = zip(*self._itl)
        return np.concatenate(vals), np.concatenate(weights)
