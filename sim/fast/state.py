"""Per-request progress with implicit decode progress: the fast core's state.

A decoding request (its next step computes exactly its last known token) advances by one
token in every step it is scheduled, and in the common step every running request is
scheduled. So its computed tokens are kept implicitly: ``computed = base + g``, where
``g`` counts the steps executed so far and ``base`` is fixed while the request keeps
decoding in every step. Three aggregates follow from that and cost O(1) per step:

* the sum of decoding contexts, ``sum_base + n_dec * g`` (the attention's work);
* new KV blocks at step ``g``: a decoding request writes slot ``base + g`` and needs a
  new block when that is a multiple of ``block_size``, so ``phase[g % block_size]``
  counts them, with ``phase[(-base) % block_size]`` holding each request;
* finishes: a decoding request emits its last token at step
  ``prompt + output - 2 - base``; a heap keyed by that step (stale entries skipped, an
  entry that a skip left early pushed back when it reaches the top).

Prefilling requests (few at a time) keep explicit ``comp``/``known``. A decoding request
that a step skips (its token budget ran out, only in the exact path) gets ``base - 1``.
Paged blocks are tight between steps (a running request holds ``ceil(computed /
block_size)`` blocks, sim/kv/paged.py), so only their count is kept.

Emission runs (for ITL, token times and max ITL, sim/fast/record.py): a request's
consecutive token-emitting steps ``[run_start, last]``. A decoding request that emitted
in the previous step is *continuing*; one that did not (skipped, or emitting for the
first time after a preemption) is *stale* and starts a new run when it next emits.

A prefilling request with one prompt token left is decoding too: its next step computes its
last known token, as vLLM's decode steps do (sim/sched/vllm.py folds it into decode runs);
it joins as stale, and ``first_due`` when that token is its first.
"""

from __future__ import annotations

import heapq
from array import array

import numpy as np


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _view(a: np.ndarray) -> memoryview:
    """Read-only token counts as a sequence of Python ints, without a copy."""
    return memoryview(np.ascontiguousarray(a, dtype=np.int64))


def _int32(a: np.ndarray) -> array:
    """``a`` (token counts) as a 4-byte int array."""
    return array("i", np.ascontiguousarray(a, dtype=np.int32).tobytes())


