"""The event loop: arrivals wake one replica that plans, prices and commits steps.

    arrivals ──wake──> replica: deliver arrivals <= clock -> schedule() -> executor
                                -> timeout -> update() -> recorder

Time. SimPy orders the processes, but the simulated time every result is stamped
with is the replica's own ``clock``, kept exact: a step ends at its start plus its
duration (sequential float additions, the same whether steps are planned one by
one or folded into a decode run), an idle replica wakes at the exact arrival or
wake-up time. SimPy's relative timeouts cannot always land on such a time (``now
+ delay`` may skip it by an ulp), so the clock, not ``env.now``, decides.

Same-time rule: a step that starts at time t sees every request arriving at or
before t. The replica delivers arrivals by comparing the trace's arrival times
with its clock, so the rule holds whatever order SimPy processes events in.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import simpy
from simpy.events import Event

from sim.engine.plan import StepPlan, StepResult
from sim.engine.requests import RequestSpecs
from sim.metrics.recorder import Recorder
from sim.sched.base import Scheduler

LATE = 2  # SimPy priority below NORMAL (1): processed after arrivals at the same time


def _late(env: simpy.Environment, delay: float, value=None) -> Event:
    """An event firing after ``delay`` with LATE priority (as Timeout does, one level later)."""
    event = env.event()
    event._ok = True
    event._value = value
    env.schedule(event, LATE, max(0.0, delay))
    return event


@dataclass(frozen=True)
class RunStatus:
    """How the event loop ended."""

    end_s: float  # simulated time when the loop stopped (s)
    stopped_at_limit: bool  # the horizon or the safety limit cut the run short
    stuck: int  # waiting requests no step could ever admit


class Engine:
    """One replica. ``executor(plan) -> durations`` prices (or runs) each plan."""

    def __init__(self, specs: RequestSpecs, scheduler: Scheduler,
                 executor: Callable[[StepPlan], np.ndarray], recorder: Recorder, *,
                 stop_s: float, num_arrivals: int, on_plan=None, progress=None):
        self.specs, self.scheduler, self.executor = specs, scheduler, executor
        self.recorder, self.on_plan, self.progress = recorder, on_plan, progress
        self.stop_s = stop_s  # no step starts at or after this time (s)
        self.n = num_arrivals  # requests [0, n) arrive; later ones are outside the run
        self.env = simpy.Environment()
        self.clock = 0.0  # the replica's exact simulated time (s)
        self.delivered = 0  # requests [0, delivered) have been handed to the scheduler
        self._idle: Event | None = None
        self._arrival = specs.arrival_s[:num_arrivals]
        ok = specs.prompt_tokens[:num_arrivals] + specs.output_tokens[:num_arrivals]
        ok = ok <= scheduler.limits.max_model_len
        self._admissible = np.concatenate(([0], np.cumsum(ok)))

    def run(self) -> RunStatus:
        self.env.process(self._arrivals())
        replica = self.env.process(self._replica())
        return self.env.run(until=replica)

    # ---- processes --------------------------------------------------------------------
    def _arrivals(self):
        """Wake the replica at each arrival while it is idle (value: the exact time)."""
        env, arrival = self.env, self._arrival
        for i in range(self.n):
            if arrival[i] > env.now:
                yield env.timeout(arrival[i] - env.now)
            if self._idle is not None and not self._idle.triggered:
                self._idle.succeed(float(arrival[i]))

    def _replica(self):
        sched = self.scheduler
        yield _late(self.env, 0.0)
        while self.clock < self.stop_s:
            self._deliver()
            plan = sched.schedule(self.clock)
            if plan is None:
                if not (yield from self._wait_idle()):
                    break
                continue
            yield from self._execute(plan)
        return RunStatus(self.clock, self.clock >= self.stop_s, len(sched.waiting))

    def _deliver(self) -> None:
        """Hand over every request arriving at or before the clock (the same-time rule)."""
        end = int(np.searchsorted(self._arrival, self.clock, side="right"))
        for i in range(self.delivered, end):
            self.scheduler.add_request(i)
        self.delivered = max(self.delivered, end)

    def _wait_idle(self):
        """Sleep until the next arrival or the scheduler's wake-up; False if neither comes."""
        nxt = float(self._arrival[self.delivered]) if self.delivered < self.n else None
        wake = self.scheduler.next_wakeup(self.clock)
        if nxt is None and wake is None:
            return False
        if nxt is not None and nxt <= self.env.now:  # SimPy time already passed it (an ulp)
            self.clock = max(self.clock, nxt)
            return True
        events = []
        if nxt is not None:
            self._idle = self.env.event()
            events.append(self._idle)
        if wake is not None:
            events.append(_late(self.env, wake - self.env.now, float(wake)))
        fired = yield self.env.any_of(events)
        self._idle = None
        self.clock = max(self.clock, min(fired.values()))
        return True

    def _execute(self, plan: StepPlan):
        durations = np.asarray(self.executor(plan), dtype=np.float64)
        times = np.cumsum(np.concatenate(([self.clock], durations)))  # sequential adds
        plan, durations, times = self._cut(plan, durations, times)
        yield _late(self.env, float(times[-1]) - self.env.now)
        self.clock = float(times[-1])
        outcome = self.scheduler.update(plan, StepResult(durations))
        starts = times[:-1]
        waiting = self._waiting(outcome.num_waiting, starts)
        self.recorder.on_plan(plan, starts, durations, outcome, waiting)
        if self.on_plan is not None:
            self.on_plan(plan, starts, durations, outcome)
        if self.progress is not None:
            self.progress(self.clock)

    def run_limit(self, plan: StepPlan) -> float:
        """Steps of ``plan`` after its first must start before this time (s): the stop time,
        or the next arrival when the plan is an interruptible decode run. An executor that
        runs steps for real (live mode) stops there too, so it never runs a cut step."""
        limit = self.stop_s
        if plan.interruptible and self.delivered < self.n:
            limit = min(limit, float(self._arrival[self.delivered]))
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
        """Waiting requests at each step start: those queued at planning plus later arrivals."""
        if len(starts) == 1:
            return np.array([base], dtype=np.int64)
        lo = np.searchsorted(self._arrival, starts[0], side="right")
        hi = np.searchsorted(self._arrival, starts, side="right")
        return base + (self._admissible[hi] - self._admissible[lo])
