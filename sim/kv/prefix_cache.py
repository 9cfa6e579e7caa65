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
  private to a request are published only when it is recompute-preempted: no
  other request can hit them, and a finished request never looks them up again,
  so the result is the same as publishing them at once.

Hit accounting follows vLLM's ``PrefixCacheStats``, in tokens: ``queries`` (the
known tokens of each request at its lookup) and ``hits``; lookups of preempted
requests are counted apart. Unlike vLLM, a lookup is counted once per
admission, not once per step the request spends blocked at the queue head.
"""

from __future__ import annotations

import numpy as np

from sim.kv.base import KVUsage
from sim.kv.block_keys import BlockKeys
from sim.kv.caching_pool import CachingBlockPool
from sim.kv.paged import PagedKV


class PrefixCachingKV(PagedKV):
    description = "vLLM PagedAttention with automatic prefix caching (LRU, ref-counted blocks)"
    tracks_computed = True

    def __init__(self, **kw):
        super().__init__(**kw)
        self.pool = CachingBlockPool(self.num_blocks)
        self.keys = BlockKeys(self.specs, self.block_size, self.prompt_tokens)
        n = len(self.held)
        self.published = np.zeros(n, dtype=np.int64)  # leading shareable blocks published
        self.looked_up = np.zeros(n, dtype=bool)  # admitted before (a later lookup = preempted)
        self._stash = None  # (req, pool version, hit blocks, num_tokens) of the last lookup
        self.stats = dict.fromkeys(("queries", "hits", "preempted_queries", "preempted_hits"), 0)

    # ---- lookup and allocation ---------------------------------------------------
    def lookup_prefix(self, req, num_tokens=None):
        n = int(self.prompt_tokens[req] if num_tokens is None else num_tokens)
        limit = (n - 1) // self.block_size  # whole blocks, at least one token left to compute
        get, hits = self.pool.cached.get, []
        shared = self.keys.shared(req)
        for key in shared[:limit]:
            b = get(key)
            if b is None:
                break
            hits.append(b)
        if len(hits) == min(len(shared), limit) and self.looked_up[req]:
            for key in self.keys.private(req, len(shared), limit):
                b = get(key)
                if b is None:
                    break
                hits.append(b)
        self._stash = (req, self.pool.version, hits, n)
        return len(hits) * self.block_size

    def block_refs(self, blocks):
        return self.pool.ref[np.asarray(blocks, dtype=np.int64)]

    def pending_hits(self, req):
        stash = self._stash
        current = stash is not None and stash[0] == req and stash[1] == self.pool.version
        return list(stash[2]) if current and not self.held[req] else []

    def allocate(self, req, total_tokens, admitting=False):
        stash, self._stash = self._stash, None
        # the lookup just made for this request (admission; static batching reserves with
        # admitting=False): its hits become the head of the table
        looked = stash is not None and stash[0] == req and not self.held[req]
        if looked:
            assert stash[1] == self.pool.version, "the pool changed between lookup and allocate"
        hits = stash[2] if looked else []
        need = -(-int(total_tokens) // self.block_size)
        new = need - int(self.held[req]) - len(hits)
        evictable = int((self.pool.ref[hits] == 0).sum()) if hits else 0
        if new + evictable + (self.admission_reserve if admitting else 0) > self.pool.num_free:
            return False
        if looked:
            self._count_lookup(req, stash[3], len(hits))
        if hits:
            self.pool.touch(req, hits)
            self.published[req] = min(len(hits), int(self.keys.n_shared[req]))
        if new > 0:
            self.pool.take(req, new)
        self.held[req] = max(need, int(self.held[req]))
        self._publish(req, int(total_tokens))
        return True

    def _count_lookup(self, req: int, num_tokens: int, num_hit_blocks: int) -> None:
        pre = "preempted_" if self.looked_up[req] else ""
        self.stats[pre + "queries"] += num_tokens
        self.stats[pre + "hits"] += num_hit_blocks * self.block_size
        self.looked_up[req] = True

    # ---- publishing computed blocks ------------------------------------------------
    def note_computed(self, req_ids, upto):
        full = np.minimum(np.asarray(upto) // self.block_size, self.keys.n_shared[req_ids])
        for i in np.flatnonzero(full > self.published[req_ids]).tolist():
            self._publish(int(req_ids[i]), int(upto[i]))

    def _publish(self, req: int, upto: int) -> None:
        """Publish ``req``'s shareable blocks that tokens ``[0, upto)`` fill."""
        start = int(self.published[req])
        stop = min(upto // self.block_size, int(self.keys.n_shared[req]))
        if stop <= start:
            return
        self.pool.register(self.pool.tables[req][start:stop], self.keys.shared(req)[start:stop])
        self.published[req] = stop

    # ---- freeing ---------------------------------------------------------------------
    def preempt(self, req, computed_tokens):
        table = self.pool.tables.get(req, [])
        self._publish(req, computed_tokens)
        done = computed_tokens // self.block_size
        # published for a step that never ran (a victim already scheduled in this step)
        for b in table[done: int(self.published[req])]:
            if self.pool.key[b]:
                self.pool.drop(b)
        start = int(self.keys.n_shared[req])
        own = [(b, key) for b, key in zip(table[start:done], self.keys.private(req, start, done))
               if not self.pool.key[b]]  # blocks it hit at an earlier admission keep their key
        self.pool.register([b for b, _ in own], [key for _, key in own])
        self._release(req)

    def free(self, req):
        self._release(req)
        self.keys.forget(req)

    def _release(self, req: int) -> None:
        self.pool.release(req)
        self.held[req] = 0
        self.published[req] = 0

    # ---- observation -----------------------------------------------------------------
    @property
    def shared_slots(self):
        return (self.pool.refs_total - (self.num_blocks - self.pool.num_free)) * self.block_size

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
        if self.host is not None:
            self.host.check()
