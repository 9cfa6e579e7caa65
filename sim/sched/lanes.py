"""Interactive and batch lanes with separate admission budgets (vLLM v1 underneath).

Requests carry a lane tag; the lane named ``interactive_lane`` is interactive,
every other lane is batch. Each step runs vLLM's two passes lane by lane, so
interactive requests never wait behind batch work, running or queued:

1. running interactive requests (admission order), with the whole token budget;
2. the interactive queue (FCFS) with what is left;
3. running batch requests with what is left, at most ``batch_step_tokens`` when
   the step carries interactive work (so batch prefill chunks cannot stretch the
   steps that carry interactive requests: their TTFT and TPOT); a step without
   interactive work gives the batch lane the whole budget;
4. the batch queue (FCFS), only if the interactive queue was drained: a blocked
   interactive head stops admission, batch work never takes what it waits for.

As in vLLM, nothing is admitted after a pass that preempted.

Reservations for the interactive lane (the seed's "separate admission budgets,
not only a priority bit that still shares one saturated KV pool"):

* ``interactive_seq_share`` of ``max_num_seqs``: batch requests run at most
  ``max_num_seqs - floor(share * max_num_seqs)`` at once (admission reason ``policy``);
* ``interactive_kv_share`` of the KV blocks: batch requests together hold at most
  ``blocks - max(reserve, blocks held by interactive requests only)``, counted
  physically (a prefix-cache block shared by several requests once; one shared by
  both lanes as the batch lane's). This is enforced at
  admission and when batch requests grow (a batch request that would grow into
  the reservation fails its allocation and preempts the newest batch request),
  so the batch lane behaves like a vLLM with a smaller pool and leaves the
  reservation free for interactive arrivals. The interactive lane may use any
  free block.

Preemption victims: the newest running batch request, else the newest
interactive one. Allocation failures against the batch lane's KV share count as
allocation failures (and preempt) like physical ones.
"""

from __future__ import annotations

import warnings
from itertools import chain

import numpy as np
from pydantic import ConfigDict, Field

from sim.engine.plan import StepPlan
from sim.sched.base import SCHEDULERS
from sim.sched.batch import BatchBuilder
from sim.sched.queues import FCFSQueue, RequestQueue
from sim.sched.vllm import BUDGET, EMPTY, POLICY, SEQS, VllmScheduler
from sim.warning import RunWarning
from traces.errors import InputError
from traces.validated import Validated

INTERACTIVE, BATCH = 0, 1


class LanesParams(Validated):
    model_config = ConfigDict(extra="forbid", frozen=True)

    interactive_lane: str = Field(
        "interactive", min_length=1,
        description="Lane tag of interactive requests (workload `lane`); every other lane is "
        "batch.")
    interactive_seq_share: float = Field(
        0.25, ge=0, lt=1, description="Fraction of engine.max_num_seqs reserved for the "
        "interactive lane (fraction); batch requests never use those slots.")
    interactive_kv_share: float = Field(
        0.25, ge=0, lt=1, description="Fraction of the KV blocks reserved for the interactive "
        "lane (fraction); batch requests never hold those blocks.")
    batch_step_tokens: int = Field(
        1024, ge=0, description="Most tokens batch requests compute in a step that also "
        "carries interactive requests (tokens), keeping those steps short; 0 = no cap.")


class LaneQueue(RequestQueue):
    """Two FCFS queues; the interactive one is always considered first."""

    arrivals_can_jump = True  # an interactive arrival goes ahead of a batch head

    def __init__(self, interactive: np.ndarray):
        self.flags = interactive
        self.lanes = (FCFSQueue(), FCFSQueue())  # INTERACTIVE, BATCH

    def _lane(self, req: int) -> FCFSQueue:
        return self.lanes[INTERACTIVE if self.flags[req] else BATCH]

    def add(self, req):
        self._lane(req).add(req)

    def prepend(self, req):
        self._lane(req).prepend(req)

    def _head(self) -> FCFSQueue:
        return self.lanes[INTERACTIVE] if len(self.lanes[INTERACTIVE]) else self.lanes[BATCH]

    def peek(self):
        return self._head().peek()

    def pop(self):
        return self._head().pop()

    def __len__(self):
        return len(self.lanes[INTERACTIVE]) + len(self.lanes[BATCH])

    def __iter__(self):
        return chain(*self.lanes)


