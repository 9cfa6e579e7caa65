"""Reservation KV (pre-paging servers): a request's slots are reserved whole, up front.

FasterTransformer- and Orca-era servers gave each admitted request one contiguous
KV buffer sized before generation started. We keep the block pool (so the pool,
tables and integrity check are shared with paging) but a request's *first*
allocation takes its whole reservation; decode never grows the table, so these
policies never preempt for decode growth, and ``decode_run_new_blocks`` is all
zeros. The summary's ``kv_cache.mean_wasted_slot_fraction`` then measures the
reserved-but-unused slots (internal fragmentation). External fragmentation (a
contiguous buffer needs one free *run* of slots) is not modelled: any free
blocks can form a reservation, which flatters these policies slightly.
"""

from __future__ import annotations

import numpy as np

from sim.kv.paged import PagedKV


class ReservationKV(PagedKV):
    """Subclasses set ``self.reserve``: blocks each request reserves (int64 per request)."""

    reserves_up_front = True
    reserve: np.ndarray

    def blocks_for(self, req_ids, total_tokens):
        return np.where(np.asarray(total_tokens) > 0, self.reserve[req_ids], 0)

    def decode_run_new_blocks(self, req_ids, context_lens, num_steps):
        return np.zeros(num_steps, dtype=np.int64)  # tables never grow after the first take
