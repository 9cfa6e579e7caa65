"""``static`` batching (sim/sched/static.py) on the fast core's state.

A batch starts when ``max_num_seqs`` (the batch size) requests wait or the oldest has
waited ``max_wait_s`` (the engine wakes at that deadline: ``next_wakeup``); its members,
taken FCFS while their blocks fit, each take blocks for ``prompt + output - 1`` slots at
once, so no step allocates (block phases read 0, sim/fast/upfront.py ``NoGrowth``) and
nobody is preempted. The first step computes every member's whole prompt; then every live
member decodes (implicit progress, decode runs that no arrival cuts). A finished member's
blocks stay held until the last member finishes, when the batch's blocks are all freed.
"""

from __future__ import annotations

from sim.fast.sched import FLEET, FastScheduler, Planned
from sim.fast.state import cdiv
from sim.fast.upfront import NoGrowth
from sim.sched.static import WAKE_TOLERANCE_S
from sim.sched.vllm import MEMORY, POLICY


class FastStatic(FastScheduler):
    runs = frozenset({FLEET})  # paged KV, optimistic admission; a fleet
    reads_clock = True  # the engine sets ``now_s`` before each plan (the batch deadline)

    def __init__(self, *args, arrival, max_wait_s: float, **kw):
        super().__init__(*args, **kw)
        self.arrival = arrival  # arrival time of each request (s, floats)
        self.max_wait_s = max_wait_s
        self.phase = NoGrowth(self.phase)
        self.members: list[int] = []  # the batch in flight, admission order
        self.left = 0  # its members not finished yet
        self.now_s = 0.0

    @classmethod
    def policy_args(cls, sched, specs) -> dict:
        return {"arrival": sched.specs.arrival_s, "max_wait_s": sched.params.max_wait_s}

    def _slots(self, r: int) -> int:
        """Blocks member ``r`` holds: its whole sequence but the last token (never fed
        back)."""
        return cdiv(self.prompt[r] + self.out[r] - 1, self.bs)

    # ---- batch formation ------------------------------------------------------------
    def _deadline(self) -> float:
        return float(self.arrival[self.waiting[0]]) + self.max_wait_s

    def next_wakeup(self) -> float | None:
        if self.members or not self.waiting:
            return None
        return self._deadline()

    def _start_batch(self, p: Planned) -> None:
        """Take members FCFS while their blocks fit (StaticScheduler._start_batch)."""
        self.blocked = POLICY
        q = self.waiting
        while q and len(self.running) < self.lim.max_num_seqs:
            r = q[0]
            nb = self._slots(r)
            if nb > self.num_blocks - self.used:
                self.blocked = MEMORY
                self.memory_blocked[r] = 1
                break
            self.used += nb
            self._start(p, r, 0)
        assert self.running, "static: the oldest request's reservation exceeds the KV pool"
        self.members, self.left = list(self.running), len(self.running)

    # ---- the step ---------------------------------------------------------------------
    def _schedule(self) -> Planned | None:
        p = Planned()
        started = False
        if not self.members:
            if not self.waiting or not (len(self.waiting) >= self.lim.max_num_seqs or
                                        self.now_s >= self._deadline() - WAKE_TOLERANCE_S):
                return None
            self._start_batch(p)
            started = True
        if self.pre:  # the context phase: every member's whole prompt in one step
            comp, known = self.comp, self.known
            p.entries = [(r, known[r] - comp[r], comp[r]) for r in self.pre]
        else:
            p.n_dec, p.dec_ctx = self.n_dec, self.sum_base + self.n_dec * self.g
        if not (started and self.blocked == MEMORY):  # the batch start was not cut short
            self.blocked = POLICY  # anyone waiting waits for the batch in flight to end
        p.blocked = self.blocked
        return p

    # ---- blocks -------------------------------------------------------------------------
    def new_blocks(self, r: int, c: int, upto: int) -> int:
        return 0

    def free_finished(self, reqs: list[int]) -> None:
        """Finished members keep their blocks until the batch ends (at once, async or not,
        as StaticScheduler.update frees them)."""
        self.left -= len(reqs)
        if not self.left:
            self.used -= sum([self._slots(r) for r in self.members])
            self.members = []

    def check(self) -> None:
        held = sum(self._slots(r) for r in self.members)
        assert held == self.used, f"fast core: {self.used} blocks in use, the batch's {held}"
