"""vLLM runs a MoE block's shared experts on a second CUDA stream beside the router and the
routed experts for steps of up to 256 tokens (VLLM_SHARED_EXPERTS_STREAM_TOKEN_THRESHOLD;
vllm/model_executor/layers/fused_moe/runner/shared_experts.py): the fitted cost takes the
longer of the two there and their sum above (sim/cost/fitted.py _moe_block)."""

from __future__ import annotations

import numpy as np
import pytest

import sim.cost.fitted as fitted
from sim.engine.plan import StepPlan
from sim.runner import build_cost
from tests.fast.equivalence import prepared

DSV3 = ("model=deepseek-v3", "gpu=h200-sxm", "tensor_parallel_size=8",
        "engine.max_model_len=8192")


@pytest.fixture(scope="module")
def cost():
    return build_cost(prepared(None, *DSV3)[0])


def parts(c, n: int) -> tuple[float, float, set[str]]:
    side = {g for g in c.gemms if g == "router" or g.startswith("shared_")}
    t = np.array([float(n)])
    routed = float(c.moe.seconds(t)[0] + c._gemm("router", t)[0])
    shared = sum(float(c._gemm(g, t)[0]) for g in side if g != "router")
    return routed, shared, side


@pytest.mark.parametrize("n, overlapped", [(4, True), (256, True), (257, False), (512, False)])
def test_a_moe_block_takes_the_longer_stream_up_to_256_tokens(cost, n, overlapped):
    routed, shared, side = parts(cost, n)
    assert side == {"router", "shared_shared_gate_up", "shared_shared_down"}
    assert 0 < shared < routed  # DeepSeek-V3's one shared expert is the shorter stream
    block = float(cost._moe_block(np.array([float(n)]))[0])
    assert block == pytest.approx(routed if overlapped else routed + shared, rel=1e-12)


def test_a_decode_step_saves_the_shared_experts_of_every_moe_block(monkeypatch):
    plan = StepPlan.build(np.arange(4), [1] * 4, [1000] * 4)
    r = prepared(None, *DSV3)[0]
    overlapped = build_cost(r).step_times(plan)[0]  # (the layer table fills lazily)
    monkeypatch.setattr(fitted, "SHARED_STREAM_TOKENS", 0)  # every step serial
    serial = build_cost(r)
    _, shared, _ = parts(serial, 4)
    gap = serial.step_times(plan)[0] - overlapped
    # 58 MoE blocks (61 layers, the first 3 dense), about 16 us of shared expert each
    assert serial.plan.moe_layers == 58
    assert gap == pytest.approx(58 * shared, rel=1e-9)
    assert 0.5e-3 < gap < 1.5e-3
