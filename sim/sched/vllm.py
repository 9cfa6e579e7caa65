"""vLLM v1's ``Scheduler.schedule()``, step for step, with the running pass vectorized.

One token budget (``max_num_batched_tokens``) per step:

1. Running requests, in running order, each ask for ``known - computed`` tokens,
   capped by the long-prefill cap (below), the remaining budget and
   ``max_model_len - 1 - computed``. If its KV blocks can't be allocated, the
   tail of the running list is preempted (recompute) until it fits or the
   request itself was the victim, which ends the running pass.
2. Only if nothing was preempted: waiting requests, in queue order, while the
   budget lasts and ``len(running) < max_num_seqs``. A prompt that exceeds the
   remaining budget with chunked prefill off, or whose blocks can't be
   allocated, stops admission (admission never preempts). With
   ``scheduler_reserve_full_isl`` (vLLM 0.32's default) blocks for *all* of a
   waiting request's tokens must be free, although only the chunk scheduled now
   is allocated.

The long-prefill cap (vLLM 0.32, ``vllm/v1/core/sched/scheduler.py:640-655``) is
``long_prefill_token_threshold`` while more than one request is running or
waiting, none for a lone request (nobody to starve), and with
``long_prefill_token_threshold_adaptive`` at least ``max_num_batched_tokens //
(running + waiting)``. Running + waiting is the same all through one schedule()
(admission and preemption move requests between the two), so it is computed
where it is used.

The running pass is computed for all requests at once with numpy (grants from a
cumulative sum of demands, blocks from a cumulative sum of shortfalls); it drops
to a per-request loop only at the first request whose blocks don't fit.

Decode runs: when a step is pure decode for every running request, nothing was
admitted and the reason admission stopped cannot change during the run, the
plan covers the longest run of steps that per-step planning would reproduce
exactly (see ``sim.engine.plan``).
"""

from __future__ import annotations

import numpy as np

from sim.engine.plan import StepPlan
from sim.sched.base import _RUNNING, SCHEDULERS, Scheduler, SchedulerLimits
from sim.sched.batch import BatchBuilder

MAX_RUN_STEPS = 4096  # bound on one decode run (steps): bounds per-plan arrays
MAX_VERIFY_RUN = 32  # bound on one speculative verify run (steps): the draws one plan reads

# Why admission stopped. Persistent reasons cannot change during a decode run.
EMPTY, SEQS, BUDGET, MEMORY = "", "max_num_seqs", "token_budget", "kv_memory"
ADMISSION, POLICY = "admission", "policy"


