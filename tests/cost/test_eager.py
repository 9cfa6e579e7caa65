"""Steps vLLM runs without a CUDA graph: the host launches every block's kernels while the
GPU runs them, so such a step costs max(kernels, dense blocks x eager_per_layer_ms + MoE
blocks x eager_moe_per_layer_ms) + host cost.

Which steps: more tokens than vLLM's max_cudagraph_capture_size (default min(2 x
max_num_seqs, 512)), or all under --enforce-eager (sim/config/resolve.py
Resolved.cuda_graph_max_tokens)."""

from __future__ import annotations

import numpy as np
import pytest

from sim.cost.profile.model_file import load_model_file, shipped_profiles
from sim.engine.plan import StepPlan
from sim.runner import build_cost
from tests.fast.equivalence import prepared

# the default scenario: Llama-3-8B (32 blocks) on H100, the shipped profile's host cost
# per step at tp 1 (0.3055 + 0.0188 x 32 = 0.9071 ms) and Hopper's 0.4 ms per dense block for
# eager launches (Blackwell's profiles: 0.8)
EAGER_S = 32 * 0.4e-3
HOST_S = load_model_file(shipped_profiles()["h100-sxm/vllm"]).host_overhead.ms(32, 1) * 1e-3


def step(tokens, ctx):
    return StepPlan.build(np.arange(len(tokens)), tokens, ctx)


def cost(*sets):
    r, _ = prepared(None, *sets)
    return r, build_cost(r)


def test_capture_size_follows_vllm():
    assert cost()[0].cuda_graph_max_tokens == 512  # max_num_seqs 1024: min(2048, 512)
    assert cost("engine.max_num_seqs=64")[0].cuda_graph_max_tokens == 128
    assert cost("engine.max_cudagraph_capture_size=96")[0].cuda_graph_max_tokens == 96
    assert cost("engine.enforce_eager=true")[0].cuda_graph_max_tokens == 0


def test_a_small_eager_step_is_launch_bound():
    # one decoding request: its kernels (6.3 ms: the weights read once) take less than the
    # 12.8 ms of launches
    plan = step([1], [100])
    graphed = cost()[1].step_times(plan)[0]
    eager = cost("engine.enforce_eager=true")[1].step_times(plan)[0]
    assert load_model_file(shipped_profiles()["h100-sxm/vllm"]).host_overhead \
        .eager_per_layer_ms == 0.4
    assert graphed < 0.6 * EAGER_S
    assert eager == pytest.approx(EAGER_S + HOST_S, abs=1e-12)


def test_steps_above_the_capture_size_only():
    _, c = cost("engine.max_cudagraph_capture_size=96")
    _, off = cost("engine.max_cudagraph_capture_size=96", "cost={name: fitted, "
                  "eager_per_layer_ms: 0}")
    at, over = step([96], [0]), step([97], [0])
    assert c.step_times(at)[0] == off.step_times(at)[0]  # 96 tokens: from a graph
    assert c.step_times(over)[0] == pytest.approx(EAGER_S + HOST_S, abs=1e-12)
    assert off.step_times(over)[0] < 0.6 * EAGER_S  # 7.1 ms of kernels


def test_a_gpu_bound_eager_step_keeps_its_kernel_time():
    # an 8,192-token prefill on one H100: tens of ms of kernels, more than the launches
    _, c = cost()
    _, off = cost("cost={name: fitted, eager_per_layer_ms: 0}")
    big = step([8192], [0])
    assert off.step_times(big)[0] > 2 * EAGER_S
    assert c.step_times(big)[0] == off.step_times(big)[0]


def test_eager_decode_runs_price_like_their_steps():
    # a decode run of more requests than the graphs hold (the fast core's run pricing)
    _, c = cost("engine.max_cudagraph_capture_size=8")
    n, k = 20, 30
    ctx = np.arange(n) * 50
    want = c.step_times(StepPlan.build(np.arange(n), np.ones(n, np.int64), ctx, num_steps=k))
    assert c.run_times(n, int(ctx.sum()), k) == want.tolist()
    assert min(want) >= EAGER_S + HOST_S - 1e-12


def test_async_scheduling_overlaps_the_host_with_the_kernels():
    # engine.async_scheduling: the host's schedule time of a step runs while the GPU runs
    # the one before, so a graph step costs max(kernels, host), not kernels + host
    _, sync = cost("engine.async_scheduling=false")
    _, asy = cost("engine.async_scheduling=true")
    for tokens, ctx in (([1] * 8, [500] * 8), ([256], [0])):
        plan = step(np.array(tokens), np.array(ctx))
        s, a = sync.step_times(plan)[0], asy.step_times(plan)[0]
        assert a == pytest.approx(s - HOST_S, rel=1e-9)  # kernels >> host: the host hides
        # the fast core's scalar path agrees with the vectorised one
        dec = np.array(tokens) == 1
        one = asy.shape_time1(sum(tokens), len(tokens), list(np.array(tokens)[~dec]),
                              list(np.array(ctx)[~dec]), int(dec.sum()),
                              int(np.array(ctx)[dec].sum()))
        assert one == pytest.approx(a, rel=1e-12)
    # an eager step under async: max(kernels, launches + host)
    big = step(np.array([2048]), np.array([0]))
    e_sync, e_async = sync.step_times(big)[0], asy.step_times(big)[0]
    kernels = e_sync - HOST_S
    assert e_async == pytest.approx(max(kernels, EAGER_S + HOST_S), rel=1e-9)


def test_a_moe_block_launches_at_its_own_figure():
    # a fused-MoE block's launches (router, top-k, alignment, quantization, two grouped
    # GEMMs, reduction) are priced per block apart from a dense block's: Kimi-K2.5's first
    # block is dense (Hopper's 0.4 ms), its other 60 route (the profile's 1.2 ms); an eager
    # step of one decoding request is launch-bound, so it costs the launches plus the host
    host = load_model_file(shipped_profiles()["h200-sxm/vllm"]).host_overhead
    assert (host.eager_per_layer_ms, host.eager_moe_per_layer_ms) == (0.4, 1.2)
    kimi = ("model=kimi-k2.5", "gpu=h200-sxm", "tensor_parallel_size=8",
            "engine.enforce_eager=true")
    plan = step([1], [100])
    for sets, launches_ms in (((), 1 * 0.4 + 60 * 1.2),
                              (("cost={name: fitted, eager_moe_per_layer_ms: 0.5}",),
                               1 * 0.4 + 60 * 0.5),
                              (("cost={name: fitted, eager_per_layer_ms: 2.0}",),
                               1 * 2.0 + 60 * 1.2)):
        _, c = cost(*kimi, *sets)
        _, graphed = cost(*kimi[:3], *sets)
        assert graphed.step_times(plan)[0] < 0.5 * launches_ms * 1e-3
        assert c.step_times(plan)[0] == pytest.approx(
            (launches_ms + host.ms(61, 8)) * 1e-3, abs=1e-12)
