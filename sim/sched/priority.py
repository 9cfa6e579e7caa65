"""vLLM v1 with ``policy="priority"``: the same step, two different choices.

* the waiting queue is ordered by (priority, arrival time, request index), lower
  first (vLLM's convention: a smaller number is more urgent; ``Request.__lt__``,
  ``vllm/v1/request.py:357``, breaks ties by request id, here the index); a
  preempted request re-enters the heap by its key rather than going to the front;
* when a running request's blocks cannot be allocated, the victim is the running
  request with the *largest* (priority, arrival time), wherever it sits in the
  running list; among equals the one earliest in the running list (vLLM takes
  ``max(self.running, key=lambda r: (r.priority, r.arrival_time))``,
  ``vllm/v1/core/sched/scheduler.py:796-800``, and ``max`` keeps the first of
  equal keys). If it was already granted tokens in this step they are refunded to
  the budget (``_allocate_or_preempt`` does this).

Arrival times compare as the engine's integer nanoseconds.

Running requests are still served in admission order, as vLLM v1 does.
"""

from __future__ import annotations

import numpy as np

from sim.engine.clock import to_ns
from sim.sched.base import SCHEDULERS
from sim.sched.batch import BatchBuilder
from sim.sched.queues import PriorityQueue
from sim.sched.vllm import VllmScheduler


@SCHEDULERS.register("vllm-priority")
class VllmPriorityScheduler(VllmScheduler):
    """vLLM v1 policy="priority": queue by (priority, arrival); preempt the least urgent."""

    description = ("vLLM v1 policy=priority: admit by (priority, arrival); on KV shortage "
                   "preempt the least urgent running request")

    def __init__(self, specs, *args, **kw):
        self.arrival_ns = to_ns(specs.arrival_s)  # the engine's clock (ns); make_queue uses it
        super().__init__(specs, *args, **kw)

    def make_queue(self):
        return PriorityQueue(self.specs.priority, self.arrival_ns)

    def pick_victim(self, batch: BatchBuilder) -> int:
        r = self.running
        prio = self.specs.priority[r]
        least = prio == prio.max()
        arrival = self.arrival_ns[r]
        latest = least & (arrival == arrival[least].max())
        return int(r[np.argmax(latest)])  # the first such in running order
