"""Waiting queues: the order in which waiting requests are considered for admission.

Mirrors vLLM's ``RequestQueue``: FCFS is a deque where preempted requests are put
back at the front; the priority queue orders by (priority, arrival time) and a
preempted request simply re-enters the heap.
"""

from __future__ import annotations

import heapq
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Iterator

import numpy as np


class RequestQueue(ABC):
    @abstractmethod
    def add(self, req: int) -> None:
        """Enqueue a newly arrived request."""

    @abstractmethod
    def prepend(self, req: int) -> None:
        """Put a preempted request back where it is considered first (FCFS) or by key."""

    @abstractmethod
    def peek(self) -> int: ...

    @abstractmethod
    def pop(self) -> int: ...

    @abstractmethod
    def __len__(self) -> int: ...

    @abstractmethod
    def __iter__(self) -> Iterator[int]:
        """Requests in the order they would be considered."""

    #: whether a new arrival can move ahead of the current head
    arrivals_can_jump = False


class FCFSQueue(RequestQueue):
    def __init__(self) -> None:
        self._q: deque[int] = deque()

    def add(self, req):
        self._q.append(req)

    def prepend(self, req):
        self._q.appendleft(req)

    def peek(self):
        return self._q[0]

    def pop(self):
        return self._q.popleft()

    def __len__(self):
        return len(self._q)

    def __iter__(self):
        return iter(self._q)


class PriorityQueue(RequestQueue):
    """Smallest (priority, arrival time, request index) first, as vLLM's policy="priority"."""

    arrivals_can_jump = True

    def __init__(self, priority: np.ndarray, arrival: np.ndarray) -> None:
        self._heap: list[tuple] = []
        self._priority = priority
        self._arrival = arrival  # arrival times (vllm-priority: the engine's integer ns)

    def add(self, req):
        key = (int(self._priority[req]), self._arrival[req].item(), req)
        heapq.heappush(self._heap, key)

    prepend = add

    def peek(self):
        return self._heap[0][2]

    def pop(self):
        return heapq.heappop(self._heap)[2]

    def __len__(self):
        return len(self._heap)

    def __iter__(self):
        return (r for _, _, r in sorted(self._heap))
