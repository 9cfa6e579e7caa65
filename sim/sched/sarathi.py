"""Sarathi-Serve's stall-free batching (Agrawal et al., OSDI 2024).

Every step fills a token budget of ``chunk_size`` tokens in this order:

1. every running request in its decode phase (one token each), so decodes never
   stall behind a prefill;
2. running requests whose prompt is part-way through (chunked prefill continued),
   in admission order;
3. new requests from the FCFS queue, each prefilling as much as the budget leaves.

vLLM v1 serves running requests in admission order instead, so an older partial
prefill (e.g. capped by ``long_prefill_token_threshold``) is served before a
younger decode and, under KV pressure, vLLM preempts the newest request, which
may be that decode; Sarathi keeps the decode and preempts the prefill. Otherwise
the two plan the same steps for the same budget: what makes Sarathi stall-free
in practice is its small ``chunk_size``, which bounds every step's prefill work.
Everything else (chunking, KV growth on demand, recompute preemption, no
admission in a step that preempted) is vLLM's.

Budget: the per-step budget is ``min(chunk_size, max_num_batched_tokens)``; the
engine's ``max_num_batched_tokens`` stays the hard cap that sized activation
memory, ``chunk_size`` is Sarathi's (usually much smaller) latency knob.
Chunking is always on, whatever ``enable_chunked_prefill`` says.

Preemption victim: the last request in service order (the newest partial
prefill, else the newest decode), i.e. the tail of the not-yet-served part of
the batch, as Sarathi-Serve's scheduler pops its running list from the back.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from sim.sched.base import SCHEDULERS
from sim.sched.batch import BatchBuilder
from sim.sched.vllm import VllmScheduler


class SarathiParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    chunk_size: int = Field(
        512, ge=1, description="Token budget of one step (tokens); the step budget is "
        "min(chunk_size, engine.max_num_batched_tokens). The Sarathi-Serve paper uses 512 for "
        "strict latency SLOs, 2048 for relaxed ones.",
    )


@SCHEDULERS.register("sarathi")
class SarathiScheduler(VllmScheduler):
    """Decodes first, then partial prefills, then new prefills, under ``chunk_size``."""

    description = ("Sarathi-Serve stall-free batching: decodes first, then chunked prefills, "
                   "under a chunk_size token budget")
    Params = SarathiParams

    def __init__(self, specs, limits, kv, params=None, admission=None):
        params = params if params is not None else self.Params()
        budget = min(params.chunk_size, limits.max_num_batched_tokens)
        limits = replace(limits, max_num_batched_tokens=budget, enable_chunked_prefill=True)
        super().__init__(specs, limits, kv, params, admission)

    def running_order(self) -> np.ndarray:
        r = self.running
        # decode phase: exactly the last known token is missing from the cache
        decoding = self.known_tokens[r] - self.computed[r] == 1
        if decoding.all():
            return r
        return np.concatenate((r[decoding], r[~decoding]))

    def pick_victim(self, batch: BatchBuilder) -> int:
        # the tail of service order is never already in the batch (unless it is the
        # requester itself), so no granted tokens need refunding
        return int(self.running_order()[-1])
