"""vLLM v0's default scheduler (``_schedule_default``): a step is all prefill or all decode.

Each step first admits waiting requests (FCFS, whole prompts, no chunking) while
the token budget (``max_num_batched_tokens``), ``max_num_seqs`` and the KV blocks
allow. If at least one is admitted the step is prefill-only: the running requests'
decodes wait. Otherwise the step decodes every running request. Memory follows v0's
block manager (``sim.sched.v0``): a prompt is admitted only when its blocks fit
beyond the 1% watermark, and before each decode one free block must be left, else
the newest running request is preempted (recompute: it later prefills its prompt
plus the tokens it had generated, as v0 does).

With swap preemption, as in v0, no new prompt is admitted while requests are swapped
out; they are swapped back in after a decode step that preempted nothing.

Defaults where v0 differs from v1 (``resolve_defaults``, unless the scenario sets
them): ``max_num_seqs`` 256, ``max_num_batched_tokens`` max(max_model_len, 2048)
(chunked prefill off), ``kv.watermark`` 0.01. Whole prompts must fit one step, so
the budget is raised to ``max_model_len`` when it is smaller (the ``orca`` policy
does the same).

Decode runs: a decode step repeats unchanged while nothing could be admitted; a head
blocked on memory stays blocked while decodes only consume blocks, an empty queue
makes the run interruptible.
"""

from __future__ import annotations

from dataclasses import replace

from sim.sched.base import SCHEDULERS
from sim.sched.batch import BatchBuilder
from sim.sched.v0 import V0Scheduler, with_default_watermark
from sim.sched.vllm import MEMORY

V0_MAX_NUM_SEQS = 256  # vLLM v0's EngineArgs default (requests)
V0_MIN_BATCHED_TOKENS = 2048  # v0, chunking off: max(max_model_len, 2048) (tokens)


def _whole_prompts(limits):
    return replace(limits, enable_chunked_prefill=False, long_prefill_token_threshold=0,
                   max_num_batched_tokens=max(limits.max_num_batched_tokens,
                                              limits.max_model_len))


@SCHEDULERS.register("prefill-first")
class PrefillFirstScheduler(V0Scheduler):
    """vLLM v0: prefill-only steps whenever something can be admitted, else decode-only."""

    description = ("vLLM v0 default: whole-prompt prefill-only steps first, else a decode "
                   "step for all running; no mixing, no chunking, v0's block manager")

    def __init__(self, specs, limits, kv, params=None, admission=None):
        super().__init__(specs, _whole_prompts(limits), kv, params, admission)

    @classmethod
    def resolve_defaults(cls, scenario, limits):
        e = scenario.engine
        limits = replace(
            limits, max_num_seqs=e.max_num_seqs or V0_MAX_NUM_SEQS,
            max_num_batched_tokens=e.max_num_batched_tokens or max(limits.max_model_len,
                                                                   V0_MIN_BATCHED_TOKENS))
        return with_default_watermark(scenario), _whole_prompts(limits)

    def _step(self, batch: BatchBuilder, preempted: list) -> int:
        budget, admitted = self.limits.max_num_batched_tokens, 0
        if not len(self.swapped):  # v0: no new prefills while requests are swapped out
            budget, admitted = self._admit_pass(self.waiting, budget, batch, whole=True)
        if admitted:  # a prefill step: decodes wait
            return admitted
        budget = self._decode_pass(budget, batch, preempted)
        if len(self.swapped) and preempted:  # v0 swaps nothing in after a preemption
            self._blocked = MEMORY
        elif len(self.swapped):  # then swap in (v0's _schedule_swapped)
            _, admitted = self._admit_pass(self.swapped, budget, batch, whole=True)
        return admitted
