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

from sim.fast.caching import CachingScheduler
from sim.fast.sched import FastScheduler


class HeapQueue:
    """vLLM's priority queue (sim/sched/queues.py PriorityQueue) with a deque's names."""

    __slots__ = ("heap", "key")

    def __init__(self, key: list[tuple[int, int]]):
        self.heap: list[tuple[int, int, int]] = []
        self.key = key  # (priority, arrival ns) per request

    def append(self, r: int) -> None:
        heapq.heappush(self.heap, (*self.key[r], r))

    appendleft = append  # a preempted request goes back by its key

    def __getitem__(self, i: int) -> int:
        assert i == 0, "only the head of a priority queue is read"
        return self.heap[0][2]

    def popleft(self) -> int:
        return heapq.heappop(self.heap)[2]

    def __len__(self) -> int:
        return len(self.heap)


class PriorityOrder:
    """The two overrides (mixed into a fast scheduler); ``key``: (priority, arrival ns) per
    request."""

    def __init__(self, *args, key: list[tuple[int, int]], **kw):
        self.key = key  # set before the base class makes the queue
        super().__init__(*args, **kw)

    def make_queue(self) -> HeapQueue:
        return HeapQueue(self.key)

    def _victim(self) -> int:
        key = self.key
        return max(self.running, key=key.__getitem__)  # max keeps the first of equals


class PriorityScheduler(PriorityOrder, FastScheduler):
    pass


class CachingPriorityScheduler(PriorityOrder, CachingScheduler):
    pass

