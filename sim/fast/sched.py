"""vLLM v1's schedule() on the fast core's state (sim/fast/state.py), step for step.

The same rules as sim/sched/vllm.py (``VllmScheduler`` with FCFS, optimistic admission,
paged KV, recompute preemption), in two paths (blocks are counted, sim/fast/blocks.py; with
prefix caching sim/fast/caching.py overrides those methods to drive the general engine's
cache):

* fast: when every running request's demand fits the token budget and every new block
  fits the pool, order does not matter and the running pass is O(prefilling requests):
  decoding requests are counted, not visited;
* exact: otherwise, the request-by-request loop in running order (budget, allocate or
  preempt the tail), as vLLM does; decoding requests left unscheduled fall behind
  (``Progress.skip``).

Then, only if nothing was preempted, the waiting pass admits in queue order.
"""

from __future__ import annotations

from array import array
from collections import deque

from sim.fast.blocks import BlockCount
from sim.fast.state import Progress
from sim.sched.base import SchedulerLimits
from sim.sched.vllm import BUDGET, EMPTY, MEMORY, SEQS, capped_demand, long_prefill_cap

# what a configuration may ask of a policy's fast scheduler beyond its plain form (the
# fast core's refusal names them: sim/fast/__init__.py unsupported)
CACHING, UPFRONT = "prefix caching", "KV reserved up front"
RESERVE, FLEET = "admission reserve", "a fleet"
FEATURES = (CACHING, UPFRONT, RESERVE, FLEET)


class Planned:
    """One scheduled step (internal to the fast core; mutable while it is built)."""

    __slots__ = ("n_dec", "dec_ctx", "entries", "skipped", "preempted", "blocked", "first_sched",
                 "swap_out", "swap_in")

    def __init__(self):
        self.n_dec = 0  # decoding requests scheduled (one token each)
        self.dec_ctx = 0  # sum of their contexts (tokens)
        self.entries: list = []  # (request, tokens, context): the others, in batch order
        self.skipped: list | tuple = ()  # decoding requests not scheduled
        self.preempted: list | tuple = ()
        self.blocked = EMPTY  # why admission stopped
        self.first_sched: list | tuple = ()  # admitted for the first time
        self.swap_out = self.swap_in = 0  # KV moved to / from the host before it (bytes)

    @property
    def num_reqs(self) -> int:
        return self.n_dec + len(self.entries)


