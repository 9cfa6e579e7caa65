"""KV reserved up front (``contiguous-max``, ``contiguous-exact``: sim/kv/reservation.py) as
the fast scheduler's block seams.

A request's first allocation takes its whole reservation (``resv[r]`` blocks) and its table
never grows: admission needs ``resv[r]`` free blocks beside the watermark, a running
request's steps take none (so nothing is ever preempted for blocks), and a finish frees the
reservation. Decoding requests then need no new block at any step: their block phases
(sim/fast/state.py ``phase``) are all zero (``NoGrowth``), so the pure decode step, the fast
running pass and a decode run's block counts read zero without a branch of their own.
"""

from __future__ import annotations

import numpy as np


class NoGrowth(list):
    """``phase`` of a scheduler whose tables never grow: every count reads 0 (writes are
    dropped), by index and by iteration."""

    def __setitem__(self, i, v) -> None:
        pass


class UpFront:
    """Mixed in before a fast scheduler (FastScheduler, PriorityScheduler): reservations
    instead of paged growth (``used``, ``num_blocks``, ``reserve`` are the scheduler's)."""

    def __init__(self, *args, resv: np.ndarray, **kw):
        super().__init__(*args, **kw)
        self.resv = memoryview(np.ascontiguousarray(resv, dtype=np.int64))  # blocks each
        self.phase = NoGrowth(self.phase)

    @classmethod
    def policy_args(cls, sched, specs) -> dict:
        return super().policy_args(sched, specs) | {"resv": sched.kv.reserve}

    def new_blocks(self, r: int, c: int, upto: int) -> int:
        return 0  # a running request holds its whole reservation

    def _release(self, r: int, computed: int, preempted: bool = False,
                 cached: int | None = None) -> None:
        self.used -= self.resv[r]

    def release_finished(self, reqs: list[int]) -> None:
        resv = self.resv
        self.used -= sum([resv[r] for r in reqs])

    def _admit_blocks(self, r: int, upto: int, whole: int) -> bool:
        """The reservation fits beside the watermark (with ``scheduler_reserve_full_isl``
        the whole-prompt gate asks the same: a reservation does not depend on tokens)."""
        nb = self.resv[r]
        if nb + self.reserve > self.num_blocks - self.used:
            return False
        self.used += nb
        return True

    def check(self) -> None:
        """KV conservation: the blocks in use are the running requests' reservations."""
        held = sum(self.resv[r] for r in self.running)
        assert held == self.used and 0 <= self.used <= self.num_blocks, (
            f"fast core: {self.used} blocks in use, reservations of running requests {held}")
