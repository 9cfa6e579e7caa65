"""The fast core's event loop: sim/engine/engine.py's replica, on the fast scheduler.

Plans are the general engine's plans, one for one: a step, or a decode run (every running
request decoding, nothing admitted or preempted) of as many steps as per-step planning
would repeat unchanged (to the next finish, the last block that fits, ``MAX_RUN_STEPS``),
cut at the next arrival when an arrival could change it, and at the horizon. So times,
the drain limit (counted in plans) and every recorded column come out the same; only the
work per plan shrinks (O(prefilling + admitted + finished) instead of O(running)).
Times are integer nanoseconds (sim/engine/clock.py); the same-time rule holds.

In a fleet (``env``: the fleet's SimPy environment) the loop is a SimPy process, as the
general engine's replica: it waits (LATE priority) for each plan's end and for the next
arrival when idle, and reports its finishes to the fleet at the plan's end. The plan is
committed when it is made; nothing the fleet reads from a replica (its source, its
``busy_until``, the KV usage a router reads: ``kv_used_fraction``) shows it before the
end, so the fleet sees what it sees of a general replica. An optimistic replica
(``_run_waiting``) commits a decode run at its end instead, cut at the first request
pushed to it meanwhile. Rows whose waiting counts can
grow while the plan runs (a run no arrival cuts) are counted again at its end, as the
general engine counts them.
"""

from __future__ import annotations

import gc
import heapq
from array import array
from bisect import bisect_left, bisect_right
from itertools import accumulate, cycle, islice

import numpy as np

from sim.engine.arrivals import ArrivalSource, seen_by_step
from sim.engine.clock import MAX_NS, NS_PER_S, ns
from sim.engine.engine import LATE, LATER, RunStatus, _horizon, _late, step_blocks
from sim.fast import arrivals, hooks
from sim.fast.record import FastRecord
from sim.fast.sched import FastScheduler, Planned
from sim.sched.base import EngineStopped
from sim.sched.vllm import MAX_RUN_STEPS

_MAX_S = MAX_NS / NS_PER_S


def shape(entries, n_dec: int) -> tuple[list, list, int, int, int]:
    """A step's shape from its (request, tokens, context) entries beside ``n_dec``
    decoding requests: the prefill chunks' tokens and contexts, the one-token entries'
    count and context sum (priced as decodes), and the step's tokens."""
    pq, pc, n1, c1, total = [], [], 0, 0, n_dec
    for _, t, c in entries:
        total += t
        if t > 1:
            pq.append(t)
            pc.append(c)
        else:
            n1 += 1
            c1 += c
    return pq, pc, n1, c1, total