class FastScheduler(BlockCount, Progress):
    reads_clock = False  # whether the engine sets ``now_s`` (s) before each plan
    #: which of FEATURES (prefix caching aside: a caching twin) this policy also runs
    runs = frozenset({UPFRONT, RESERVE, FLEET})
    run_slack = 0  # blocks a decode run's later steps leave free (vLLM: none)

    def __init__(self, prompt, output, limits: SchedulerLimits, block_size: int,
                 num_blocks: int, admission_reserve: int, persists: dict[str, bool]):
        super().__init__(prompt, output, block_size, num_blocks)
        self.lim = limits
        self.reserve = admission_reserve  # blocks admissions leave free (watermark)
        self.waiting = self.make_queue()  # deque-like: [0], popleft, append, appendleft
        n = len(prompt)
        self.status = bytearray(n)  # sim.sched.base.Status codes
        self.npre = array("i", bytes(4 * n))  # preemptions per request
        self.cached = array("i", [-1]) * n  # computed tokens at first admission (-1 never ran)
        self.memory_blocked = bytearray(n)
        self.recomputed = 0  # tokens thrown away by preemption (tokens)
        self.alloc_failures = 0
        self.deferred: list[int] = []  # finished, blocks not freed yet (async scheduling)
        # finished by the step just committed, still in the running list for the next
        # schedule (async scheduling: sim/sched/base.py ``_zombies``)
        self.zombies: set[int] = set()
        self.replan = False  # async: the last plan only preempted (plan again at once)
        self._victims: list[int] = []
        self._pure = Planned()  # the plan of a step where every request decodes
        # why admission stopped at the last waiting pass; a step that preempted skips the
        # pass and reports the reason from before, as VllmScheduler does
        self.blocked = EMPTY
        # whether an admission stop for each reason holds for a whole decode run (the
        # general scheduler's rule, VllmScheduler.blocked_persists, asked once per reason)
        self.persists = persists

    # ---- vLLM's per-request rules (sim/sched/vllm.py) --------------------------------------
    def cap(self, eligible: int | None = None) -> int:
        """The long-prefill cap for ``eligible`` running + waiting requests (default: all)."""
        return long_prefill_cap(self.lim, len(self.running) + len(self.waiting)
                                if eligible is None else eligible)

    def demand(self, r: int, c: int, cap: int) -> int:
        return capped_demand(self.known_of(r) - c, c, cap, self.lim.max_model_len)

    # ---- the step -----------------------------------------------------------------------
    holds_finished = True  # async: finished requests stay running for one schedule (set from
    # the general scheduler's rule by sim/fast/__init__.py build)

    def schedule(self) -> Planned | None:
        """Plan the next step (None: nothing can run, or, async, it only preempted:
        ``_victims`` set, planned again once the step in flight is updated)."""
        p = self._schedule()
        if self.zombies:  # the step in flight's update: its finishes leave the list
            self.drop_zombies()
        return p

    def drop_zombies(self) -> None:
        """The finished requests kept for one schedule leave the running list (a few a
        step: removed one by one, the list's order kept)."""
        running = self.running
        for r in self.zombies:
            running.remove(r)
        self.zombies.clear()

    def _schedule(self) -> Planned | None:
        if not self.pre and not self.waiting and self.n_dec and not self._victims:
            p = self._pure_decode()
            if p is not None:
                return p
        while True:
            if not self.running and not self.waiting:
                return None
            p = self._passes()
            p.blocked = self.blocked
            if p.preempted and not p.num_reqs:
                self._victims += p.preempted  # vLLM schedules again at once
                if self.async_frees and self.holds_finished:  # after the step in flight's
                    # update (VllmScheduler)
                    self.replan = True
                    return None
                continue
            if not p.num_reqs:
                return None
            if self._victims:
                p.preempted, self._victims = self._victims + list(p.preempted), []
            return p

    def _pure_decode(self) -> Planned | None:
        """Every running request decodes and none waits: the plan, if the blocks fit."""
        blocks = self.phase[self.g % self.bs]
        if blocks > self.num_blocks - self.used:
            return None
        self._grow_running(blocks, blocks, ())
        p = self._pure  # reused: a pure decode plan is consumed before the next
        p.n_dec, p.dec_ctx = self.n_dec, self.sum_base + self.n_dec * self.g
        self.blocked = EMPTY
        return p

    def _passes(self) -> Planned:
        """vLLM's two passes: the running requests, then (if none was preempted) the queue;
        sets ``blocked`` when the queue's pass ran."""
        p = Planned()
        cap = self.cap()
        budget = self._running_fast(p, cap)
        if budget is None:
            p = Planned()
            budget = self._running_exact(p, cap)
        if not p.preempted:
            self._waiting(p, budget, cap)
            self.blocked = p.blocked
        return p

    def _running_fast(self, p: Planned, cap: int) -> int | None:
        """Everyone's demand fits: O(prefilling). None when the exact loop is needed."""
        bs, g = self.bs, self.g
        total = self.n_dec
        blocks = self.phase[g % bs] if self.n_dec else 0
        comp = self.comp
        for r in self.pre:
            c = comp[r]
            need = self.demand(r, c, cap)
            p.entries.append((r, need, c))
            total += need
            blocks += self.new_blocks(r, c, c + need)
        if total > self.lim.max_num_batched_tokens or blocks > self.free:
            return None
        self._grow_running(blocks, self.phase[g % bs] if self.n_dec else 0, p.entries)
        p.n_dec, p.dec_ctx = self.n_dec, self.sum_base + self.n_dec * g
        return self.lim.max_num_batched_tokens - total

    def _running_exact(self, p: Planned, cap: int, run: list[int] | None = None,
                       budget: int | None = None, lane: int = 0) -> int:
        """Request by request in running order (vLLM's loop): ``run`` (default: the running
        list; a lane's requests for sim/fast/lanes.py, ``lane`` naming its KV room) with
        ``budget`` (default: the step's); returns the budget left."""
        run = self.running if run is None else run
        i = 0
        budget = self.lim.max_num_batched_tokens if budget is None else budget
        if not p.preempted:
            p.preempted = []
        zombies = self.zombies
        while i < len(run) and budget > 0:
            r = run[i]
            if zombies and r in zombies:  # finished in the step in flight: skipped
                i += 1
                continue
            c = self.ctx(r)
            grant = min(self.demand(r, c, cap), budget)
            nb = self.new_blocks(r, c, c + grant)
            ok = True
            while nb > self._room(lane):
                self.alloc_failures += 1
                victim = self._victim()
                at = len(run) - 1 if victim == run[-1] else (
                    run.index(victim) if victim in run else len(run))
                granted = self._unschedule(p, victim) if at < i and \
                    victim not in zombies else 0
                budget += granted
                i -= at < i
                if run is not self.running and at < len(run):
                    del run[at]
                self._preempt(victim, granted)
                p.preempted.append(victim)
                if victim == r:
                    ok = False
                    break
            if not ok:
                break
            self._grow_one(r, nb, c + grant)
            if self.dec[r]:
                p.n_dec += 1
                p.dec_ctx += c
            else:
                p.entries.append((r, grant, c))
            budget -= grant
            i += 1
        skipped = [r for r in run[i:] if self.dec[r]]
        if skipped:
            p.skipped = [*p.skipped, *skipped]
        return budget

    def _victim(self) -> int:
        """The running request to preempt when blocks run out (vLLM FCFS: the tail)."""
        return self.running[-1]

    def _unschedule(self, p: Planned, v: int) -> int:
        """Take ``v``, scheduled earlier in this step, out of ``p``; its granted tokens."""
        if self.dec[v]:
            p.n_dec -= 1
            p.dec_ctx -= self.ctx(v)
            return 1
        e = next(e for e in p.entries if e[0] == v)
        p.entries.remove(e)
        return e[1]

    def _preempt(self, v: int, granted: int = 0) -> None:
        """Recompute preemption (vLLM v1); ``granted``: the tokens this step had given it
        (its blocks for them are freed too)."""
        self.npre[v] += 1
        if v in self.zombies:  # finished in the step in flight: its blocks go now
            self.zombies.discard(v)
            self.running.remove(v)
            self.deferred.remove(v)
            self.release_finished([v])
            return
        self.status[v] = 1  # WAITING
        if v == self.running[-1]:
            self.running.pop()
        else:
            self.running.remove(v)
        c = self.ctx(v)
        cached = self._cached_upto(v, granted > 0) if self.async_frees and \
            self.holds_finished else None
        if self.dec[v]:
            if v not in self.stale:
                self.close_run(v, self.g - 1)
            self.stale.discard(v)
            self.first_due.discard(v)
            self.drop_dec(v)
        else:
            self.pre.remove(v)
        self._requeue(v, c, granted, cached)

    def _requeue(self, v: int, c: int, granted: int, cached: int | None) -> None:
        """Victim ``v`` (out of the running list, ``c`` tokens computed, ``granted`` more
        scheduled this step) frees its blocks and starts over at the queue's front:
        recompute preemption (sim/fast/swap.py: swap)."""
        self._release(v, c + granted, preempted=True, cached=cached)
        self.recomputed += c
        self.comp[v] = 0
        self.waiting.appendleft(v)

    def _cached_upto(self, v: int, scheduled: bool) -> int:
        """Async scheduling: the tokens of victim ``v`` whose blocks vLLM has hashed, its
        known tokens less those emitted in the step in flight and, unless this plan
        scheduled it, the step before (sim/sched/base.py ``_cached_upto``); read from its
        emission runs before they are closed."""
        n = self.g - 1  # the step in flight (the last committed)
        rs = self.run_start.get(v)
        open_run = rs is not None and v not in self.stale  # emitted in every step since rs
        lag = int(open_run)
        if not scheduled:
            lag += int((open_run and rs <= n - 1) or self.last_emit.get(v) == n - 1)
        return self.known_of(v) - lag

    def _waiting(self, p: Planned, budget: int, cap: int) -> int:
        """Admit in queue order (VllmScheduler._schedule_waiting): stop at the first request
        the budget, max_num_seqs, the policy or the free blocks refuse; ``p.blocked`` says
        which. Returns the budget left."""
        q = self.waiting
        if not q:
            p.blocked = EMPTY
            return budget
        lim, known, comp, running = self.lim, self.known, self.comp, self.running
        seqs, mml, chunked = lim.max_num_seqs, lim.max_model_len, lim.enable_chunked_prefill
        while q:
            r = q[0]
            if budget <= 0:
                p.blocked = BUDGET
                return budget
            if len(running) >= seqs:
                p.blocked = SEQS
                return budget
            why = self._admission_block(r)
            if why:
                p.blocked = why
                return budget
            kr = known[r]
            c = comp[r] or self._hit(r, kr)  # comp 0: preemption recomputes
            need = kr - c  # demand(): capped by the long-prefill cap and max_model_len
            if 0 < cap < need:
                need = cap
            if need > mml - 1 - c:
                need = mml - 1 - c
            if not chunked and need > budget:
                p.blocked = BUDGET
                return budget
            if need > budget:
                need = budget
            if not self._admit_blocks(r, c + need, kr if kr < mml else mml):
                p.blocked = MEMORY
                self.memory_blocked[r] = 1
                return budget
            self._start(p, r, c)
            p.entries.append((r, need, c))
            budget -= need
        p.blocked = EMPTY
        return budget

    def _start(self, p: Planned, r: int, c: int) -> None:
        """The queue's head ``r`` runs from plan ``p`` on, ``c`` tokens computed; its first
        admission records its cached tokens and its first scheduling."""
        self.waiting.popleft()
        self.comp[r] = c
        self._join(r)
        self.pre.append(r)
        self.status[r] = 2  # RUNNING
        if self.cached[r] < 0:
            self.cached[r] = c
            if not p.first_sched:
                p.first_sched = []
            p.first_sched.append(r)

    def _join(self, r: int) -> None:
        """``r`` takes its place in the running order (vLLM: last)."""
        self.running.append(r)

    def _admission_block(self, r: int) -> str:
        """A policy's reason not to admit waiting request ``r`` now ('' = no objection)."""
        return EMPTY

    def one_left(self, r: int, computed: int) -> None:
        """Prefilling request ``r`` has one prompt token left (``computed`` tokens in KV): it
        decodes from the next step (vLLM: nothing more to note)."""

    stopped = ""  # why the modelled server stopped ('' = it did not; sim/fast/swap.py)
    failed_now: list | tuple = ()  # failed by this schedule (sim/fast/swap.py), unreported

    def swapped_queue(self):
        """v0's swapped requests (sim/fast/swap.py; none without swap preemption)."""
        return ()

    def queued(self) -> int:
        """Waiting requests (a swapped queue's aside: sim/fast/swap.py), as the general
        engine reports those left at the end."""
        return len(self.waiting)

    def next_wakeup(self) -> float | None:
        """When (s) the policy wants to plan again with nothing arriving (vLLM: never)."""
        return None

    def batch_order(self) -> list[int]:
        """The running requests in the order a step's batch lists them (vLLM: running
        order, the admitted last)."""
        return self.running

    def run_steps(self, g: int, k: int) -> int:
        """The most steps (<= ``k``) a decode run from step ``g`` may take for the policy's
        own reasons (vLLM: ``k``)."""
        return k

    @classmethod
    def policy_args(cls, sched, specs) -> dict:
        """The policy's own constructor arguments, from the general scheduler ``sched`` it
        stands for (vllm: none)."""
        return {}

    def make_queue(self):
        """The waiting queue (vLLM FCFS: a deque; preempted requests go to its front)."""
        return deque()
