"""Swap preemption (``engine.preemption_mode: swap``, vLLM v0) on the fast core: the rules
of sim/sched/base.py ``_preempt`` and sim/sched/vllm.py ``_schedule_waiting`` on the fast
scheduler's block count.

* A victim's blocks (those of its computed tokens and of this step's grant) move to the
  host pool (``sim.kv.swap.HostPool``, the general KV manager's own, so its counters are
  the run's) when it has room: the victim keeps its computed tokens and joins the swapped
  queue, which admission serves before the waiting one, oldest first; its blocks come
  back when it is admitted again (bytes charged to that plan, as the swap-out's to the plan
  that preempted).
* A victim the host pool refuses is recomputed (``on_full: recompute``), fails
  (``abort_request``) or stops the engine (``stop_engine``, vLLM v0's RuntimeError): every
  unfinished request fails and the run ends (``EngineStopped``, caught by the engine).

A swap's bytes lengthen the step they are charged to by bytes / the GPU's host bandwidth
(``CostModel.swap_time``; sim/fast/engine.py). Paged KV without prefix caching, the
``vllm`` or ``vllm-priority`` scheduler (its victims go back by their key, the swapped ones
come back first in FCFS order, as sim/sched/base.py keeps them) or ``prefill-first`` (v0's
own order: sim/fast/prefill_first.py), optimistic or reserve admission (a swapped
request is judged as a waiting one: it holds no block; sim/fast/__init__.py
``unsupported``).
"""

from __future__ import annotations

from collections import deque

from sim.fast.state import cdiv
from sim.kv.swap import ABORT_REQUEST, LACK_OF_SWAP, RECOMPUTE
from sim.sched.base import EngineStopped


class SwapQueue:
    """The waiting deque with vLLM v0's swapped queue before it: the head is the oldest
    swapped request while there is one; arrivals and recomputed victims go to the waiting
    deque (its end, its front) as before."""

    __slots__ = ("waiting", "swapped")

    def __init__(self, waiting):
        self.waiting, self.swapped = waiting, deque()

    def __len__(self) -> int:
        return len(self.waiting) + len(self.swapped)

    def __getitem__(self, i: int) -> int:
        assert i == 0, "only the head of the queues is read"
        return self.swapped[0] if self.swapped else self.waiting[0]

    def popleft(self) -> int:
        return self.swapped.popleft() if self.swapped else self.waiting.popleft()

    def append(self, r: int) -> None:
        self.waiting.append(r)

    def appendleft(self, r: int) -> None:
        self.waiting.appendleft(r)


class SwapPreemption:
    """Mixed before a fast scheduler (sim/fast/__init__.py ``_mixed``); ``host``: the
    general KV manager's host pool."""

    def __init__(self, *args, host, **kw):
        super().__init__(*args, **kw)
        self.host = host
        self.waiting = SwapQueue(self.waiting)
        self.swap_bytes = [0, 0]  # moved out / in since the last plan (bytes)
        self.failed_now = []  # failed by this schedule, not yet reported to the source

    @classmethod
    def policy_args(cls, sched, specs) -> dict:
        return super().policy_args(sched, specs) | {"host": sched.kv.host}

    def schedule(self):
        p = super().schedule()
        if p is not None:  # the traffic since the last plan is this one's (_take_swap_bytes)
            (p.swap_out, p.swap_in), self.swap_bytes = self.swap_bytes, [0, 0]
        return p

    def queued(self) -> int:
        return len(self.waiting.waiting)

    def swapped_queue(self):
        return self.waiting.swapped

    def _requeue(self, v: int, c: int, granted: int, cached) -> None:
        blocks = cdiv(c + granted, self.bs)
        host = self.host
        if not blocks:  # nothing to move: recomputed
            return super()._requeue(v, c, granted, cached)
        if host.room_for(blocks):
            self.used -= blocks
            self.swap_bytes[0] += host.take(v, blocks)
            self.comp[v] = c  # it keeps its computed tokens
            self.waiting.swapped.append(v)
            return
        if host.on_full == RECOMPUTE:
            return super()._requeue(v, c, granted, cached)
        self.used -= blocks  # it fails, or the engine stops
        self.status[v] = 5  # ABORTED
        if host.on_full == ABORT_REQUEST:
            self.failed_now.append(v)
            return
        self._stop()

    def _start(self, p, r: int, c: int) -> None:
        back = bool(self.waiting.swapped)  # the head comes from the swapped queue
        super()._start(p, r, c)
        if back:
            self.swap_bytes[1] += self.host.give_back(r)

    def _stop(self) -> None:
        """vLLM v0's RuntimeError: every block is freed, every unfinished request fails
        (sim/sched/base.py ``_swap_space_full``), the engine stops."""
        self.stopped = LACK_OF_SWAP
        for r in self.running:
            if self.dec[r]:  # its tokens so far are its own (open_runs)
                if r not in self.stale:
                    self.close_run(r, self.g - 1)
                self.drop_dec(r)
        self.running.clear()
        self.pre.clear()
        self.stale.clear()
        self.first_due.clear()
        self.zombies.clear()
        self.deferred = []
        self.used = 0
        for r in self.waiting.swapped:
            self.host.drop(r)
        self.waiting = SwapQueue(self.make_queue())
        st = self.status
        for r in range(len(st)):
            if st[r] < 3:  # pending, waiting or running
                st[r] = 5
        raise EngineStopped(self.stopped)
