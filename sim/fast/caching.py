"""The fast scheduler with vLLM's prefix caching: the same ``PrefixCachingKV`` object the
general engine uses (sim/kv/prefix_cache.py, sim/kv/caching_pool.py) does the lookups,
allocations, publishing, frees and eviction; this file only says when, as sim/sched/vllm.py
does:

* admission (the waiting pass): ``lookup_prefix`` for the hit, ``fits`` for the
  ``scheduler_reserve_full_isl`` gate, ``allocate(admitting=True)`` (hit blocks, new
  blocks, the blocks the chunk fills published; hits and queries counted once per
  admission, as vLLM 0.32 records them, ``vllm/v1/core/sched/scheduler.py:1315-1318``);
* the running pass: a prefilling request's chunk is an ``allocate`` (new blocks, then
  ``cache_blocks`` of the blocks it fills: ``vllm/v1/core/kv_cache_manager.py:607-616``);
  decoding requests' new blocks are counted (``owed``) and taken from the free queue's
  head in one take before the next pool operation that could tell the difference, then
  handed to their requests when a request's table is next read (``free_settled`` at its
  finish, ``settle`` at its preemption; see ``take_pending``);
* frees in batch order (vLLM frees a step's finished requests in that order, and the free
  queue's order decides evictions, ``vllm/v1/core/block_pool.py:774-803``).

Decode blocks never hold shareable content (they lie past the prompt, or in a prompt's
partial last block), so a decoding request never publishes, except in the step that
computes its last prompt token, which fills the prompt's last block when the prompt is a
whole number of blocks: ``first_due`` requests publish when scheduled, as
``note_computed`` does in sim/sched/vllm.py. ``used`` stays the pool's blocks in use
(shared ones once): the fast core's decode-run arithmetic holds unchanged.

**Counting until a block can be found.** While no request has a shareable block (no
shared prefix in the workload) and none has been preempted, no block ever gets a key: no
lookup can hit, nothing is evicted, and the pool's blocks are interchangeable (the pool
never looks at a block's id, only at keys and queue order). Until then the pool is kept
as BlockCount keeps paged KV (``used``), plus what the pool will need per request (its
table's blocks and scheduled tokens, as ``allocate`` would set them) and the lookups
counted at admission; the first preemption (or the end of the run) makes it concrete
(``_materialize``): each holder's table, the decode blocks not handed out yet, the rest
free, which is the pool's state up to a renaming of block ids.
"""

from __future__ import annotations

from array import array

from sim.fast.sched import FastScheduler
from sim.fast.state import cdiv
from sim.kv.prefix_cache import PrefixCachingKV


