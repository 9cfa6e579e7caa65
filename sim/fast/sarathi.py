"""Sarathi-Serve's stall-free batching (sim/sched/sarathi.py) on the fast core's state, with
v0's block manager and service order (sim/fast/v0.py).

Every step: every running decode, oldest first, one token each after can_append_slot
(never left out for the budget); then the running requests part-way through their prompt,
oldest first, each computing what the budget leaves of it (their blocks were taken at
admission); then waiting requests FCFS, admitted with blocks for every known token and
computing what the budget leaves (admission goes on in a step that preempted). The budget
is ``min(chunk_size, max_num_batched_tokens)`` tokens, decodes included.
"""

from __future__ import annotations

from sim.fast.sched import Planned
from sim.fast.v0 import FastV0


class FastSarathi(FastV0):
    def _passes(self) -> Planned:
        p = Planned()
        self._served = []
        budget = self._decode_pass(p, self.lim.max_num_batched_tokens)
        budget = self._prefill_pass(p, budget)
        self._admit(p, budget, whole=False)
        return p

    def _prefill_pass(self, p: Planned, budget: int) -> int:
        """Running requests part-way through their prompt, oldest first: each computes what
        the budget leaves (a pf1 its last prompt token, with the block it holds)."""
        pf1 = self.pf1
        todo = sorted(self.pre + list(pf1)) if pf1 else sorted(self.pre)
        comp, known, served = self.comp, self.known, self._served
        for i, r in enumerate(todo):
            if budget <= 0:
                left = [q for q in todo[i:] if q in pf1]  # decoding on the fast state
                if left:
                    p.skipped = [*p.skipped, *left]
                break
            served.append(r)
            if r in pf1:
                p.n_dec += 1
                p.dec_ctx += self.ctx(r)
                pf1.discard(r)  # it samples this step: prefilling no more
                self.ahead.discard(r)
                budget -= 1
                continue
            c = comp[r]
            chunk = known[r] - c
            if chunk > budget:
                chunk = budget
            p.entries.append((r, chunk, c))
            budget -= chunk
        return budget