# ---- vLLM's per-request rules in ints: this scheduler's and the fast core's (sim/fast) --
def long_prefill_cap(lim: SchedulerLimits, eligible: int) -> int:
    """Most tokens one request may compute this step (0 = no cap) with ``eligible``
    running + waiting (+ swapped) requests; see the module docstring."""
    if lim.long_prefill_token_threshold <= 0 or eligible <= 1:
        return 0
    if lim.long_prefill_token_threshold_adaptive:  # scheduler.py:650-655
        return max(lim.long_prefill_token_threshold, lim.max_num_batched_tokens // eligible)
    return lim.long_prefill_token_threshold


def capped_demand(need: int, comp: int, cap: int, max_model_len: int) -> int:
    """A request's ``need`` tokens under the long-prefill ``cap`` (0: none) and
    ``max_model_len - 1 - computed`` (never binding for an admitted request: parity)."""
    if 0 < cap < need:
        need = cap
    return min(need, max_model_len - 1 - comp)


@SCHEDULERS.register("vllm")
class VllmScheduler(Scheduler):
    """vLLM v1 FCFS continuous batching with chunked prefill and recompute preemption."""

    description = "vLLM v1: token-budget continuous batching, chunked prefill, FCFS, recompute"
    prefix_caching_by_default = True  # vLLM v1's default (vllm/config/cache.py:141)
    folds_verify = True  # speculative verify steps fold into runs (_verify_run)
    holds_finished = True  # async: finished requests stay running for one schedule (base)

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self._blocked = EMPTY
        self._victims: list[int] = []  # preempted by a step that then scheduled nothing
        self._replan = False  # async: the last plan only preempted (replan_now)
        self._cap = 0  # the long-prefill cap of the plan being made (fix_cap)

    def blocked_reason(self) -> str:
        return self._blocked

    def replan_now(self) -> bool:
        replan, self._replan = self._replan, False
        return replan

    # ---- hooks for policies --------------------------------------------------------
    def running_order(self) -> np.ndarray:
        """The order in which running requests are served (vLLM: admission order)."""
        return self.running

    def pick_victim(self, batch: BatchBuilder) -> int:
        """The running request to preempt when blocks run out (vLLM FCFS: the tail)."""
        return int(self.running[-1])

    def admission_block(self, req: int) -> str:
        """A policy's reason not to admit ``req`` now ('' = no objection)."""
        return EMPTY

    def free_blocks(self) -> int:
        """Blocks the running pass may take now (vLLM: every free block)."""
        return self.kv.num_free

    def allocate(self, req: int, total: int, admitting: bool = False,
                 cached: int | None = None) -> bool:
        """Grow ``req`` to ``total`` slots if the policy lets it; False (no change) if not.
        ``cached``: the tokens whose KV is final after the step (default ``total``; less
        when the slots hold drafts or the drafter's lookahead)."""
        return self.kv.allocate(req, total, admitting, cached)

    def blocked_persists(self, reason: str) -> bool:
        """Whether an admission stop for ``reason`` holds for a whole decode run."""
        if reason == SEQS:
            return True
        lim = self.limits
        if lim.long_prefill_token_threshold > 0 and lim.long_prefill_token_threshold_adaptive:
            return False  # an arrival lowers the cap (budget // requests): a smaller chunk fits
        if reason == BUDGET:
            return True
        if self.waiting.arrivals_can_jump:
            return False
        return reason == MEMORY or (reason == ADMISSION and self.admission.persistent)

    # ---- the step ----------------------------------------------------------------------
    def schedule(self, now: float) -> StepPlan | None:
        plan = self._schedule_step(now)
        if self.spec is not None and self.spec.ghosts:
            self.spec_drop_ghosts(plan)
        self.drop_zombies()
        return plan

    def _schedule_step(self, now: float) -> StepPlan | None:
        if not self.has_work():
            return None
        batch, preempted = BatchBuilder(), []
        self.fix_cap()
        # the budget a request may take: max_num_batched_tokens less, with a draft model,
        # one drafting slot per scheduled request (vLLM's input_budget - draft_slots)
        budget = self.limits.max_num_batched_tokens - self._slots
        budget = self._schedule_running(budget, batch, preempted)
        if self.spec is not None:
            self.spec_after_running(batch)
        admitted = 0
        if not preempted:
            admitted = self._schedule_waiting(budget, batch)
        if preempted and batch.num_reqs == 0:
            # a request preempted itself before anyone was scheduled (a victim order other
            # than the tail, or async scheduling's finished requests ahead of it): vLLM's
            # engine just schedules again, at once; async, the empty batch takes the queue's
            # second slot, so the step in flight is updated first (the engine's lagging
            # re-plan: its finishes freed, arrivals to its end seen)
            self._victims += preempted  # reported with the plan that follows
            if self.async_scheduling and self.holds_finished:
                self._replan = True
                return None
            return self._schedule_step(now)
        return self._plan(batch, preempted, admitted)

    def _plan(self, batch: BatchBuilder, preempted: list, admitted: int) -> StepPlan | None:
        """Freeze the step; a decode run when it is pure decode and nothing can change it."""
        if batch.num_reqs == 0:
            return None
        ids, tok, ctx = batch.arrays()
        preempted, self._victims = self._victims + preempted, []
        self._mark_scheduled(int(tok.sum()))
        if self.spec is not None:
            self.spec_scheduled(ids, tok, ctx)
        steps, interruptible, contexts = 1, True, None
        # a free held back by async scheduling lands after this step: it may admit someone
        if not preempted and not admitted and not self._deferred:
            if self.spec is None and self._is_pure_decode(ids, tok, ctx):
                interruptible = not self.blocked_persists(self._blocked)
                steps = self._run_length(ids, ctx)
            elif self.spec is not None and self.spec_runs and self.folds_verify:
                contexts = self._verify_run(ids, tok, ctx)
                if contexts is not None:
                    interruptible = not self.blocked_persists(self._blocked)
                    steps = len(contexts)
        return StepPlan.build(ids, tok, ctx, preempted, num_steps=steps,
                              interruptible=interruptible, step_contexts=contexts,
                              **self._take_swap_bytes())

    def long_prefill_cap(self) -> int:
        """Most tokens one request may compute this step (0 = no cap)."""
        return long_prefill_cap(self.limits,
                                len(self.running) + len(self.waiting) + len(self.swapped))

    def fix_cap(self) -> None:
        """Take the step's long-prefill cap once, before its passes, as vLLM does
        (scheduler.py:640-655): preempting a request that finished in the step in flight
        (async) shrinks the running list mid-pass, and the cap must not follow it."""
        self._cap = self.long_prefill_cap()

    def _demand(self, ids: np.ndarray, comp: np.ndarray) -> np.ndarray:
        need = self.known_tokens[ids] - comp
        if self.spec is not None:  # the drafts held are scheduled with the last token
            need += self.spec.drafts[ids]
            if self.spec.async_:  # max_model_len counts the step in flight's drafts too
                np.minimum(need, self.limits.max_model_len - 1 - comp - self.spec.inflight[ids],
                           out=need)
        cap = self._cap
        if cap > 0:
            np.minimum(need, cap, out=need)
        # never binds for admitted requests (prompt + output <= max_model_len), kept for parity
        np.minimum(need, self.limits.max_model_len - 1 - comp, out=need)
        if self._zombies:  # finished in the step in flight: skipped (scheduler.py:663-676)
            need[np.isin(ids, list(self._zombies))] = 0
        return need

    def _demand_one(self, req: int, comp: int, budget: int | None = None) -> int:
        """``_demand`` of one request, in Python ints; with ``budget`` (a waiting request
        under speculative decoding) a resumed decode is padded (``spec_pad``; -1: the budget
        cannot hold it padded, which stops admission)."""
        need = int(self.known_tokens[req]) - comp
        if need == 1 and budget is not None and self.spec is not None:
            need = self.spec_pad(req, comp, budget)
            if need < 0:
                return need
        return capped_demand(need, comp, self._cap, self.limits.max_model_len)

    def _schedule_running(self, budget: int, batch: BatchBuilder, preempted: list) -> int:
        order = self.running_order()
        pos, slots = 0, self._slots
        while pos < len(order) and budget > 0:
            seg = order[pos:] if pos else order
            comp = self.computed[seg]
            need = self._demand(seg, comp)
            # a draft model's drafting slot: each scheduled request takes one more (one
            # asking for nothing is skipped and takes none: a finished one, async)
            sv = slots * (need > 0) if slots else 0
            cum = np.cumsum(need + sv) if slots else np.cumsum(need)
            before = cum - need - sv
            if before[-1] + need[-1] <= budget:  # everyone gets all they ask for: common
                grant = need
            else:  # budget runs out part-way: grant = clip(budget - before, 0, need)
                grant = np.minimum(np.maximum(budget - before, 0), need)
            extra = self.kv.extra_blocks(seg, self._slots_upto(comp + grant, seg))
            if self.spec is not None or self._zombies:  # granted nothing: skipped
                extra[grant == 0] = 0
            cum_extra = np.cumsum(extra)
            fits = len(seg)
            free = self.free_blocks()
            if cum_extra[-1] > free:
                fits = int(np.searchsorted(cum_extra, free, side="right"))
            self.kv.grow(seg[:fits], extra[:fits])
            if self.kv.tracks_computed:  # prefix caching publishes the blocks this step fills
                self.kv.note_computed(seg[:fits],
                                      self._final_upto(comp[:fits] + grant[:fits], seg[:fits]))
            if grant is need and fits == len(seg) and self.spec is None and \
                    not self._zombies:
                batch.add(seg, grant, comp)
            else:
                on = grant[:fits] > 0
                batch.add(seg[:fits][on], grant[:fits][on], comp[:fits][on])
            budget -= int(grant[:fits].sum()) + (slots * int((grant[:fits] > 0).sum())
                                                 if slots else 0)
            if fits == len(seg):
                break
            req, g = int(seg[fits]), int(grant[fits])
            if g == 0:  # nothing to compute (vLLM: `continue`): the next request's turn
                pos += fits + 1
                continue
            budget, ok = self._allocate_or_preempt(req, int(comp[fits]) + g, budget, batch,
                                                   preempted)
            if not ok:
                break
            batch.add_one(req, g, int(comp[fits]))
            budget -= g + (slots if g else 0)
            order = self.running_order()
            pos = int(np.flatnonzero(order == req)[0]) + 1
        return budget

    def _allocate_or_preempt(self, req, total, budget, batch, preempted) -> tuple[int, bool]:
        """vLLM's allocate-or-preempt loop for one running request (``total``: its
        computed tokens after the step, drafts included)."""
        slots, cached = self._slots_upto(total, req), self._final_upto(total, req)
        while not self.allocate(req, slots, cached=cached):
            self.alloc_failures += 1
            victim = self.pick_victim(batch)
            scheduled = victim != req and batch.contains(victim)
            if scheduled:
                budget += batch.remove(victim) + self._slots
            self._victim_scheduled = scheduled
            self._preempt(victim)
            self._victim_scheduled = False
            preempted.append(victim)
            if victim == req:
                return budget, False
        return budget, True

    def _schedule_waiting(self, budget: int, batch: BatchBuilder) -> int:
        """Admit waiting requests in queue order; returns how many were admitted.

        Sets ``self._blocked`` to why admission stopped ('' = queue drained).
        """
        admitted = 0
        self._blocked = EMPTY
        while len(self.swapped) or len(self.waiting):
            # swapped requests (vLLM v0) resume before any waiting request is considered
            queue = self.swapped if len(self.swapped) else self.waiting
            req = queue.peek()
            self._blocked = self._precheck(req, budget)
            if self._blocked:
                break
            comp = int(self.computed[req]) or self.kv.lookup_prefix(
                req, int(self.known_tokens[req]))
            need = self._demand_one(req, comp, budget)
            if need < 0:  # speculative decoding: too little budget for a padded decode
                self._blocked = BUDGET
                break
            if not self.limits.enable_chunked_prefill and need > budget:
                self._blocked = BUDGET
                break
            need = min(need, budget)
            cached = self._final_upto(comp + need, req)
            if not self._whole_fits(req) or not self.allocate(
                    req, self._slots_upto(comp + need, req), admitting=True, cached=cached):
                self._blocked = MEMORY
                self.memory_blocked[req] = True
                break
            self._admit(req, comp, queue)
            if queue is self.swapped:
                self._swap_bytes[1] += self.kv.swap_in(req)
            batch.add_one(req, need, comp)
            budget -= need + self._slots
            admitted += 1
        return admitted

    def _whole_fits(self, req: int) -> bool:
        """vLLM 0.32's ``scheduler_reserve_full_isl`` admission gate: blocks for every known
        token of ``req`` (capped at max_model_len), less its prefix-cache hit, must be free
        (``vllm/v1/core/kv_cache_manager.py:522-539``, called with
        ``full_sequence_must_fit`` from ``scheduler.py:1270``)."""
        if not self.limits.scheduler_reserve_full_isl:
            return True
        total = min(int(self.known_tokens[req]), self.limits.max_model_len)
        return self.kv.fits(req, total, admitting=True)

    def _precheck(self, req: int, budget: int) -> str:
        if budget <= 0:
            return BUDGET
        if len(self.running) >= self.limits.max_num_seqs:
            return SEQS
        if not self.admission.allows(req, int(self.generated[req])):
            return ADMISSION
        return self.admission_block(req)

    def _admit(self, req: int, computed: int, queue=None) -> None:
        (self.waiting if queue is None else queue).pop()
        self.running = np.append(self.running, req)
        self.status[req] = _RUNNING
        self.computed[req] = computed
        if self.cached_tokens[req] < 0:
            self.cached_tokens[req] = computed

    # ---- decode runs -------------------------------------------------------------------
    def _is_pure_decode(self, ids, tok, ctx) -> bool:
        # one token each, and that token is the last known one (not a prefill chunk of 1)
        return (len(ids) == len(self.running) and int(tok.sum()) == len(ids)
                and bool((ctx + 1 == self.known_tokens[ids]).all()))

    def _run_length(self, ids: np.ndarray, ctx: np.ndarray) -> int:
        """Steps this decode step can repeat unchanged (>= 1)."""
        k = min(int((self.output[ids] - self.generated[ids]).min()), MAX_RUN_STEPS)
        if k <= 1:
            return 1
        new = self.kv.decode_run_new_blocks(ids, ctx + 1, k - 1)
        cum = np.cumsum(new)
        if cum[-1] > self.kv.num_free:
            k = 1 + int(np.searchsorted(cum, self.kv.num_free, side="right"))
        self.run_blocks = cum[: k - 1]
        return k

    def _verify_run(self, ids: np.ndarray, tok: np.ndarray, ctx: np.ndarray):
        """Speculative decoding: the verify steps this one repeats unchanged, as each step's
        contexts ([steps, batch]; None: one step). Every running request verifies K real
        drafts in each (its last token and K drafts, nothing capped, none padded), so each
        schedules the same 1 + K tokens and differs only by what it accepted (its next draws,
        known ahead: SpecState.ahead); the run ends at the first step that finishes someone
        (that step included), before a step whose 1 + K max_model_len would cap, and before
        one whose blocks do not fit, as a plain decode run (``_run_length``)."""
        sp, lim, k = self.spec, self.limits, self.spec.k
        n = len(ids)
        if n != len(self.running) or sp.ghosts or len(sp.scheduled) != n or \
                0 < lim.long_prefill_token_threshold < 1 + k:
            return None
        if not ((tok == 1 + k).all() and (ctx + 1 == self.known_tokens[ids]).all()) or any(
                v != (k, False) for v in sp.scheduled.values()):
            return None
        rem = self.output[ids] - self.generated[ids]  # >= 1 token each step
        m = min(int(rem.min()), MAX_VERIFY_RUN)
        if m <= 1:
            return None
        acc = sp.ahead(ids.tolist(), m)
        gained = np.cumsum(1 + acc, axis=1)  # tokens emitted after steps 0 .. m-1
        ends = (gained >= rem[:, None]).any(axis=0)
        steps = int(np.argmax(ends)) + 1 if ends.any() else m
        c = np.empty((n, steps), dtype=np.int64)
        c[:, 0] = ctx
        c[:, 1:] = ctx[:, None] + gained[:, : steps - 1]
        slots = c + (1 + k + sp.lookahead)
        room = (lim.max_model_len - 1) - c
        if sp.async_:  # the step in flight's rejected drafts: counted computed by vLLM
            infl = np.empty_like(c)
            infl[:, 0] = sp.inflight[ids]
            infl[:, 1:] = k - acc[:, : steps - 1]
            slots += infl
            room -= infl
        fits = (room >= 1 + k).all(axis=0)  # step 0's holds: it was granted 1 + K
        if not fits.all():
            steps = int(np.argmin(fits))
        if steps <= 1:
            return None
        held = np.maximum(self.kv.blocks_for(ids[:, None], np.minimum(slots[:, :steps],
                                                                     lim.max_model_len)),
                          self.kv.held[ids][:, None])
        held = np.maximum.accumulate(held, axis=1)
        cum = np.cumsum((held[:, 1:] - held[:, :-1]).sum(axis=0))
        free = self.free_blocks()
        if cum[-1] > free:
            steps = 1 + int(np.searchsorted(cum, free, side="right"))
            if steps <= 1:
                return None
        self.run_blocks = cum[: steps - 1]
        self._run_accepted = acc[:, :steps]
        return c[:, :steps].T.copy()

    # ---- speculative decoding (sim/sched/spec.py states the rules) ----------------------
    def _final_upto(self, total, ids):
        """Of ``total`` computed tokens of requests ``ids``, those whose KV is final (what a
        prefix cache may hash): drafts are not (kv_cache_manager.py:612-616 caps at
        num_tokens); None / ``total`` unchanged without speculative decoding."""
        if self.spec is None:
            return None if not isinstance(total, np.ndarray) else total
        if isinstance(total, np.ndarray):
            return np.minimum(total, self.known_tokens[ids])
        return min(total, int(self.known_tokens[ids]))

    def _slots_upto(self, total, ids=None):
        """KV slots to hold for ``total`` computed tokens of requests ``ids``: with the
        drafter's lookahead (vLLM's allocate_slots(..., num_lookahead_tokens), capped at
        max_model_len) and, under async scheduling, the drafts of the step in flight that
        vLLM still counts as computed (it learns of their rejection after this schedule)."""
        sp = self.spec
        if sp is None or (not sp.lookahead and not sp.async_):
            return total
        extra = sp.lookahead
        if sp.async_ and ids is not None:
            extra = extra + sp.inflight[ids]
        if isinstance(total, np.ndarray):
            return np.minimum(total + extra, self.limits.max_model_len)
        return min(total + int(extra), self.limits.max_model_len)

    def spec_drop_ghosts(self, plan) -> None:
        """Async scheduling: requests that acceptance finished in the step in flight were
        in vLLM's running list for this schedule (``ghosts``); they leave it now, and their
        tokens in this plan produce nothing (sim/sched/spec.py)."""
        sp = self.spec
        ghosts = sp.ghosts
        self.running = np.array([r for r in self.running.tolist() if r not in ghosts],
                                dtype=np.int64)
        sp.ghost_plan = set() if plan is None else \
            {r for r in plan.req_ids.tolist() if r in ghosts}
        for r in sp.ghost_plan:  # their drafts are never verified
            sp.scheduled.pop(r, None)
        sp.ghosts.clear()

    def spec_after_running(self, batch: BatchBuilder) -> None:
        """What the waiting pass's padding rule reads of the running pass: whether it
        scheduled anyone, and whether one of them is mid-prefill (``prefill_scheduled``)."""
        ids = batch.arrays()[0]
        self._spec_running = (len(ids) > 0, bool(self.spec.chunk[ids].any()))

    def spec_pad(self, req: int, comp: int, budget: int) -> int:
        """A waiting request with one token to compute: padded to 1 + K placeholder drafts
        when a running request was scheduled (none of them mid-prefill) or it has computed
        tokens, and 1 + K + 1 fits max_model_len; -1 when the budget cannot hold 1 + K
        (scheduler.py:1131-1155)."""
        any_running, prefill = self._spec_running
        k = self.spec.k
        if prefill or not (any_running or comp > 0) or \
                comp + 1 + k + 1 > self.limits.max_model_len:
            return 1
        if 1 + k > budget:
            return -1
        self.spec.padded.add(req)
        return 1 + k

    def spec_scheduled(self, ids: np.ndarray, tok: np.ndarray, ctx: np.ndarray) -> None:
        """The drafts each request of the plan verifies: those of its drafts the grant
        covers (scheduler.py:861-876), or K placeholders when padded; every scheduled
        request then holds none until the step's drafts arrive."""
        sp = self.spec
        known = self.known_tokens[ids]
        over = ctx + tok - known  # tokens scheduled past the known ones: drafts
        sp.scheduled = scheduled = {}
        padded = sp.padded
        for r, o, held in zip(ids.tolist(), over.tolist(), sp.drafts[ids].tolist()):
            if o <= 0:
                continue
            if r in padded:
                scheduled[r] = (o, True)
            elif (d := min(o, held)) > 0:
                scheduled[r] = (d, False)
        padded.clear()
        sp.drafts[ids] = 0
        sp.chunk[ids] = ctx + tok < known  # vLLM's is_prefill_chunk, for the next schedule
