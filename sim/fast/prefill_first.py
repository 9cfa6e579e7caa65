"""``prefill-first`` (vLLM v0's default scheduler, sim/sched/prefill_first.py) on the fast
core's state, with v0's block manager and service order (sim/fast/v0.py).

Each step first admits waiting requests FCFS, whole prompts only, while the token budget,
``max_num_seqs`` and the blocks allow; if any was admitted the step is prefill-only (every
decoding request waits: ``Progress.skip``). Otherwise every running request decodes, oldest
first, each after can_append_slot. A prompt is computed in its admission step, so no
request is ever part-way through one.

With swap preemption (sim/fast/swap.py), as v0: no new prompt is admitted while requests
are swapped out; after a decode step that preempted nothing they are swapped back in, in
the same step (each computes its next token).
"""

from __future__ import annotations

from sim.fast.sched import Planned
from sim.fast.v0 import FastV0
from sim.sched.vllm import MEMORY


class FastPrefillFirst(FastV0):
    def _passes(self) -> Planned:
        p = Planned()
        self._served = []
        swapped = self.swapped_queue()
        if not swapped:  # v0: no new prefills while requests are swapped out
            self._admit(p, self.lim.max_num_batched_tokens, whole=True)
        if p.entries:  # a prefill step: the decodes wait
            dec = self.dec
            skipped = [r for r in self.running if dec[r]]
            if skipped:
                p.skipped = skipped
            return p
        budget = self._decode_pass(p, self.lim.max_num_batched_tokens)
        if swapped and p.preempted:  # v0 swaps nothing in after a preemption
            self.blocked = MEMORY
        elif swapped:  # then swap in (v0's _schedule_swapped)
            self._admit(p, budget, whole=True, queue=swapped)
        return p
