"""The roofline's MoE layers, MLA attention and sliding windows."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from sim.catalog import GPUS, MODELS
from sim.cost.moe_roofline import window_pairs
from sim.cost.roofline import RooflineCost
from tests.capacity.helpers import cli

H100 = GPUS["h100-sxm"]


def cost(key, tp=1, ep=1, **update):
    m = MODELS[key].model_copy(update=update) if update else MODELS[key]
    return RooflineCost(m, H100, tp, resolved=SimpleNamespace(ep=ep))


def decode(c, n, ctx=1000):
    return float(c.shape_times(n, n, [], [], n, n * ctx, 1)[0])


def test_window_pairs_by_hand():
    # window 2: a 4-token prompt's queries see 1, 2, 2, 2 keys
    assert window_pairs(np.array([4.0]), np.array([0.0]), 2)[0] == 7
    # a chunk of 3 after 10 cached tokens, window 4: 4 keys each
    assert window_pairs(np.array([3.0]), np.array([10.0]), 4)[0] == 12
    # a window wider than the sequence is full causal attention
    q, p = np.array([5.0]), np.array([7.0])
    assert window_pairs(q, p, 1 << 20)[0] == 5 * 7 + 5 * 6 / 2


def test_moe_reads_only_the_experts_a_step_touches():
    c = cost("qwen3-30b-a3b")
    one, sixteen, big = (c.moe._experts(t) for t in (1, 16, 64))
    # 1 token x top-8: 8 of 128 experts' weights; 16 tokens: all 128 (memory bound)
    per_expert = 3 * 2048 * 768 * 2 / c.bw
    assert one == pytest.approx(8 * per_expert, rel=0.01)
    assert sixteen == pytest.approx(128 * per_expert, rel=0.02)
    assert big < 1.2 * sixteen  # beyond: the weights are read once, activations grow


def test_moe_step_costs_less_than_its_dense_equivalent():
    """A 3B-active model decodes faster than a 30B dense one, slower than a 3B dense one."""
    moe = decode(cost("qwen3-30b-a3b"), 64)
    assert decode(cost("qwen3-32b"), 64) > moe > decode(cost("qwen2.5-0.5b"), 64)


def test_expert_parallel_splits_pairs_and_adds_all_to_all():
    tp8, ep8 = cost("deepseek-v3", tp=8), cost("deepseek-v3", tp=8, ep=8)
    assert ep8.moe.pairs(64) == 64 * 8 / 8 and tp8.moe.pairs(64) == 64 * 8
    assert ep8.moe._all_to_all(64) > 0 == tp8.moe._all_to_all(64)
    assert ep8.moe.local == 32 and ep8.moe.width == 2048 and tp8.moe.width == 256


def test_mla_decode_reads_the_latent():
    c = cost("deepseek-v3", tp=8)
    assert c.kv_token_layer == (512 + 64) * 2
    assert c.decode_dims == (576, 512) and c.prefill_dims == (192, 128)


def test_sliding_layers_cap_long_context_attention():
    full = cost("gpt-oss-120b", sliding_window=0, num_sliding_layers=0)
    slide = cost("gpt-oss-120b")
    ctx = 100_000
    assert decode(slide, 8, ctx) < decode(full, 8, ctx)
    short = 64  # inside the window both are the same
    assert decode(slide, 8, short) == pytest.approx(decode(full, 8, short), rel=1e-9)


def test_moe_scenario_runs_end_to_end_under_roofline(tmp_path):
    sc = tmp_path / "moe.yaml"
    sc.write_text("model: qwen3-30b-a3b\ngpu: h100-sxm\ncost: {name: roofline}\n"
                  "enable_expert_parallel: true\ntensor_parallel_size: 2\n"
                  "workload:\n  arrival: {process: poisson, rate: 4}\n"
                  "  lengths: {dist: fixed, prompt: 300, output: 20}\n  num_requests: 20\n")
    assert cli("run", sc, "--out", tmp_path / "out") == 0
    assert (tmp_path / "out" / "summary.json").is_file()
