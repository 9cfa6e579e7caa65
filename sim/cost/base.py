"""Cost-model seam: a step plan in, step durations out.

A cost model sees only the plan (and the static model/GPU description). For a
multi-step decode run it returns one duration per step: step ``j`` reads
``context_lens + j`` tokens of context per request.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel, ConfigDict

from sim.config.hardware import GpuSpec, ModelSpec
from sim.engine.plan import StepPlan
from sim.registry import Registry


@dataclass(frozen=True)
class StepShape:
    """The quantities of a plan that step time depends on (tokens, per step)."""

    num_steps: int
    total_tokens: int  # tokens computed per step (GEMM rows)
    num_reqs: int  # requests per step (logits rows)
    prefill_q: np.ndarray  # query tokens of each prefill-shaped request
    prefill_ctx: np.ndarray  # tokens already cached for each prefill-shaped request
    num_decode: int  # decode-shaped requests per step
    decode_ctx: np.ndarray  # [num_steps] sum of decode requests' context before each step

    @staticmethod
    def of(plan: StepPlan) -> StepShape:
        dec = plan.decode_mask
        ctx0 = int(plan.context_lens[dec].sum())
        n_dec = int(dec.sum())
        steps = np.arange(plan.num_steps, dtype=np.int64)
        return StepShape(
            num_steps=plan.num_steps,
            total_tokens=plan.total_tokens,
            num_reqs=plan.batch_size,
            prefill_q=plan.num_tokens[~dec],
            prefill_ctx=plan.context_lens[~dec],
            num_decode=n_dec,
            decode_ctx=ctx0 + n_dec * steps,
        )


class CostModel(ABC):
    """Prices step plans. Subclasses declare ``Params`` and implement ``step_times``."""

    description = ""
    Params: type[BaseModel]

    def __init__(self, model: ModelSpec, gpu: GpuSpec, tp: int, params: BaseModel | None = None,
                 **_: object):
        self.model = model
        self.gpu = gpu
        self.tp = tp
        self.params = params if params is not None else self.Params()

    @abstractmethod
    def step_times(self, plan: StepPlan) -> np.ndarray:
        """Duration of each step of ``plan`` (seconds), an array of length num_steps."""

    def swap_time(self, plan: StepPlan) -> float:
        """Seconds to move swapped KV over the host link before the step."""
        moved = plan.swap_in_bytes + plan.swap_out_bytes
        return moved / self.gpu.host_bandwidth if moved else 0.0


class NoParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


COST_MODELS: Registry[type[CostModel]] = Registry("cost model")
