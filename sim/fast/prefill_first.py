"""``prefill-first`` (vLLM v0's default scheduler, sim/sched/prefill_first.py) on the fast
core's state.

Each step first admits waiting requests FCFS, whole prompts only, while the token budget,
``max_num_seqs`` and the blocks (all of a prompt's, beside the 1 % watermark) allow; if any
was admitted the step is prefill-only (every decoding request waits: ``Progress.skip``).
Otherwise every running request decodes, oldest arrival first (``running`` is kept in
request order, sim/sched/v0.py), each after v0's ``can_append_slot``: one free block,
else the newest running request is preempted (recompute). A prompt is computed in its
admission step, so no request is ever part-way through one. With blocks to spare the
decode step is counted, not visited, and a decode run keeps one block free at each of its
steps (``run_slack``).
"""

from __future__ import annotations

from bisect import insort

from sim.fast.sched import FastScheduler, Planned
from sim.sched.vllm import BUDGET, EMPTY, MEMORY, SEQS


class FastPrefillFirst(FastScheduler):
    run_slack = 1  # blocks v0's can_append_slot leaves free at every step (sim/sched/v0.py)

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self._order: list[int] = []  # the batch order of the plan just made (hooks)

    def _passes(self) -> Planned:
        p = Planned()
        self._admit_whole(p)
        if p.entries:  # a prefill step: the decodes wait
            dec = self.dec
            skipped = [r for r in self.running if dec[r]]
            if skipped:
                p.skipped = skipped
            self._order = [r for r, _, _ in p.entries]
        else:
            self._decode_pass(p)
            self._order = self.running
        return p

    def _admit_whole(self, p: Planned) -> None:
        """Admit whole prompts in queue order (V0Scheduler._admit_pass, ``whole``); sets
        ``blocked`` to why admission stopped."""
        q, lim, known = self.waiting, self.lim, self.known
        budget = lim.max_num_batched_tokens
        self.blocked = EMPTY
        while q:
            r = q[0]
            why = (BUDGET if budget <= 0 else SEQS if len(self.running) >= lim.max_num_seqs
                   else self._admission_block(r))
            if why:
                self.blocked = why
                return
            need = known[r]  # no prefix cache: a preempted request recomputes everything
            if need > budget:
                self.blocked = BUDGET
                return
            if not self._admit_blocks(r, need, need):  # can_allocate: the whole prompt
                self.blocked = MEMORY
                self.memory_blocked[r] = 1
                return
            q.popleft()
            self.comp[r] = 0
            insort(self.running, r)  # served oldest arrival first
            self.pre.append(r)
            self.status[r] = 2  # RUNNING
            if self.cached[r] < 0:
                self.cached[r] = 0
                if not p.first_sched:
                    p.first_sched = []
                p.first_sched.append(r)
            p.entries.append((r, need, 0))
            budget -= need

    def _decode_pass(self, p: Planned) -> None:
        """Every running request decodes, oldest first, each after one free block is found
        (V0Scheduler._decode_pass); with a block to spare after all of them, counted."""
        blocks = self.phase[self.g % self.bs] if self.n_dec else 0
        if blocks + 1 <= self.free:
            self._grow_running(blocks, blocks, ())
            p.n_dec, p.dec_ctx = self.n_dec, self.sum_base + self.n_dec * self.g
            return
        run, i = self.running, 0
        p.preempted = []
        while i < len(run):
            r = run[i]
            while self.free < 1:  # the newest running request not served yet goes
                v = run[-1]
                self.alloc_failures += 1
                self._preempt(v)
                p.preempted.append(v)
                if v == r:
                    return
            c = self.ctx(r)
            self._grow_one(r, self.new_blocks(r, c, c + 1), c + 1)
            p.n_dec += 1
            p.dec_ctx += c
            i += 1

    def _pure_decode(self) -> Planned | None:
        """Every running request decodes and none waits: the plan, if a block is left."""
        blocks = self.phase[self.g % self.bs]
        if blocks + 1 > self.free:
            return None
        self._order = self.running
        return super()._pure_decode()

    def batch_order(self) -> list[int]:
        return self._order
