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

Times are the engine's integer nanoseconds (sim.engine.clock). Same-time rule: a release
at time t is visible to a step that starts at t (the engine delivers by comparing times
with its clock); a request rejected at arrival (the server's length rules) frees its slot at
its arrival time.
"""

from __future__ import annotations

import heapq
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sim.engine.clock import to_s


class ArrivalSource(ABC):
    """Tells the engine when requests arrive (request indices in arrival order)."""

    @abstractmethod
    def next_time(self) -> int | None:
        """The earliest arrival not yet delivered (ns); None when none is known yet."""

    @abstractmethod
    def due(self, now: int) -> Sequence[int]:
        """Hand over the requests arriving at or before ``now`` (ns), in arrival order."""

    @abstractmethod
    def finished(self, reqs: np.ndarray, now: int) -> None:
        """Requests ``reqs`` finished at ``now`` (ns)."""

    def failed(self, reqs: np.ndarray, now: int) -> None:
        """Requests ``reqs`` failed at ``now`` (ns; vLLM v0: no room in the swap space): each
        answers its client as a finish does (vllm bench serve then sends the client's
        next)."""
        self.finished(reqs, now)

    @abstractmethod
    def arrivals_by(self, after: int, upto: np.ndarray) -> np.ndarray:
        """Admissible arrivals in (after, t] for each t of ``upto`` (ns), assuming no finish
        in between: the waiting-queue growth during a run of steps (``seen_by_step``).
        Every arrival at or before ``after`` has been handed over."""

    @abstractmethod
    def arrival_times(self) -> np.ndarray:
        """Each request's arrival time (s, float); NaN for requests that never arrived."""

    @abstractmethod
    def exhausted(self) -> bool:
        """Every request has been handed to the engine (the drain after the last arrival
        has begun)."""


class OpenLoop(ArrivalSource):
    """Arrivals at fixed times (ns, sorted); ``admissible`` marks requests the scheduler
    accepts."""

    def __init__(self, arrival_ns: np.ndarray, admissible: np.ndarray):
        self.arrival = arrival_ns
        # every request accepted (the common case): the count before i is i, kept as a range
        self.all_admissible = bool(np.all(admissible))
        self.cum_admissible = (range(len(arrival_ns) + 1) if self.all_admissible
                               else np.concatenate(([0], np.cumsum(admissible))))
        self.delivered = 0  # requests [0, delivered) have been handed over

    def next_time(self) -> int | None:
        return int(self.arrival[self.delivered]) if self.delivered < len(self.arrival) else None

    def due(self, now: int) -> range:
        end = max(self.delivered, int(np.searchsorted(self.arrival, now, side="right")))
        out, self.delivered = range(self.delivered, end), end
        return out

    def finished(self, reqs: np.ndarray, now: int) -> None:
        """Finishes do not move an open loop's arrivals."""

    def arrivals_by(self, after: int, upto: np.ndarray) -> np.ndarray:
        lo = np.searchsorted(self.arrival, after, side="right")
        hi = np.searchsorted(self.arrival, upto, side="right")
        if self.all_admissible:
            return hi - lo
        return self.cum_admissible[hi] - self.cum_admissible[lo]

    def arrival_times(self) -> np.ndarray:
        return to_s(self.arrival)

    def exhausted(self) -> bool:
        return self.delivered >= len(self.arrival)


@dataclass
class _Slots:
    """The gate's state: free slots (a heap of the times they free, ns), the next request
    and when the last one released reached the engine (ns; requests arrive in order)."""

    free_at: list[int]
    next_req: int
    last: int = 0

    def copy(self) -> _Slots:
        return _Slots(list(self.free_at), self.next_req, self.last)


def api_server_seen(sent, delay, last, serial_const=None):
    """When the engine sees a request sent at ``sent`` whose ingress is ``delay`` (a
    constant plus its prompt's tokenizing), behind a request seen at ``last`` (requests
    reach the scheduler in the order sent). ``serial_const``: None when each prompt is
    tokenized beside the others; else the delay's constant part, and one worker tokenizes
    the prompts in turn (engine.ingress_serial). Any numbers (ns ints, s floats)."""
    if serial_const is None:
        return max(sent + delay, last)
    return max(sent + serial_const, last) + (delay - serial_const)


def api_server_seen_all(sent: np.ndarray, delays: np.ndarray, const: float,
                        serial: bool) -> np.ndarray:
    """``api_server_seen`` over requests in the order sent (s): the running maximum, or
    with one worker Lindley's recursion, seen_i = max(sent_i + c, seen_i-1) + s_i, as
    S_i + max_{j<=i}(sent_j + c - S_j-1) with S the cumulative tokenizing times."""
    if not serial:
        return np.maximum.accumulate(sent + delays)
    work = delays - const
    done = np.cumsum(work)
    return done + np.maximum.accumulate(sent + const - (done - work))


class Gated(ArrivalSource):
    """At most ``concurrency`` requests in the system (see the module docstring).

    ``delay_ns`` (per request, ns): the client sends at max(ready, a slot frees) and the
    engine sees the request that much later, in the order sent (the API server's work on
    each prompt: engine.ingress_ms + ingress_per_token_us); ``ready_ns`` are then the
    client's ready times and ``think_ns`` the think time plus the egress. Without it the
    caller folds a constant ingress into both (``ready_ns`` shifted, ``think_ns`` plus
    ingress and egress)."""

    def __init__(self, ready_ns: np.ndarray, admissible: np.ndarray, concurrency: int,
                 think_ns: int = 0, delay_ns: np.ndarray | None = None,
                 serial_ns: int | None = None):
        self.ready, self.admissible, self.think = ready_ns.tolist(), admissible, int(think_ns)
        self.delay = None if delay_ns is None else np.asarray(delay_ns, np.int64).tolist()
        # one tokenizing worker (api_server_seen): the delays' constant part (ns), else None
        self.serial = None if serial_ns is None else int(serial_ns)
        self.slots = _Slots([0] * concurrency, 0)  # every slot free from time 0
        self.sent = np.full(len(ready_ns), -1, dtype=np.int64)  # engine sees it (ns; -1 never)
        self.client = np.full(len(ready_ns), -1, dtype=np.int64)  # client sends it (ns)

    def _send_time(self, s: _Slots) -> int:
        """When the client sends request ``s.next_req``: ready, and a slot free (ns)."""
        return max(self.ready[s.next_req], s.free_at[0])

    def _release_time(self, s: _Slots) -> int | None:
        if s.next_req >= len(self.ready) or not s.free_at:
            return None
        send = self._send_time(s)
        if self.delay is None:
            return send
        return api_server_seen(send, self.delay[s.next_req], s.last, self.serial)

    def _release(self, s: _Slots, t: int) -> int:
        """Send request ``s.next_req``, seen by the engine at ``t`` (a rejected one frees its
        slot at once)."""
        req = s.next_req
        heapq.heappop(s.free_at)
        if not self.admissible[req]:
            heapq.heappush(s.free_at, t + self.think)
        s.next_req += 1
        s.last = t
        return req

    def next_time(self) -> int | None:
        return self._release_time(self.slots)

    def due(self, now: int) -> list[int]:
        out = []
        while (t := self._release_time(self.slots)) is not None and t <= now:
            send = self._send_time(self.slots)
            req = self._release(self.slots, t)
            self.sent[req], self.client[req] = t, send
            out.append(req)
        return out

    def finished(self, reqs: np.ndarray, now: int) -> None:
        for _ in range(len(reqs)):
            heapq.heappush(self.slots.free_at, now + self.think)

    def arrivals_by(self, after: int, upto: np.ndarray) -> np.ndarray:
        # the releases not yet made all come after ``after`` (every earlier one was due)
        s, times = self.slots.copy(), []
        while (t := self._release_time(s)) is not None and t <= upto[-1]:
            if self.admissible[self._release(s, t)]:
                times.append(t)
        return np.searchsorted(np.asarray(times), upto, side="right")

    def arrival_times(self) -> np.ndarray:
        return np.where(self.sent >= 0, to_s(self.sent), np.nan)

    def client_times(self) -> np.ndarray | None:
        """When the client sent each request (s; NaN: never), exactly, with per-request
        delays; None without them (the caller subtracts its constant ingress)."""
        if self.delay is None:
            return None
        return np.where(self.client >= 0, to_s(self.client), np.nan)

    def exhausted(self) -> bool:
        return self.slots.next_req >= len(self.ready)


def seen_by_step(seen: int, starts, async_scheduling: bool):
    """Up to when (ns) the plan of each step of a run saw arrivals: its first step's plan
    saw ``seen`` (the clock, or the start of the step before when it was planned behind
    it); step j > 0's plan was made at step j's start, or with async scheduling at step
    j - 1's start while that step ran (sim/engine/engine.py _lagging), as a run unfolded
    into single steps plans them. The waiting count at step j is the first plan's plus the
    admissible arrivals in (seen, seen_by_step[j]]."""
    later = starts[:-1] if async_scheduling else starts[1:]
    if isinstance(starts, np.ndarray):
        return np.concatenate(([seen], later)).astype(np.int64)
    return [seen, *later]


def client_sent(seen_s: np.ndarray, ingress_s, ready_s: np.ndarray) -> np.ndarray:
    """When the client sent each gated request (s): the engine saw it ``ingress_s`` later
    (NaN: never sent), and never before it was ready -- the subtraction's float residue
    (-1.7e-18 s for a request ready at 0 behind an 11.0592 ms ingress) would otherwise put
    it before a warm-up of 0 and out of every latency figure."""
    sent = np.asarray(seen_s, dtype=np.float64) - ingress_s
    return np.where(np.isnan(sent), np.nan, np.maximum(sent, ready_s))

