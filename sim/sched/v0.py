"""The memory rules vLLM v0 and Sarathi-Serve share (``prefill-first`` and ``sarathi``).

Sarathi-Serve forked vLLM v0's scheduler and block manager (v1), and both differ
from vLLM v1 in the rules that decide who waits and who is preempted:

* **Service order.** Running requests are served oldest arrival first: the FCFS
  policy sorts them every step (v0 ``core/scheduler.py`` ``_schedule_running``;
  Sarathi-Serve ``sarathi_scheduler.py`` ``_schedule``). Request indices are in
  arrival order, so ``running`` is kept sorted.
* **can_append_slot(s).** Before each running decode the block manager asks for one
  free block per sequence (v0 ``block_manager_v1.py`` ``can_append_slots``,
  Sarathi-Serve ``base_block_space_manager.py`` ``can_append_slot``). When none is
  left, the newest running request not yet served in this step is preempted, whether
  or not this decode needs a new block; the request itself when it is the newest.
  vLLM v1 preempts only when an allocation fails.
* **can_allocate.** A waiting request is admitted only when blocks for all its known
  tokens (its prompt, plus the tokens it had generated before a recompute
  preemption) are free beyond the watermark: free - needed >= watermark x blocks.
  Both systems default the watermark to 0.01 (``kv.watermark``; the schedulers'
  ``resolve_defaults`` set it unless the scenario does). All those blocks are
  allocated at admission, even when only a chunk is computed now: a prefill never
  allocates again, so it never preempts.

Swap preemption (vLLM v0's ``preemption_mode: swap``): a swapped request resumes
before any waiting one, under the same whole-allocation check (``can_swap_in``).

Decode runs: a run repeats a pure decode step while every ``can_append_slot`` check
of every step in it passes: the blocks the run allocates stay below the free count
(one block is left free at every check).
"""

from __future__ import annotations

import numpy as np

import sim.sched.vllm as vllm_sched
from sim.sched.base import Status
from sim.sched.batch import BatchBuilder
from sim.sched.vllm import BUDGET, EMPTY, MEMORY

V0_WATERMARK = 0.01  # vLLM v0's and Sarathi-Serve's default (fraction of the blocks)


def with_default_watermark(scenario):
    """``scenario`` with ``kv.watermark`` set to v0's 0.01 unless the scenario sets it."""
    kv = scenario.kv
    if "watermark" in kv.extras or "watermark" not in kv.cls.Params.model_fields:
        return scenario
    kv = type(kv)(**{"name": kv.name, **kv.extras, "watermark": V0_WATERMARK})
    return scenario.model_copy(update={"kv": kv})


