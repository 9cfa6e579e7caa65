"""A literal, per-request transcription of vLLM v1's Scheduler.schedule() and update.

Deliberately naive (Python objects and lists, one request at a time, no decode
runs) so it can serve as an independent oracle for the vectorized scheduler.
Time advances by the linear cost model; arrivals at time t are visible to a step
that starts at t.
"""

from __future__ import annotations

from dataclasses import dataclass


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass
class Req:
    rid: int
    arrival: float
    prompt: int
    max_tokens: int
    priority: int = 0
    computed: int = 0
    output: int = 0
    blocks: int = 0

    @property
    def num_tokens(self) -> int:
        return self.prompt + self.output


class RefScheduler:
    def __init__(self, *, num_blocks, block_size, max_num_seqs, max_tokens, max_model_len,
                 chunked, threshold, priority_policy=False):
        self.free = num_blocks
        self.bs = block_size
        self.max_seqs, self.max_tokens, self.max_len = max_num_seqs, max_tokens, max_model_len
        self.chunked, self.thr, self.prio = chunked, threshold, priority_policy
        self.running: list[Req] = []
        self.waiting: list[Req] = []

    def allocate(self, req: Req, num_new: int) -> bool:
        need = cdiv(req.computed + num_new, self.bs) - req.blocks
        if need > self.free:
            return False
        if need > 0:
            self.free -= need
            req.blocks += need
        return True

    def free_req(self, req: Req) -> None:
        self.free += req.blocks
        req.blocks = 0

    def add(self, req: Req) -> None:
        self.waiting.append(req)
        if self.prio:
            self.waiting.sort(key=lambda r: (r.priority, r.arrival, r.rid))

    def preempt(self, req: Req) -> None:
        self.free_req(req)
        req.computed = 0
        self.waiting.insert(0, req)
        if self.prio:
            self.waiting.sort(key=lambda r: (r.priority, r.arrival, r.rid))

    def schedule(self):
        budget = self.max_tokens
        sched: dict[int, int] = {}
        scheduled_reqs: list[Req] = []
        preempted: list[int] = []
        i = 0
        while i < len(self.running) and budget > 0:
            req = self.running[i]
            n = req.num_tokens - req.computed
            if 0 < self.thr < n:
                n = self.thr
            n = min(n, budget, self.max_len - 1 - req.computed)
            if n == 0:
                i += 1
                continue
            while True:
                if self.allocate(req, n):
                    ok = True
                    break
                if self.prio:
                    victim = max(self.running, key=lambda r: (r.priority, r.arrival, r.rid))
                    self.running.remove(victim)
                    if victim in scheduled_reqs:
                        scheduled_reqs.remove(victim)
                        budget += sched.pop(victim.rid)
                        i -= 1
                else:
                    victim = self.running.pop()
                self.preempt(victim)
                preempted.append(victim.rid)
                if victim is req:
                    ok = False
                    break
            if not ok:
                break
            scheduled_reqs.append(req)
            sched[req.rid] = n
            budget -= n
            i += 1
        if not preempted:
            while self.waiting and budget > 0:
                if len(self.running) == self.max_seqs:
                    break
                req = self.waiting[0]
                n = req.num_tokens - req.computed
                if 0 < self.thr < n:
                    n = self.thr
                if not self.chunked and n > budget:
                    break
                n = min(n, budget)
                if not self.allocate(req, n):
                    break
                self.waiting.pop(0)
                self.running.append(req)
                sched[req.rid] = n
                budget -= n
        return sched, preempted

    def update(self, sched: dict[int, int]) -> list[int]:
        finished = []
        for req in list(self.running):
            if req.rid not in sched:
                continue
            req.computed += sched[req.rid]
            if req.computed >= req.num_tokens:
                req.output += 1
                if req.output >= req.max_tokens:
                    finished.append(req.rid)
                    self.running.remove(req)
                    self.free_req(req)
        return finished


def simulate(arrival, prompt, output, *, cost_ms, priority=None, **knobs):
    """Returns steps [(start, {rid: tokens}, preempted, finished)] and rejected ids."""
    reqs = [Req(i, arrival[i], prompt[i], output[i], 0 if priority is None else priority[i])
            for i in range(len(arrival))]
    s = RefScheduler(**knobs)
    now, nxt, steps, rejected, victims = 0.0, 0, [], [], []
    base, per_prefill, per_decode = cost_ms
    while True:
        while nxt < len(reqs) and reqs[nxt].arrival <= now:
            r = reqs[nxt]
            if r.prompt + r.max_tokens > s.max_len:
                rejected.append(r.rid)
            else:
                s.add(r)
            nxt += 1
        sched, pre = s.schedule() if (s.running or s.waiting) else ({}, [])
        if pre and not sched:  # priority: the first request preempted itself; vLLM's engine
            victims += pre     # runs nothing and schedules again at once
            continue
        pre, victims = victims + pre, []
        if not sched:
            if nxt >= len(reqs):
                break
            now = max(now, reqs[nxt].arrival)
            continue
        prefill = sum(n for n in sched.values() if n > 1)
        decode = sum(1 for n in sched.values() if n == 1)
        dur = (base + per_prefill * prefill + per_decode * decode) * 1e-3
        finished = s.update(sched)
        steps.append((now, sched, pre, finished))
        now = now + dur
    return steps, rejected
