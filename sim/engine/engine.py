"""The event loop: one replica that plans, prices and commits steps as requests arrive.

    replica: deliver arrivals <= clock -> schedule() -> executor -> timeout -> update()
             -> recorder, and the finishes back to the arrival source (sim.engine.arrivals)

Time is integer nanoseconds (``sim.engine.clock``): SimPy's clock counts them,
trace arrivals and step durations are rounded to the nanosecond once, and a step
ends at exactly its start plus its duration, whether steps are planned one by
one or folded into a decode run. Seconds handed to schedulers, the recorder and
callbacks are derived from the integer clock.

Same-time rule: a step that starts at time t sees every request arriving at or
before t. The replica delivers arrivals by comparing their integer times with
its clock, so the rule holds exactly, also for times given in decimal (a group
arriving at 0.1772 s joins the step that starts at 0.1772 s). An idle replica
sleeps until the next arrival or the scheduler's wake-up, whichever is first
(nothing else can happen while it is idle: arrivals only change on finishes).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import simpy
from simpy.events import Event

from sim.engine.arrivals import ArrivalSource, OpenLoop, seen_by_step
from sim.engine.clock import MAX_NS, ns, to_ns, to_s
from sim.engine.plan import StepPlan, StepResult
from sim.engine.requests import RequestSpecs
from sim.metrics.recorder import Recorder
from sim.sched.base import EngineStopped, Scheduler

LATE = 2  # SimPy priority below NORMAL (1): processed after arrivals at the same time
# below LATE: an optimistic fleet replica plans after every step end of the instant has
# been committed and has routed what its finishes let go (sim/fleet/cluster.py)
LATER = 3


def _horizon(stop: int) -> int | None:
    """The latest an idle fleet replica with nothing on the way waits (ns): the horizon,
    which may come before anything else does (a gated fleet's clients held by a replica
    the horizon stopped never send again); None without one (a push or a poke ends it)."""
    return stop if stop < MAX_NS else None


def _late(env: simpy.Environment, delay: int, value=None, priority: float = LATE) -> Event:
    """An event firing after ``delay`` ns with LATE priority (as Timeout does, one level
    later)."""
    event = env.event()
    event._ok = True
    event._value = value
    env.schedule(event, priority, max(0, int(delay)))
    return event


def step_blocks(starts: list[int], used: list, now: int):
    """What a run whose steps start at ``starts`` holds at ``now`` (ns), ``used`` per step
    (blocks, or a fraction of them): the last step that started before ``now`` (a router at
    a step's start comes before the plan of that step: the same-time rule), or the first."""
    return used[max(bisect_left(starts, now) - 1, 0)]


@dataclass(frozen=True)
class RunStatus:
    """How the event loop ended."""

    end_s: float  # simulated time when the loop stopped (s)
    stopped_at_limit: bool  # the horizon or the safety limit cut the run short
    stuck: int  # waiting requests no step could ever admit


class Engine:
    """One replica. ``executor(plan) -> durations`` prices (or runs) each plan; ``source``
    says when requests arrive (default: requests [0, num_arrivals) at their trace times)."""

    def __init__(self, specs: RequestSpecs, scheduler: Scheduler,
                 executor: Callable[[StepPlan], np.ndarray], recorder: Recorder, *,
                 stop_s: float, num_arrivals: int, on_plan=None, progress=None,
                 source: ArrivalSource | None = None, env: simpy.Environment | None = None):
        self.specs, self.scheduler, self.executor = specs, scheduler, executor
        self.recorder, self.on_plan, self.progress = recorder, on_plan, progress
        self.stop = min(ns(stop_s), MAX_NS)  # no step starts at or after this time (ns)
        # its clock counts integer nanoseconds; a fleet (sim.fleet) shares one among replicas
        self.env = env if env is not None else simpy.Environment()
        self.clock = 0  # the replica's simulated time (ns)
        self.last_start: int | None = None  # start of the last step executed (ns)
        self.last_end: int | None = None  # end of the last step executed (ns)
        self.busy_until = -1  # end of the plan being executed, after its cut (ns; -1 idle)
        self.seen = 0  # the last plan saw the arrivals up to this time (ns)
        self.source = source or OpenLoop(to_ns(specs.arrival_s[:num_arrivals]),
                                         admissible(specs, scheduler)[:num_arrivals])
        # a fleet replica told of every request pushed to it (sim/fleet/cluster.py): a decode
        # run is cut only where one comes, and an idle replica wakes on the push, instead
        # of at the fleet's lookahead (a lower bound of when one could come)
        self.optimistic = False
        # the SimPy priority of its plans' ends (LATE). An optimistic fleet's replicas end the
        # steps of one instant in replica order (LATE + a fraction below LATER), not in the
        # order their plans were made, which depends on where each cut its runs
        self.late = LATE
        self.kv_run = None  # an optimistic run's (step starts, KV used fraction at each step)
        self.staged = False  # plans after the instant's step ends (sim/fleet/cluster.py _stage)

    def run(self) -> RunStatus:
        return self.env.run(until=self.start())

    def start(self) -> simpy.Process:
        """Start the replica's process in its environment (a fleet starts several, then
        runs the shared environment); the process's value is the RunStatus."""
        return self.env.process(self._replica())

    # ---- processes --------------------------------------------------------------------
    def _replica(self):
        sched = self.scheduler
        yield _late(self.env, 0)
        while self.clock < self.stop:
            # staged: plan after every step end of this instant (LATER); when nothing else
            # is due now, that is at once
            if self.staged and self.env.peek() <= self.env.now:
                yield _late(self.env, 0, priority=LATER)
            self._deliver()
            try:
                plan = sched.schedule(self.clock / 1e9)
                lagging = self._lagging()
                while plan is None and (lagging or sched.replan_now()):
                    # nothing was in flight to plan behind (or the plan only preempted,
                    # async): vLLM schedules at once, seeing every arrival and finish so far
                    lagging = False
                    sched.flush_frees()
                    self._deliver(self.clock)
                    plan = sched.schedule(self.clock / 1e9)
            except EngineStopped:  # the modelled server failed (vLLM v0: swap space full)
                break
            if sched.failed_now:  # their clients are answered now (ArrivalSource.failed)
                failed, sched.failed_now = sched.failed_now, []
                self.source.failed(np.asarray(failed, dtype=np.int64), self.clock)
            if plan is None:
                if not (yield from self._wait_idle()):
                    break
                continue
            yield from self._execute(plan)
        sched.flush_frees()  # the run is over: nothing plans behind the last finishes
        sched.drop_zombies()
        if self.clock >= self.stop and self.last_start is not None:
            # a decode run no arrival could join (interruptible False) ran on past arrivals;
            # hand them over as single steps would have at the steps they ran through, so a
            # folded run and its unfolded twin end with the same requests delivered
            for i in self.source.due(self.last_start):
                sched.add_request(i)
        return RunStatus(self.clock / 1e9, self.clock >= self.stop, len(sched.waiting))

    def _lagging(self) -> bool:
        """Async scheduling (vLLM's batch queue of two) with a step ending at the clock: the
        plan starting now was made when that step started, so it sees only arrivals up to
        that start."""
        return self.scheduler.async_scheduling and self.last_end == self.clock

    def _deliver(self, upto: int | None = None) -> None:
        """Hand over every request arriving at or before the clock (the same-time rule), or,
        lagging (async scheduling), at or before the start of the step that just ended."""
        if upto is None:
            upto = self.last_start if self._lagging() else self.clock
        self.seen = upto  # the next plan sees the arrivals up to here (ns)
        for i in self.source.due(upto):
            self.scheduler.add_request(i)

    def _wait_idle(self):
        """Sleep until the next arrival or the scheduler's wake-up; False if neither comes."""
        if self.optimistic:
            return (yield from self._wait_pushed())
        wake = self.scheduler.next_wakeup(self.clock / 1e9)
        times = [t for t in (self.source.next_time(), None if wake is None else ns(wake))
                 if t is not None]
        if not times:
            return False
        t = min(times)
        self.busy_until = -1  # idle
        # a fleet's lookahead may say "now" (a request may come from another replica's step
        # ending now): wait behind the events of this instant, which may push it
        yield _late(self.env, max(0, t - self.env.now))
        self.clock = max(self.clock, t)
        return True

    def _wait_pushed(self):
        """An optimistic replica's idle wait: until the first pushed request is due or the
        scheduler's wake-up (LATE: behind the instant's routing), waking on a push or on
        the end of its arrivals (``Pushed.poke``) to look again; False if nothing comes."""
        env, src = self.env, self.source
        self.busy_until = -1
        while True:
            wake = self.scheduler.next_wakeup(self.clock / 1e9)
            times = [t for t in (src.next_time(), None if wake is None else ns(wake))
                     if t is not None]
            if not times and src.exhausted():
                self.clock = max(self.clock, env.now)  # when it learnt so (the lookahead's)
                return False
            t = min(times) if times else _horizon(self.stop)
            if (yield from src.wait(env, t)):
                self.clock = max(self.clock, t)
                return True

    def _execute(self, plan: StepPlan):
        durations = to_ns(self.executor(plan))  # rounded to the nanosecond, once
        if len(durations) == 1:  # one step: no cumulative sums, nothing to cut
            times = np.array([self.clock, self.clock + int(durations[0])], dtype=np.int64)
        else:
            times = self.clock + np.concatenate(([0], np.cumsum(durations)))  # (ns)
        whole = (plan, durations, times)
        plan, durations, times = self._cut(*whole)
        run = self.optimistic and whole[0].num_steps > 1
        if run:  # what a router reads meanwhile: its steps'
            self.kv_run = (whole[2][:-1].tolist(), self.scheduler.run_kv_fractions(whole[0]))
        if run and whole[0].interruptible:
            # a push due before the run's end cuts it there (the plan is committed at its
            # end, so the cut is the one a lookahead at that push would have made)
            while True:
                self.busy_until = int(times[-1])
                if (yield from self.source.wait(self.env, self.busy_until, self.late)):
                    break
                plan, durations, times = self._cut(*whole)
        else:
            self.busy_until = int(times[-1])
            yield _late(self.env, int(times[-1]) - self.env.now, priority=self.late)
        self.kv_run = None
        self.last_start = int(times[-2])  # the last step's start (ns)
        self.clock = self.last_end = int(times[-1])
        durations_s = to_s(durations)
        outcome = self.scheduler.update(plan, StepResult(durations_s))
        waiting = self._waiting(outcome.num_waiting, times[:-1])
        if len(outcome.finished):
            self.source.finished(outcome.finished, self.clock)
        starts_s = to_s(times[:-1])
        self.recorder.on_plan(plan, starts_s, durations_s, outcome, waiting)
        if self.on_plan is not None:
            self.on_plan(plan, starts_s, durations_s, outcome)
        if self.progress is not None:
            self.progress(self.clock / 1e9)

    def kv_used_fraction(self) -> float | None:
        """During an optimistic run, the KV cache's used fraction at the step in progress
        (a router's reading, as the fast engine's); None otherwise (the KV manager's own
        reading: the plan's first step)."""
        return None if self.kv_run is None else step_blocks(*self.kv_run, self.env.now)

    def run_limit(self, plan: StepPlan) -> int:
        """Steps of ``plan`` after its first must start before this time (ns): the stop time,
        or the next arrival when the plan is an interruptible decode run. An executor that
        runs steps for real (live mode) stops there too, so it never runs a cut step."""
        limit, nxt = self.stop, self.source.next_time()
        if plan.interruptible and nxt is not None:
            limit = min(limit, nxt)
        return limit

    def _cut(self, plan, durations, times):
        """Shorten a decode run to the steps that start before the next event that matters.

        An executor may return fewer durations than the plan has steps when it stopped at
        ``run_limit`` itself; the run is then cut to the steps it returned."""
        if plan.num_steps == 1:
            return plan, durations, times
        limit = self.run_limit(plan)
        k = max(1, int(np.searchsorted(times[:-1], limit, side="left")))
        if k == plan.num_steps:
            return plan, durations, times
        return plan.first(k), durations[:k], times[: k + 1]

    def _waiting(self, base: int, starts: np.ndarray) -> np.ndarray:
        """Waiting requests at each step start (ns) as each step's plan saw them: those
        queued at planning plus the arrivals seen since (seen_by_step)."""
        if len(starts) == 1:
            return np.array([base], dtype=np.int64)
        upto = seen_by_step(self.seen, starts, self.scheduler.async_scheduling)
        return base + self.source.arrivals_by(self.seen, upto)


def admissible(specs: RequestSpecs, scheduler: Scheduler) -> np.ndarray:
    """Requests the scheduler accepts (the server's length rules; the rest are rejected at
    arrival and never wait)."""
    return ~scheduler.limits.rejects(specs.prompt_tokens, specs.output_tokens)
