"""The event loop: arrivals feed one replica that plans, prices and commits steps.

Same-time rule: a step that starts at time t sees every request arriving at or
before t. SimPy orders events at equal times by priority, then by creation; the
replica resumes (after a step, or from idle) with priority ``LATE``, below every
arrival's ``NORMAL``, so all arrivals at t are in the inbox before it plans.

    arrivals ──inbox──> replica: schedule() -> executor -> timeout -> update() -> recorder
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


def _late(env: simpy.Environment, event: Event, delay: float = 0.0) -> Event:
    """Trigger ``event`` after ``delay`` with LATE priority (as Timeout does, one level later)."""
    event._ok = True
    event._value = None
    env.schedule(event, LATE, delay)
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
        self.inbox: list[int] = []
        self.delivered = 0
        self._idle: Event | None = None
        ok = specs.prompt_tokens[:num_arrivals] + specs.output_tokens[:num_arrivals]
        ok = ok <= scheduler.limits.max_model_len
        self._admissible = np.concatenate(([0], np.cumsum(ok)))
        self._arrival = specs.arrival_s[:num_arrivals]

    def run(self) -> RunStatus:
        self.env.process(self._arrivals())
        replica = self.env.process(self._replica())
        return self.env.run(until=replica)

    # ---- processes --------------------------------------------------------------------
    def _arrivals(self):
        env, arrival = self.env, self._arrival
        for i in range(self.n):
            if arrival[i] > env.now:
                yield env.timeout(arrival[i] - env.now)
            self.inbox.append(i)
            self.delivered = i + 1
            if self._idle is not None and not self._idle.triggered:
                _late(env, self._idle)

    def _replica(self):
        env, sched = self.env, self.scheduler
        yield _late(env, env.event())
        while env.now < self.stop_s:
            self._deliver()
            plan = sched.schedule(env.now)
            if plan is None:
                if not (yield from self._wait_idle()):
                    break
                continue
            yield from self._execute(plan)
        return RunStatus(env.now, env.now >= self.stop_s, len(sched.waiting))

    def _deliver(self) -> None:
        for i in self.inbox:
            self.scheduler.add_request(i)
        self.inbox.clear()

    def _wait_idle(self):
        """Sleep until an arrival or the scheduler's wake-up; False when nothing can come."""
        env = self.env
        wake = self.scheduler.next_wakeup(env.now)
        if self.delivered >= self.n and wake is None:
            return False
        self._idle = env.event()
        events = [self._idle]
        if wake is not None:
            events.append(_late(env, env.event(), max(0.0, wake - env.now)))
        yield env.any_of(events)
        self._idle = None
        return True

    def _execute(self, plan: StepPlan):
        env = self.env
        durations = np.asarray(self.executor(plan), dtype=np.float64)
        times = np.cumsum(np.concatenate(([env.now], durations)))
        plan, durations, times = self._cut(plan, durations, times)
        yield _late(env, env.event(), times[-1] - env.now)
        outcome = self.scheduler.update(plan, StepResult(durations))
        starts = times[:-1]
        waiting = self._waiting(outcome.num_waiting, starts)
        self.recorder.on_plan(plan, starts, durations, outcome, waiting)
        if self.on_plan is not None:
            self.on_plan(plan, starts, durations, outcome)
        if self.progress is not None:
            self.progress(env.now)

    def _cut(self, plan, durations, times):
        """Shorten a decode run to the steps that start before the next event that matters."""
        if plan.num_steps == 1:
            return plan, durations, times
        limit = self.stop_s
        if plan.interruptible and self.delivered < self.n:
            limit = min(limit, self._arrival[self.delivered])
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
