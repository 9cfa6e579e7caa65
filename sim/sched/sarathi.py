"""Sarathi-Serve's stall-free batching (Agrawal et al., OSDI 2024), as its code schedules.

Modelled on ``sarathi/core/scheduler/sarathi_scheduler.py`` and the block manager it
forked from vLLM v0 (``sim.sched.v0``). Every step, in this order:

1. every running request in its decode phase, oldest arrival first, one token each:
   before each, ``can_append_slot`` wants one free block, else the newest running
   request not served yet is preempted (recompute), the request itself when it is the
   newest. Decodes are never left out for lack of token budget (stall-free);
2. running requests part-way through their prompt, oldest first, each computing
   ``min(rest of its prompt, budget left)`` tokens. Their blocks were all allocated
   at admission, so they never allocate and never preempt;
3. waiting requests, FCFS, admitted only when blocks for the whole prompt (plus the
   tokens generated before a recompute) are free beyond the watermark (``kv.watermark``,
   Sarathi-Serve's default 0.01 unless the scenario sets it); all are allocated then,
   and the request computes what the budget leaves. Admission goes on in a step that
   preempted (unlike vLLM v1).

Budget: ``min(chunk_size, max_num_batched_tokens)`` tokens per step, decodes included;
prefill chunks get what the decodes leave. Chunking is always on whatever
``enable_chunked_prefill`` says, and Sarathi-Serve has no per-request cap
(``long_prefill_token_threshold`` is ignored). Sarathi-Serve has no prefix caching and
no swap preemption; asking for either is an input error.
"""

from __future__ import annotations

from dataclasses import replace

from pydantic import ConfigDict, Field

from sim.sched.base import SCHEDULERS
from sim.sched.batch import BatchBuilder
from sim.sched.v0 import V0Scheduler, with_default_watermark
from traces.errors import InputError
from traces.validated import Validated


class SarathiParams(Validated):
    model_config = ConfigDict(extra="forbid", frozen=True)

    chunk_size: int = Field(
        512, ge=1, description="Token budget of one step (tokens); the step budget is "
        "min(chunk_size, engine.max_num_batched_tokens). The Sarathi-Serve paper uses 512 for "
        "strict latency SLOs, 2048 for relaxed ones.",
    )


@SCHEDULERS.register("sarathi")
class SarathiScheduler(V0Scheduler):
    """Decodes first, then partial prefills, then whole-prompt admissions, under chunk_size."""

    description = ("Sarathi-Serve stall-free batching: decodes first, then chunked prefills "
                   "under a chunk_size budget; whole prompts allocated at admission")
    Params = SarathiParams

    def __init__(self, specs, limits, kv, params=None, admission=None):
        if kv.tracks_computed or kv.host is not None:
            raise InputError(
                "scheduler sarathi: Sarathi-Serve has no prefix caching and no swap "
                "preemption; set engine.enable_prefix_caching false and "
                "engine.preemption_mode recompute")
        params = params if params is not None else self.Params()
        super().__init__(specs, self._budgeted(limits, params), kv, params, admission)

    @staticmethod
    def _budgeted(limits, params):
        """The step budget min(chunk_size, max_num_batched_tokens), chunked, no long-prefill
        cap (idempotent)."""
        budget = min(params.chunk_size, limits.max_num_batched_tokens)
        return replace(limits, max_num_batched_tokens=budget, enable_chunked_prefill=True,
                       long_prefill_token_threshold=0)

    @classmethod
    def resolve_defaults(cls, scenario, limits):
        # the resolved limits carry the budget, so sizing, reports and the emitted vllm serve
        # line (--max-num-batched-tokens, --long-prefill-token-threshold 0: vLLM's v1
        # scheduler under that budget) say what was simulated
        params = scenario.scheduler.params or cls.Params()
        return with_default_watermark(scenario), cls._budgeted(limits, params)

    def _step(self, batch: BatchBuilder, preempted: list) -> int:
        budget = self._decode_pass(self.limits.max_num_batched_tokens, batch, preempted)
        budget = self._prefill_pass(budget, batch)
        _, admitted = self._admit_pass(self.waiting, budget, batch, whole=False)
        return admitted

    def _prefill_pass(self, budget: int, batch: BatchBuilder) -> int:
        """Running prompts part-way through, oldest first: their blocks are allocated."""
        r = self.running
        for req in r[self.prefilling[r]].tolist():
            if budget <= 0:
                break
            comp = int(self.computed[req])
            chunk = min(int(self.known_tokens[req]) - comp, budget)
            batch.add_one(req, chunk, comp)
            budget -= chunk
        return budget
