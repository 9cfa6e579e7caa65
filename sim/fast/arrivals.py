"""The fast core's view of an arrival source (sim/engine/arrivals.py): the same answers,
with the next arrival time kept as a plain int (``nxt``, ``NEVER`` when none is known), so
the event loop compares it with the clock without a call.

* ``Open``: an open loop, its times and admissible counts read as Python ints (bisect, no
  numpy calls);
* ``GatedView``: a ``Gated`` source (closed loops, concurrency caps) used as is; a finish
  frees a client's slot, so ``nxt`` is read again after every delivery and finish;
* ``Asked``: any other source (a fleet replica's ``Pushed``, sim/fleet/source.py), asked at
  every read, since the fleet moves its next time; its finishes are held until the plan
  has ended (``release``), when the general engine reports them.

``finished(reqs, now)``: the requests (ids) finished at the end of the plan just planned.
"""

from __future__ import annotations

from bisect import bisect_right

import numpy as np

from sim.engine.arrivals import ArrivalSource, Gated, OpenLoop

NEVER = 1 << 63  # after every time the clock can reach (sim/engine/clock.py MAX_NS)


class Open:
    def __init__(self, source: OpenLoop):
        # the source's own arrays, read as Python ints (no copy: a list of ten million
        # arrivals would take 0.4 GB)
        self.arrival = _ints(source.arrival)  # arrival times (ns), sorted
        cum = source.cum_admissible  # admissible arrivals before index i
        self.cum_ok = cum if isinstance(cum, range) else _ints(cum)
        self.delivered = 0  # arrivals [0, delivered) handed over
        self.nxt = self.arrival[0] if self.arrival else NEVER

    def due(self, now: int) -> range:
        """The requests arriving at or before ``now`` (ns), in arrival order."""
        i, arrival = self.delivered, self.arrival
        end = bisect_right(arrival, now, i)
        self.delivered = end
        self.nxt = arrival[end] if end < len(arrival) else NEVER
        return range(i, end)

    def finished(self, reqs: list[int], now: int) -> None:
        """An open loop's arrivals do not move."""

    failed = finished  # a failed request answers its client (ArrivalSource.failed)

    def exhausted(self) -> bool:
        return self.delivered >= len(self.arrival)

    def waiting_by(self, base: int, after: int, upto: list[int]) -> list[int]:
        """Waiting requests at each step of a run no arrival interrupts, as each step's
        plan saw them: ``base`` plus the arrivals in (after, t] (sim.engine.arrivals
        seen_by_step)."""
        arrival, cum = self.arrival, self.cum_ok
        lo = cum[bisect_right(arrival, after)]
        return [base + cum[bisect_right(arrival, t)] - lo for t in upto]


class GatedView:
    def __init__(self, source: Gated):
        self.src = source
        self.nxt = self._next()

    def _next(self) -> int:
        t = self.src.next_time()
        return NEVER if t is None else t

    def due(self, now: int) -> list[int]:
        out = self.src.due(now)
        self.nxt = self._next()
        return out

    def finished(self, reqs: list[int], now: int) -> None:
        if reqs:
            self.src.finished(reqs, now)
            self.nxt = self._next()

    failed = finished  # a failed request answers its client (ArrivalSource.failed)

    def exhausted(self) -> bool:
        return self.src.exhausted()

    def waiting_by(self, base: int, after: int, upto: list[int]) -> list[int]:
        if not self.src.slots.free_at:  # every client has a request in the system
            return [base] * len(upto)
        return (base + self.src.arrivals_by(after, np.asarray(upto, dtype=np.int64))).tolist()


class Asked:
    def __init__(self, source: ArrivalSource):
        self.src = source
        self.held: list[int] = []  # finished by the plan in progress, not yet reported

    @property
    def nxt(self) -> int:
        t = self.src.next_time()
        return NEVER if t is None else t

    def wait(self, env, until: int, priority: float):
        """``Pushed.wait``, with ``NEVER`` for no deadline."""
        return self.src.wait(env, None if until == NEVER else until, priority)

    def due(self, now: int) -> list[int]:
        return self.src.due(now)

    def finished(self, reqs: list[int], now: int) -> None:
        self.held.extend(reqs)

    def failed(self, reqs: list[int], now: int) -> None:
        """Failed at scheduling (not at a plan's end): reported at once, as the general
        engine does."""
        self.src.failed(np.asarray(reqs, dtype=np.int64), now)

    def release(self, now: int) -> None:
        """The plan in progress has ended at ``now``: report its finishes."""
        if self.held:
            reqs, self.held = np.asarray(self.held, dtype=np.int64), []
            self.src.finished(reqs, now)

    def exhausted(self) -> bool:
        return self.src.exhausted()

    def waiting_by(self, base: int, after: int, upto: list[int]) -> list[int]:
        return (base + self.src.arrivals_by(after, np.asarray(upto, dtype=np.int64))).tolist()


def _ints(a: np.ndarray) -> memoryview:
    """An int64 array as a sequence of Python ints (bisect reads it as it reads a list)."""
    return memoryview(np.ascontiguousarray(a, dtype=np.int64))


def view(source: ArrivalSource) -> Open | GatedView | Asked:
    if type(source) is OpenLoop:
        return Open(source)
    return GatedView(source) if type(source) is Gated else Asked(source)