class CachingScheduler(FastScheduler):
    def __init__(self, *args, kv: PrefixCachingKV):
        super().__init__(*args)
        self.kv = kv
        self.seq = array("q", bytes(8 * len(self.prompt)))  # admission order (batch order)
        self._admitted = 0
        # decode blocks due but not taken yet (blocks): taken at the next pool operation that
        # could tell (a lookup, an admission, a free); a take by another request before them
        # only changes which block ids each gets
        self.owed = 0
        # counting (see the module doc): no request shares a block and none was preempted
        self.counting = not any(kv.keys.counts) and not kv.pool.tables
        if self.counting:
            n = len(self.prompt)
            # int32: a request's tokens stay under 2^25 (traces.limits.MAX_TOKENS twice)
            self._held = array("i", bytes(4 * n))  # allocate's table length per request
            self._upto = array("i", bytes(4 * n))  # allocate's / note_one's tokens

    def _materialize(self, *also: int) -> None:
        """Leave counting: hand the pool each holder's table (the running requests, the
        finished ones whose frees wait, ``also``) and the decode blocks taken since,
        pending, as the per-request takes would have left it."""
        self.counting = False
        kv, held, upto = self.kv, self._held, self._upto
        tabled = 0
        zombies = self.zombies  # finished, still running for a schedule: in deferred
        for r in (*[r for r in self.running if r not in zombies], *self.deferred, *also):
            if held[r]:
                kv.pool.take(r, held[r])
                kv.held[r], tabled = held[r], tabled + held[r]
            kv.upto[r] = upto[r]
        kv.take_pending(self.used - tabled)
        self._held = self._upto = None

    def _sync(self) -> None:
        self.used = self.num_blocks - self.kv.num_free + self.owed

    def _flush(self) -> None:
        if self.owed:
            self.kv.take_pending(self.owed)
            self.owed = 0

    # ---- the running pass ----------------------------------------------------------------
    def _grow_running(self, blocks, dec_blocks, entries, due=None):
        if self.counting:
            self.used += blocks
            held, upto, bs = self._held, self._upto, self.bs
            for r, t, c in entries:
                held[r] = cdiv(c + t, bs)  # a chunk only grows the table
                upto[r] = c + t
            for r in (self.first_due if due is None else due):
                upto[r] = max(int(upto[r]), self.ctx(r) + 1)
            return
        kv = self.kv
        self.owed += dec_blocks
        due = self.first_due if due is None else due
        if due:  # publish in running order: it decides which of two equal
            seq = self.seq  # blocks the cache keeps (the other waits in dups)
            grown = [(seq[r], r, c + t, False) for r, t, c in entries]
            due = [(seq[r], r, self.ctx(r) + 1, True) for r in due]
            for _, r, upto, decoding in sorted(grown + due):
                if decoding:
                    kv.note_one(r, upto)
                else:
                    kv.allocate(r, upto)
        else:
            for r, t, c in entries:  # ``pre`` is in running order
                kv.allocate(r, c + t)
        self.used += blocks  # each allocate took exactly its request's share

    def _grow_one(self, r, nb, upto):
        self.used += nb
        if self.counting:
            if not self.dec[r]:
                self._held[r] = cdiv(upto, self.bs)
                self._upto[r] = upto
            elif r in self.first_due and upto > self._upto[r]:
                self._upto[r] = upto
            return
        kv = self.kv
        if self.dec[r]:
            self.owed += nb
            if r in self.first_due:
                kv.note_one(r, upto)
        else:
            kv.allocate(r, upto)

    def grow_run(self, n):
        if not self.counting:
            self.owed += n
        self.used += n

    # ---- frees -----------------------------------------------------------------------
    def _settle(self, r: int, computed: int) -> None:
        kv = self.kv
        kv.settle(r, cdiv(computed, self.bs) - int(kv.held[r]))

    def _release(self, r, computed, preempted=False, cached=None):
        if self.counting:
            self._materialize(r)  # a preempted request's blocks get keys: they can be found
        self._flush()
        self._settle(r, computed)
        if preempted:
            self.kv.preempt(r, computed, cached)
        else:
            self.kv.free(r)
        self._sync()

    def release_finished(self, reqs):
        if self.counting:
            comp, bs = self.comp, self.bs
            self.used -= sum([cdiv(comp[r], bs) for r in reqs])
            return
        if len(reqs) > 1:
            reqs = self._free_order(reqs)
        self._flush()
        comp, bs, free = self.comp, self.bs, self.kv.free_settled
        for r in reqs:
            free(r, cdiv(comp[r], bs))
        self._sync()

    def _free_order(self, reqs: list[int]) -> list[int]:
        """A step's finished requests in batch order (running order: admission order)."""
        return sorted(reqs, key=self.seq.__getitem__)

    # ---- admission -------------------------------------------------------------------
    def _hit(self, r, known):
        if self.counting:
            return 0  # nothing it could find (PrefixCachingKV.lookup_prefix)
        self._flush()  # the pending takes may evict what the lookup would find
        return self.kv.lookup_prefix(r, known)

    def _admit_blocks(self, r, upto, whole):
        if self.counting:
            return self._admit_counted(r, upto, whole)
        kv = self.kv
        self._flush()
        # the gate of scheduler_reserve_full_isl; allocate's own check when the chunk is all
        if whole > upto and self.lim.scheduler_reserve_full_isl and not kv.fits(
                r, whole, admitting=True):
            return False
        if not kv.allocate(r, upto, admitting=True):
            return False
        self._sync()
        self._admitted += 1
        self.seq[r] = self._admitted
        return True

    def _admit_counted(self, r, upto, whole):
        """``_admit_blocks`` while counting: PrefixCachingKV's checks and counts of a
        lookup without hits, on ``used``."""
        bs, free, reserve = self.bs, self.num_blocks - self.used, self.reserve
        if whole > upto and self.lim.scheduler_reserve_full_isl and max(
                cdiv(whole, bs), 0) + reserve > free:
            return False
        nb = cdiv(upto, bs)
        if max(nb, 0) + reserve > free:
            return False
        kv = self.kv
        kv.stats["queries"] += self.known[r]  # its lookup, counted at admission
        kv.looked_up[r] = 1
        self.used += nb
        self._held[r], self._upto[r] = nb, upto
        self._admitted += 1
        self.seq[r] = self._admitted
        return True

    # ---- observation ---------------------------------------------------------------------
    def shared_slots(self):
        return 0 if self.counting else self.kv.shared_slots

    def check(self):
        """Every running request's table holds its blocks; the pool's own checks."""
        if not self._admitted:  # nothing ever reached this pool (an idle fleet replica)
            assert self.used == 0 and not self.running and self.kv.pool.version == 0
            return
        if self.counting:
            self._materialize()
        self._flush()
        for r in self.running:
            self._settle(r, self.ctx(r))
        assert not self.kv.num_pending, "fast core: decode blocks nobody holds"
        for r in self.running:
            assert int(self.kv.held[r]) == cdiv(self.ctx(r), self.bs), f"request {r}'s table"
        self.kv.check_integrity()
        assert self.used == self.num_blocks - self.kv.num_free
        assert self.n_dec + len(self.pre) == len(self.running)
