"""vLLM v1 with ``policy="priority"``: the same step, two different choices.

* the waiting queue is ordered by (priority, arrival time, request index), lower
  first (vLLM's convention: a smaller number is more urgent); a preempted request
  re-enters the heap by its key rather than going to the front;
* when a running request's blocks cannot be allocated, the victim is the running
  request with the *largest* (priority, arrival time, request index), wherever it
  sits in the running list. If it was already granted tokens in this step they
  are refunded to the budget (``_allocate_or_preempt`` does this).

Running requests are still served in admission order, as vLLM v1 does.
"""

from __future__ import annotations

import numpy as np

from sim.sched.base import SCHEDULERS
from sim.sched.batch import BatchBuilder
from sim.sched.queues import PriorityQueue
from sim.sched.vllm import VllmScheduler


@SCHEDULERS.register("vllm-priority")
class VllmPriorityScheduler(VllmScheduler):
    """vLLM v1 policy="priority": queue by (priority, arrival); preempt the least urgent."""

    description = ("vLLM v1 policy=priority: admit by (priority, arrival); on KV shortage "
                   "preempt the least urgent running request")

    def make_queue(self):
        return PriorityQueue(self.specs.priority, self.specs.arrival_s)

    def pick_victim(self, batch: BatchBuilder) -> int:
        r = self.running
        # lexsort's last key is the primary one: the final position holds the largest key
        last = np.lexsort((r, self.specs.arrival_s[r], self.specs.priority[r]))[-1]
        return int(r[last])
