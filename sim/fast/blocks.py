"""Paged KV as a count of blocks: the block seams of the fast scheduler (sim/fast/sched.py).

Paged blocks are tight between steps (a running request holds ``ceil(computed /
block_size)`` blocks, sim/kv/paged.py), so without prefix caching only ``used`` is kept;
sim/fast/caching.py overrides these methods to drive vLLM's prefix-caching pool instead.
"""

from __future__ import annotations

from sim.fast.state import cdiv


class BlockCount:
    """Mixed into FastScheduler (``used``, ``num_blocks``, ``bs``, ``comp``, ``lim``,
    ``reserve`` are its)."""

    async_frees = False  # engine.async_scheduling: a step's finishes free a plan later
    deferred: list[int]  # finished requests whose blocks are not freed yet

    def _room(self, lane: int = 0) -> int:
        """Blocks a running request may take now (vLLM: every free block; ``lane``: a
        policy's lane, sim/fast/lanes.py)."""
        return self.num_blocks - self.used

    def new_blocks(self, r: int, c: int, upto: int) -> int:
        """Blocks running request ``r``, holding ``c`` tokens' blocks, takes to hold ``upto``
        tokens (paged: a block per ``block_size`` tokens; sim/fast/upfront.py: none)."""
        return cdiv(upto, self.bs) - cdiv(c, self.bs)

    def _grow_running(self, blocks: int, dec_blocks: int, entries, due=None) -> None:
        """The running pass scheduled every running request (of a lane): ``blocks`` new
        blocks, of which ``dec_blocks`` for decoding requests and the rest for ``entries``
        (request, tokens, computed) in running order; ``due``: the decoding requests whose
        step computes their prompt's last token (default: ``first_due``)."""
        self.used += blocks

    def _grow_one(self, r: int, nb: int, upto: int) -> None:
        """Running request ``r`` takes ``nb`` new blocks to hold ``upto`` tokens."""
        self.used += nb

    def grow_run(self, n: int) -> None:
        """A decode run's steps after its first take ``n`` new blocks (at its commit, as
        sim/sched/base.py update allocates them)."""
        self.used += n

    def _release(self, r: int, computed: int, preempted: bool = False,
                 cached: int | None = None) -> None:
        """``r`` (finished or preempted, with ``computed`` tokens in KV) frees its blocks
        (``cached``: a prefix cache hashes at most its first that many tokens)."""
        self.used -= cdiv(computed, self.bs)

    def release_finished(self, reqs: list[int]) -> None:
        """Finished requests free their blocks (their computed tokens are explicit)."""
        comp, bs = self.comp, self.bs
        for r in reqs:
            self.used -= cdiv(comp[r], bs)

    def free_finished(self, reqs: list[int]) -> None:
        """Requests ``reqs`` finished in the step just committed: their blocks are freed now,
        or with async scheduling when the next plan is committed (``deferred``), as vLLM's
        scheduler learns of them a step later (sim/sched/base.py flush_frees)."""
        if self.async_frees:
            self.deferred += reqs
        else:
            self.release_finished(reqs)

    def flush_frees(self) -> None:
        """Free the blocks held back by async scheduling."""
        if self.deferred:
            reqs, self.deferred = self.deferred, []
            self.release_finished(reqs)

    def _hit(self, r: int, known: int) -> int:
        """Tokens of waiting request ``r`` already in KV (its prefix-cache hit)."""
        return 0

    def _admit_blocks(self, r: int, upto: int, whole: int) -> bool:
        """Admit ``r`` with blocks for ``upto`` tokens if they fit (False: KV memory refuses).
        ``whole``: its known tokens capped at max_model_len, which must fit too with
        ``scheduler_reserve_full_isl`` (sim/sched/vllm.py _whole_fits)."""
        bs, free, reserve = self.bs, self.num_blocks - self.used, self.reserve
        if self.lim.scheduler_reserve_full_isl:
            w = -(-whole // bs)
            if w > 0 and w + reserve > free:
                return False
        nb = -(-upto // bs)
        if nb > 0 and nb + reserve > free:
            return False
        self.used += nb
        return True

    def shared_slots(self) -> int:
        """Token slots counted in more than one request's table (prefix sharing)."""
        return 0
