"""The arrival source of a replica in a fleet: the router pushes requests into it.

    router ──push(req, due)──> Pushed ──next_time()/due(now)──> the replica's engine
    engine ──finished(reqs, now)──> Pushed ──on_finish──> the fleet (router counts, transfers)

To the engine it is an arrival source like any other. ``next_time`` is the earliest time a
request can reach this replica: one already pushed, or the earliest the fleet could push
another (``lookahead``: the pool's next arrival, or for a decode pool the earliest a
prefill could finish plus a transfer). The engine sleeps until then when idle, and cuts
a decode run there, so a request never waits behind a run that started before it came
(a lookahead earlier than the true push only costs an extra wake-up). A lookahead of
None means nothing will come before this replica's own next event; ``ended`` (default: the
lookahead is None) says nothing more will come at all: the drain has begun.

For an optimistic replica (sim/fleet/cluster.py ``Fleet._stage``: ``pushed_only``)
``next_time`` is the first request pushed, and the replica ``wait``s for a time or the next
push or ``poke`` (nothing more will come): it cuts a run at a push, not at the lookahead.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Callable

import numpy as np

from sim.engine.arrivals import ArrivalSource
from sim.engine.clock import to_s
from sim.engine.engine import LATE, _late


class Pushed(ArrivalSource):
    """Requests pushed by the fleet, each due at a time (ns) >= the time it is pushed."""

    def __init__(self, admissible: np.ndarray, lookahead: Callable[[], int | None],
                 on_finish: Callable[[np.ndarray, int], None],
                 ended: Callable[[], bool] | None = None):
        self.admissible, self.lookahead, self.on_finish = admissible, lookahead, on_finish
        self.ended = ended or (lambda: self.lookahead() is None)
        self.pending: list[tuple[int, int, int]] = []  # heap of (due ns, push order, request)
        self.due_times: list[int] = []  # every admissible push's due time, sorted (ns)
        self.received: dict[int, int] = {}  # request -> when it reaches this replica (ns)
        self.pushes = 0
        self.wake = None  # what a replica waiting for a push waits on (``wait``)
        # an optimistic replica's (sim/fleet/cluster.py Fleet._stage): ``next_time`` is the
        # first request pushed, not the fleet's lookahead; pushes wake it (``wait``)
        self.pushed_only = False
        self.dead = False  # its engine stopped: a request pushed now fails (Fleet._stopped)
        self.on_fail = None  # the fleet's: requests that failed here (Fleet._failed)

    def push(self, req: int, due: int) -> None:
        heapq.heappush(self.pending, (int(due), self.pushes, int(req)))
        self.received[int(req)] = int(due)
        self.pushes += 1
        if self.admissible[req]:
            bisect.insort(self.due_times, int(due))
        self.poke()

    def head(self) -> int | None:
        """When the first request pushed and not yet taken is due (ns), None if none."""
        return self.pending[0][0] if self.pending else None

    def wait(self, env, until: int | None, priority: float = LATE):
        """Wait (a SimPy generator) until ``until`` (ns, at ``priority``; None: no deadline)
        or the next push or ``poke``, whichever comes first; True when ``until`` came."""
        if self.wake is None or self.wake.triggered:
            self.wake = env.event()
        if until is None:
            yield self.wake
            return False
        wake = self.wake
        timer = _late(env, max(0, until - env.now), priority=priority)
        timer.callbacks.append(lambda _: wake.triggered or wake.succeed())  # (any_of, cheaper)
        yield wake
        if timer.processed:
            self.wake = None
            return True
        return False

    def poke(self) -> None:
        """Wake the replica waiting in ``wait`` (a push, or nothing more will come)."""
        w = self.wake
        if w is not None and not w.triggered:
            w.succeed()

    def next_time(self) -> int | None:
        """What this replica's engine plans by: the first request pushed for an optimistic
        replica, else ``earliest``."""
        return self.head() if self.pushed_only else self.earliest()

    def earliest(self) -> int | None:
        """The earliest a request can reach this replica: one pushed, or the lookahead."""
        ahead = self.lookahead()
        if not self.pending:
            return ahead
        head = self.pending[0][0]
        return head if ahead is None else min(head, ahead)

    def due(self, now: int) -> list[int]:
        out = []
        while self.pending and self.pending[0][0] <= now:
            out.append(heapq.heappop(self.pending)[2])
        return out

    def finished(self, reqs: np.ndarray, now: int) -> None:
        self.on_finish(reqs, now)

    def failed(self, reqs: np.ndarray, now: int) -> None:
        if self.on_fail is not None:
            self.on_fail(reqs, now)

    def arrivals_by(self, after: int, upto: np.ndarray) -> np.ndarray:
        t = np.asarray(self.due_times, dtype=np.int64)
        lo = np.searchsorted(t, after, side="right")
        return np.searchsorted(t, upto, side="right") - lo

    def arrival_times(self) -> np.ndarray:
        out = np.full(len(self.admissible), np.nan)
        for req, t in self.received.items():
            out[req] = to_s(t)
        return out

    def exhausted(self) -> bool:
        return not self.pending and self.ended()
