"""Paged KV with automatic prefix caching (vLLM v1, ``engine.enable_prefix_caching``).

Selected by the runner for ``kv: {name: paged}`` when the engine knob is on; the
pool is :class:`~sim.kv.caching_pool.CachingBlockPool` and block keys come from
:mod:`sim.kv.block_keys`. As vLLM's ``KVCacheManager``:

* ``lookup_prefix`` (``get_computed_blocks``): the longest run of leading blocks
  whose keys are cached, capped at ``num_tokens - 1`` tokens (vLLM recomputes
  at least the last token to get its logits), so whole blocks only.
* ``allocate(admitting=True)`` (``allocate_slots``): the hit blocks count against
  the free blocks only when they sit in the free queue (evictable); they are
  taken first, then new blocks are popped from the queue head (evicting).
* Blocks are published (made findable) when a step's scheduled tokens fill them
  (``note_computed``, called by the scheduler as vLLM's ``cache_blocks``). Blocks
  private to a request (its generated tokens, its prompt past its chain or from the
  first hash id no other chain carries: sim/kv/block_keys.py) are published only
  when it is recompute-preempted: no
  other request can hit them, and a finished request never looks them up again,
  so the result is the same as publishing them at once. When a request's blocks
  are freed, its full blocks (hashed in vLLM, published or not here) join the
  tail of the free queue and a partly filled one its head (see the pool).

Hit accounting follows vLLM's ``PrefixCacheStats``, in tokens: ``queries`` (the
known tokens of each request at its lookup) and ``hits``; lookups of preempted
requests are counted apart (``vllm/v1/core/kv_cache_manager.py:253-262``: num_tokens,
the hit, ``num_preemptions > 0``). As vLLM 0.32, a lookup is counted once per
admission, when the allocation succeeds, not in the steps the request spends blocked at
the queue head ("Record at admission so unscheduled lookups are not counted",
``vllm/v1/core/sched/scheduler.py:1314-1318``). An eviction is a popped block that
still had a key (``_maybe_evict_cached_block`` returning True, ``block_pool.py:686-689,
729-750``); vLLM keys every full block, so its count also has the private blocks' evictions,
which say nothing about what other requests lose.
"""

from __future__ import annotations

import numpy as np

from sim.kv.base import KVUsage
from sim.kv.block_keys import BlockKeys
from sim.kv.caching_pool import PENDING, CachingBlockPool
from sim.kv.paged import PagedKV