class V0Scheduler(vllm_sched.VllmScheduler):
    """vLLM v1's plans, decode runs and commit, with v0's service order and memory rules."""

    prefix_caching_by_default = False  # vLLM v0 had it off unless asked
    holds_finished = False  # v0's loop: a finished request leaves the running list at once

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        # admitted and still computing the tokens it was admitted with (a prompt, or the
        # prompt + output of a recompute): Sarathi-Serve's "prompt processing not finished"
        self.prefilling = np.zeros(len(self.specs), dtype=bool)

    # ---- the step ------------------------------------------------------------------------
    def schedule(self, now: float):
        if not self.has_work():
            return None
        batch, preempted = BatchBuilder(), []
        admitted = self._step(batch, preempted)
        if preempted and batch.num_reqs == 0:
            # the only act was a request preempting itself: as vLLM's engine, plan again
            self._victims += preempted  # reported with the plan that follows
            return self.schedule(now)
        return self._plan(batch, preempted, admitted)

    def _step(self, batch: BatchBuilder, preempted: list) -> int:
        """Fill ``batch`` (the policy's passes); returns how many requests were admitted."""
        raise NotImplementedError

    # ---- the running decodes ---------------------------------------------------------
    def _decode_pass(self, budget: int, batch: BatchBuilder, preempted: list) -> int:
        """Every running decode, oldest first, each after ``can_append_slot``."""
        served = -1  # requests up to this index have been served (or skipped) this pass
        while True:
            r = self.running
            seg = r[(r > served) & ~self.prefilling[r]]
            if not len(seg):
                return budget
            ctx = self.computed[seg]
            extra = self.kv.extra_blocks(seg, ctx + 1)
            # free blocks before each decode's check; non-increasing, so the checks that
            # pass are a prefix of the segment
            free_before = self.kv.num_free - (np.cumsum(extra) - extra)
            ok = free_before >= 1
            if self.kv.reserves_up_front:  # a reservation never grows: appends need no block
                ok[:] = True
            fits = len(seg) if ok.all() else int(np.argmin(ok))
            self._grant(seg[:fits], extra[:fits], ctx[:fits], batch)
            budget -= fits
            if fits == len(seg):
                return budget
            req = int(seg[fits])
            victim = max(int(self.running[-1]), req)  # the newest not served yet
            self.alloc_failures += 1
            self._preempt(victim)
            preempted.append(victim)
            served = req if victim == req else req - 1  # a survivor is checked again

    def _grant(self, ids, extra, ctx, batch: BatchBuilder) -> None:
        if not len(ids):
            return
        self.kv.grow(ids, extra)
        if self.kv.tracks_computed:  # prefix caching publishes the blocks this step fills
            self.kv.note_computed(ids, ctx + 1)
        batch.add(ids, np.ones(len(ids), dtype=np.int64), ctx)

    # ---- admission -------------------------------------------------------------------
    def _admit_pass(self, queue, budget: int, batch: BatchBuilder, whole: bool) -> tuple:
        """Admit from ``queue`` (waiting, or v0's swapped) in order while everything fits.

        ``whole``: the request's tokens must all fit this step's budget (no chunking);
        otherwise it computes what the budget leaves. Returns (budget left, admitted) and
        sets ``_blocked`` to why admission stopped ('' = queue drained).
        """
        admitted, self._blocked = 0, EMPTY
        swapped = queue is self.swapped
        while len(queue):
            req = queue.peek()
            self._blocked = self._precheck(req, budget)  # the v1 gate: same checks
            if self._blocked:
                break
            known = int(self.known_tokens[req])
            comp = int(self.computed[req]) or self.kv.lookup_prefix(req, known)
            if whole and known - comp > budget:
                self._blocked = BUDGET
                break
            if not self.allocate(req, known, admitting=True):  # can_allocate / can_swap_in
                self._blocked = MEMORY
                self.memory_blocked[req] = True
                break
            self._v0_admit(req, comp, queue)
            if swapped:
                self._swap_bytes[1] += self.kv.swap_in(req)
            chunk = min(known - comp, budget)
            batch.add_one(req, chunk, comp)
            budget -= chunk
            admitted += 1
        return budget, admitted

    def _v0_admit(self, req: int, computed: int, queue) -> None:
        queue.pop()
        at = int(np.searchsorted(self.running, req))
        self.running = np.insert(self.running, at, req)  # kept in arrival order
        self.status[req] = Status.RUNNING
        if queue is not self.swapped:  # a swapped request resumes where it stopped
            self.computed[req] = computed
            self.prefilling[req] = True
        if self.cached_tokens[req] < 0:
            self.cached_tokens[req] = computed

    # ---- commit and decode runs ---------------------------------------------------------
    def update(self, plan, result):
        outcome = super().update(plan, result)
        self.prefilling[outcome.emitted] = False  # a step that samples ends the prefill
        return outcome

    def _run_length(self, ids: np.ndarray, ctx: np.ndarray) -> int:
        k = super()._run_length(ids, ctx)
        room = self.kv.num_free - 1  # can_append_slot leaves one block free at every check
        if k > 1 and not self.kv.reserves_up_front and self.run_blocks[-1] > room:
            k = 1 + int(np.searchsorted(self.run_blocks, room, side="right"))
            self.run_blocks = self.run_blocks[: k - 1]
        return k
