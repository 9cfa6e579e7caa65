"""Cost-model seam: a step plan in, step durations out.

A cost model sees only the plan (and the static model/GPU description). For a
multi-step decode run it returns one duration per step: step ``j`` reads
``context_lens + j`` tokens of context per request.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

import numpy as np
from pydantic import BaseModel, ConfigDict

from sim.config.hardware import GpuSpec, ModelSpec
from sim.engine.plan import StepPlan
from sim.registry import Registry
from traces.validated import Validated

_EMPTY = np.zeros(0, dtype=np.int64)


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
        tok, ctx, k = plan.num_tokens, plan.context_lens, plan.num_steps
        total = int(tok.sum())
        if total == len(tok):  # every request decode-shaped: the hot path
            n_dec, ctx0, pq, pc = len(tok), int(ctx.sum()), _EMPTY, _EMPTY
        else:
            dec = tok == 1
            n_dec, ctx0 = int(dec.sum()), int(ctx[dec].sum())
            pq, pc = tok[~dec], ctx[~dec]
        return StepShape(k, total, len(tok), pq, pc, n_dec, decode_contexts(ctx0, n_dec, k))


def decode_contexts(ctx0: int, num_decode: int, num_steps: int) -> np.ndarray:
    """Sum of the decode requests' contexts before each step of a run (tokens): each of
    the ``num_decode`` requests adds one token per step."""
    if num_steps == 1:
        return np.array([ctx0])
    return ctx0 + num_decode * np.arange(num_steps, dtype=np.int64)


@dataclass(frozen=True)
class RunExtras:
    """What an executor adds to a run's results: a summary section and parquet tables."""

    section: str  # summary.json key, e.g. "live"
    summary: dict
    tables: dict = field(default_factory=dict)  # file name -> pandas DataFrame


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

    #: ``step_times(plan)`` is ``shape_times`` of the plan's shape plus swap time, so the
    #: fast core (sim/fast) may price steps from their aggregates without building plans
    prices_shapes = False

    def shape_times(self, total: int, reqs: int, prefill_q: np.ndarray,
                    prefill_ctx: np.ndarray, num_decode: int, decode_ctx0: int,
                    num_steps: int) -> np.ndarray:
        """Durations (s) of ``num_steps`` steps of this shape (see StepShape; step j's decode
        context sum is ``decode_ctx0 + num_decode * j``), without swap time. Only for
        models with ``prices_shapes``."""
        raise NotImplementedError(f"{type(self).__name__} prices plans, not shapes")

    def run_times(self, n: int, decode_ctx0: int, num_steps: int) -> list[float]:
        """``shape_times`` of a decode run of ``n`` requests (seconds per step, floats)."""
        return self.shape_times(n, n, _EMPTY, _EMPTY, n, decode_ctx0, num_steps).tolist()

    def run_ns(self, n: int, decode_ctx0: int, num_steps: int) -> list[int]:
        """``run_times`` rounded to the nanosecond as the engine rounds them (to_ns)."""
        return [round(min(x, 4.611686018427388e9) * 1_000_000_000)
                for x in self.run_times(n, decode_ctx0, num_steps)]

    def shape_time1(self, total: int, reqs: int, prefill_q, prefill_ctx, num_decode: int,
                    decode_ctx0: int) -> float:
        """``shape_times`` of one step, as a float (models override with a scalar path)."""
        return float(self.shape_times(total, reqs, prefill_q, prefill_ctx, num_decode,
                                      decode_ctx0, 1)[0])

    def verify_run_times(self, plan: StepPlan) -> np.ndarray | None:
        """The step times (s) of a speculative verify run (``plan.step_contexts``), each
        step's as ``step_times`` of that step alone, all at once; None: the caller prices
        the steps one by one (sim/cost/drafter.py)."""
        return None

    def host_times(self, total: np.ndarray, reqs: np.ndarray) -> np.ndarray | None:
        """The host (CPU) part of each step's price (s): scheduling, input preparation and
        the per-step launch, for steps of ``total`` tokens and ``reqs`` requests; None
        when the model does not separate it (the summary's ``schedule`` block)."""
        return None

    def fitted_delays_s(self) -> tuple[float, float] | None:
        """(ingress, egress) seconds fitted with this model (engine.ingress_ms/egress_ms
        default to them), or None when the model carries none."""
        return None

    def fitted_ingress_per_token_s(self) -> float:
        """Seconds of API-server work per prompt token before the engine sees a request
        (engine.ingress_per_token_us defaults to it); 0 when the model carries none."""
        return 0.0

    def observe(self, plan: StepPlan) -> None:
        """Called with every plan the engine committed (a priced decode run may be cut
        short before it commits). Default: nothing."""
        return None

    def run_warnings(self) -> list[str]:
        """Things to say once at the end of a run (e.g. steps outside the fitted ranges)."""
        return []

    def forget(self) -> None:
        """Drop the prices memoised during a run (pure caches: the model prices the same
        afterwards), e.g. before a long run's summary. Default: the ``*memo*`` and
        ``_one_prefill`` dicts of the model and of its parts."""
        for obj in (self, *vars(self).values()):
            for name, v in getattr(obj, "__dict__", {}).items():
                if isinstance(v, dict) and ("memo" in name or name == "_one_prefill"):
                    v.clear()

    # ---- run hooks: no-ops for models that only price plans; the live executor uses them
    def start_run(self, kv, engine) -> None:  # noqa: B027
        """Called once before a run's first step with its KV manager and engine (the live
        executor reads block tables, the engine's clock and its decode-run limit)."""

    def after_plan(self, plan: StepPlan, starts, durations, outcome) -> None:  # noqa: B027
        """Called after the scheduler committed ``plan`` (cut to the steps that ran)."""

    def end_run(self) -> RunExtras | None:
        """What the run adds to its results (summary section, tables); None for pricing."""
        return None

    def swap_time(self, plan: StepPlan) -> float:
        """Seconds to move swapped KV over the host link before the step."""
        return self.swap_seconds(plan.swap_in_bytes + plan.swap_out_bytes)

    def swap_seconds(self, moved: int) -> float:
        """Seconds to move ``moved`` bytes of KV over the host link."""
        return moved / self.gpu.host_bandwidth if moved else 0.0


class ShapeCost(CostModel):
    """A cost model whose step times depend on the step's shape alone (StepShape): it
    implements ``shape_times``; plans are priced through it, swap time added."""

    prices_shapes = True

    def step_times(self, plan: StepPlan) -> np.ndarray:
        s = StepShape.of(plan)
        out = self.shape_times(s.total_tokens, s.num_reqs, s.prefill_q, s.prefill_ctx,
                               s.num_decode, int(s.decode_ctx[0]), s.num_steps)
        out[0] += self.swap_time(plan)
        return out

    @abstractmethod
    def shape_times(self, total, reqs, prefill_q, prefill_ctx, num_decode, decode_ctx0,
                    num_steps) -> np.ndarray:
        """See CostModel.shape_times."""


class NoParams(Validated):
    model_config = ConfigDict(extra="forbid", frozen=True)


COST_MODELS: Registry[type[CostModel]] = Registry("cost model")
