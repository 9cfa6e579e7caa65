"""``vllm-priority`` on the fast core: sim/sched/priority.py's two choices, on either fast
scheduler (plain counts or the prefix cache):

* the waiting queue is a heap by (priority, arrival time in ns, request index), lower first;
  a preempted request re-enters by its key (``HeapQueue``: the deque methods the fast
  scheduler calls);
* the victim is the running request with the largest (priority, arrival time), the first
  such in running order; one scheduled earlier in the step gives its tokens back
  (``FastScheduler._unschedule``).

The rest (the running pass, admission, decode runs: an arrival can jump the queue, so a
memory stop does not last a run, ``VllmScheduler.blocked_persists``) is the fast core's.
"""

from __future__ import annotations

import heapq
from array import array

from sim.fast.caching import CachingScheduler
from sim.fast.sched import FastScheduler


class HeapQueue:
    """vLLM's priority queue (sim/sched/queues.py PriorityQueue) with a deque's names."""

    __slots__ = ("heap", "prio", "arrival")

    def __init__(self, prio: array, arrival: array):
        self.heap: list[tuple[int, int, int]] = []  # the queued requests' keys only
        self.prio, self.arrival = prio, arrival  # per request (arrival: ns)

    def append(self, r: int) -> None:
        heapq.heappush(self.heap, (self.prio[r], self.arrival[r], r))

    appendleft = append  # a preempted request goes back by its key

    def __getitem__(self, i: int) -> int:
        assert i == 0, "only the head of a priority queue is read"
        return self.heap[0][2]

    def popleft(self) -> int:
        return heapq.heappop(self.heap)[2]

    def __len__(self) -> int:
        return len(self.heap)


class PriorityOrder:
    """The two overrides (mixed into a fast scheduler); ``prio``, ``arrival``: each
    request's priority and arrival time (ns)."""

    def __init__(self, *args, prio: array, arrival: array, **kw):
        self.prio, self.arrival = prio, arrival  # set before the base class makes the queue
        super().__init__(*args, **kw)

    @classmethod
    def policy_args(cls, sched, specs) -> dict:
        return {"prio": array("q", specs.priority.tolist()),
                "arrival": array("q", sched.arrival_ns.tolist())}

    def make_queue(self) -> HeapQueue:
        return HeapQueue(self.prio, self.arrival)

    def _victim(self) -> int:
        prio, arrival = self.prio, self.arrival
        # max keeps the first of equal keys, as vLLM's max(self.running, key=...)
        return max(self.running, key=lambda r: (prio[r], arrival[r]))


class PriorityScheduler(PriorityOrder, FastScheduler):
    pass


class CachingPriorityScheduler(PriorityOrder, CachingScheduler):
    pass

