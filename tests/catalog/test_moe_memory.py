"""MoE, MLA and sliding-window memory arithmetic against hand computations."""

from __future__ import annotations

import pytest
import yaml
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from sim.catalog import MODELS
from sim.config.memory import GIB
from sim.config.model_spec import ModelSpec
from tests.capacity.helpers import cli

Q3 = MODELS["qwen3-30b-a3b"]  # 48 layers, h 2048, 32/4 heads of 128, 128 experts of 768


def _qwen3_30b_parts():
    """Qwen3-30B-A3B by hand (elements), from its config.json."""
    h, layers, q, kv = 2048, 48, 32 * 128, 4 * 128
    attn = h * (q + 2 * kv) + q * h  # q, k, v, o projections
    small = layers * (2 * 128 + 2 * h) + 2 * 151936 * h + h  # q/k norms, 2 RMSNorms; embed,
    experts = 128 * 3 * h * 768  # LM head, final norm          # per layer
    router = h * 128
    return layers, attn, small, experts, router


def test_qwen3_30b_weights_per_gpu_tp4_by_hand():
    layers, attn, small, experts, router = _qwen3_30b_parts()
    sharded = (layers * attn + small) * 2 // 4  # bf16, TP-sharded
    want = sharded + layers * router * 2 + layers * experts * 2 // 4  # router replicated
    assert want == 15_284_935_680
    assert Q3.weight_bytes_per_gpu(4) == want


def test_qwen3_30b_weights_per_gpu_ep8_by_hand():
    """tp 2 x dp 4 = EP 8: attention halves, each GPU holds 128 / 8 = 16 whole experts."""
    layers, attn, small, experts, router = _qwen3_30b_parts()
    want = (layers * attn + small) * 2 // 2 + layers * router * 2 + layers * experts * 2 // 8
    assert want == 8_801_433_600
    assert Q3.weight_bytes_per_gpu(2, ep=8) == want


def test_qwen3_30b_dp_without_ep_shards_experts_over_the_dp_group():
    """tp 2 x dp 4 without --enable-expert-parallel: attention halves, the experts are
    sharded eight ways (vLLM's MoE layers form one TP group of TP x DP ranks)."""
    layers, attn, small, experts, router = _qwen3_30b_parts()
    want = (layers * attn + small) * 2 // 2 + layers * router * 2 + layers * experts * 2 // 8
    assert Q3.weight_bytes_per_gpu(2, moe_tp=8) == want == Q3.weight_bytes_per_gpu(2, ep=8)


def test_qwen3_235b_two_dp_ranks_fit_an_h200_where_one_gpu_does_not():
    """The gap-analysis rows run Qwen3-235B-A22B-FP8 at tp 1 with MoE TP 2 (two DP ranks)."""
    from sim.config.load import _read_yaml, default_scenario_path, validate
    from sim.config.resolve import ConfigError, resolve

    spec = {**MODELS["qwen3-235b-a22b"].model_dump(exclude={"dtype_bytes"}),
            "dtype_bits": 8, "quantization": "fp8", "weight_block_size": 128}
    base = {**_read_yaml(default_scenario_path()), "model": spec, "gpu": "h200-sxm",
            "tensor_parallel_size": 1}
    with pytest.raises(ConfigError, match="does not fit"):
        resolve(validate(base, "t.yaml"))
    r = resolve(validate({**base, "data_parallel_size": 2}, "t.yaml"))
    assert 100 * GIB < r.memory.weight_bytes < 120 * GIB and r.memory.num_gpu_blocks > 0


