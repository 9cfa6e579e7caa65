"""The lanes scheduler's bookkeeping on the fast core (sim/fast/lanes.py): the two queues,
and the interactive lane's share of the decoding aggregates (sim/fast/state.py) kept as
requests start, stop or skip decoding, so each lane's tokens, new blocks and held blocks
come in O(block_size) per plan instead of a pass over the running requests.
"""

from __future__ import annotations

from collections import deque

from sim.fast.state import cdiv

INTER, BATCH = 0, 1


class LaneDeque:
    """Two FCFS queues, the interactive one first (sim/sched/lanes.py LaneQueue), with a
    deque's names."""

    __slots__ = ("lanes", "inter")

    def __init__(self, inter: bytearray):
        self.inter = inter
        self.lanes = (deque(), deque())  # INTER, BATCH

    def append(self, r: int) -> None:
        self.lanes[BATCH - self.inter[r]].append(r)

    def appendleft(self, r: int) -> None:
        self.lanes[BATCH - self.inter[r]].appendleft(r)

    def __getitem__(self, i: int) -> int:
        return (self.lanes[INTER] or self.lanes[BATCH])[i]

    def popleft(self) -> int:
        return (self.lanes[INTER] or self.lanes[BATCH]).popleft()

    def __len__(self) -> int:
        return len(self.lanes[INTER]) + len(self.lanes[BATCH])

    def __bool__(self) -> bool:
        return bool(self.lanes[INTER] or self.lanes[BATCH])


class LaneCounts:
    """Mixed into a fast scheduler whose ``inter`` (1 = interactive, per request) is set;
    the batch lane's aggregates are the totals less the interactive lane's."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.n_dec_i, self.sum_base_i, self.phase_i = 0, 0, [0] * self.bs

    def add_dec(self, r, computed, g_next):
        super().add_dec(r, computed, g_next)
        if self.inter[r]:
            b = self.base[r]
            self.n_dec_i += 1
            self.sum_base_i += b
            self.phase_i[(-b) % self.bs] += 1

    def drop_dec(self, r):
        if self.inter[r]:
            b = self.base[r]
            self.n_dec_i -= 1
            self.sum_base_i -= b
            self.phase_i[(-b) % self.bs] -= 1
        super().drop_dec(r)

    def skip(self, r):
        if self.inter[r]:
            b, bs = self.base[r], self.bs
            self.phase_i[(-b) % bs] -= 1
            self.phase_i[(1 - b) % bs] += 1
            self.sum_base_i -= 1
        super().skip(r)

    def _decoding(self, lane: int) -> tuple[int, int, list[int]]:
        """(decoding requests, sum of their bases, their count by block phase) of ``lane``."""
        if lane == INTER:
            return self.n_dec_i, self.sum_base_i, self.phase_i
        return (self.n_dec - self.n_dec_i, self.sum_base - self.sum_base_i,
                [a - b for a, b in zip(self.phase, self.phase_i)])

    def _held_now(self, lane: int) -> int:
        """Blocks ``lane``'s running requests hold before the step: sum of ceil(computed /
        block_size); a decoding request computed base + g tokens, so its term follows from
        its phase."""
        n, base, phase = self._decoding(lane)
        bs, g, comp, want = self.bs, self.g, self.comp, 1 - lane
        held = sum(cdiv(comp[r], bs) for r in self.pre if self.inter[r] == want)
        if n:  # ceil((b + g) / bs) = 1 + (b + g - 1 - (b + g - 1) % bs) / bs, b = -x mod bs
            rest = sum(k * ((g - 1 - x) % bs) for x, k in enumerate(phase) if k)
            held += n + (base + n * (g - 1) - rest) // bs
        return held

    def check(self):
        """The interactive lane's aggregates are its requests' (and the base checks)."""
        super().check()
        dec = [r for r in self.running if self.inter[r] and self.dec[r]]
        assert (self.n_dec_i, self.sum_base_i) == (
            len(dec), sum(self.base[r] for r in dec)), "fast core: lane aggregates"
