"""vLLM v0's block manager and service order on the fast core's state (sim/sched/v0.py): the
rules ``prefill-first`` (sim/fast/prefill_first.py) and ``sarathi`` (sim/fast/sarathi.py)
share.

* ``running`` is kept in request (arrival) order: requests are served oldest first;
* a waiting request is admitted only with blocks for all its known tokens beside the
  watermark (can_allocate), all taken then: a prefilling request never allocates again;
* before each running decode one free block must be found (can_append_slot), else the
  newest running request is preempted (recompute); a decode run leaves one block free at
  each of its later steps (``run_slack``).

A request part-way through its prompt holds ``cdiv(known, block_size)`` blocks, not the
fast state's tight ``cdiv(computed)``. One with a single prompt token left is decoding on
the fast state (its next step computes one token) but still prefilling for v0 (``pf1``:
served in sarathi's prefill pass, after the decodes and within the budget); when its last
token opens a block it already holds that block (``ahead``), which the block phases count
as new at the step that computes it, so the passes take those counts off.
"""

from __future__ import annotations

from bisect import insort

from sim.fast.sched import FLEET, FastScheduler, Planned
from sim.fast.state import cdiv
from sim.sched.vllm import BUDGET, EMPTY, MEMORY, SEQS


class FastV0(FastScheduler):
    runs = frozenset({FLEET})  # v0 had no reserve rule; paged KV only
    run_slack = 1  # can_append_slot leaves one block free at every step of a run

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.pf1: set[int] = set()  # decoding on the fast state, still prefilling for v0
        self.ahead: set[int] = set()  # pf1 holding the block their last token opens
        self._served: list[int] = []  # the plan's prefill-pass and admitted requests (hooks)

    # ---- the passes -------------------------------------------------------------------
    def _decode_pass(self, p: Planned, budget: int) -> int:
        """Every running decode (pf1 aside), oldest first, each after one free block is
        found (V0Scheduler._decode_pass); counted when a block is left after all of them.
        Returns the budget left (decodes are never left out for it)."""
        bs, g, pf1 = self.bs, self.g, self.pf1
        n = self.n_dec - len(pf1)
        blocks = (self.phase[g % bs] if self.n_dec else 0) - len(self.ahead)
        if blocks + 1 <= self.free:
            self._grow_running(blocks, blocks, ())
            p.n_dec = n
            p.dec_ctx = self.sum_base + self.n_dec * g - sum([self.ctx(r) for r in pf1])
            return budget - n
        run, i = self.running, 0
        p.preempted = []
        while i < len(run):
            r = run[i]
            if not self.dec[r] or r in pf1:
                i += 1
                continue
            while self.free < 1:  # the newest running request not served yet goes
                v = run[-1]
                self.alloc_failures += 1
                self._preempt(v)
                p.preempted.append(v)
                if v == r:
                    return budget
            c = self.ctx(r)
            self._grow_one(r, self.new_blocks(r, c, c + 1), c + 1)
            p.n_dec += 1
            p.dec_ctx += c
            budget -= 1
            i += 1
        return budget

    def _admit(self, p: Planned, budget: int, whole: bool, queue=None) -> int:
        """Admit in queue order (V0Scheduler._admit_pass): ``whole``: the prompt must fit the
        budget, else it computes what the budget leaves; ``queue``: v0's swapped requests
        (resuming where they stopped; default: the waiting ones). Sets ``blocked``; returns
        the budget left."""
        q, lim, known = self.waiting if queue is None else queue, self.lim, self.known
        swapped = queue is not None
        self.blocked = EMPTY
        while q:
            r = q[0]
            why = (BUDGET if budget <= 0 else SEQS if len(self.running) >= lim.max_num_seqs
                   else self._admission_block(r))
            if why:
                self.blocked = why
                return budget
            k = known[r]  # no prefix cache: a preempted request recomputes everything
            c = self.comp[r] if swapped else 0
            if whole and k - c > budget:
                self.blocked = BUDGET
                return budget
            if not self._admit_blocks(r, k, k):  # can_allocate: every known token's block
                self.blocked = MEMORY
                self.memory_blocked[r] = 1
                return budget
            self._start(p, r, c)
            chunk = k - c if k - c < budget else budget
            p.entries.append((r, chunk, c))
            self._served.append(r)
            budget -= chunk
        return budget

    def _join(self, r: int) -> None:
        insort(self.running, r)  # served oldest arrival first

    def _pure_decode(self) -> Planned | None:
        """Every running request decodes, none waits or prefills: the plan, if a block is
        left after all of them."""
        if self.pf1 or self.phase[self.g % self.bs] + 1 > self.free:
            return None
        self._served = []
        return super()._pure_decode()

    def batch_order(self) -> list[int]:
        """The decodes in request order, then the prefill pass's and the admitted requests
        in the order they were served."""
        served = self._served
        if not served:
            return self.running
        first = set(served)
        return [r for r in self.running if r not in first] + served

    # ---- blocks -------------------------------------------------------------------------
    def one_left(self, r: int, computed: int) -> None:
        """Prefilling ``r`` has one prompt token left (decoding on the fast state)."""
        self.pf1.add(r)
        if computed % self.bs == 0:  # its last token opens a block it took at admission
            self.ahead.add(r)

    def _release(self, r: int, computed: int, preempted: bool = False,
                 cached: int | None = None) -> None:
        # part-way through a prompt (two tokens or more left): every known token's block
        k = self.known[r]
        self.used -= cdiv(k if k > computed + 1 else computed, self.bs) + (r in self.ahead)
        self.pf1.discard(r)
        self.ahead.discard(r)

    def check(self) -> None:
        bs = self.bs
        held = sum(cdiv(self.ctx(r), bs) + (r in self.ahead) if self.dec[r]
                   else cdiv(self.known[r], bs) for r in self.running)
        assert held == self.used and 0 <= self.used <= self.num_blocks, (
            f"fast core: {self.used} blocks in use, running requests hold {held}")
