"""Cost models: hand-checked linear prices, roofline limits, decode runs priced like steps."""

from __future__ import annotations

import numpy as np
import pytest

from sim.catalog import get_gpu, get_model
from sim.cost.linear import LinearCost, LinearParams
from sim.cost.roofline import RooflineCost, RooflineParams
from sim.engine.plan import StepPlan

LLAMA8, H100 = get_model("llama-3-8b"), get_gpu("h100-sxm")


def plan(tokens, ctx, steps=1, **kw):
    return StepPlan.build(np.arange(len(tokens)), tokens, ctx, num_steps=steps, **kw)


def test_linear_by_hand():
    c = LinearCost(None, None, 1, LinearParams(base_ms=5, prefill_token_ms=0.1, decode_seq_ms=0.5,
                                               context_token_ms=0.01))
    # prefill chunk of 100 (ctx 0) + 2 decodes with 40 and 60 tokens of context:
    # 5 + 0.1*100 + 0.5*2 + 0.01*(40+60) = 17 ms
    assert c.step_times(plan([100, 1, 1], [0, 40, 60]))[0] == pytest.approx(17e-3)
    # a 3-step decode run: context grows by one per request per step
    run = c.step_times(plan([1, 1], [40, 60], steps=3))
    assert run == pytest.approx([6.0e-3 + 1.0e-3, 6.0e-3 + 1.02e-3, 6.0e-3 + 1.04e-3])


@pytest.mark.parametrize("name", ["linear", "roofline"])
def test_decode_run_equals_single_steps(name):
    c = (LinearCost(None, None, 1, LinearParams(context_token_ms=0.001)) if name == "linear"
         else RooflineCost(LLAMA8, H100, 1))
    ctx = np.array([100, 2000, 37])
    run = c.step_times(plan([1, 1, 1], ctx, steps=50))
    single = [c.step_times(plan([1, 1, 1], ctx + j))[0] for j in range(50)]
    np.testing.assert_allclose(run, single, rtol=1e-12)


def test_roofline_decode_is_bandwidth_bound():
    c = RooflineCost(LLAMA8, H100, 1, RooflineParams(step_overhead_ms=0))
    t = c.step_times(plan([1], [0]))[0]
    # one decode token streams every weight matrix once (the input embedding is only
    # gathered one row per token): time ~ weight bytes / achieved bandwidth
    weights = (LLAMA8.num_params - LLAMA8.vocab_size * LLAMA8.hidden_size) * 2
    bw = H100.mem_bandwidth * H100.mem_efficiency
    assert t == pytest.approx(weights / bw, rel=0.02)


def test_roofline_prefill_is_compute_bound():
    c = RooflineCost(LLAMA8, H100, 1, RooflineParams(step_overhead_ms=0))
    t = c.step_times(plan([8192], [0]))[0]
    flops = 2 * LLAMA8.num_params * 8192
    gemm_only = flops / (H100.bf16_flops * H100.gemm_efficiency)
    assert gemm_only * 0.95 < t < gemm_only * 1.5  # plus causal attention over 8k


def test_roofline_tensor_parallel_speeds_up_and_adds_allreduce():
    one = RooflineCost(LLAMA8, H100, 1).step_times(plan([2048], [0]))[0]
    two = RooflineCost(LLAMA8, H100, 2).step_times(plan([2048], [0]))[0]
    assert 0.5 * one < two < one


def test_roofline_context_costs_time():
    c = RooflineCost(LLAMA8, H100, 1)
    short = c.step_times(plan([1] * 64, [100] * 64))[0]
    long = c.step_times(plan([1] * 64, [8000] * 64))[0]
    kv_bytes = 64 * 7900 * LLAMA8.kv_bytes_per_token(1)
    extra = kv_bytes / (H100.mem_bandwidth * H100.mem_efficiency)
    assert long - short == pytest.approx(extra, rel=0.05)


def test_swap_time_is_charged_once():
    c = LinearCost(LLAMA8, H100, 1, LinearParams(base_ms=1, decode_seq_ms=0))
    p = plan([1], [10], steps=1, swap_in_bytes=int(H100.host_bandwidth))  # one second of PCIe
    assert c.step_times(p)[0] == pytest.approx(1.001)
