"""``prefill-first`` (vLLM v0's default scheduler, sim/sched/prefill_first.py) on the fast
core's state, with v0's block manager and service order (sim/fast/v0.py).

Each step first admits waiting requests FCFS, whole prompts only, while the token budget,
``max_num_seqs`` and the blocks allow; if any was admitted the step is prefill-only (every
decoding request waits: ``Progress.skip``). Otherwise every running request decodes, oldest
first, each after can_append_slot. A prompt is computed in its admission step, so no
request is ever part-way through one.
"""

from __future__ import annotations

from sim.fast.sched import Planned
from sim.fast.v0 import FastV0


class FastPrefillFirst(FastV0):
    def _passes(self) -> Planned:
        p = Planned()
        self._served = []
        self._admit(p, self.lim.max_num_batched_tokens, whole=True)
        if p.entries:  # a prefill step: the decodes wait
            dec = self.dec
            skipped = [r for r in self.running if dec[r]]
            if skipped:
                p.skipped = skipped
        else:
            self._decode_pass(p, 0)
        return p
