"""``contiguous-max``: each request reserves ``max_model_len`` slots (Orca-Max, FT-style)."""

from __future__ import annotations

import numpy as np

from sim.kv.base import KV_POLICIES
from sim.kv.reservation import ReservationKV


@KV_POLICIES.register("contiguous-max")
class ContiguousMaxKV(ReservationKV):
    description = ("pre-paging: reserve max_model_len slots per request at admission; "
                   "never grows, never preempts")

    def __init__(self, **kw):
        super().__init__(**kw)
        per_request = -(-self.max_model_len // self.block_size)  # cdiv(max_model_len, bs)
        self.reserve = np.full(len(self.held), per_request, dtype=np.int64)
