"""``orca``: iteration-level scheduling without paging (Orca, OSDI'22).

Orca schedules per iteration like vLLM (requests join and leave the batch
between steps) but reserves each admitted request's KV up front, for its
maximum context; it has no paging and no chunked prefill. We express that as:

* the reservation is the KV policy's: the scenario must pick a reservation KV
  policy (``kv: {name: contiguous-max}``, the vLLM paper's "Orca (Max)"; or
  ``contiguous-exact``, its "Orca (Oracle)" that knows each output length).
  A reservation never grows, so no request is ever preempted;
* prompts are computed whole: chunked prefill and the per-request chunk cap are
  off, and the token budget is raised to ``max_model_len`` when it is smaller
  (as vLLM's own default with chunking off), so every admissible prompt fits
  one step.

Everything else (FCFS, admission stops at the first request that does not fit)
is the inherited vLLM loop.
"""

from __future__ import annotations

from dataclasses import replace

from sim.sched.base import SCHEDULERS
from sim.sched.vllm import VllmScheduler
from traces.errors import InputError

RESERVATION_POLICIES = ("contiguous-max", "contiguous-exact")


@SCHEDULERS.register("orca")
class OrcaScheduler(VllmScheduler):
    description = ("Orca: iteration-level batching, whole prompts, each request's KV reserved "
                   "up front (needs kv contiguous-max or contiguous-exact)")
    #: KV policies this scheduler runs with (checked by the scenario and here)
    kv_policies = RESERVATION_POLICIES
    holds_finished = False  # not vLLM v1's loop: a finish leaves the running list at once

    def __init__(self, specs, limits, kv, params=None, admission=None):
        if not kv.reserves_up_front:
            raise InputError(
                "scheduler orca reserves each request's KV up front: set kv: {name: "
                f"contiguous-max}} (or one of {', '.join(RESERVATION_POLICIES)})")
        limits = replace(limits, enable_chunked_prefill=False, long_prefill_token_threshold=0,
                         max_num_batched_tokens=max(limits.max_num_batched_tokens,
                                                    limits.max_model_len))
        super().__init__(specs, limits, kv, params, admission)
