"""``lanes`` on the fast core: sim/sched/lanes.py's step on the fast scheduler (paged KV,
with or without prefix caching).

Each step runs vLLM's two passes lane by lane, as ``LanesScheduler.schedule`` does: the
running interactive requests with the whole budget, the interactive queue, the running
batch requests with what is left (at most ``batch_step_tokens`` when the step carries
interactive work) and inside the batch lane's KV room, then the batch queue only if the
interactive one drained and nothing was preempted. The victim is the newest running batch
request, else the newest interactive one (never one already scheduled in the step). A
decode run stops before batch growth would reach the interactive reservation
(``run_steps``); an admission stop lasts a run only for a full seq table or a spent budget.

Blocks per lane are counted from the running requests at each plan (paged blocks are
tight: ``ceil(computed / block_size)`` each) and kept through the plan's allocations, so
the work per plan is O(running); the queue, the victim, the room and the batch order are
the only overrides of ``FastScheduler``.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import deque
from itertools import accumulate, cycle, islice

from sim.fast.caching import CachingScheduler
from sim.fast.sched import FastScheduler, Planned
from sim.fast.state import cdiv
from sim.sched.lanes import batch_growth, interactive_only
from sim.sched.vllm import ADMISSION, BUDGET, EMPTY, MEMORY, POLICY, SEQS

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


class FastLanes(FastScheduler):
    def __init__(self, *args, inter: bytearray, batch_seqs: int, kv_reserve: int,
                 step_tokens: int, **kw):
        self.inter = inter  # 1 = the interactive lane (set before the queue is made)
        super().__init__(*args, **kw)
        self.batch_seqs, self.kv_reserve, self.step_tokens = batch_seqs, kv_reserve, step_tokens
        self.held = [0, 0]  # blocks the running requests of each lane hold (this plan)
        self.inter_new = 0  # of which new blocks of interactive decoding requests (this plan)
        self.nrun = [0, 0]  # running requests per lane (this plan)
        self.budget_left = 0  # step tokens left for interactive admissions (tokens)
        # LanesScheduler.blocked_persists: a full seq table, or a spent step budget
        self.persists = {EMPTY: False, SEQS: True, BUDGET: True, MEMORY: False,
                         POLICY: False, ADMISSION: False}

    def make_queue(self) -> LaneDeque:
        return LaneDeque(self.inter)

    def _lane(self, r: int) -> int:
        return BATCH - self.inter[r]

    # ---- the step -----------------------------------------------------------------------
    def _pure_decode(self) -> Planned | None:
        return None  # the lanes' budget and room are checked by the passes

    def _passes(self) -> Planned:
        p = Planned()
        p.preempted = []
        cap, bs, held, nrun = self.cap(), self.bs, [0, 0], [0, 0]
        orders = ([], [])
        for r in self.running:
            lane = BATCH - self.inter[r]
            orders[lane].append(r)
            held[lane] += cdiv(self.ctx(r), bs)
            nrun[lane] += 1
        self.held, self.nrun, self.inter_new = held, nrun, 0
        budget = self._serve(p, orders, INTER, self.lim.max_num_batched_tokens, cap)
        if not p.preempted:
            self.budget_left = budget
            self.persists[BUDGET] = budget <= 0
            budget = self._admit(p, INTER, budget)
        if p.num_reqs and self.step_tokens:  # the step carries interactive work
            budget = min(budget, self.step_tokens)
        budget = self._serve(p, orders, BATCH, budget, cap)
        if not p.preempted and not self.blocked:
            self._admit(p, BATCH, budget)
        return p

    def _serve(self, p: Planned, orders: tuple[list, list], lane: int, budget: int,
               cap: int) -> int:
        """The running requests of ``lane`` in running order (the exact loop of
        ``FastScheduler._running_exact`` inside the lane's room); the budget left."""
        order, bs, i = orders[lane], self.bs, 0
        while i < len(order) and budget > 0:
            r = order[i]
            c = self.ctx(r)
            grant = min(self.demand(r, c, cap), budget)
            nb = cdiv(c + grant, bs) - cdiv(c, bs)
            while nb > self._room(lane):
                self.alloc_failures += 1
                victim = self._victim()
                orders[self._lane(victim)].remove(victim)
                self._preempt(victim)
                p.preempted.append(victim)
                if victim == r:
                    break
            else:
                self._grow_one(r, nb, c + grant)
                self.held[lane] += nb
                if self.dec[r]:
                    p.n_dec += 1
                    p.dec_ctx += c
                    if lane == INTER:
                        self.inter_new += nb
                else:
                    p.entries.append((r, grant, c))
                budget -= grant
                i += 1
                continue
            break
        skipped = [r for r in order[i:] if self.dec[r]]
        if skipped:
            p.skipped = [*p.skipped, *skipped]
        return budget

    def _admit(self, p: Planned, lane: int, budget: int) -> int:
        """The lane's queue (the general scheduler swaps its queue the same way, so the
        long-prefill cap counts that queue only)."""
        full = self.waiting
        self.waiting = q = full.lanes[lane]
        try:
            budget = self._waiting(p, budget, self.cap(len(self.running) + len(q)))
        finally:
            self.waiting = full
        self.blocked = p.blocked
        return budget

    # ---- the lanes' overrides -------------------------------------------------------------
    def _room(self, lane: int) -> int:
        """Blocks a request of ``lane`` may take now: any free block (interactive), what the
        interactive reservation leaves (batch: LanesScheduler._batch_room)."""
        free = self.num_blocks - self.used
        if lane == INTER:
            return free
        batch, inter = self._lane_blocks()
        cap = self.num_blocks - max(self.kv_reserve, inter)
        return max(0, min(free, cap - batch))

    def _lane_blocks(self) -> tuple[int, int]:
        """Blocks held by the batch lane, and by the interactive lane only (physical)."""
        return self.held[BATCH], self.held[INTER]

    def _growth(self, r: int, upto: int) -> int:
        """Blocks the batch lane gains by admitting ``r`` with ``upto`` tokens."""
        return cdiv(upto, self.bs)

    def _victim(self) -> int:
        inter = self.inter
        for r in reversed(self.running):
            if not inter[r]:
                return r
        return self.running[-1]

    def _preempt(self, v: int, granted: int = 0) -> None:
        lane = self._lane(v)
        self.held[lane] -= cdiv(self.ctx(v), self.bs)
        self.nrun[lane] -= 1
        super()._preempt(v, granted)

    def _admission_block(self, r: int) -> str:
        if self.inter[r] or self.nrun[BATCH] < self.batch_seqs:
            return EMPTY
        return POLICY

    def _admit_blocks(self, r: int, upto: int, whole: int) -> bool:
        lane = self._lane(r)
        if lane == BATCH and self._growth(r, upto) > self._room(BATCH):
            return False
        if not super()._admit_blocks(r, upto, whole):
            return False
        self.held[lane] += cdiv(upto, self.bs)
        self.nrun[lane] += 1
        return True

    def batch_order(self) -> list[int]:
        inter = self.inter
        return [r for r in self.running if inter[r]] + [r for r in self.running if not inter[r]]

    def run_steps(self, g: int, k: int) -> int:
        """Cut the run before the step whose batch-lane blocks the room lacks
        (LanesScheduler._run_length)."""
        bs, base, inter = self.bs, self.base, self.inter
        phase = [0] * bs
        for r in self.running:
            if not inter[r]:
                phase[(-base[r]) % bs] += 1
        if not any(phase):
            return k
        i = (g + 1) % bs
        cum = list(accumulate(islice(cycle(phase[i:] + phase[:i]), k - 1)))
        room = self._room(BATCH)
        return 1 + bisect_right(cum, room) if cum[-1] > room else k


class CachingLanes(FastLanes, CachingScheduler):
    """``lanes`` with the prefix cache (sim/fast/caching.py). While no block is in two tables
    the lanes' block counts are physical; with sharing the interactive-only blocks are
    counted from the tables as LanesScheduler does (``interactive_only``), plus the
    interactive decode blocks not handed to their tables yet (``take_pending``)."""

    def _lane_blocks(self):
        kv = self.kv
        if not kv.shared_slots:
            return super()._lane_blocks()
        inter = [r for r in self.running if self.inter[r]]
        held, bs, dec = kv.held, self.bs, self.dec
        pending = sum(cdiv(self.ctx(r), bs) - int(held[r]) for r in inter if dec[r])
        only = interactive_only(kv, inter) + pending + self.inter_new
        return self.used - only, only

    def _growth(self, r, upto):
        if not self.kv.pending_hits(r):
            return super()._growth(r, upto)
        inter = [q for q in self.running if self.inter[q]]
        return batch_growth(self.kv, r, upto, inter)  # hits are in tables, never pending

    def _free_order(self, reqs):
        inter, seq = self.inter, self.seq
        return sorted(reqs, key=lambda r: (BATCH - inter[r], seq[r]))  # the batch order