def test_mixtral_tp4_and_ep8_by_hand():
    m = MODELS["mixtral-8x7b"]  # 32 layers, 8 experts of 14336, no shared, h 4096
    h, layers = 4096, 32
    attn = h * (4096 + 2 * 1024) + 4096 * h
    small = layers * 2 * h + 2 * 32000 * h + h
    expert = 3 * h * 14336
    tp4 = (layers * attn + small) * 2 // 4 + layers * h * 8 * 2 + layers * 8 * expert * 2 // 4
    assert m.weight_bytes_per_gpu(4) == tp4
    # EP 8 over tp 8: one whole expert per GPU
    ep8 = (layers * attn + small) * 2 // 8 + layers * h * 8 * 2 + layers * 1 * expert * 2
    assert m.weight_bytes_per_gpu(8, ep=8) == ep8


def test_kv_per_token_mla_vs_gqa():
    ds = MODELS["deepseek-v3"]
    for tp in (1, 8, 16):  # the latent is not split over TP
        assert ds.kv_bytes_per_token(tp) == 61 * (512 + 64) * 2 == 70272
    fp8 = ds.model_copy(update={"kv_dtype_bytes": 1})
    assert fp8.kv_bytes_per_token(8) == 61 * 576 * 1
    l70 = MODELS["llama-3.1-70b"]  # GQA: 8 KV heads split over TP
    assert l70.kv_bytes_per_token(1) == 80 * 2 * 8 * 128 * 2 == 327680
    assert l70.kv_bytes_per_token(8) == 327680 // 8
    assert Q3.kv_bytes_per_token(8) == 48 * 2 * 1 * 128 * 2  # 4 heads replicated at TP 8


def test_dense_defaults_leave_dense_models_unchanged():
    m = MODELS["llama-3-8b"]
    assert (m.is_moe, m.is_mla, m.num_moe_layers, m.num_dense_layers) == (False, False, 0, 32)
    assert m.active_params == m.num_params == 8_030_261_248
    assert m.weight_bytes_per_gpu(2, ep=8) == m.weight_bytes_per_gpu(2)
    assert m.attn_gemms(2) == [("qkv", 2048 + 2 * 512, 4096), ("o", 4096, 2048)]
    assert m.dense_mlp_gemms(2) == [("gate_up", 14336, 4096), ("down", 4096, 7168)]
    assert m.shared_expert_gemms(2) == [] and m.dtype_bytes == 2 and m.weight_elem_bytes == 2.0


def test_mla_gemms_of_deepseek_v3():
    ds = MODELS["deepseek-v3"]
    assert ds.attn_gemms(8) == [("qkv_a", 1536 + 512 + 64, 7168), ("q_b", 16 * 192, 1536),
                                ("kv_b", 16 * 256, 512), ("o", 7168, 16 * 128)]
    assert ds.shared_expert_gemms(8) == [("shared_gate_up", 512, 7168),
                                         ("shared_down", 7168, 256)]


def test_legacy_dtype_bytes_and_4bit():
    m = ModelSpec(name="x", num_layers=2, hidden_size=64, num_attention_heads=4,
                  num_kv_heads=2, head_dim=16, intermediate_size=128, vocab_size=100,
                  max_position_embeddings=64, dtype_bytes=1)
    assert (m.dtype_bits, m.dtype_bytes, m.act_bytes) == (8, 1, 2)
    four = m.model_copy(update={"dtype_bits": 4})
    assert (four.dtype_bytes, four.weight_elem_bytes, four.act_bytes) == (1, 0.5, 2)
    assert four.weight_bytes_per_gpu(1) < m.weight_bytes_per_gpu(1)
    assert m.model_copy(update={"dtype_bytes": 2}).dtype_bits == 16
    # a dumped spec with dtype_bytes set on it (older callers): the legacy key wins
    dumped = {**m.model_dump(), "dtype_bits": 16, "dtype_bytes": 1}
    assert ModelSpec.model_validate(dumped).dtype_bits == 8


@settings(max_examples=60, deadline=None)
@given(experts=st.sampled_from([8, 16, 32, 64, 128]), k=st.integers(1, 8),
       inter=st.integers(1, 64).map(lambda x: 64 * x), tp=st.sampled_from([1, 2, 4, 8]),
       dp=st.sampled_from([1, 2]), bits=st.sampled_from([4, 8, 16]))
