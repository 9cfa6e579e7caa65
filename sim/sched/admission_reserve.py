"""``reserve`` admission: estimate a request's KV need up front (the seed's advice).

A waiting request is admitted only when the blocks for its prompt plus its
*expected* output fit in the free KV left after every running request's
expected remaining need:

    blocks(prompt + E(req)) + sum over running r of max(0, blocks(prompt_r + E(r)) - held_r)
        + watermark  <=  free blocks

E is the expected total output: ``expect: max_tokens`` uses the request's own
``max_tokens`` (our traces' output lengths: exact, so running requests never run
out of blocks and never preempt); ``expect: quantile`` uses the recorded length
mix (the seed's step 1): the ``quantile`` of the run's output lengths among those
longer than what the request has already generated (nearest rank, rounded up),
so a request that outlives the estimate gets a larger one. Requests beyond their
estimate can still preempt others, far less often than with ``optimistic``.

A refusal persists through a decode run: free blocks only shrink by allocations
that also shrink a running request's expected remaining need (or that it had
already outgrown), and E never decreases as a request generates.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import ConfigDict, Field

from sim.sched.admission import ADMISSION_RULES, Admission
from traces.validated import Validated


class ReserveParams(Validated):
    model_config = ConfigDict(extra="forbid", frozen=True)

    expect: Literal["quantile", "max_tokens"] = Field(
        "quantile", description="Expected output per request: a quantile of the recorded "
        "output lengths, or the request's own max_tokens (tokens).",
    )
    quantile: float = Field(
        0.9, gt=0, le=1, description="expect: quantile: which quantile of the recorded output "
        "lengths (fraction; among those longer than what was generated so far).",
    )


@ADMISSION_RULES.register("reserve")
class Reserve(Admission):
    description = ("admit only when prompt + expected output (a quantile of the recorded "
                   "lengths or max_tokens) fits beside what running requests still need")
    Params = ReserveParams
    persistent = True

    def __init__(self, specs, limits, kv, params=None):
        super().__init__(specs, limits, kv, params)
        self.lengths = np.sort(specs.output_tokens)  # the recorded output length mix (tokens)

    def expected_output(self, req_ids: np.ndarray, generated: np.ndarray) -> np.ndarray:
        """Expected total output tokens of each request, given what it generated (tokens)."""
        if self.params.expect == "max_tokens":
            return self.specs.output_tokens[req_ids]
        n = len(self.lengths)
        lo = np.searchsorted(self.lengths, generated, side="right")  # lengths > generated
        idx = lo + np.ceil(self.params.quantile * (n - 1 - lo)).astype(np.int64)
        guess = self.lengths[np.minimum(idx, n - 1)]
        return np.where(lo < n, np.maximum(guess, generated + 1), generated + 1)

    def expected_total(self, req_ids: np.ndarray, generated: np.ndarray) -> np.ndarray:
        """Tokens each request is expected to hold at its end: prompt + expected output,
        at most max_model_len."""
        return np.minimum(self.specs.prompt_tokens[req_ids]
                          + self.expected_output(req_ids, generated), self.limits.max_model_len)

    def fits(self, need: int, free: int) -> bool:
        """Whether ``need`` expected blocks (the request's and the running ones') fit in
        ``free`` blocks beside the watermark."""
        return need + self.kv.admission_reserve <= free

    def _need(self, req_ids: np.ndarray, generated: np.ndarray) -> np.ndarray:
        """Blocks each request still expects to take (>= 0)."""
        return self.kv.extra_blocks(req_ids, self.expected_total(req_ids, generated))

    def allows(self, req, generated):
        run = self.sched.running
        if self.sched._zombies:  # finished in the step in flight: they need nothing more
            run = run[~np.isin(run, list(self.sched._zombies))]
        ahead = int(self._need(run, self.sched.generated[run]).sum()) if len(run) else 0
        own = int(self._need(np.array([req]), np.array([generated]))[0])
        return self.fits(own + ahead, self.kv.num_free)
