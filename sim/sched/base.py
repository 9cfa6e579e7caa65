"""Scheduler seam: the abstract base every scheduling policy extends.

The base owns per-request progress (struct of arrays, indexed by request index)
and the commit of a step's results. Policies implement ``schedule``; most extend
``VllmScheduler`` and override one small hook.

Progress vocabulary (vLLM v1's):
    known tokens    = prompt + generated   (all tokens whose ids exist)
    computed tokens = tokens whose KV is in the cache
A step schedules ``known - computed`` tokens (or a chunk of them). When a step
makes computed reach known, the request emits one new output token.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from enum import IntEnum

import numpy as np
from pydantic import BaseModel, ConfigDict

from sim.engine.plan import StepOutcome, StepPlan, StepResult
from sim.engine.requests import RequestSpecs
from sim.kv import swap
from sim.kv.base import KVManager
from sim.registry import Registry
from sim.sched.admission import Admission, Optimistic
from sim.sched.lengths import rejected
from sim.sched.queues import FCFSQueue
from sim.sched.spec import SpecState
from traces.validated import Validated


class Status(IntEnum):
    PENDING = 0  # not arrived yet
    WAITING = 1  # queued (new, or preempted and queued again)
    RUNNING = 2
    FINISHED = 3
    REJECTED = 4  # no room in max_model_len (see sim.sched.lengths)
    ABORTED = 5  # failed by the engine (vLLM v0: no room in the CPU swap space)


def arrived_as_waiting(status: np.ndarray) -> np.ndarray:
    """A run's final statuses, with requests that arrived before the run stopped but were
    never handed to the scheduler (they came during the last step) queued, i.e.
    unfinished: total = finished + rejected + unfinished + never sent."""
    status = status.copy()
    status[status == Status.PENDING] = Status.WAITING
    return status


# plain ints for the hot paths (an IntEnum member lookup costs a Python call)
_WAITING, _RUNNING, _FINISHED, _REJECTED = (int(Status.WAITING), int(Status.RUNNING),
                                             int(Status.FINISHED), int(Status.REJECTED))


class EngineStopped(Exception):  # noqa: N818 (a stop, not an error of the simulator)
    """The modelled server stopped (vLLM v0's RuntimeError when its swap space is full);
    the scheduler has failed every request it had not finished."""


@dataclass(frozen=True)
class SchedulerLimits:
    """The engine knobs a scheduler obeys (vLLM names, resolved values)."""

    max_num_seqs: int  # running requests at most (requests)
    max_num_batched_tokens: int  # tokens computed per step at most (tokens)
    max_model_len: int  # prompt + output at most (tokens)
    enable_chunked_prefill: bool
    long_prefill_token_threshold: int  # per-request chunk cap per step, 0 = none (tokens)
    # admit a waiting request only when blocks for all its tokens are free (vLLM 0.32)
    scheduler_reserve_full_isl: bool = True
    # floor the long-prefill cap at max_num_batched_tokens // (running + waiting)
    long_prefill_token_threshold_adaptive: bool = False

    def rejects(self, prompt, output) -> np.ndarray:
        """Requests refused at arrival (``sim.sched.lengths.rejected``)."""
        return rejected(prompt, output, self.max_model_len)


class NoParams(Validated):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Scheduler(ABC):
    """Abstract scheduler. Subclasses implement :meth:`schedule`."""

    description = ""
    Params: type[BaseModel] = NoParams
    #: whether ``engine.enable_prefix_caching`` left unset means on (vLLM v1's default) for
    #: this policy with paged KV (``Scenario.prefix_caching``)
    prefix_caching_by_default = False

    def __init__(self, specs: RequestSpecs, limits: SchedulerLimits, kv: KVManager,
                 params: BaseModel | None = None, admission: Admission | None = None):
        n = len(specs)
        self.specs = specs
        self.limits = limits
        self.kv = kv
        self.params = params if params is not None else self.Params()
        self.admission = admission or Optimistic(specs, limits, kv)
        self.admission.bind(self)
        self.prompt = specs.prompt_tokens
        self.output = specs.output_tokens
        self.computed = np.zeros(n, dtype=np.int64)
        self.generated = np.zeros(n, dtype=np.int64)
        self.known_tokens = specs.prompt_tokens.copy()  # prompt + generated (tokens)
        self.status = np.zeros(n, dtype=np.int8)
        self.num_preemptions = np.zeros(n, dtype=np.int64)
        self.cached_tokens = np.full(n, -1, dtype=np.int64)  # prefix hit at first admission
        self.recomputed_tokens = 0  # tokens thrown away by recompute preemption (tokens)
        self.running = np.zeros(0, dtype=np.int64)  # in running order
        self.waiting = self.make_queue()
        # swap-preempted requests (vLLM v0's swapped queue: resumed first, oldest first)
        self.swapped = FCFSQueue()
        self._swap_bytes = [0, 0]  # swapped out / in since the last plan (bytes)
        self.failed_now: list[int] = []  # failed by this schedule (swap space), unreported
        # when the plan was made: KV blocks used, running, waiting, KV tokens stored after the
        # step, why admission stopped
        self._at_schedule = (0, 0, 0, 0, "")
        # async scheduling (engine.async_scheduling): the KV of requests finished in a step
        # is freed only once the next plan is made, as vLLM's scheduler learns of those
        # finishes a step later (update_from_output runs after the next schedule())
        self.async_scheduling = False
        self._deferred: list[int] = []
        # async scheduling: the requests finished by the step just committed stay in
        # vLLM's running list for the next schedule() (update_from_output of that step runs
        # after it, vllm/v1/engine/core.py step_with_batch_queue): each still takes a
        # max_num_seqs slot and counts in the long-prefill cap's running + waiting, the
        # running pass skips it (scheduler.py:663-676: it reached max_tokens) and a KV
        # shortage may preempt it, which frees its blocks at once (``zombies``; policies
        # that keep their own per-lane books opt out with ``holds_finished``)
        self._zombies: set[int] = set()
        # the last two steps each request emitted in (step indices; -2: none) and the index
        # of the last step committed: async scheduling's prefix cache lags (_cached_upto)
        self._emit_last = np.full(n, -2, dtype=np.int64)
        self._emit_last_n = np.zeros(n, dtype=np.int64)  # tokens emitted then (drafts: 1 + a)
        self._emit_prev = np.full(n, -2, dtype=np.int64)
        self._steps_done = 0
        self._victim_scheduled = False  # the victim being preempted was scheduled this plan
        self.alloc_failures = 0  # running-pass block allocations that failed (each preempts)
        self.memory_blocked = np.zeros(n, dtype=bool)  # ever refused admission for lack of KV
        self.run_blocks = np.zeros(0, dtype=np.int64)  # cumulative new blocks, steps 1.. of a run
        self.stopped = ""  # why the modelled engine stopped ('' = it did not)
        # speculative decoding (engine.speculative_config; sim/sched/spec.py): drafts held,
        # acceptance draws; None when off. _slots: drafting slots per scheduled request
        self.spec: SpecState | None = None
        self._slots = 0
        self._spec_running = (False, False)
        # verify steps folded into runs (set by the runner where each step is priced as
        # planned alone, sim/cost/drafter.py); the run's accepted drafts [batch, k]
        self.spec_runs = False
        self._run_accepted = np.zeros((0, 0), dtype=np.int64)

    def enable_spec(self, cfg, seed: int) -> None:
        """Run with vLLM's speculative decoding (a ``SpeculativeConfig``)."""
        self.spec = SpecState(cfg, seed, bound=self.output)
        self.spec.async_ = self.async_scheduling  # set before (sim/runner.py)
        self._slots = self.spec.draft_slots

    @classmethod
    def resolve_defaults(cls, scenario, limits: SchedulerLimits):
        """The policy's own defaults for knobs the scenario leaves unset (vLLM v0's for the
        v0-era policies): returns (scenario, limits), used for sizing and reports."""
        return scenario, limits

    @classmethod  # noqa: B027 (a hook: most policies refuse nothing)
    def check_resolved(cls, params, limits: SchedulerLimits, num_blocks: int,
                       block_size: int) -> None:
        """Refuse (InputError) parameters the resolved deployment cannot run (``num_blocks``
        usable KV blocks of ``block_size`` tokens): called where the scenario is resolved,
        so the message names the file or --set at fault."""

    # ---- queue / arrivals ---------------------------------------------------------
    def make_queue(self):
        from sim.sched.queues import FCFSQueue

        return FCFSQueue()

    def add_request(self, req: int) -> bool:
        """A request arrives. False if it is rejected (``sim.sched.lengths``: no room for
        one output token, or over max_model_len under the strict rule)."""
        if self.limits.rejects(self.prompt[req], self.output[req]):
            self.status[req] = _REJECTED
            return False
        self.status[req] = _WAITING
        self.waiting.add(req)
        return True

    def has_work(self) -> bool:
        return len(self.running) > 0 or len(self.waiting) > 0 or len(self.swapped) > 0

    # ---- planning -------------------------------------------------------------------
    @abstractmethod
    def schedule(self, now: float) -> StepPlan | None:
        """Plan the next step at time ``now`` (seconds); None when nothing can run."""

    def replan_now(self) -> bool:
        """A plan that came back None preempted requests and must be made again at once
        (async scheduling: after the step in flight is updated)."""
        return False

    def next_wakeup(self, now: float) -> float | None:
        """A time (seconds) at which the scheduler wants to plan again while idle."""
        return None

    def blocked_reason(self) -> str:
        """Why waiting requests were not admitted at the last plan (for diagnostics)."""
        return ""

    def _mark_scheduled(self, scheduled_tokens: int) -> None:
        # a prefix-cached block shared by several requests stores its tokens once
        run = self.running
        if self._zombies:  # finished: neither running nor storing for the reports
            run = np.array([r for r in run.tolist() if r not in self._zombies], dtype=np.int64)
        stored = int(self.computed[run].sum()) + scheduled_tokens - self.kv.shared_slots
        self._at_schedule = (self.kv.num_used, len(run),
                             len(self.waiting) + len(self.swapped), stored, self.blocked_reason())

    def run_kv_fractions(self, plan: StepPlan) -> list[float]:
        """The KV cache's used fraction at each step of the decode run ``plan`` just
        scheduled (the blocks ``update`` will record: step 0's as scheduled, then each
        step's new ones), as ``KVManager.used_fraction`` reads once they are taken."""
        used = self._at_schedule[0] + np.concatenate(([0], self.run_blocks[: plan.num_steps - 1]))
        return (used / max(self.kv.num_blocks, 1)).tolist()

    def _take_swap_bytes(self) -> dict:
        """Swap traffic to charge to the plan being built (StepPlan keyword arguments)."""
        (out, back), self._swap_bytes = self._swap_bytes, [0, 0]
        return {"swap_out_bytes": out, "swap_in_bytes": back}

    def _preempt(self, req: int) -> None:
        """Recompute preemption (vLLM v1): drop the KV, start over from the front.

        With ``engine.preemption_mode: swap`` (vLLM v0) the KV moves to the host pool when
        it has room: the request keeps its computed tokens and joins ``swapped``.
        """
        self.num_preemptions[req] += 1
        ghost = self.spec is not None and req in self.spec.ghosts
        if ghost or req in self._zombies:
            # a request finished in the step in flight, preempted before vLLM learns it:
            # its blocks go now, it stays finished
            if ghost:
                self.spec.ghosts.discard(req)
            self._zombies.discard(req)
            self.running = self.running[self.running != req]
            if req in self._deferred:
                self._deferred.remove(req)
            self.kv.free(req)
            return
        self.status[req] = Status.WAITING
        self.running = self.running[self.running != req]
        if self.spec is not None:  # its drafts go (scheduler.py:1594)
            self.spec.drafts[req] = 0
            self.spec.inflight[req] = 0
        moved = self.kv.swap_out(req)
        if moved:
            self._swap_bytes[0] += moved
            self.swapped.add(req)
            return
        host = self.kv.host
        if host is not None and self.kv.held[req] and host.on_full != swap.RECOMPUTE:
            self._swap_space_full(req)  # vLLM v0 fails the request, or the engine
            return
        self.kv.preempt(req, int(self.computed[req]), self._cached_upto(req))
        self.recomputed_tokens += int(self.computed[req])
        self.computed[req] = 0
        self.waiting.prepend(req)

    def _cached_upto(self, req: int) -> int | None:
        """Async scheduling with a prefix cache: the tokens of ``req`` whose blocks vLLM
        has hashed when it preempts it (None: all it computed). vLLM hashes a block once its
        tokens are known: at allocate_slots (capped at the tokens known then,
        kv_cache_manager.py:607-616) or at the update of a step that ran it
        (async_scheduler.py:73-77, only while it is RUNNING). Planning behind the step in
        flight, it knows neither that step's tokens nor the ones of the step before it
        until their updates, so a victim preempted before this plan scheduled it lacks the
        KV of the tokens the step in flight emitted and of the last token the step before it
        emitted (that step's update hashes all but its last: num_computed_tokens less the
        placeholders of the step in flight); one scheduled in this plan lacks those of the
        step in flight only. Those blocks are freed unhashed."""
        if not (self.async_scheduling and self.holds_finished and self.kv.tracks_computed):
            return None
        last, prev, n = int(self._emit_last[req]), int(self._emit_prev[req]), self._steps_done
        lag = int(self._emit_last_n[req]) if last == n else 0
        if not self._victim_scheduled:
            lag += int(last == n - 1 or prev == n - 1)
        return int(self.known_tokens[req]) - lag

    def _swap_space_full(self, req: int) -> None:
        """A swap victim that does not fit the host pool (``sim.kv.swap``): it fails, or
        the engine stops (vLLM v0's RuntimeError) and every unfinished request fails."""
        self.kv.free(req)
        self.status[req] = Status.ABORTED
        if self.kv.host.on_full == swap.ABORT_REQUEST:
            self.failed_now.append(req)  # its client is answered (Engine._replica)
            return
        self.stopped = swap.LACK_OF_SWAP
        for r in np.flatnonzero(self.kv.held > 0).tolist():
            self.kv.free(r)
        for r in list(self.swapped):
            self.kv.host.drop(r)
        live = np.isin(self.status, (Status.PENDING, Status.WAITING, Status.RUNNING))
        self.status[live] = Status.ABORTED
        self.running = np.zeros(0, dtype=np.int64)
        self.waiting, self.swapped = self.make_queue(), FCFSQueue()
        raise EngineStopped(self.stopped)

    # ---- commit ---------------------------------------------------------------------
    def update(self, plan: StepPlan, result: StepResult) -> StepOutcome:
        """Commit an executed plan: advance progress, emit tokens, free finished requests."""
        self.flush_frees()  # the previous step's finishes: the plan just run did not see them
        ids, k = plan.req_ids, plan.num_steps
        used0, n_running, n_waiting, stored0, blocked = self._at_schedule
        tokens, ctx0 = plan.num_tokens, plan.context_lens
        if self.spec is not None and self.spec.ghost_plan:  # finished already: no output
            gone = self.spec.ghost_plan
            live = np.array([r not in gone for r in ids.tolist()], dtype=bool)
            ids, tokens, ctx0 = ids[live], tokens[live], ctx0[live]
            self.spec.ghost_plan = set()
        stored = None
        if k > 1 and plan.step_contexts is not None:  # a verify run (speculative decoding)
            kv_used, gen_before, ctx0, stored = self._commit_verify_run(plan, used0, stored0)
            emitted = ids
        elif k > 1:  # a decode run: blocks for steps 1..k-1 were counted when it was planned
            cum, kv_used = self._run_kv_used(used0, k)
            if cum[-1]:
                self.kv.allocate_many(ids, plan.context_lens + k)
            self.computed[ids] += k
            emitted = ids
            gen_before = self.generated[ids]
            self.generated[ids] = gen_before + k
            self.known_tokens[ids] += k
        else:
            kv_used = np.array([used0], dtype=np.int64)
            comp = self.computed[ids] + tokens
            new = None  # tokens each emitting request appends (None: 1 each)
            if self.spec is not None and self.spec.scheduled:
                comp, new = self._verify(ids, comp)
            self.computed[ids] = comp
            known = self.known_tokens[ids]
            done = comp >= known  # computed reached known: one token emitted
            if done.all():  # pure decode, or every prefill completed
                emitted = ids
            else:
                emitted, known = ids[done], known[done]
                if new is not None:
                    new = new[done]
            gen_before = self.generated[emitted]
            if new is None:
                new = 1
            else:  # stop at max_tokens, as vLLM's stop check per token does
                new = np.minimum(new, self.output[emitted] - gen_before)
            self.generated[emitted] = gen_before + new
            self.known_tokens[emitted] = known + new
        ended = self.generated[emitted] >= self.output[emitted]
        finished = emitted[ended]
        if len(finished) and self.spec is not None and self.spec.async_:
            self._spec_ghosts(finished, gen_before[ended], tokens, ctx0, ids)
        if len(finished):
            self._finish(finished)
        if self.spec is not None:  # the drafter proposes K for every request that sampled
            if len(finished):
                self.spec.forget(finished.tolist())
            live = emitted[self.status[emitted] == _RUNNING]
            self.spec.drafts[live] = self.spec.k
        n = self._steps_done + k  # the index of the plan's last step (from 1)
        if k == 1:
            self._emit_prev[emitted] = self._emit_last[emitted]
        else:  # a run: every request emitted in each of its steps
            self._emit_prev[emitted] = n - 1
        self._emit_last[emitted] = n
        self._emit_last_n[emitted] = self.generated[emitted] - gen_before if k == 1 or \
            plan.step_contexts is not None else 1
        self._steps_done = n
        first = emitted[gen_before == 0]
        if stored is None:
            stored = stored0 + len(ids) * np.arange(k) if k > 1 else np.array([stored0])
        return StepOutcome(
            emitted=emitted, first_tokens=first, finished=finished,
            kv_blocks_used=kv_used, num_running=n_running, num_waiting=n_waiting,
            kv_tokens=stored, blocked=blocked,
        )

    def _run_kv_used(self, used0: int, k: int) -> tuple[np.ndarray, np.ndarray]:
        """A run's new blocks by step 1..k-1 (cumulative, counted when it was planned) and
        the blocks in use at each of its k steps."""
        cum = self.run_blocks[: k - 1]
        kv_used = np.empty(k, dtype=np.int64)
        kv_used[0] = used0
        kv_used[1:] = used0 + cum
        return cum, kv_used

    def _commit_verify_run(self, plan: StepPlan, used0: int, stored0: int):
        """Commit the verify run ``plan`` (VllmScheduler._verify_run), as its steps one by one
        would: each request's contexts as planned, its accepted drafts the draws the plan
        was made from; the last step capped at max_tokens. Returns (blocks in use per step,
        generated tokens before the last step, the last step's contexts, stored tokens per
        step) for ``update``'s common tail."""
        ids, k, sp = plan.req_ids, plan.num_steps, self.spec
        acc = self._run_accepted[:, :k]
        ctx = plan.step_contexts  # [k, batch]
        last = ctx[-1]
        cum, kv_used = self._run_kv_used(used0, k)
        infl = sp.k - acc[:, -2] if sp.async_ else sp.inflight[ids]  # as the last step saw it
        if cum[-1]:
            slots = last + (1 + sp.k + sp.lookahead) + (infl if sp.async_ else 0)
            self.kv.allocate_many(ids, np.minimum(slots, self.limits.max_model_len))
        if self.kv.tracks_computed:  # the last schedule's (drafts are not final)
            self.kv.note_computed(ids, last + 1)
        sp.take_run(ids.tolist(), acc)
        a_last = acc[:, -1]
        self.computed[ids] = last + 1 + a_last
        gen_before = self.generated[ids] + (last - ctx[0])  # before the last step
        new = np.minimum(1 + a_last, self.output[ids] - gen_before)
        self.generated[ids] = gen_before + new
        self.known_tokens[ids] = last + 1 + new
        if sp.async_:  # the last step's rejected drafts, until the next update
            sp.hold_inflight(ids.copy(), sp.k - a_last)
        sp.scheduled = {}
        stored = stored0 + (ctx.sum(axis=1) - int(ctx[0].sum()))
        return kv_used, gen_before, last, stored

    def _spec_ghosts(self, finished, gen_before, tokens, ctx, ids) -> None:
        """Async scheduling: a request that this step finished with more than its last
        token (accepted drafts) was scheduled again before vLLM learnt it (its skip rule,
        scheduler.py:662-676, only knows the step emits one token at least): it stays in
        the running order for the next plan, asking for 1 + K with vLLM's optimistic
        computed count (this step's 1 + drafts all taken)."""
        sp = self.spec
        ghost = finished[gen_before < self.output[finished] - 1]
        if not len(ghost):
            return
        at = {int(r): i for i, r in enumerate(ids.tolist())}
        for r in ghost.tolist():
            i = at[r]
            opt = int(ctx[i]) + int(tokens[i])  # computed as vLLM counts it (s)
            known = int(self.known_tokens[r])
            self.computed[r] = known - 1
            sp.hold_inflight(r, opt - (known - 1))
            sp.drafts[r] = sp.k
            sp.ghosts.add(r)

    def _verify(self, ids: np.ndarray, comp: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Speculative decoding's verify: each request's scheduled drafts are accepted or
        rejected (placeholders always are); the rejected come off its computed tokens.
        Returns (computed tokens, tokens each appends: 1 + accepted)."""
        sp = self.spec
        slot = {r: i for i, r in enumerate(ids.tolist())}  # each request's batch slot
        reqs = list(sp.scheduled)
        d = [v[0] for v in sp.scheduled.values()]
        real = [i for i, v in enumerate(sp.scheduled.values()) if not v[1]]
        a = [0] * len(reqs)  # placeholders (padding): never accepted
        if real:  # the draws in request order within the step, as one at a time
            got = sp.accept_many(np.array([reqs[i] for i in real], dtype=np.int64),
                                 np.array([d[i] for i in real], dtype=np.int64)).tolist()
            for i, x in zip(real, got):
                a[i] = x
        comp, new = comp.tolist(), [1] * len(slot)
        for r, di, ai in zip(reqs, d, a):
            i = slot[r]
            comp[i] -= di - ai
            new[i] += ai
        if sp.async_:  # rejected drafts vLLM counts computed until the next update
            sp.hold_inflight(np.array(reqs, dtype=np.int64),
                             np.array(d, dtype=np.int64) - np.array(a, dtype=np.int64))
        sp.scheduled = {}
        return np.array(comp, dtype=np.int64), np.array(new, dtype=np.int64)

    def flush_frees(self) -> None:
        """Free the KV of finished requests held back by async scheduling (and forget the
        drafts of the step that was in flight: its outcome is known now)."""
        if self.spec is not None and self.spec.async_:
            self.spec.clear_inflight()
        if self._deferred:
            self.kv.free_many(self._deferred)
            self._deferred = []

    # async: finished requests stay running for one schedule (vLLM v1's schedulers, which
    # then drop them: drop_zombies)
    holds_finished = False

    def _finish(self, finished: np.ndarray) -> None:
        if self.async_scheduling:
            self._deferred.extend(finished.tolist())
        else:
            self.kv.free_many(finished.tolist())
        self.status[finished] = _FINISHED
        if self.async_scheduling and self.holds_finished:  # zombies until the next plan
            ghosts = self.spec.ghosts if self.spec is not None else ()
            self._zombies.update(r for r in finished.tolist() if r not in ghosts)
            return
        keep = self.status[self.running] == _RUNNING
        if self.spec is not None and self.spec.ghosts:  # scheduled once more (async)
            ghosts = self.spec.ghosts
            keep |= np.array([r in ghosts for r in self.running.tolist()], dtype=bool)
        self.running = self.running[keep]

    def drop_zombies(self) -> None:
        """The requests finished by the step before the plan just made leave the running
        list (vLLM's update_from_output of that step)."""
        if self._zombies:
            z = self._zombies
            self.running = np.array([r for r in self.running.tolist() if r not in z],
                                    dtype=np.int64)
            z.clear()

    # ---- end of run -------------------------------------------------------------------
    def unfinished(self) -> np.ndarray:
        """Requests that arrived but neither finished nor were rejected."""
        return np.flatnonzero((self.status == Status.WAITING) | (self.status == Status.RUNNING))


SCHEDULERS: Registry[type[Scheduler]] = Registry("scheduler")
