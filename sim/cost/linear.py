"""The linear step-time model: a handful of coefficients, easy to reason about.

    step = base + prefill_token * prefill tokens + decode_seq * decode requests
                + context_token * context tokens read by decode requests

"Context tokens read" counts each decode-shaped request's tokens already in the
KV cache before the step (``context_lens``). Golden tests use this model because
every step time can be computed by hand.
"""

from __future__ import annotations

import numpy as np
from pydantic import ConfigDict, Field

from sim.cost.base import COST_MODELS, ShapeCost, decode_contexts
from traces.validated import Validated

_LONG = {"why": "longer than a simulated run can be (1e9 s)"}


class LinearParams(Validated):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    base_ms: float = Field(
        5.0, ge=0, le=1e12, json_schema_extra=_LONG, description="Fixed time of every step (ms)."
    )
    prefill_token_ms: float = Field(
        0.1, ge=0, le=1e12, json_schema_extra=_LONG,
        description="Time per prefill-shaped token computed (ms/token)."
    )
    decode_seq_ms: float = Field(
        0.05, ge=0, le=1e12, json_schema_extra=_LONG,
        description="Time per decode-shaped request in the step (ms/request)."
    )
    context_token_ms: float = Field(
        0.0, ge=0, le=1e12, json_schema_extra=_LONG,
        description="Time per context token a decode request reads (ms/token)."
    )


@COST_MODELS.register("linear")
class LinearCost(ShapeCost):
    description = "base + per-prefill-token + per-decode-seq + per-context-token (ms)"
    Params = LinearParams

    def shape_times(self, total, reqs, prefill_q, prefill_ctx, num_decode, decode_ctx0,
                    num_steps):
        p = self.params
        ctx = decode_contexts(decode_ctx0, num_decode, num_steps)
        ms = (p.base_ms + p.prefill_token_ms * float(np.sum(prefill_q, dtype=np.int64))
              + p.decode_seq_ms * num_decode + p.context_token_ms * ctx)
        return np.asarray(ms, dtype=np.float64) * 1e-3
