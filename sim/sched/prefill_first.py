"""vLLM v0's default scheduler: a step is all prefill or all decode.

Each step first tries to admit waiting requests (FCFS, whole prompts, no
chunking) while the token budget (``max_num_batched_tokens``), ``max_num_seqs``
and free KV blocks allow. If at least one is admitted the step is prefill-only:
the running requests' decodes wait. Otherwise the step decodes every running
request, preempting the newest (recompute) when a block cannot be allocated,
exactly as vLLM v0's ``_schedule_default`` with recompute preemption.

A recomputed request prefills its prompt plus the tokens it had generated, as v0
does. With swap preemption, as in v0, no new prompt is admitted while requests
are swapped out; they are swapped back in after a decode step that preempted
nothing. Whole prompts must fit one step, so the token budget is raised to
``max_model_len`` when it is smaller (vLLM v0's default with chunking off is
``max(max_model_len, 2048)``; the ``orca`` policy does the same).

Decode runs: a decode step repeats unchanged while nothing could be admitted.
The admission check is the one vLLM's waiting pass makes, so the run conditions
(``blocked_persists``) carry over: a head blocked on memory stays blocked while
decodes only consume blocks; an empty queue makes the run interruptible.
"""

from __future__ import annotations

from dataclasses import replace

from sim.engine.plan import StepPlan
from sim.sched.base import SCHEDULERS
from sim.sched.batch import BatchBuilder
from sim.sched.queues import FCFSQueue
from sim.sched.vllm import VllmScheduler


@SCHEDULERS.register("prefill-first")
class PrefillFirstScheduler(VllmScheduler):
    """vLLM v0: prefill-only steps whenever something can be admitted, else decode-only."""

    description = ("vLLM v0 default: whole-prompt prefill-only steps first, else a decode "
                   "step for all running; no mixing, no chunking, recompute")

    def __init__(self, specs, limits, kv, params=None, admission=None):
        # whole prompts, no per-request cap: what the inherited waiting pass then does
        limits = replace(limits, enable_chunked_prefill=False, long_prefill_token_threshold=0,
                         max_num_batched_tokens=max(limits.max_num_batched_tokens,
                                                    limits.max_model_len))
        super().__init__(specs, limits, kv, params, admission)

    def schedule(self, now: float) -> StepPlan | None:
        if not self.has_work():
            return None
        batch, preempted = BatchBuilder(), []
        budget, admitted = self.limits.max_num_batched_tokens, 0
        if not len(self.swapped):  # v0: no new prefills while requests are swapped out
            admitted = self._schedule_waiting(budget, batch)
        if not admitted:  # nothing to prefill: decode everyone
            budget = self._schedule_running(budget, batch, preempted)
            if len(self.swapped) and not preempted:  # then swap in (vLLM v0)
                admitted = self._swap_in(budget, batch)
        return self._plan(batch, preempted, admitted)

    def _swap_in(self, budget: int, batch: BatchBuilder) -> int:
        """The inherited waiting pass over the swapped queue only (new requests hidden)."""
        waiting, self.waiting = self.waiting, FCFSQueue()
        try:
            return self._schedule_waiting(budget, batch)
        finally:
            self.waiting = waiting
