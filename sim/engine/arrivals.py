"""Where the engine's arrivals come from: it asks for the next one, and tells about finishes.

    engine ──next_time() / due(now)──> source          (when requests enter the system)
    engine ──finished(requests, now)──> source          (what may let the next ones in)

``OpenLoop``: a request arrives at its trace time, whatever the system does.

``Gated``: the trace time is when a request is READY (a client wants to send it); at most
``concurrency`` requests are in the system, the others wait client-side and are sent in
order, each when a slot frees: its previous request finished (or was rejected), plus
``think_s``. All ready at 0 is a closed loop of ``concurrency`` clients (``vllm bench serve
--max-concurrency N`` at an infinite request rate); Poisson ready times are vLLM's semaphore
over a Poisson stream. A gated request ARRIVES when it is sent: latencies count from there,
as ``vllm bench serve`` measures them; the wait before is its client queue time.

Same-time rule: a release at time t is visible to a step that starts at t (the engine
delivers by comparing times with its clock); a request rejected at arrival (prompt + output
> max_model_len) frees its slot at its arrival time.
"""

from __future__ import annotations

import heapq
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


class ArrivalSource(ABC):
    """Tells the engine when requests arrive (request indices in arrival order)."""

    @abstractmethod
    def next_time(self) -> float | None:
        """The earliest arrival not yet delivered (s); None when none is known yet."""

    @abstractmethod
    def due(self, now: float) -> Sequence[int]:
        """Hand over the requests arriving at or before ``now`` (s), in arrival order."""

    @abstractmethod
    def finished(self, reqs: np.ndarray, now: float) -> None:
        """Requests ``reqs`` finished at ``now`` (s)."""

    @abstractmethod
    def arrivals_by(self, starts: np.ndarray) -> np.ndarray:
        """Admissible arrivals in (starts[0], s] for each s of ``starts`` (s), assuming no
        finish in between: the waiting-queue growth during a run of steps."""

    @abstractmethod
    def arrival_times(self) -> np.ndarray:
        """Each request's arrival time (s); NaN for requests that never arrived."""


class OpenLoop(ArrivalSource):
    """Arrivals at fixed times (sorted); ``admissible`` marks requests the scheduler accepts."""

    def __init__(self, arrival_s: np.ndarray, admissible: np.ndarray):
        self.arrival = arrival_s
        self.cum_admissible = np.concatenate(([0], np.cumsum(admissible)))
        self.delivered = 0  # requests [0, delivered) have been handed over

    def next_time(self) -> float | None:
        return float(self.arrival[self.delivered]) if self.delivered < len(self.arrival) else None

    def due(self, now: float) -> range:
        end = max(self.delivered, int(np.searchsorted(self.arrival, now, side="right")))
        out, self.delivered = range(self.delivered, end), end
        return out

    def finished(self, reqs: np.ndarray, now: float) -> None:
        """Finishes do not move an open loop's arrivals."""

    def arrivals_by(self, starts: np.ndarray) -> np.ndarray:
        lo = np.searchsorted(self.arrival, starts[0], side="right")
        hi = np.searchsorted(self.arrival, starts, side="right")
        return self.cum_admissible[hi] - self.cum_admissible[lo]

    def arrival_times(self) -> np.ndarray:
        return self.arrival


@dataclass
class _Slots:
    """The gate's state: free slots (a heap of the times they free) and the next request."""

    free_at: list[float]
    next_req: int

    def copy(self) -> _Slots:
        return _Slots(list(self.free_at), self.next_req)


class Gated(ArrivalSource):
    """At most ``concurrency`` requests in the system (see the module docstring)."""

    def __init__(self, ready_s: np.ndarray, admissible: np.ndarray, concurrency: int,
                 think_s: float = 0.0):
        self.ready, self.admissible, self.think = ready_s, admissible, think_s
        self.slots = _Slots([float("-inf")] * concurrency, 0)
        self.sent = np.full(len(ready_s), np.nan)  # when each request was sent (s)

    def _release_time(self, s: _Slots) -> float | None:
        if s.next_req >= len(self.ready) or not s.free_at:
            return None
        return max(float(self.ready[s.next_req]), s.free_at[0])

    def _release(self, s: _Slots, t: float) -> int:
        """Send request ``s.next_req`` at ``t`` (a rejected one frees its slot at once)."""
        req = s.next_req
        heapq.heappop(s.free_at)
        if not self.admissible[req]:
            heapq.heappush(s.free_at, t + self.think)
        s.next_req += 1
        return req

    def next_time(self) -> float | None:
        return self._release_time(self.slots)

    def due(self, now: float) -> list[int]:
        out = []
        while (t := self._release_time(self.slots)) is not None and t <= now:
            req = self._release(self.slots, t)
            self.sent[req] = t
            out.append(req)
        return out

    def finished(self, reqs: np.ndarray, now: float) -> None:
        for _ in range(len(reqs)):
            heapq.heappush(self.slots.free_at, now + self.think)

    def arrivals_by(self, starts: np.ndarray) -> np.ndarray:
        s, times = self.slots.copy(), []
        while (t := self._release_time(s)) is not None and t <= starts[-1]:
            if self.admissible[self._release(s, t)]:
                times.append(t)
        return np.searchsorted(np.asarray(times), starts, side="right")

    def arrival_times(self) -> np.ndarray:
        return self.sent