def test_ep_splits_the_same_expert_bytes_as_tp(experts, k, inter, tp, dp, bits):
    """With experts divisible by EP, EP ranks hold as many expert bytes as TP ranks would
    hold at TP = EP; weights summed over the GPUs never fall short of the model."""
    m = ModelSpec(name="m", num_layers=4, hidden_size=512, num_attention_heads=8,
                  num_kv_heads=8, head_dim=64, intermediate_size=1024, vocab_size=1000,
                  max_position_embeddings=4096, num_experts=experts,
                  num_experts_per_tok=min(k, experts), moe_intermediate_size=inter,
                  first_dense_layers=1, moe_dtype_bits=bits)
    ep = tp * dp
    assume(experts % ep == 0)  # else a rank holds ceil(experts / ep) experts (tested above)
    expert_bytes = m.num_moe_layers * experts * 3 * 512 * inter * bits // 8
    rest_ep = m.weight_bytes_per_gpu(tp, ep=ep) - expert_bytes // ep
    rest_tp = m.weight_bytes_per_gpu(tp) - expert_bytes // tp
    assert abs(rest_ep - rest_tp) <= 1
    assert tp * m.weight_bytes_per_gpu(tp) >= m.weight_bytes_per_gpu(1)
    assert m.active_params <= m.num_params


def test_scenario_show_prints_the_moe_memory_plan_per_gpu(capsys):
    sets = ("model=qwen3-30b-a3b", "tensor_parallel_size=2", "data_parallel_size=4",
            "enable_expert_parallel=true")
    assert cli("scenario", "show", *(x for s in sets for x in ("--set", s))) == 0
    d = yaml.safe_load(capsys.readouterr().out)["derived"]
    assert d["weights_gib_per_gpu"] == round(8_801_433_600 / GIB, 3)  # the EP8 hand figure
    assert (d["expert_parallel_size"], d["experts_per_gpu"], d["gpus_per_server"]) == (8, 16, 8)
    assert d["kv_bytes_per_token_per_gpu"] == 48 * 2 * 2 * 128 * 2  # 4 KV heads over TP 2
    assert d["kv_block_bytes"] == 16 * d["kv_bytes_per_token_per_gpu"]
    assert d["num_gpu_blocks"] > 0 and d["model_active_params_b"] == 3.353


def _spec(**kw):
    base = dict(name="x", num_layers=4, hidden_size=64, num_attention_heads=4, num_kv_heads=2,
                head_dim=16, intermediate_size=128, vocab_size=100, max_position_embeddings=64)
    return ModelSpec(**{**base, **kw})


@pytest.mark.parametrize("kw, why", [
    (dict(num_experts_per_tok=2), "num_experts_per_tok needs num_experts > 0"),
    (dict(num_experts=8, num_experts_per_tok=9, moe_intermediate_size=32), "1 .. num_experts"),
    (dict(num_experts=8, num_experts_per_tok=2), "moe_intermediate_size must be > 0"),
    (dict(num_experts=8, num_experts_per_tok=2, moe_intermediate_size=8,
          first_dense_layers=4), "first_dense_layers"),
    (dict(kv_lora_rank=32, qk_rope_head_dim=8), "qk_nope_head_dim must be > 0"),
    (dict(v_head_dim=8), "need kv_lora_rank > 0"),
    (dict(sliding_window=16), "go together"),
    (dict(sliding_window=16, num_sliding_layers=5), "exceeds num_layers"),
    (dict(dtype_bytes=3), "dtype_bytes must be 1"),
    (dict(dtype_bits=6), "dtype_bits"),
    (dict(quantization="int3"), "quantization"),
])
def test_contradictory_fields_are_refused(kw, why):
    with pytest.raises(ValueError, match=why):
        _spec(**kw)
