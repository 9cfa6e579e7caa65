"""``reserve`` admission on the fast core (sim/sched/admission_reserve.py's rule).

The rule admits a waiting request only when its prompt plus expected output fits in the
free blocks beside what every running request still expects to take. It reads each running
request's generated tokens and held blocks as the general scheduler has them at the waiting
pass: a decoding request's from its implicit progress (``base + g``), the step's own
allocations included (a decoding request scheduled in the step holds the block of its
token; a prefilling one the blocks of its chunk). The expectation and the fit are the
general rule's (``Reserve.expected_total``, ``fits``), so both cores compute the same
numbers; the work is O(running) per admission attempt, as there.
"""

from __future__ import annotations

import numpy as np

from sim.fast.sched import Planned
from sim.fast.state import cdiv
from sim.sched.vllm import ADMISSION


class ReserveAdmission:
    """Mixed in before a fast scheduler (FastScheduler, CachingScheduler): its waiting pass
    asks the rule first, as VllmScheduler._precheck does."""

    def __init__(self, *args, rule, **kw):
        super().__init__(*args, **kw)
        self.rule = rule  # the general scheduler's Reserve (expected_total, fits)
        self._building: Planned | None = None  # the plan whose waiting pass is running

    @classmethod
    def policy_args(cls, sched, specs) -> dict:
        return super().policy_args(sched, specs) | {"rule": sched.admission}

    def _waiting(self, p: Planned, budget: int, cap: int) -> int:
        self._building = p
        return super()._waiting(p, budget, cap)

    def _admission_block(self, r: int) -> str:
        if not self._allows(r):
            return ADMISSION
        return super()._admission_block(r)

    def _allows(self, r: int) -> bool:
        """Reserve.allows: own + ahead + watermark <= free blocks."""
        ids, gen, held = self._progress()
        ids.append(r)
        gen.append(self.known[r] - self.prompt[r])  # waiting: holds no block
        held.append(0)
        total = self.rule.expected_total(np.array(ids, dtype=np.int64),
                                         np.array(gen, dtype=np.int64))
        # paged KV's extra_blocks: the blocks of the expected total not held yet
        need = np.maximum(0, -(-total // self.bs) - np.array(held, dtype=np.int64))
        return self.rule.fits(int(need.sum()), self.num_blocks - self.used)

    def _progress(self) -> tuple[list[int], list[int], list[int]]:
        """(running requests, tokens each generated, blocks each holds) at this point of the
        plan being built."""
        p, g, bs = self._building, self.g, self.bs
        chunk = {q: c + t for q, t, c in p.entries}  # computed after the step
        skipped = set(p.skipped)
        dec, base, comp, known, prompt = self.dec, self.base, self.comp, self.known, self.prompt
        ids, gen, held = [], [], []
        zombies = self.zombies  # finished in the step in flight: they need nothing more
        for q in self.running:
            if q in zombies:
                continue
            ids.append(q)
            if dec[q]:
                ctx = base[q] + g
                gen.append(ctx + 1 - prompt[q])
                held.append(cdiv(ctx if q in skipped else ctx + 1, bs))
            else:
                gen.append(known[q] - prompt[q])
                held.append(cdiv(chunk.get(q, comp[q]), bs))
        return ids, gen, held
