"""Paged KV (vLLM's PagedAttention): a request holds just enough blocks for its tokens."""

from __future__ import annotations

import numpy as np
from pydantic import ConfigDict, Field

from sim.kv.base import KV_POLICIES, KVManager, KVUsage
from sim.kv.block_pool import BlockPool
from traces.validated import Validated


class PagedParams(Validated):
    model_config = ConfigDict(extra="forbid", frozen=True)

    watermark: float = Field(
        0.0, ge=0, lt=1,
        description="Fraction of blocks kept free when admitting new requests (vLLM v0 used "
        "0.01; v1 uses 0). Running requests may still use them.",
    )


@KV_POLICIES.register("paged")
class PagedKV(KVManager):
    """Blocks on demand: ceil(tokens / block_size) per request."""

    description = ("vLLM PagedAttention: blocks allocated on demand, ceil(tokens/block_size); "
                   "engine.enable_prefix_caching adds vLLM's LRU prefix cache")
    Params = PagedParams

    pool_class = BlockPool  # the physical pool (prefix caching: its LRU pool)

    def __init__(self, **kw):
        super().__init__(**kw)
        self.pool = self.pool_class(self.num_blocks)
        watermark = getattr(self.params, "watermark", 0.0)
        self.admission_reserve = int(watermark * self.num_blocks)
        self._ceil_blocks = type(self).blocks_for is PagedKV.blocks_for

    def fits(self, req, total_tokens, admitting=False):
        if not self._ceil_blocks:
            return super().fits(req, total_tokens, admitting)
        need = -(-int(total_tokens) // self.block_size) - int(self.held[req])
        return need <= 0 or need + (self.admission_reserve if admitting else 0) <= self.num_free

    def blocks_for(self, req_ids, total_tokens):
        return -(-np.asarray(total_tokens) // self.block_size)

    def decode_run_new_blocks(self, req_ids, context_lens, num_steps):
        # Request i needs a new block at every step j where it writes the first slot
        # of a block it does not hold yet: j = held*bs - ctx + m*bs, m = 0, 1, ...
        bs = self.block_size
        first = self.held[req_ids] * bs - context_lens  # >= 0 for a consistent table
        first = np.maximum(first, 0)
        reps = num_steps // bs + 1
        steps = (first[:, None] + bs * np.arange(reps)[None, :]).ravel()
        steps = steps[steps < num_steps]
        return np.bincount(steps, minlength=num_steps).astype(np.int64)

    @property
    def num_free(self) -> int:
        return self.pool.num_free

    def allocate(self, req, total_tokens, admitting=False, cached=None):
        if self._ceil_blocks:  # blocks_for in Python ints (no numpy call for one request)
            need = -(-int(total_tokens) // self.block_size) - int(self.held[req])
        else:
            need = int(self.blocks_for(req, total_tokens)) - int(self.held[req])
        if need <= 0:
            return True
        if need + (self.admission_reserve if admitting else 0) > self.pool.num_free:
            return False
        self.pool.take(req, need)
        self.held[req] += need
        return True

    def grow(self, req_ids, extra):
        nz = np.flatnonzero(extra)
        if not len(nz):
            return
        reqs, counts = req_ids[nz], extra[nz]
        if type(self.pool) is BlockPool:
            self.pool.take_many(reqs.tolist(), counts.tolist())
        else:  # the prefix-caching pool takes (and may evict) block by block
            for req, n in zip(reqs.tolist(), counts.tolist()):
                self.pool.take(req, n)
        self.held[reqs] += counts

    def free(self, req):
        self.pool.release(req)
        self.held[req] = 0

    def free_many(self, reqs):
        if type(self).free is not PagedKV.free:  # a subclass frees its own way
            return super().free_many(reqs)
        release = self.pool.release
        for req in reqs:
            release(req)
        self.held[reqs] = 0

    def usage(self):
        used = int(self.held.sum())
        return KVUsage(used=used, free=self.pool.num_free, cached=0, total=self.num_blocks)

    def block_table(self, req):
        return self.pool.table(req)

    def next_free_blocks(self, n):
        return self.pool.peek(n)

    def check_integrity(self):
        self.pool.check(int(self.held.sum()))
        if self.host is not None:
            self.host.check()
