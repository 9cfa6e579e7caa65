"""Static batching (FasterTransformer-style): fixed batches, no admission mid-batch.

A batch starts when ``batch_size`` requests are waiting or the oldest has waited
``max_wait_s``. Its members are taken FCFS; each reserves the KV its whole
sequence needs (prompt + output - 1 token slots, the last output token is never
fed back) when the batch starts, so a batch never preempts; if the next member's
reservation does not fit, the batch starts smaller.

The batch then runs:

* the context phase: every member's whole prompt in one step (FasterTransformer
  runs one forward pass over the batch; ``max_num_batched_tokens`` and chunked
  prefill do not apply, and the activation memory of that pass is not
  re-planned: the KV capacity is the scenario's);
* decode: one token per unfinished member per step until the longest finishes.

Modeling choices (the waste static batching pays):

* finished members compute nothing (they are left out of the step), but their
  KV blocks stay held until the whole batch ends; the summary's wasted-slot
  fraction counts them as held-but-unused. FasterTransformer would also run the
  finished rows as padding; under the roofline a decode step is bound by reading
  the weights, so a step over a few live rows already costs nearly a full one,
  and leaving padding rows out makes these numbers an upper bound for static;
* ``batch_size`` is capped by ``engine.max_num_seqs``; the admission rule is not
  consulted (the exact up-front reservation is stricter than any rule).

While a batch runs, waiting requests are blocked for reason ``policy``; arrivals
cannot change a running batch, so its decode runs are never interrupted.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from pydantic import ConfigDict, Field

from sim.engine.plan import StepPlan
from sim.sched.base import SCHEDULERS, Status
from sim.sched.batch import BatchBuilder
from sim.sched.vllm import MEMORY, POLICY, VllmScheduler
from traces.validated import Validated

WAKE_TOLERANCE_S = 1e-9  # the engine's wake-up time may round just below the deadline (s)


class StaticParams(Validated):
    model_config = ConfigDict(extra="forbid", frozen=True)

    batch_size: int = Field(
        32, ge=1, description="Requests per batch (requests); capped by engine.max_num_seqs.")
    max_wait_s: float = Field(
        1.0, ge=0, description="Longest the oldest waiting request waits for a batch to fill "
        "before a smaller batch starts (s).")


@SCHEDULERS.register("static")
class StaticScheduler(VllmScheduler):
    """Fixed batches: fill (or time out), prefill all, decode until the longest finishes."""
    holds_finished = False  # not vLLM v1's loop: a finish leaves the running list at once

    description = ("static batching (FasterTransformer-style): fill batch_size or wait "
                   "max_wait_s, run to the longest member, no admission mid-batch")
    Params = StaticParams
    prefix_caching_by_default = False  # not vLLM: no prefix cache unless asked

    def __init__(self, specs, limits, kv, params=None, admission=None):
        params = params if params is not None else self.Params()
        limits = replace(limits, max_num_seqs=min(params.batch_size, limits.max_num_seqs))
        super().__init__(specs, limits, kv, params, admission)
        self.members = np.zeros(0, dtype=np.int64)  # the batch in flight, admission order

    # ---- batch formation ----------------------------------------------------------------
    def _deadline(self) -> float:
        return float(self.specs.arrival_s[self.waiting.peek()]) + self.params.max_wait_s

    def next_wakeup(self, now: float) -> float | None:
        if len(self.members) or not len(self.waiting):
            return None
        return self._deadline()

    def _ready(self, now: float) -> bool:
        if len(self.waiting) >= self.limits.max_num_seqs:
            return True
        return now >= self._deadline() - WAKE_TOLERANCE_S

    def _start_batch(self) -> int:
        """Take members FCFS while their reservations fit; returns how many."""
        self._blocked = POLICY
        while len(self.waiting) and len(self.running) < self.limits.max_num_seqs:
            req = self.waiting.peek()
            comp = self.kv.lookup_prefix(req, int(self.known_tokens[req]))
            if not self.allocate(req, int(self.prompt[req] + self.output[req] - 1)):
                self._blocked = MEMORY
                self.memory_blocked[req] = True
                break
            self._admit(req, comp)
        self.members = self.running.copy()
        # the pool is empty between batches and resolve checked one max_model_len fits
        assert len(self.members), "static: the oldest request's reservation exceeds the KV pool"
        return len(self.members)

    # ---- the step -------------------------------------------------------------------------
    def schedule(self, now: float) -> StepPlan | None:
        started = 0
        if not len(self.members):
            if not len(self.waiting) or not self._ready(now):
                return None
            started = self._start_batch()
        # the context phase computes every member's whole prompt in one step; after it every
        # live member has exactly one token to compute per step (decode)
        batch, r = BatchBuilder(), self.running
        ctx, upto = self.computed[r], self.known_tokens[r]
        batch.add(r, upto - ctx, ctx)
        if self.kv.tracks_computed:  # prefix caching publishes the blocks this step fills
            self.kv.note_computed(r, upto)
        if not (started and self._blocked == MEMORY):  # the batch start was not cut short
            self._blocked = POLICY  # anyone waiting waits for the batch in flight to end
        return self._plan(batch, [], started)

    def blocked_persists(self, reason: str) -> bool:
        return True  # nothing that arrives can join or change the batch in flight

    # ---- commit ------------------------------------------------------------------------------
    def _finish(self, finished: np.ndarray) -> None:
        # finished members keep their blocks: the batch's memory is freed when it ends
        self.status[finished] = Status.FINISHED
        self.running = self.running[self.status[self.running] == Status.RUNNING]

    def update(self, plan, result):
        outcome = super().update(plan, result)
        if len(self.members) and not len(self.running):  # the longest member finished
            for req in self.members.tolist():
                self.kv.free(req)
            self.members = np.zeros(0, dtype=np.int64)
        return outcome
