"""MiniMax-M2's q/k RMSNorm spans all heads (vLLM 0.32's MiniMaxText01RMSNormTP): under
tensor parallelism each block all-reduces every token's q and k variances (two fp32) on
top of its two activation all-reduces, and the norm weights are one scale per q and k
element (ModelSpec.qk_norm_layerwise; sim/cost/fitted.py, sim/cost/roofline.py)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from pydantic import ValidationError

from sim.catalog import get_model
from sim.config.hardware import ModelSpec
from sim.cost.elementwise import QK_VARIANCE_BYTES
from sim.cost.roofline import RooflineCost
from sim.engine.plan import StepPlan
from sim.runner import build_cost
from tests.fast.equivalence import prepared


def decode(n: int) -> StepPlan:
    return StepPlan.build(np.arange(n), [1] * n, [1000] * n)


def per_head(m: ModelSpec) -> ModelSpec:
    return m.model_copy(update={"qk_norm_layerwise": False})


def test_minimax_norms_across_heads_and_qwen3_per_head():
    mm, q3 = get_model("minimax-m2.5"), get_model("qwen3-32b")
    assert mm.qk_norm and mm.qk_norm_layerwise
    assert q3.qk_norm and not q3.qk_norm_layerwise


def test_layerwise_norm_weights_are_one_per_q_and_k_element():
    mm = get_model("minimax-m2.5")
    # 62 layers; q 48 heads x 128, k 8 x 128: 7,168 scales a layer, not 2 x 128
    assert mm.num_params - per_head(mm).num_params == 62 * (6144 + 1024 - 256)


def test_layerwise_needs_qk_norm():
    spec = get_model("minimax-m2.5").model_dump(exclude={"dtype_bytes"})
    spec.update(qk_norm=False, qk_norm_layerwise=True)
    with pytest.raises(ValidationError, match="qk_norm_layerwise needs qk_norm"):
        ModelSpec(**spec)


@pytest.mark.parametrize("gpu, tp", [("b300", 1), ("b200", 4)])  # TP 1 fits a B300 only
def test_fitted_step_adds_one_variance_allreduce_per_block_under_tp(gpu, tp):
    r = prepared(None, "model=minimax-m2.5", f"gpu={gpu}", f"tensor_parallel_size={tp}",
                 "engine.max_model_len=8192")[0]
    layerwise = build_cost(r)
    plain = build_cost(dataclasses.replace(r, model=per_head(r.model)))
    gap = layerwise.step_times(decode(4))[0] - plain.step_times(decode(4))[0]
    if tp == 1:
        assert gap == 0.0
        return
    t = np.array([4.0])
    one = float(layerwise._allreduce_bytes(t * QK_VARIANCE_BYTES)[0])
    assert gap == pytest.approx(62 * one, rel=1e-9)
    # aiconfigurator's B200 vllm_graph all-reduce at its smallest messages, 4 GPUs:
    # 6.7-7.1 us, so 62 blocks add about 0.43 ms to a 4-request decode step
    assert 6.0e-6 < one < 8.0e-6


def test_roofline_adds_the_same_allreduce():
    r = prepared(None, "model=minimax-m2.5", "gpu=b200", "tensor_parallel_size=4")[0]
    layerwise = RooflineCost(r.model, r.gpu, 4)
    plain = RooflineCost(per_head(r.model), r.gpu, 4)
    gap = layerwise.step_times(decode(4))[0] - plain.step_times(decode(4))[0]
    assert gap == pytest.approx(62 * layerwise._allreduce_bytes(4 * QK_VARIANCE_BYTES))
    assert gap > 62 * r.gpu.allreduce_latency_s