class PrefixCachingKV(PagedKV):
    description = "vLLM PagedAttention with automatic prefix caching (LRU, ref-counted blocks)"
    tracks_computed = True
    # speculative decoding with an EAGLE-family drafter: a hit drops its last block
    # (vLLM single_type_kv_cache_manager.py:815-820, "Eagle needs the tokens right before
    # the generation point recomputed")
    drop_last_hit = False

    pool_class = CachingBlockPool

    def __init__(self, **kw):
        super().__init__(**kw)
        self.keys = BlockKeys(self.specs, self.block_size, self.prompt_tokens)
        n = len(self.held)
        self.published = np.zeros(n, dtype=np.int64)  # leading shareable blocks published
        self.looked_up = bytearray(n)  # 1: admitted before (a later lookup = preempted)
        # 1: recompute-preempted once. Until then a request's keyed blocks are exactly the
        # first ``published`` of its table (hits and published shareable blocks lead it;
        # blocks taken from the queue have no key), so freeing it reads no keys
        self.preempted = bytearray(n)
        self.upto = np.zeros(n, dtype=np.int64)  # tokens [0, upto) scheduled so far (tokens)
        self._stash = None  # (req, pool version, hit blocks, num_tokens) of the last lookup
        # full blocks of a finished request (its last token has no KV)
        self._filled = ((self.prompt_tokens + self.output_tokens - 1) // self.block_size).tolist()
        self._n_shared = self.keys.counts  # for one request at a time
        self.stats = dict.fromkeys(("queries", "hits", "preempted_queries", "preempted_hits"), 0)

    # ---- lookup and allocation ---------------------------------------------------
    def lookup_prefix(self, req, num_tokens=None):
        n = int(self.prompt_tokens[req] if num_tokens is None else num_tokens)
        if not self._n_shared[req] and not self.looked_up[req]:  # nothing it could find
            self._stash = (req, self.pool.version, [], n)
            return 0
        limit = (n - 1) // self.block_size  # whole blocks, at least one token left to compute
        get = self.pool.cached.get
        shared = self.keys.shared(req)
        hits = list(map(get, shared[:limit]))  # every get at C speed (no side effects) ...
        if None in hits:
            del hits[hits.index(None):]  # ... then the leading cached run
        if len(hits) == min(len(shared), limit) and self.looked_up[req]:
            for key in self.keys.private(req, len(shared), limit):
                b = get(key)
                if b is None:
                    break
                hits.append(b)
        if hits and self.drop_last_hit:  # EAGLE: the drafter recomputes the last block
            hits.pop()
        self._stash = (req, self.pool.version, hits, n)
        return len(hits) * self.block_size

    def block_refs(self, blocks):
        return np.array(self.pool.refs(np.asarray(blocks, dtype=np.int64).tolist()),
                        dtype=np.int64)

    def pending_hits(self, req):
        stash = self._stash
        current = stash is not None and stash[0] == req and stash[1] == self.pool.version
        return list(stash[2]) if current and not self.held[req] else []

    def _lookup(self, req: int):
        """The lookup just made for ``req``: (hit blocks, tokens looked up), or None."""
        stash = self._stash
        if stash is None or stash[0] != req or self.held[req]:
            return None
        assert stash[1] == self.pool.version, "the pool changed between lookup and allocate"
        return stash[2], stash[3]

    def _blocks(self, req: int, total_tokens: int, hits) -> tuple[int, int, int]:
        """(blocks ``total_tokens`` slots need, blocks held, new blocks after ``hits``)."""
        need, held = -(-int(total_tokens) // self.block_size), int(self.held[req])
        return need, held, need - held - len(hits)

    def _lacks(self, new: int, hits, admitting: bool) -> bool:
        """Too few free blocks for ``new`` blocks (if > 0) and ``hits`` (vLLM's
        ``get_num_blocks_to_allocate``: new blocks plus hit blocks that are evictable, i.e.
        sit in the free queue, ``single_type_kv_cache_manager.py:175``)."""
        evictable = list(map(self.pool.ref.__getitem__, hits)).count(0) if hits else 0
        reserve = self.admission_reserve if admitting else 0
        return (new if new > 0 else 0) + evictable + reserve > self.pool.num_free

    def fits(self, req, total_tokens, admitting=False):
        looked = self._lookup(req)
        hits = looked[0] if looked else ()
        return not self._lacks(self._blocks(req, total_tokens, hits)[2], hits, admitting)

    def allocate(self, req, total_tokens, admitting=False, cached=None):
        # the lookup just made for this request (admission; static batching reserves with
        # admitting=False): its hits become the head of the table
        looked = self._lookup(req)
        self._stash = None
        hits = looked[0] if looked else ()
        need, held, new = self._blocks(req, total_tokens, hits)
        if self._lacks(new, hits, admitting):
            return False
        if looked:
            self._count_lookup(req, looked[1], len(hits))
        if hits:
            self.pool.touch(req, hits)
            self.published[req] = min(len(hits), self._n_shared[req])
        if new > 0:
            self.pool.take(req, new)
        if need > held:
            self.held[req] = need
        upto = int(total_tokens) if cached is None else int(cached)  # final tokens: no drafts
        if upto > self.upto[req]:
            self.upto[req] = upto
        if self._n_shared[req]:
            self._publish(req, upto)
        return True

    def _count_lookup(self, req: int, num_tokens: int, num_hit_blocks: int) -> None:
        pre = "preempted_" if self.looked_up[req] else ""
        self.stats[pre + "queries"] += num_tokens
        self.stats[pre + "hits"] += num_hit_blocks * self.block_size
        self.looked_up[req] = 1

    # ---- decode growth whose owners are named later (the fast core) -----------------
    def take_pending(self, n: int) -> None:
        """Take ``n`` blocks from the free queue's head (evicting, as a take does) for decode
        steps whose requests are named later (:meth:`settle`). A block just taken is like
        any other just taken (reference count 1, no key, out of the queue), so which request
        gets which one changes only block ids: hits, evictions, the queue order of keys and
        every count equal those of per-request takes made at the same moment."""
        if n > 0:
            self.pool.take(PENDING, n)

    def settle(self, req: int, n: int) -> None:
        """Append ``n`` pending blocks to ``req``'s table (its decode steps took them)."""
        if n > 0:
            self.pool.move(PENDING, req, n)
            self.held[req] += n

    @property
    def num_pending(self) -> int:
        return len(self.pool.tables.get(PENDING, ()))

    # ---- publishing computed blocks ------------------------------------------------
    def note_one(self, req: int, upto: int) -> None:
        """``note_computed`` for one request, in Python ints."""
        if upto > self.upto[req]:
            self.upto[req] = upto
        if min(upto // self.block_size, self._n_shared[req]) > self.published[req]:
            self._publish(req, upto)

    def note_computed(self, req_ids, upto):
        self.upto[req_ids] = np.maximum(self.upto[req_ids], upto)
        full = np.minimum(np.asarray(upto) // self.block_size, self.keys.n_shared[req_ids])
        for i in np.flatnonzero(full > self.published[req_ids]).tolist():
            self._publish(int(req_ids[i]), int(upto[i]))

    def _publish(self, req: int, upto: int) -> None:
        """Publish ``req``'s shareable blocks that tokens ``[0, upto)`` fill."""
        start = int(self.published[req])
        stop = min(upto // self.block_size, self._n_shared[req])
        if stop <= start:
            return
        self.pool.register(self.pool.tables[req][start:stop], self.keys.shared(req)[start:stop])
        self.published[req] = stop

    # ---- freeing ---------------------------------------------------------------------
    def preempt(self, req, computed_tokens, cached=None):
        """Publish ``req``'s full blocks under their keys, then free them. vLLM hashes a block
        as soon as a step is scheduled to fill it (``cache_blocks`` in ``allocate_slots``,
        ``vllm/v1/core/kv_cache_manager.py:607-616``), so a victim already scheduled in this
        step keeps the keys of the blocks that step would have filled. ``cached``: at most
        the blocks its first that many tokens fill are hashed (async scheduling: the
        scheduler's ``_cached_upto``); the rest are freed as unhashed ones."""
        self.preempted[req] = 1  # its own blocks get keys; hits on them may follow
        table = self.pool.tables.get(req, [])
        upto = max(int(computed_tokens), int(self.upto[req]))
        if cached is not None:
            upto = min(upto, cached)
        self._publish(req, upto)
        done = upto // self.block_size
        start = self._n_shared[req]
        own = [(b, key) for b, key in zip(table[start:done], self.keys.private(req, start, done))
               if not self.pool.key[b]]  # blocks it hit at an earlier admission keep their key
        self.pool.register([b for b, _ in own], [key for _, key in own])
        self._release(req, done)

    def free(self, req):
        self.free_settled(req, int(self.held[req]))

    def free_settled(self, req: int, blocks: int) -> None:
        """Free ``req`` (finished, or swapped out: ``KVManager.swap_out``), which holds
        ``blocks`` blocks: those its table lacks are the last pending ones (the fast core's
        decode takes, :meth:`take_pending`), which join it first. A finished request's full
        blocks hold reusable content (vLLM hashed them), though only the request itself could
        match its private ones, so they stay unregistered."""
        self._release(req, self._filled[req], blocks - len(self.pool.tables.get(req, ())))
        self.keys.forget(req)

    def _release(self, req: int, hashed: int, pending: int = 0) -> None:
        """Return ``req``'s blocks (its first ``hashed`` hold reusable content; ``pending``
        more taken for it, see ``CachingBlockPool.release``) and forget its progress."""
        lead = None if self.preempted[req] else int(self.published[req])
        self.pool.release(req, hashed, pending, lead)
        self.held[req] = 0
        self.published[req] = 0
        self.upto[req] = 0

    # ---- observation -----------------------------------------------------------------
    @property
    def shared_slots(self):
        return (self.pool.refs_total - (self.num_blocks - self.pool.num_free)) * self.block_size

    def used_fraction(self) -> float:
        # usage()'s used / total without counting the cached free blocks (O(free queue))
        return (self.num_blocks - self.pool.num_free) / max(self.num_blocks, 1)

    def usage(self):
        free = self.pool.num_free
        return KVUsage(used=self.num_blocks - free, free=free,
                       cached=self.pool.num_cached_free(), total=self.num_blocks)

    def counters(self):
        s = self.stats
        return {**super().counters(), "prefix_caching": True,
                **{f"prefix_{k}": v for k, v in s.items()},
                "prefix_evictions": self.pool.evictions}

    def check_integrity(self):
        self.pool.check(int(self.held.sum()))
        key = self.pool.key
        for req, table in self.pool.tables.items():  # what ``_release`` tells the pool
            if req != PENDING and not self.preempted[req]:
                lead = int(self.published[req])
                assert all(key[b] for b in table[:lead]) and not any(
                    key[b] for b in table[lead:]), "keyed blocks != the first published"
        if self.host is not None:
            self.host.check()
