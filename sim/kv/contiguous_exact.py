"""``contiguous-exact``: every request reserves prompt + max output slots (Orca-Oracle)."""

from __future__ import annotations

from sim.kv.base import KV_POLICIES
from sim.kv.reservation import ReservationKV


@KV_POLICIES.register("contiguous-exact")
class ContiguousExactKV(ReservationKV):
    description = ("pre-paging: reserve prompt + max output slots per request at admission; "
                   "never grows, never preempts")

    def __init__(self, **kw):
        super().__init__(**kw)
        # output_tokens is the request's max_tokens (generation always runs to it)
        self.reserve = -(-(self.prompt_tokens + self.output_tokens) // self.block_size)
