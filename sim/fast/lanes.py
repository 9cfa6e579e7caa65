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
from itertools import accumulate, cycle, islice

from sim.fast.caching import CachingScheduler
from sim.fast.lane_counts import BATCH, INTER, LaneCounts, LaneDeque
from sim.fast.sched import FLEET, RESERVE, FastScheduler, Planned
from sim.fast.state import cdiv
from sim.sched.lanes import batch_growth, interactive_only
from sim.sched.vllm import ADMISSION, BUDGET, EMPTY, MEMORY, POLICY, SEQS


class FastLanes(LaneCounts, FastScheduler):
    runs = frozenset({RESERVE, FLEET})  # its lane books count paged blocks

    def __init__(self, *args, inter: bytearray, batch_seqs: int, kv_reserve: int,
                 step_tokens: int, **kw):
        self.inter = inter  # 1 = the interactive lane (set before the queue is made)
        super().__init__(*args, **kw)
        self.batch_seqs, self.kv_reserve, self.step_tokens = batch_seqs, kv_reserve, step_tokens
        self.nrun_i = 0  # running interactive requests
        self.held = [0, 0]  # blocks the running requests of each lane hold (this plan)
        self.inter_new = 0  # of which new blocks of interactive decoding requests (this plan)
        self.budget_left = 0  # step tokens left for interactive admissions (tokens)
        # LanesScheduler.blocked_persists: a full seq table, or a spent step budget
        self.persists = {EMPTY: False, SEQS: True, BUDGET: True, MEMORY: False,
                         POLICY: False, ADMISSION: False}

    @classmethod
    def policy_args(cls, sched, specs) -> dict:
        return {"inter": bytearray(sched.interactive.astype("u1").tobytes()),
                "batch_seqs": sched.batch_seqs, "kv_reserve": sched.kv_reserve,
                "step_tokens": sched.params.batch_step_tokens}

    def make_queue(self) -> LaneDeque:
        return LaneDeque(self.inter)

    def _lane(self, r: int) -> int:
        return BATCH - self.inter[r]

    def _held_batch(self, held_i: int) -> int:
        """Blocks the batch lane's running requests hold before the step (``held_i``: the
        interactive lane's): the rest of the blocks in use, less those of finished requests
        not freed yet (async scheduling; no lane counts them, as in LanesScheduler)."""
        return self._physical_batch(held_i)

    def _physical_batch(self, held_i: int) -> int:
        """``_held_batch`` while no block is in two tables (counted from ``used``)."""
        if not self.deferred:
            return self.used - held_i
        bs, comp = self.bs, self.comp
        return self.used - held_i - sum(cdiv(comp[r], bs) for r in self.deferred)

    def _held_inter(self) -> int:
        """Blocks the interactive lane's running requests hold before the step (none
        running: none held, without the pass)."""
        return self._held_now(INTER) if self.nrun_i else 0

    # ---- the step -----------------------------------------------------------------------
    def _pure_decode(self) -> Planned | None:
        """Every running request decodes and none waits: both lanes' passes without their
        loops, when every decode token and block fits (checked before anything changes);
        None otherwise (``_passes`` then)."""
        at, n_i = self.g % self.bs, self.n_dec_i
        bi = self.phase_i[at] if n_i else 0
        n_b, bb = self.n_dec - n_i, self.phase[at] - bi
        budget = self.lim.max_num_batched_tokens - n_i  # left after the interactive lane
        batch_budget = min(budget, self.step_tokens) if n_i and self.step_tokens else budget
        free = self.num_blocks - self.used
        if budget < 0 or bi > free or n_b > batch_budget or not self._counted():
            return None
        held_i = self._held_inter()
        held_b = self._physical_batch(held_i)  # counted (checked above)
        room = min(free - bi, self.num_blocks - max(self.kv_reserve, held_i + bi) - held_b)
        if bb > room and bb:
            return None
        due = self.first_due
        if due:  # published lane by lane, as the passes do
            self._grow_running(bi, bi, (), [r for r in due if self.inter[r]])
            self._grow_running(bb, bb, (), [r for r in due if not self.inter[r]])
        else:
            self._grow_running(bi + bb, bi + bb, (), ())
        held = self.held
        held[INTER], held[BATCH], self.inter_new = held_i + bi, held_b + bb, bi
        self.budget_left = budget
        self.persists[BUDGET] = budget <= 0
        self.blocked = EMPTY
        p = self._pure
        p.n_dec, p.dec_ctx = self.n_dec, self.sum_base + self.n_dec * self.g
        return p

    def _counted(self) -> bool:
        """Whether the lanes' block counts are physical (no block in two tables)."""
        return True

    def _passes(self) -> Planned:
        p = Planned()
        p.preempted = []
        cap, held = self.cap(), self.held
        held[INTER] = held_i = self._held_inter()
        held[BATCH], self.inter_new = self._held_batch(held_i), 0
        budget = self.lim.max_num_batched_tokens
        if self.nrun_i or self.waiting.lanes[INTER]:
            budget = self._serve(p, INTER, budget, cap)
            if not p.preempted:
                self.budget_left = budget
                self.persists[BUDGET] = budget <= 0
                budget = self._admit(p, INTER, budget)
            if p.num_reqs and self.step_tokens:  # the step carries interactive work
                budget = min(budget, self.step_tokens)
        else:  # an idle interactive lane: its passes grant and admit nothing
            self.budget_left = budget
            self.persists[BUDGET] = budget <= 0
            p.blocked = self.blocked = EMPTY
        budget = self._serve(p, BATCH, budget, cap)
        if not p.preempted and not self.blocked:
            self._admit(p, BATCH, budget)
        return p

    def _serve(self, p: Planned, lane: int, budget: int, cap: int) -> int:
        """The running requests of ``lane``; the budget left."""
        left = self._serve_all(p, lane, budget, cap)
        if left is not None:
            return left
        want = 1 - lane
        order = [r for r in self.running if self.inter[r] == want]
        return self._running_exact(p, cap, order, budget, lane)

    def _serve_all(self, p: Planned, lane: int, budget: int, cap: int) -> int | None:
        """Every request of the lane gets all it asks and its blocks fit (the exact loop
        would grant each its demand): O(prefilling). None when the exact loop is needed.
        A lane with no running request grants nothing."""
        if not (self.nrun_i if lane == INTER else len(self.running) - self.nrun_i):
            return budget
        n, base, _ = self._decoding(lane) if lane == INTER else (
            self.n_dec - self.n_dec_i, self.sum_base - self.sum_base_i, None)
        bs, g, inter, comp, want = self.bs, self.g, self.inter, self.comp, 1 - lane
        at = g % bs
        dec_blocks = (self.phase_i[at] if lane == INTER else self.phase[at] - self.phase_i[at])
        total, blocks, entries = n, dec_blocks, []
        for r in self.pre:
            if inter[r] == want:
                c = comp[r]
                need = self.demand(r, c, cap)
                entries.append((r, need, c))
                total += need
                blocks += cdiv(c + need, bs) - cdiv(c, bs)
        if not total:
            return budget
        if total > budget or blocks > self._room(lane):
            return None
        self._grow_running(blocks, dec_blocks, entries,
                           [r for r in self.first_due if inter[r] == want])
        self.held[lane] += blocks
        if lane == INTER:
            self.inter_new += dec_blocks
        p.n_dec += n
        p.dec_ctx += base + n * g
        p.entries += entries
        return budget - total

    def _admit(self, p: Planned, lane: int, budget: int) -> int:
        """The lane's queue (the general scheduler swaps its queue the same way, so the
        long-prefill cap counts that queue only)."""
        full = self.waiting
        q = full.lanes[lane]
        if not q:
            p.blocked = self.blocked = EMPTY
            return budget
        self.waiting = q
        try:
            budget = self._waiting(p, budget, self.cap(len(self.running) + len(q)))
        finally:
            self.waiting = full
        self.blocked = p.blocked
        return budget

    # ---- the lanes' overrides -------------------------------------------------------------
    def _room(self, lane: int = INTER) -> int:
        """Blocks a request of ``lane`` may take now: any free block (interactive), what the
        interactive reservation leaves (batch: LanesScheduler._batch_room)."""
        free = self.num_blocks - self.used
        if lane == INTER:
            return free
        batch, inter = self._lane_blocks()
        room = self.num_blocks - (inter if inter > self.kv_reserve else self.kv_reserve) - batch
        return free if free < room else room if room > 0 else 0  # in [0, free]

    def _lane_blocks(self) -> tuple[int, int]:
        """Blocks held by the batch lane, and by the interactive lane only (physical)."""
        return self.held[BATCH], self.held[INTER]

    def _growth(self, r: int, upto: int) -> int:
        """Blocks the batch lane gains by admitting ``r`` with ``upto`` tokens."""
        return cdiv(upto, self.bs)

    def _grow_one(self, r, nb, upto):
        super()._grow_one(r, nb, upto)
        lane = self._lane(r)
        self.held[lane] += nb
        if lane == INTER and self.dec[r]:
            self.inter_new += nb

    def _victim(self) -> int:
        inter = self.inter
        for r in reversed(self.running):
            if not inter[r]:
                return r
        return self.running[-1]

    def _preempt(self, v: int, granted: int = 0) -> None:
        self.held[self._lane(v)] -= cdiv(self.ctx(v), self.bs)
        self.nrun_i -= self.inter[v]
        super()._preempt(v, granted)

    def free_finished(self, reqs):
        if self.nrun_i:
            inter = self.inter
            self.nrun_i -= sum(inter[r] for r in reqs)
        super().free_finished(reqs)

    def _admission_block(self, r: int) -> str:
        if self.inter[r] or len(self.running) - self.nrun_i < self.batch_seqs:
            return EMPTY
        return POLICY

    def _admit_blocks(self, r: int, upto: int, whole: int) -> bool:
        if self.inter[r]:
            if not super()._admit_blocks(r, upto, whole):
                return False
            self.held[INTER] += cdiv(upto, self.bs)
            self.nrun_i += 1
            return True
        grow = self._growth(r, upto)
        if grow and grow > self._room(BATCH) or not super()._admit_blocks(r, upto, whole):
            return False
        self.held[BATCH] += cdiv(upto, self.bs)
        return True

    def check(self):
        super().check()
        assert self.nrun_i == sum(self.inter[r] for r in self.running), "fast core: lanes"

    def batch_order(self) -> list[int]:
        inter = self.inter
        return [r for r in self.running if inter[r]] + [r for r in self.running if not inter[r]]

    def run_steps(self, g: int, k: int) -> int:
        """Cut the run before the step whose batch-lane blocks the room lacks
        (LanesScheduler._run_length)."""
        n_b, bs = self.n_dec - self.n_dec_i, self.bs
        if not n_b:
            return k
        room = self._room(BATCH)
        if n_b * -(-(k - 1) // bs) <= room:  # each takes at most one block per bs steps
            return k
        phase = self._decoding(BATCH)[2]
        i = (g + 1) % bs
        cum = list(accumulate(islice(cycle(phase[i:] + phase[:i]), k - 1)))
        return 1 + bisect_right(cum, room) if cum[-1] > room else k


class CachingLanes(FastLanes, CachingScheduler):
    """``lanes`` with the prefix cache (sim/fast/caching.py). While no block is in two tables
    the lanes' block counts are physical; with sharing the interactive-only blocks are
    counted from the tables as LanesScheduler does (``interactive_only``), plus the
    interactive decode blocks not handed to their tables yet (``take_pending``)."""

    def _held_batch(self, held_i):
        return self._held_now(BATCH) if self.shared_slots() else self._physical_batch(held_i)

    def _counted(self):
        return not self.shared_slots()

    def _lane_blocks(self):
        if self.counting or not self.kv.shared_slots:  # (shared_slots(), inline: per admission)
            return self.held[BATCH], self.held[INTER]
        kv = self.kv
        inter = [r for r in self.running if self.inter[r]]
        held, bs, dec = kv.held, self.bs, self.dec
        pending = sum(cdiv(self.ctx(r), bs) - int(held[r]) for r in inter if dec[r])
        only = interactive_only(kv, inter) + pending + self.inter_new
        return self.used - only, only

    def _growth(self, r, upto):
        if self.counting or not self.kv.pending_hits(r):
            return cdiv(upto, self.bs)  # FastLanes._growth
        inter = [q for q in self.running if self.inter[q]]
        return batch_growth(self.kv, r, upto, inter)  # hits are in tables, never pending

    def _free_order(self, reqs):
        inter, seq = self.inter, self.seq
        return sorted(reqs, key=lambda r: (BATCH - inter[r], seq[r]))  # the batch order