class FastEngine:
    def __init__(self, sched: FastScheduler, cost, source: ArrivalSource,
                 admissible: np.ndarray, record: FastRecord, *, stop_ns: int,
                 drain: tuple[int, int], progress=None, hook=None, env=None, priced=None):
        """``priced``: prices one-step plans instead of ``cost`` (its ``fast_step_time``:
        a decode pool's transferred prompts, sim/fleet/disagg.py)."""
        self.s, self.cost, self.rec, self.env = sched, cost, record, env
        self.priced = priced
        # a cost model that prices whole plans (a fitted steps file: its price of a step
        # depends on the token counts the run has committed): each plan is built as the
        # general engine's (O(running)), priced with ``step_times`` and shown to it
        # committed (``observe``), as sim/runner.py does for the general engine
        self.whole = not cost.prices_shapes
        self.view = None  # the decode run being priced: its batch (hooks.batch_view)
        self.swaps = getattr(sched, "host", None) is not None  # swap traffic (sim/fast/swap.py)
        self.viewed = hook is not None or self.whole  # plans built as the general engine's
        self.ok = bytearray(admissible.astype(np.uint8).tobytes())  # accepted at arrival
        self.src = arrivals.view(source)  # .nxt: the next arrival (ns; NEVER: none known)
        # every request handed over (the drain begun); a fleet's source is asked per plan
        self.all_in = env is None and self.src.exhausted()
        self.stop, self.clock, self.last_start, self.last_end = stop_ns, 0, None, None
        self.seen = 0  # the last plan saw the arrivals up to this time (ns)
        self.last_d = 1  # the last decode run's last step (ns): guesses how long a run lasts
        self.progress, self.hook = progress, hook  # hook(plan, starts, durations, outcome)
        # the drain limit (sim/runner.py _DrainLimit): plans after the last arrival
        self.drain_min, self.drain_factor = drain
        self.plans, self.drain_limit, self.drain_budget, self.drain_cut = 0, None, 0, False
        self.busy_until = -1  # end of the plan being executed (ns; -1 idle)
        # a fleet's plan in progress: the blocks the general engine's KV manager shows until
        # the plan's end (its first step's; the plan itself is committed already). None:
        # between plans, the scheduler's count
        self.kv_shown: int | None = None
        self.recount = None  # a fleet's run rows to count again at the plan's end
        self.reported = None  # a fleet's plan to hand the hook at its end
        self.kv_run = None  # an optimistic run's (step starts, blocks in use at each step)
        # a fleet replica told of every request pushed to it (sim/fleet/cluster.py): it cuts
        # its decode runs only where one comes, instead of at the fleet's lookahead
        self.optimistic = False
        # the SimPy priority of its plans' ends: LATE; an optimistic fleet's replicas end the
        # steps of one instant in replica order (Engine.late)
        self.late = LATE
        self.staged = False  # plans after the instant's step ends (sim/fleet/cluster.py _stage)

    def run(self) -> RunStatus:
        # the loop makes no reference cycles; the cyclic collector only costs time here
        collect = gc.isenabled()
        gc.disable()
        try:
            loop = self._loop()
            while True:  # without an environment the loop never yields
                next(loop)
        except StopIteration as end:
            return end.value
        finally:
            if collect:
                gc.enable()

    def start(self):
        """A fleet's replica: the loop as a process of ``env``; its value is the RunStatus."""
        return self.env.process(self._loop())

    def _loop(self):
        s, src, lag, env = self.s, self.src, self.s.async_frees, self.env
        rec, clocked = self.rec, s.reads_clock
        rows, stream_at = rec.st[0], rec.stream_at  # past stream_at rows, stream them
        if env is not None:  # after the fleet's arrivals at time 0, as the general engine
            yield _late(env, 0)
        while self.clock < self.stop:
            if self.staged and env.peek() <= env.now:  # after the instant's step ends
                yield _late(env, 0, priority=LATER)  # (Engine._replica)
            # async scheduling: the plan starting at a step's end was made when that step
            # started, so it sees the arrivals up to that start (sim/engine/engine.py _lagging)
            lagging = lag and self.last_end == self.clock
            upto = self.last_start if lagging else self.clock
            self.seen = upto  # the plan sees the arrivals up to here (ns)
            if env is not None or src.nxt <= upto:  # a fleet's nxt costs a lookahead
                self._deliver(upto)
            if clocked:
                s.now_s = self.clock / 1e9
            try:
                p = s.schedule()
                while p is None and (lagging or s.replan):
                    # nothing in flight to plan behind (or it only preempted): at once, as
                    # vLLM
                    lagging = s.replan = False
                    s.flush_frees()
                    self.seen = self.clock
                    self._deliver(self.clock)
                    p = s.schedule()
            except EngineStopped:  # the modelled server failed (swap space full)
                break
            if s.failed_now:  # their clients are answered now (ArrivalSource.failed)
                failed, s.failed_now = s.failed_now, []
                self.src.failed(failed, self.clock)
            if p is None:
                if self.optimistic:
                    if not (yield from self._idle()):
                        break
                    continue
                t = self._next_time()
                if t is None:
                    break
                if env is not None:  # as the general engine's replica waits
                    self.busy_until = -1
                    yield _late(env, max(0, t - env.now))
                self.clock = max(self.clock, t)
                continue
            if env is not None:  # a fleet's source can end between deliveries
                self.all_in = src.exhausted()
                self.kv_shown = s.used
            waited = False
            if not p.entries and not p.skipped and not p.preempted and not s.pre \
                    and not s.deferred:
                if self.optimistic and not s.persists[p.blocked]:
                    waited = yield from self._run_waiting(p)
                else:
                    self._decode_run(p)
            else:
                self._step(p)
            if env is not None:
                if not waited:
                    self.busy_until = self.clock
                    yield _late(env, self.clock - env.now, priority=self.late)
                self.kv_shown = self.kv_run = None
                self._ended()
            if len(rows) >= stream_at:
                rec.flush(s)
            self.last_end = self.clock
            if self.progress is not None:
                self.progress(self.clock / NS_PER_S)
        s.flush_frees()  # the run is over: nothing plans behind the last finishes
        if s.zombies:
            s.drop_zombies()
        if self.clock >= self.stop and self.last_start is not None:
            self._deliver(self.last_start)  # as the general engine hands them over
        s.open_runs()
        s.check()
        return RunStatus(self.clock / NS_PER_S, self.clock >= self.stop, s.queued())

    def _ended(self) -> None:
        """A fleet's plan has ended: count the waiting requests of a run no arrival cut
        again (the fleet may have pushed requests due within it while it ran), then
        report the finishes."""
        if self.recount is not None:
            at, base, after, upto = self.recount
            self.recount = None
            self.rec.st[4][at:at + len(upto)] = array("q", self.src.waiting_by(base, after,
                                                                                upto))
        self.src.release(self.clock)
        if self.reported is not None:  # after the finishes, as the general engine
            view, p, kw = self.reported
            self.reported = None
            hooks.call(self.hook, view, p, **kw)

    def _report(self, view, p: Planned, **kw) -> None:
        """The per-plan hook: at once, or a fleet's at the plan's end (``_ended``), when the
        general engine's replica reports its plans (a fleet's step log in time order)."""
        if self.env is None:
            hooks.call(self.hook, view, p, **kw)
        else:
            self.reported = (view, p, kw)

    def kv_used_fraction(self) -> float:
        """The KV blocks in use as a router reads them now (sim/kv/base.py used_fraction):
        during a plan those of its first step, as the general engine, whose KV manager
        takes a decode run's later blocks and frees its finishes at the plan's end; during
        an optimistic run those of the step in progress (``step_blocks``)."""
        s = self.s
        if self.kv_run is not None:
            used = step_blocks(*self.kv_run, self.env.now)
        else:
            used = s.used if self.kv_shown is None else self.kv_shown
        return used / max(s.num_blocks, 1)

    def _next_time(self) -> int | None:
        """The next arrival or the scheduler's wake-up (ns), whichever comes first."""
        t = self.src.nxt
        t = None if t == arrivals.NEVER else t
        wake = self.s.next_wakeup()
        if wake is not None:
            t = ns(wake) if t is None else min(t, ns(wake))
        return t

    def _deliver(self, now: int) -> None:
        if self.env is None and self.src.nxt > now:  # (a fleet's source: due() is cheaper)
            return
        s, ok = self.s, self.ok
        for r in self.src.due(now):
            if ok[r]:
                s.status[r] = 1  # WAITING
                s.waiting.append(r)
            else:
                s.status[r] = 4  # REJECTED
        self.all_in = self.src.exhausted()

    def _finished(self, reqs: list[int]) -> None:
        """``reqs`` finished at the end of the plan just run (the clock): a gated source
        lets their clients send again."""
        if reqs:
            self.src.finished(reqs, self.clock)

    def _drain(self) -> None:
        """Count a plan; once every request has arrived, past the drain budget the run stops
        after this plan's first step."""
        self.plans += 1
        if not self.all_in:
            return
        if self.drain_limit is None:
            self.drain_budget = max(self.drain_min, self.drain_factor * self.plans)
            self.drain_limit = self.plans + self.drain_budget
        elif self.plans > self.drain_limit and not self.drain_cut:
            self.stop, self.drain_cut = min(self.stop, self.clock), True

    # ---- one step -----------------------------------------------------------------------
    def _step(self, p: Planned) -> None:
        s = self.s
        pq, pc, n1, c1, total = shape(p.entries, p.n_dec)
        comp = s.comp
        stored = (s.sum_base + s.n_dec * s.g + sum([comp[r] for r in s.pre]) + total
                  - s.shared_slots())
        used, running, waiting = s.used, len(s.running), len(s.waiting)
        self._drain()
        if self.viewed:
            view = hooks.batch_view(s, p)
            pure = (not p.entries and not p.skipped and not p.preempted and not s.pre
                    and not s.deferred)
            interruptible = not s.persists[p.blocked] if pure else True  # as _plan sets it
        if self.whole:  # its step_times adds the swap time (CostModel.swap_time)
            plan = hooks.plan(view, p, 1, interruptible)
            dur = float(self.cost.step_times(plan)[0])
        else:
            dur = self.cost.shape_time1(total, p.num_reqs, pq, pc, p.n_dec + n1,
                                        p.dec_ctx + c1) if self.priced is None else \
                self.priced.fast_step_time(self.cost, p)
            if self.swaps:
                dur += self.cost.swap_seconds(p.swap_out + p.swap_in)
        d = round((dur if dur < _MAX_S else _MAX_S) * NS_PER_S)
        start = self.clock
        self.last_start, self.clock = start, start + d
        first, finished = self._commit(p)
        if self.whole:
            self.cost.observe(plan)
        self._finished(finished)
        rec = self.rec
        rec.plan(sum(pq), p.n_dec + n1, p.num_reqs, running, len(p.preempted), 1, p.blocked)
        rec.step(start, d, used, stored, waiting)
        if p.first_sched or first or finished:
            rec.events(start, d, p.first_sched, first, finished)
        if self.hook is not None:
            self._report(view, p, steps=1, interruptible=interruptible, starts=[start],
                         durs=[d], kv_used=[used], kv_tokens=[stored], running=running,
                         waiting=waiting, first=first, finished=finished)

    def _commit(self, p: Planned) -> tuple[list, list]:
        """Advance progress by the step just executed (sim/sched/base.py update)."""
        s = self.s
        s.flush_frees()  # the previous plan's finishes (async scheduling)
        g = s.g
        first, done = [], []
        if s.stale:
            skipped = set(p.skipped)
            for r in [r for r in s.stale if r not in skipped]:
                s.emit_fresh(r, g)
                s.stale.discard(r)
                if r in s.first_due:
                    s.first_due.discard(r)
                    first.append(r)
        if p.skipped:
            for r in p.skipped:
                s.skip(r)
        known, prompt, out, last_emit = s.known, s.prompt, s.out, s.last_emit
        for r, t, c in p.entries:
            ca = c + t
            if ca < known[r]:
                if ca + 1 < known[r]:
                    s.comp[r] = ca
                    continue
                s.pre.remove(r)  # one prompt token left: decode-shaped from the next step
                s.add_dec(r, ca, g + 1)
                s.one_left(r, ca)
                s.stale.add(r)
                if known[r] == prompt[r]:
                    s.first_due.add(r)
                continue
            gen = known[r] - prompt[r]
            if gen == 0:  # its first token: no gap before it
                first.append(r)
                s.run_start[r] = g
            elif r in last_emit:
                s.emit_fresh(r, g)
            else:
                s.run_start[r] = g
            s.pre.remove(r)
            if gen + 1 >= out[r]:
                done.append(r)
                s.comp[r], known[r] = ca, known[r] + 1
            else:
                known[r] += 1
                s.add_dec(r, ca, g + 1)
        ending = self._finishing(g) if s.fin and s.fin[0][0] <= g else ()
        s.g = g + 1
        return first, (self._finish(done, ending, g) if ending or done else done)

    def _finishing(self, g: int) -> list[int]:
        """Decoding requests whose last token is step ``g``'s."""
        s, out = self.s, []
        if not s.fin or s.fin[0][0] > g:  # nothing (valid or not) due by step g
            return out
        while (gf := s.next_finish()) is not None and gf <= g:
            assert gf == g, "fast core: a decoding request ran past its last token"
            r = heapq.heappop(s.fin)[1]
            s.finat.pop(r, None)  # a second entry with the same step is stale now
            out.append(r)
        return out

    def _finish(self, done: list[int], ending: list[int], g: int) -> list[int]:
        s = self.s
        for r in ending:
            s.close_run(r, g)
            s.drop_dec(r)
        for r in done:
            s.close_run(r, g)
        out = done + ending if ending else done
        s.free_finished(out)
        running, status, last_emit = s.running, s.status, s.last_emit
        keep = s.async_frees and s.holds_finished  # running for one more schedule (async)
        if keep:
            s.zombies.update(out)
        for r in out:
            if not keep:
                running.remove(r)
            status[r] = 3  # FINISHED
            last_emit.pop(r, None)  # it emits no more
        return out

    # ---- a decode run -------------------------------------------------------------------
    def _decode_run(self, p: Planned) -> None:
        """A run of pure decode steps (sim/sched/vllm.py _run_length), kept as lists of ints
        (the cost model prices long runs with numpy, short ones in Python floats: the same
        values), cut at the next arrival if one could join it, and at the horizon."""
        limit = self._run_limit(p)
        run = self._priced_run(p, limit) if self.whole else self._price_run(p, limit)
        if run is None:
            return self._step(p)
        if self.optimistic:  # what a router reads until the run's end (its steps')
            self.kv_run = (run[0], run[2])
        self._commit_run(p, run, limit)

    def _run_waiting(self, p: Planned):
        """A fleet replica's decode run that an arrival could join, cut only by the requests
        that reach this replica (``optimistic``): priced to its end (the next finish, the
        pool, the horizon, a request already pushed), then waited on until that end or a
        push due before it, which moves the end to that push's step; committed at the end.
        Nothing the fleet reads shows a plan before its end (the class doc), so this is the
        run the lookahead's cuts and re-plans make, in one plan (sim/fleet/cluster.py)."""
        env, src = self.env, self.src
        limit = self._run_limit(p)
        run = self._priced_run(p, limit) if self.whole else self._price_run(p, limit)
        if run is None:
            self._step(p)
            return False
        starts, d = run[0], run[1]
        self.kv_run = (starts, run[2])  # a router reads the step in progress's blocks
        while True:
            k = len(starts) if starts[-1] < limit else max(1, bisect_left(starts, limit))
            self.busy_until = starts[k - 1] + d[k - 1]
            if (yield from src.wait(env, self.busy_until, self.late)):
                break
            limit = min(limit, src.nxt)
        self._commit_run(p, run, limit)
        return True

    def _run_limit(self, p: Planned) -> int:
        """Steps of a decode run after its first start before this time (ns): the horizon,
        or the next arrival when one could join the run (Engine.run_limit)."""
        nxt = self.src.nxt
        return nxt if nxt < self.stop and not self.s.persists[p.blocked] else self.stop

    def _idle(self):
        """An optimistic replica with nothing to plan waits for its first pushed request's
        due time or the scheduler's wake-up (LATE: behind the routing of that instant),
        waking on a push or on the end of its arrivals (``Pushed.poke``) to look again;
        False once nothing more can come (Engine._wait_pushed)."""
        env, src = self.env, self.src
        self.busy_until = -1
        while True:
            t = self._next_time()
            if t is None:
                if src.exhausted():
                    self.clock = max(self.clock, env.now)  # when it learnt so (the lookahead's)
                    return False
                t = _horizon(self.stop) or arrivals.NEVER  # (Engine._wait_pushed)
            if (yield from src.wait(env, t, LATE)):
                self.clock = max(self.clock, t)
                return True

    def _priced_run(self, p: Planned, limit: int):
        """``_price_run`` for a whole-plan cost model: it prices the run's batch (``view``)."""
        self.view = hooks.batch_view(self.s, p)
        run = self._price_run(p, limit)
        if run is None:
            self.view = None
        return run

    def _price_run(self, p: Planned, limit: int):
        """The run's steps up to where ``limit`` (ns) cuts it: (starts, durations, blocks in
        use per step), or None when it is one step. Steps are priced up to a guess of where
        the run will be cut, then further if the guess was short: each step's price is
        independent of the run length, so the steps kept are the general engine's."""
        s = self.s
        n, g = s.n_dec, s.g
        k_max = min(s.next_finish() - g + 1, MAX_RUN_STEPS)
        if k_max > 1:
            k_max = s.run_steps(g, k_max)
        if k_max <= 1:
            return None
        # a guess at where the run will be cut, at least 2 steps (a run may be cut to 1)
        k = min(k_max, max(2, (limit - self.clock) // (self.last_d or 1) + 2))
        used = self._run_blocks(g, k)  # blocks in use at each step of the run
        if used is None:  # step 1 of the run would not find a free block
            return None
        final = len(used) < k or k == k_max  # the pool or the finish ends the run
        k = len(used)
        d = self._run_durations(p, n, 0, k)
        starts = list(accumulate(d[:-1], initial=self.clock))
        while not final and starts[-1] < limit:  # the guess was short: price further
            k2 = min(k_max, 2 * k)
            used = self._run_blocks(g, k2)
            final = len(used) < k2 or k2 == k_max
            k2 = len(used)
            if k2 == k:  # the pool ends the run just where it was priced: nothing to add
                break
            more = self._run_durations(p, n, k, k2 - k)
            starts.extend(accumulate(more[:-1], initial=starts[-1] + d[-1]))
            d += more
            k = k2
        return starts, d, used

    def _commit_run(self, p: Planned, run, limit: int) -> None:
        """Execute the run ``_price_run`` priced, cut at ``limit`` (ns): the steps that start
        before it."""
        s = self.s
        n, g = s.n_dec, s.g
        starts, d, used = run
        k = len(starts)
        interruptible = not s.persists[p.blocked]
        stored0, running, waiting = p.dec_ctx + n - s.shared_slots(), len(s.running), len(
            s.waiting)
        self._drain()
        if starts[-1] >= limit:  # cut: the steps that start before the limit
            k = max(1, bisect_left(starts, limit))
            del starts[k:], d[k:]
        if k > 1 and not interruptible:
            upto = seen_by_step(self.seen, starts, self.s.async_frees)
            wait = self.src.waiting_by(waiting, self.seen, upto)
            if self.env is not None:
                self.recount = (len(self.rec.st[4]), waiting, self.seen, upto)
        else:  # an interruptible run ends before the next arrival: nobody joins the queue
            wait = [waiting] * k
        kv_used = used if len(used) == k else used[:k]
        kv_tokens = range(stored0, stored0 + n * k, n)
        view = self.view if self.whole else (
            hooks.batch_view(s, p) if self.hook is not None else None)
        # commit k steps: every decoding request emits in each
        first = ()
        if s.stale:
            for r in s.stale:
                s.emit_fresh(r, g)
            s.stale.clear()
            if s.first_due:  # their first tokens came with the run's first step
                first = list(s.first_due)
                s.first_due.clear()
                self.rec.events(starts[0], d[0], (), first, ())
        s.grow_run(kv_used[-1] - s.used)  # steps 1..k-1's new blocks, committed with the run
        gl = g + k - 1  # the run's last step
        ending = self._finishing(gl) if s.fin and s.fin[0][0] <= gl else ()
        s.g = gl + 1  # before _finish: a finished request's computed tokens are base + g
        finished = self._finish([], ending, gl) if ending else ()
        last, d_last = starts[-1], d[-1]
        self.last_start, self.clock, self.last_d = last, last + d_last, d_last
        self._finished(finished)
        rec = self.rec
        rec.plan(0, n, n, running, 0, k, p.blocked)
        rec.steps(starts, d, kv_used, kv_tokens, wait)
        if finished:
            rec.events(last, d_last, (), (), finished)
        if self.whole:
            self.view = None
            self.cost.observe(hooks.plan(view, p, k, interruptible))
        if self.hook is not None:
            self._report(view, p, steps=k, interruptible=interruptible, starts=starts,
                         durs=d, kv_used=kv_used, kv_tokens=list(kv_tokens), running=running,
                         waiting=waiting, first=list(first), finished=list(finished))

    def _run_blocks(self, g: int, k: int) -> list[int] | None:
        """Blocks in use at steps 0..k-1 of a run from step ``g`` (step 0's allocated by
        the schedule), cut before the first step whose blocks the pool lacks; None when
        that is step 1. A decoding request needs a block every ``block_size`` steps, so
        the new blocks per step repeat with that period."""
        s = self.s
        i = (g + 1) % s.bs
        used = list(accumulate(islice(cycle(s.phase), i, i + k - 1), initial=s.used))
        cap = s.num_blocks - s.run_slack
        if used[-1] > cap:
            del used[bisect_right(used, cap):]
        return used if len(used) > 1 else None

    def _run_durations(self, p: Planned, n: int, j: int, k: int) -> list[int]:
        """Durations (ns) of steps j..j+k-1 of the run (step i's decode contexts sum to
        ``dec_ctx + n * i``)."""
        if self.whole:  # the run's first j + k steps, as the general engine prices them
            t = self.cost.step_times(hooks.plan(self.view, p, j + k, True))[j:].tolist()
            return [round((x if x < _MAX_S else _MAX_S) * NS_PER_S) for x in t]
        return self.cost.run_ns(n, p.dec_ctx + n * j, k)
