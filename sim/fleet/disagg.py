"""Disaggregated prefill/decode: the decode side of the KV transfer.

A request runs in the prefill pool with max_tokens 1 (its KV computed, the sampled token
dropped); when it finishes there, the router of the decode pool picks a replica and the
prompt's KV moves to it, taking ``Transfer.ns(prompt)`` (sim.fleet.plan), charged once.
The request reaches the decode replica when the transfer ends, and only then can it be
admitted (decode admission waits for the transfer). The decode replica allocates KV for
the whole prompt, as vLLM's decode instance does for KV it loads from a connector, but
computes only the last prompt token to sample the first output token (vLLM's scheduler
recomputes one token when the whole prompt is already in KV). Every output token comes
from the decode replica, so the client's TTFT is prefill + transfer + the decode
replica's first step, and TPOT is the decode replica's, as a disaggregated deployment
behind vLLM's proxy reports them.

Simplifications (said in the README): transfers do not contend for links; the prefill
replica frees its blocks when the request finishes there (vLLM keeps them until the decode
side has read them); a long transferred prompt still takes the decode replica's token
budget in chunks (each chunk is priced free; only the chunk reaching the prompt's end is
priced, as one token).
"""

from __future__ import annotations

import numpy as np

from sim.engine.plan import StepPlan
from sim.fast.engine import shape


class TransferredPrompts:
    """Wraps a decode replica's executor: prompt tokens whose KV came over the transfer
    are not computed again. After the request's first decode step (or a preemption that
    dropped its KV), its prompt is priced as usual (a recompute)."""

    def __init__(self, executor, prompt_tokens: np.ndarray):
        self.executor, self.prompt = executor, prompt_tokens
        self.transferred = np.ones(len(prompt_tokens), dtype=bool)  # KV still from transfer

    def __call__(self, plan: StepPlan) -> np.ndarray:
        ids, tok, ctx = plan.req_ids, plan.num_tokens, plan.context_lens
        prompt = self.prompt[ids]
        loaded = self.transferred[ids] & (ctx < prompt)
        if not loaded.any():
            return self.executor(plan)
        ends = loaded & (ctx + tok >= prompt)  # reaches the prompt's end: samples token 1
        keep = ~loaded | ends
        self.transferred[ids[ends]] = False
        if not keep.any():  # only transferred chunks: nothing to compute
            return np.zeros(plan.num_steps)
        num = np.where(ends, 1, tok)[keep]
        context = np.where(ends, prompt - 1, ctx)[keep]
        priced = StepPlan.build(ids[keep], num, context, plan.preempted,
                                num_steps=plan.num_steps, interruptible=plan.interruptible,
                                swap_out_bytes=plan.swap_out_bytes,
                                swap_in_bytes=plan.swap_in_bytes)
        return self.executor(priced)

    def fast_step_time(self, cost, p) -> float:
        """Seconds of the fast engine's one-step plan ``p`` (sim/fast/engine.py ``_step``),
        by ``__call__``'s rule: a transferred chunk is not computed, the chunk reaching the
        prompt's end is one token at context prompt - 1; nothing computed costs nothing."""
        kept, prompt, moved = [], self.prompt, self.transferred
        for r, t, c in p.entries:
            if moved[r] and c < prompt[r]:
                if c + t < prompt[r]:
                    continue
                moved[r] = False
                t, c = 1, int(prompt[r]) - 1
            kept.append((r, t, c))
        if not kept and not p.n_dec:
            return 0.0
        pq, pc, n1, c1, total = shape(kept, p.n_dec)
        return cost.shape_time1(total, p.n_dec + len(kept), pq, pc, p.n_dec + n1,
                                p.dec_ctx + c1)
