"""Sliding-window layers (gpt-oss: 18 of 36 attend to the last 128 tokens) are priced from
aiconfigurator's measured windowed attention kernel (the profile's window_context /
window_generation curves, calibrate/aiconfigurator_curves.py convert_window), not as
window-long chunks of full attention (sim/cost/fitted.py _sliding)."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import sim.cost.fitted as fitted
from sim.cost.profile.model_file import load_model_file, shipped_profiles
from sim.runner import build_cost
from tests.fast.equivalence import prepared

GPT_OSS_TP8 = ("model=gpt-oss-120b", "gpu=h200-sxm", "tensor_parallel_size=8",
               "cost.name=fitted")
KEY = "128|bfloat16|8|1|64"  # window | KV dtype | heads, KV heads per GPU (64/8, 8/8) | dim


def cost(*sets):
    return build_cost(prepared(None, *GPT_OSS_TP8, *sets)[0])


def node_ms(table, key: str, batch: int, length: int) -> float:
    """The stored time (ms) of one measured node of a batch x length curve."""
    b, n = table.axes[0].nodes.index(batch), table.axes[1].nodes.index(length)
    return float(table.ms()[table.index()[key]][b, n])


def test_a_sliding_layer_costs_the_measured_windowed_kernel():
    mf = load_model_file(shipped_profiles()["h200-sxm/vllm"])
    c = cost()
    assert c.swa is not None and c.slide_layers == 18 and c.window == 128
    # aiconfigurator's FA3 at 8 heads / 1 KV head of 64, window 128, one 8,192-token prompt:
    # 0.031 ms (the full-attention kernel takes 0.170 ms for the same prompt)
    c8k = node_ms(mf.window_context, KEY, 1, 8192)
    assert c8k == pytest.approx(0.031, abs=0.001)
    assert c._sliding([8192], [0], 0) == pytest.approx(c8k * 1e-3, rel=1e-9)
    assert c._sliding([8192], [0], 0) < c._prefill([8192], [0]) / 4
    # a chunk of 4,096 after 4,096 cached adds the query rows the longer prefill has
    c4k = node_ms(mf.window_context, KEY, 1, 4096)
    assert c._sliding([4096], [4096], 0) == pytest.approx(
        max(c8k - c4k, c4k) * 1e-3, rel=1e-9)
    # requests of one step add; 4 decodes read their last 128 tokens (KV length 129)
    both = c._sliding([8192, 4096], [0, 0], 0)
    assert both == pytest.approx((c8k + c4k) * 1e-3, rel=1e-9)
    g = c.swa.gen.seconds(4, 129)
    assert c._sliding([], [], 4) == pytest.approx(g, rel=1e-12)
    assert node_ms(mf.window_generation, KEY, 4, 128) * 1e-3 <= g \
        <= node_ms(mf.window_generation, KEY, 4, 256) * 1e-3


def test_an_fp8_kv_cache_takes_the_fp8_windowed_curve():
    mf = load_model_file(shipped_profiles()["h200-sxm/vllm"])
    bf16, fp8 = (node_ms(mf.window_context, k, 1, 8192) for k in (KEY, "128|fp8|8|1|64"))
    assert bf16 != fp8
    assert cost("model.kv_dtype_bytes=1")._sliding([8192], [0], 0) == pytest.approx(
        fp8 * 1e-3, rel=1e-9)


def test_a_window_the_profile_did_not_time_is_said_and_priced_as_chunks(monkeypatch):
    monkeypatch.setattr(fitted, "window_key", lambda *a: "4096|bfloat16|8|1|64")
    with pytest.warns(UserWarning, match=r"no measured sliding-window attention for window "
                      r"128, 8 heads / 1 KV heads of 64 per GPU; its 18 sliding layers"):
        c = cost()
    assert c.swa is None
    # the stand-in: q / W chunks of W over a W prefix, each a full-attention launch
    assert c._sliding([1024], [0], 0) == pytest.approx(
        8 * c._prefill((128,), (128,)), rel=1e-12)


def test_the_import_keeps_the_measured_windowed_times():
    pytest.importorskip("aiconfigurator_core")
    from calibrate.aiconfigurator import newest_table, package_root, window_of

    root, _ = package_root()
    path = newest_table(root, "h200_sxm", "attention", "vllm", "context_attention_perf")
    t = pd.read_parquet(path)
    t = t[(t.window_size == 128) & (t.attn_dtype == "bfloat16") & (t.num_heads == 8)
          & (t.num_key_value_heads == 1) & (t.head_dim == 64) & (t.kv_cache_dtype == "bfloat16")
          & (t.batch_size == 2) & (t.isl == 2048)]
    ctx = window_of("h200_sxm", "context")
    assert ctx.fields == ["window", "kv_dtype", "heads", "kv_heads", "head_dim"]
    assert set(ctx.kernels) == {"vllm_flash_attn_fa3"}
    assert node_ms(ctx, KEY, 2, 2048) == pytest.approx(float(t.latency.median()), rel=1e-4)
    assert {k.split("|")[0] for k in ctx.curves} == {"128", "1024", "8192"}
    gen = window_of("h200_sxm", "generation")
    assert gen.axes[1].name == "kv_len" and gen.axes[1].nodes[:3] == [2, 4, 8]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.isfinite(node_ms(gen, KEY, 4, 8192))