@SCHEDULERS.register("lanes")
class LanesScheduler(VllmScheduler):
    """Interactive lane first, with reserved seqs and KV; batch lane in what is left."""

    description = ("interactive vs batch lanes: interactive served and admitted first with a "
                   "reserved share of max_num_seqs and KV; batch uses the rest")
    Params = LanesParams
    folds_verify = False  # its runs keep the batch lane's room (_run_length): one step each
    holds_finished = False  # its lane books count running requests: finishes leave at once

    def __init__(self, specs, limits, kv, params=None, admission=None):
        params = params if params is not None else self.Params()
        names = specs.lane_names
        code = names.index(params.interactive_lane) if params.interactive_lane in names else -1
        self.interactive = specs.lane == code  # per request (make_queue needs it)
        if len(specs) and not self.interactive.any():  # its share reserved for no one
            warnings.warn(f"scheduler lanes: no request is in the interactive lane "
                          f"{params.interactive_lane!r} (the workload's lanes: "
                          f"{', '.join(map(repr, names)) or 'none'}); its reserved sequences "
                          "and KV go unused", RunWarning, stacklevel=2)
        super().__init__(specs, limits, kv, params, admission)
        self.check_resolved(params, limits, kv.num_blocks, kv.block_size)
        self.batch_seqs = limits.max_num_seqs - int(params.interactive_seq_share
                                                    * limits.max_num_seqs)
        self.kv_reserve = int(params.interactive_kv_share * kv.num_blocks)
        self._serving: int | None = None  # the lane the running pass is serving
        self._budget_left = 0  # step tokens left for interactive admissions (tokens)

    @classmethod
    def check_resolved(cls, params, limits, num_blocks, block_size):
        reserve = int(params.interactive_kv_share * num_blocks)
        longest = -(-limits.max_model_len // block_size)  # blocks of the longest request
        if num_blocks - reserve < min(longest, num_blocks):  # else a long batch request
            # could never finish: it would preempt itself at the share, forever
            raise InputError(
                f"scheduler.interactive_kv_share {params.interactive_kv_share} leaves the "
                f"batch lane {num_blocks - reserve} KV blocks, fewer than one max_model_len "
                f"request needs ({longest}); lower the share or max_model_len")
        if not limits.enable_chunked_prefill and 0 < params.batch_step_tokens < \
                limits.max_model_len:
            raise InputError(
                f"scheduler.batch_step_tokens {params.batch_step_tokens} < max_model_len "
                f"{limits.max_model_len} with chunked prefill off: long batch prompts could "
                "never start; raise it, set it to 0 or enable chunked prefill")

    def make_queue(self):
        return LaneQueue(self.interactive)

    # ---- lane accounting ---------------------------------------------------------------------
    def _lane_blocks(self) -> tuple[int, int]:
        """Physical blocks held by batch requests, and those held by interactive ones only.

        A prefix block shared by several requests counts once (as vLLM's pool holds it
        once); one shared by both lanes counts as the batch lane's, since it stays in use
        while a batch request holds it. Every used block is in a running request's table,
        so the batch lane holds the used blocks that are not interactive-only.
        """
        r = self.running
        inter = self.interactive[r]
        if not self.kv.shared_slots:  # no block in two tables: held counts are physical
            held = self.kv.held[r]
            return int(held[~inter].sum()), int(held[inter].sum())
        only_inter = interactive_only(self.kv, r[inter].tolist())
        return self.kv.num_used - only_inter, only_inter

    def _batch_room(self, lane: tuple | None = None) -> int:
        """Blocks batch requests may still take: what the interactive lane leaves."""
        batch, inter = lane or self._lane_blocks()
        cap = self.kv.num_blocks - max(self.kv_reserve, inter)
        return max(0, min(self.kv.num_free, cap - batch))

    def free_blocks(self) -> int:
        return self._batch_room() if self._serving == BATCH else self.kv.num_free

    def allocate(self, req, total, admitting=False, cached=None):
        if not self.interactive[req] and self._batch_growth(req, total) > self._batch_room():
            return False
        return super().allocate(req, total, admitting, cached)

    def _batch_growth(self, req: int, total: int) -> int:
        r = self.running
        return batch_growth(self.kv, req, total, r[self.interactive[r]].tolist())

    def admission_block(self, req: int) -> str:
        if self.interactive[req]:
            return EMPTY
        running_batch = len(self.running) - int(self.interactive[self.running].sum())
        return POLICY if running_batch >= self.batch_seqs else EMPTY

    # ---- service order -----------------------------------------------------------------------
    def running_order(self) -> np.ndarray:
        r = self.running
        inter = self.interactive[r]
        if self._serving == INTERACTIVE:
            return r[inter]
        if self._serving == BATCH:
            return r[~inter]
        return np.concatenate((r[inter], r[~inter]))

    def pick_victim(self, batch: BatchBuilder) -> int:
        # the newest batch request, else the newest interactive one: both are the tail of
        # the lane being served or not served yet, so no granted tokens need refunding
        r = self.running
        b = r[~self.interactive[r]]
        return int(b[-1]) if len(b) else int(r[-1])

    # ---- the step: vLLM's two passes, one lane after the other -------------------------------
    def schedule(self, now: float) -> StepPlan | None:
        if not self.has_work():
            return None
        batch, preempted = BatchBuilder(), []
        budget, admitted = self._serve(INTERACTIVE, self.limits.max_num_batched_tokens, batch,
                                       preempted)
        if batch.num_reqs and self.params.batch_step_tokens:  # the step carries interactive work
            budget = min(budget, self.params.batch_step_tokens)
        _, more = self._serve(BATCH, budget, batch, preempted)
        if preempted and batch.num_reqs == 0:  # as VllmScheduler.schedule: plan again at once
            self._victims += preempted
            return self.schedule(now)
        return self._plan(batch, preempted, admitted + more)

    def _serve(self, lane: int, budget: int, batch: BatchBuilder, preempted: list):
        """Running requests of ``lane``, then its queue; returns (budget left, admitted).

        As vLLM: nothing is admitted in a step that preempted; and the batch queue is
        not considered while an interactive request waits (``_blocked`` set)."""
        try:
            self._serving = lane
            self.fix_cap()  # no finished request stays listed here (holds_finished)
            budget = self._schedule_running(budget, batch, preempted)
        finally:
            self._serving = None
        if preempted or (lane == BATCH and self._blocked):
            return budget, 0
        if lane == INTERACTIVE:
            self._budget_left = budget
        lanes, before = self.waiting, _tokens(batch)
        try:
            self.waiting = lanes.lanes[lane]
            self.fix_cap()  # the lane's queue only (sim/fast/lanes.py counts the same)
            admitted = self._schedule_waiting(budget, batch)
        finally:
            self.waiting = lanes
        return budget - (_tokens(batch) - before), admitted

    # ---- decode runs ---------------------------------------------------------------------------
    def blocked_persists(self, reason: str) -> bool:
        # an interactive arrival can be admitted past any batch-lane stop; only a full
        # seq table or a step budget that decodes already use up stop it too
        return reason == SEQS or (reason == BUDGET and self._budget_left <= 0)

    def _run_length(self, ids: np.ndarray, ctx: np.ndarray) -> int:
        k = super()._run_length(ids, ctx)
        b = ~self.interactive[ids]
        if k <= 1 or not b.any():
            return k
        cum = np.cumsum(self.kv.decode_run_new_blocks(ids[b], ctx[b] + 1, k - 1))
        room = self._batch_room()
        if cum[-1] > room:  # batch growth would reach the interactive reservation
            k = 1 + int(np.searchsorted(cum, room, side="right"))
            self.run_blocks = self.run_blocks[: k - 1]
        return k


# ---- physical block counts with prefix sharing (also the fast core's, sim/fast/lanes.py) ----
def _blocks_of(kv, reqs: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Block ids in the tables of ``reqs`` (sorted) and how many of them hold each."""
    ids = np.fromiter(chain.from_iterable(map(kv.block_table, reqs)), dtype=np.int64)
    return np.unique(ids, return_counts=True)


def interactive_only(kv, inter: list[int]) -> int:
    """Blocks in the tables of ``inter`` (the interactive lane's running requests) that no
    other table holds."""
    blocks, counts = _blocks_of(kv, inter)
    return int((counts == kv.block_refs(blocks)).sum())


def batch_growth(kv, req: int, total: int, inter: list[int]) -> int:
    """Physical blocks the batch lane gains if ``req`` grows to ``total`` slots: new
    blocks, plus prefix-cache hits that no batch request holds yet (``inter``: the
    interactive lane's running requests)."""
    hits = np.asarray(kv.pending_hits(req), dtype=np.int64)
    new = int(kv.extra_blocks(np.array([req]), np.array([total]))[0]) - len(hits)
    if not len(hits):
        return new
    held_by_inter = dict(zip(*(a.tolist() for a in _blocks_of(kv, inter))))
    holders = np.array([held_by_inter.get(h, 0) for h in hits.tolist()], dtype=np.int64)
    return new + int((kv.block_refs(hits) == holders).sum())  # no batch table has it


def _tokens(batch: BatchBuilder) -> int:
    return int(batch.arrays()[1].sum())
