"""The event loop: one replica that plans, prices and commits steps as requests arrive.

    replica: deliver arrivals <= clock -> schedule() -> executor -> timeout -> update()
             -> recorder, and the finishes back to the arrival source (sim.engine.arrivals)

Time. SimPy orders the processes, but the simulated time every result is stamped
with is the replica's own ``clock``, kept exact: a step ends at its start plus its
duration (sequential float additions, the same whether steps are planned one by
one or folded into a decode run), an idle replica wakes at the exact arrival or
wake-up time. SimPy's relative timeouts cannot always land on such a time (``now
+ delay`` may skip it by an ulp), so the clock, not ``env.now``, decides.

Same-time rule: a step that starts at time t sees every request arriving at or
before t. The replica delivers arrivals by comparing the source's arrival times
with its clock, so the rule holds whatever order SimPy processes events in. An
idle replica sleeps until the next arrival or the scheduler's wake-up, whichever
is first (nothing else can happen while it is idle: arrivals only change on
finishes).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import simpy
from simpy.events import Event

from sim.engine.arrivals import ArrivalSource, OpenLoop
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
    """One replica. ``executor(plan) -> durations`` prices (or runs) each plan; ``source``
    says when requests arrive (default: requests [0, num_arrivals) at their trace times)."""

    def __init__(self, specs: RequestSpecs, scheduler: Scheduler,
                 executor: Callable[[StepPlan], np.ndarray], recorder: Recorder, *,
                 stop_s: float, num_arrivals: int, on_plan=None, progress=None,
                 source: ArrivalSource | None = None):
        self.specs, self.scheduler, self.executor = specs, scheduler, executor
        self.recorder, self.on_plan, self.progress = recorder, on_plan, progress
        self.stop_s = stop_s  # no step starts at or after this time (s)
        self.env = simpy.Environment()
        self.clock = 0.0  # the replica's exact simulated time (s)
        self.source = source or OpenLoop(specs.arrival_s[:num_arrivals],
                                         admissible(specs, scheduler)[:num_arrivals])

    def run(self) -> RunStatus:
        replica = self.env.process(self._replica())
        return self.env.run(until=replica)

    # ---- processes --------------------------------------------------------------------
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
        for i in self.source.due(self.clock):
            self.scheduler.add_request(i)

    def _wait_idle(self):
        """Sleep until the next arrival or the scheduler's wake-up; False if neither comes."""
        times = [t for t in (self.source.next_time(), self.scheduler.next_wakeup(self.clock))
                 if t is not None]
        if not times:
            return False
        t = min(times)
        if t > self.env.now:  # SimPy's time may already be an ulp past it
            yield _late(self.env, t - self.env.now)
        self.clock = max(self.clock, t)
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
        if len(outcome.finished):
            self.source.finished(outcome.finished, self.clock)
        self.recorder.on_plan(plan, starts, durations, outcome, waiting)
        if self.on_plan is not None:
            self.on_plan(plan, starts, durations, outcome)
        if self.progress is not None:
            self.progress(self.clock)

    def _cut(self, plan, durations, times):
        """Shorten a decode run to the steps that start before the next event that matters."""
        if plan.num_steps == 1:
            return plan, durations, times
        limit, nxt = self.stop_s, self.source.next_time()
        if plan.interruptible and nxt is not None:
            limit = min(limit, nxt)
        k = max(1, int(np.searchsorted(times[:-1], limit, side="left")))
        if k == plan.num_steps:
            return plan, durations, times
        return plan.first(k), durations[:k], times[: k + 1]

    def _waiting(self, base: int, starts: np.ndarray) -> np.ndarray:
        """Waiting requests at each step start: those queued at planning plus later arrivals."""
        if len(starts) == 1:
            return np.array([base], dtype=np.int64)
        return base + self.source.arrivals_by(starts)


def admissible(specs: RequestSpecs, scheduler: Scheduler) -> np.ndarray:
    """Requests the scheduler accepts (prompt + output <= max_model_len; the rest are
    rejected at arrival and never wait)."""
    return specs.prompt_tokens + specs.output_tokens <= scheduler.limits.max_model_len