class Progress:
    """Request progress and the running set (request indices, running order)."""

    def __init__(self, prompt: np.ndarray, output: np.ndarray, block_size: int,
                 num_blocks: int):
        n = len(prompt)
        # the requests' own arrays, read as Python ints (no copy); counts the run changes
        # in 4 bytes (a request has at most 2 x 2^24 tokens)
        self.prompt, self.out = _view(prompt), _view(output)
        self.bs = block_size
        self.comp = array("i", bytes(4 * n))  # computed tokens (prefilling / not running)
        self.known = _int32(prompt)  # prompt + generated (not decoding)
        # step-indexed values of the requests that have them only (dicts: a few hundred
        # entries, not 8 bytes per request of the run)
        self.base: dict[int, int] = {}  # decoding: computed = base + g
        self.finat: dict[int, int] = {}  # decoding: the step of its last token
        self.dec = bytearray(n)  # 1 = decoding (running, next step computes 1 token)
        self.run_start: dict[int, int] = {}  # emitting: first step of the current run
        self.last_emit: dict[int, int] = {}  # last emitting step (not continuing), until
        # the request finishes
        self.running: list[int] = []  # running order (admission order)
        self.pre: list[int] = []  # running requests that are not decoding, running order
        self.n_dec, self.sum_base = 0, 0
        self.phase = [0] * block_size  # decoding requests by (-base) % block_size
        self.fin: list[tuple[int, int]] = []  # heap of (last-token step, request)
        self.stale: set[int] = set()  # decoding requests that did not emit last step
        # decoding requests whose next token is their first (a prompt's last token left)
        self.first_due: set[int] = set()
        self.g = 0  # steps executed
        self.num_blocks, self.used = num_blocks, 0  # usable blocks, blocks held (blocks)
        # closed emission runs (request, first step, last step) and lone gaps (request,
        # step, previous emitting step)
        self.runs = (array("q"), array("q"), array("q"))
        self.gaps = (array("q"), array("q"), array("q"))

    # ---- reading ----------------------------------------------------------------------
    def ctx(self, r: int) -> int:
        """Tokens whose KV request ``r`` holds (computed tokens)."""
        return self.base[r] + self.g if self.dec[r] else self.comp[r]

    def known_of(self, r: int) -> int:
        return self.base[r] + self.g + 1 if self.dec[r] else self.known[r]

    @property
    def free(self) -> int:
        return self.num_blocks - self.used

    def next_finish(self) -> int | None:
        """The earliest step at which a decoding request emits its last token. An entry
        below its request's step (skipped since it was pushed: ``skip`` moves the step,
        not the entry) goes back in at that step when it reaches the top; every entry's
        step is at most its request's, so the first that matches is the earliest."""
        fin, dec, finat = self.fin, self.dec, self.finat
        while fin:
            gf, r = fin[0]
            if dec[r]:
                f = finat.get(r)
                if f == gf:
                    return gf
                if f is not None and f > gf:
                    heapq.heapreplace(fin, (f, r))
                    continue
            heapq.heappop(fin)
        return None

    # ---- decoding set -------------------------------------------------------------------
    def add_dec(self, r: int, computed: int, g_next: int) -> None:
        """``r`` decodes from step ``g_next`` on, with ``computed`` tokens in KV then."""
        b = computed - g_next
        self.base[r] = b
        self.dec[r] = 1
        self.n_dec += 1
        self.sum_base += b
        self.phase[(-b) % self.bs] += 1
        gf = self.prompt[r] + self.out[r] - 2 - b
        self.finat[r] = gf
        heapq.heappush(self.fin, (gf, r))

    def drop_dec(self, r: int) -> None:
        """``r`` stops decoding (finished or preempted); comp/known made explicit."""
        b = self.base.pop(r)
        self.comp[r] = b + self.g
        self.known[r] = b + self.g + 1
        self.dec[r] = 0
        self.n_dec -= 1
        self.sum_base -= b
        self.phase[(-b) % self.bs] -= 1
        self.finat.pop(r, None)

    def skip(self, r: int) -> None:
        """A decoding request the step did not schedule: it falls one step behind."""
        if r not in self.stale:
            self.close_run(r, self.g - 1)
            self.stale.add(r)
        bs, b = self.bs, self.base[r]
        self.phase[(-b) % bs] -= 1
        b -= 1
        self.base[r] = b
        self.sum_base -= 1
        self.phase[(-b) % bs] += 1
        self.finat[r] += 1  # its heap entry moves when it reaches the top (next_finish)

    # ---- emission runs ------------------------------------------------------------------
    def close_run(self, r: int, last: int) -> None:
        """End ``r``'s current emission run at step ``last``."""
        a = self.run_start.pop(r, -1)
        if a < 0:
            return
        rr, ra, rb = self.runs
        rr.append(r)
        ra.append(a)
        rb.append(last)
        self.last_emit[r] = last

    def emit_fresh(self, r: int, g: int) -> None:
        """``r`` emits at step ``g`` without having emitted at ``g - 1``."""
        prev = self.last_emit.get(r, -1)
        if prev >= 0:
            gr, gg, gp = self.gaps
            gr.append(r)
            gg.append(g)
            gp.append(prev)
        self.run_start[r] = g

    def open_runs(self) -> None:
        """Close every emission run still open (the end of the simulation)."""
        for r in self.running:
            if self.dec[r] and r not in self.stale:
                self.close_run(r, self.g - 1)

    # ---- blocks -------------------------------------------------------------------------
    def check(self) -> None:
        """KV conservation: the blocks in use are exactly the running requests' tables."""
        held = sum(cdiv(self.ctx(r), self.bs) for r in self.running)
        assert held == self.used and 0 <= self.used <= self.num_blocks, (
            f"fast core: {self.used} blocks in use, running requests hold {held}")
        assert self.n_dec + len(self.pre) == len(self.running)
