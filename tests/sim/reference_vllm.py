"""A literal, per-request transcription of vLLM v1's Scheduler.schedule() and update.

Deliberately naive (Python objects and lists, one request at a time, no decode
runs) so it can serve as an independent oracle for the vectorized scheduler.
Time is integer nanoseconds and advances by the linear cost model; arrivals at
time t are visible to a step that starts at t. vLLM 0.32's rules: the server's
length rules (prompt >= max_model_len rejected, max_tokens shortened to fit), the
long-prefill cap lifted for a lone request (optionally floored at budget //
requests), and admission only when blocks for the whole sequence are free
(``scheduler_reserve_full_isl``).
"""

from __future__ import annotations

from dataclasses import dataclass


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass
class Req:
    rid: int
    arrival: int  # ns
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
                 chunked, threshold, priority_policy=False, full_isl=True, adaptive=False):
        self.free = num_blocks
        self.bs = block_size
        self.max_seqs, self.max_tokens, self.max_len = max_num_seqs, max_tokens, max_model_len
        self.chunked, self.threshold, self.prio = chunked, threshold, priority_policy
        self.full_isl, self.adaptive = full_isl, adaptive
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
        eligible = len(self.running) + len(self.waiting)
        self.thr = self.threshold if eligible > 1 else 0
        if self.thr and self.adaptive:
            self.thr = max(self.thr, self.max_tokens // eligible)
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
                if self.prio:  # max() keeps the first of equal keys, as vLLM's does
                    victim = max(self.running, key=lambda r: (r.priority, r.arrival))
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
                whole = cdiv(min(req.num_tokens, self.max_len), self.bs) - req.blocks
                if self.full_isl and whole > self.free:
                    break
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


class Livelock(RuntimeError):
    """The case never ends: vLLM's rules keep preempting and re-admitting (e.g. requests of
    equal priority and arrival preempting themselves in turn with priority scheduling), so
    vLLM itself would spin forever. Carries the steps made so far."""

    def __init__(self, steps, rejected):
        super().__init__(f"no end after {MAX_ITERATIONS} scheduler calls ({len(steps)} steps)")
        self.steps, self.rejected = steps, rejected


MAX_ITERATIONS = 5_000  # scheduler calls; the property tests' cases end in a few hundred


def simulate(arrival, prompt, output, *, cost_ms, priority=None, **knobs):
    """Returns steps [(start s, {rid: tokens}, preempted, finished)] and rejected ids;
    raises Livelock after MAX_ITERATIONS scheduler calls."""
    reqs = [Req(i, round(arrival[i] * 1e9), prompt[i], output[i],
                0 if priority is None else priority[i]) for i in range(len(arrival))]
    s = RefScheduler(**knobs)
    now, nxt, steps, rejected, victims = 0, 0, [], [], []  # now: ns
    base, per_prefill, per_decode = cost_ms
    for _ in range(MAX_ITERATIONS):
        while nxt < len(reqs) and reqs[nxt].arrival <= now:
            r = reqs[nxt]
            if r.prompt >= s.max_len:  # the input processor: no room for an output token
                rejected.append(r.rid)
            else:  # the OpenAI server shortens max_tokens to fit
                r.max_tokens = min(r.max_tokens, s.max_len - r.prompt)
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
        dur = round((base + per_prefill * prefill + per_decode * decode) * 1e-3 * 1e9)
        finished = s.update(sched)
        steps.append((now / 1e9, sched, pre, finished))
        now += dur
    else:
        raise Livelock(steps, rejected)
    return steps, rejected
