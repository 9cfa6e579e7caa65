"""fitted: fp8 weights and fp8 KV from their own tables, the KV element size, elementwise
kernels, the host model, and the refusal to price a dtype a profile has no table for."""

from __future__ import annotations

import numpy as np
import pytest

from calibrate.aiconfigurator import mark_variants_over_bar
from sim.catalog import get_gpu, get_model
from sim.cost.elementwise import LAYER_KERNELS, SAMPLER_KERNELS, ElementwiseWork
from sim.cost.fitted import FittedCost, FittedParams
from sim.cost.profile.model_file import load_model_file, save_model_file, shipped_profiles
from sim.engine.plan import StepPlan
from traces.errors import InputError

L70, L8, H100 = get_model("llama-3.1-70b"), get_model("llama-3-8b"), get_gpu("h100-sxm")
FP8 = L70.model_copy(update={"dtype_bytes": 1})
FP8_KV = L70.model_copy(update={"dtype_bytes": 1, "kv_dtype_bytes": 1})


def plan(tokens, ctx):
    return StepPlan.build(np.arange(len(tokens)), tokens, ctx, num_steps=1)


def cost(model, gpu=H100, tp=2, **params):
    return FittedCost(model, gpu, tp, FittedParams(**params))


def test_kv_element_follows_the_activation_dtype():
    # vLLM --quantization fp8 keeps bf16 activations and (kv-cache-dtype auto) a bf16 cache
    assert FP8.act_bytes == 2 and FP8.kv_bytes == 2
    assert FP8.kv_bytes_per_token(2) == L70.kv_bytes_per_token(2) == 2 * 80 * 4 * 128 * 2
    assert FP8_KV.kv_bytes_per_token(2) == L70.kv_bytes_per_token(2) // 2
    # fp8 weights: the blocks' linear layers at 1 byte, embedding and LM head at 2
    linear = 80 * (8192 * (8192 + 2 * 1024) + 8192 * 8192 + 3 * 8192 * 28672)
    assert FP8.weight_bytes_per_gpu(1) == 1 * linear + 2 * (L70.num_params - linear)
    assert L70.weight_bytes_per_gpu(1) == 2 * L70.num_params


def test_fp8_weights_with_bf16_kv_read_two_bytes_per_kv_element():
    bf16, fp8 = cost(L70), cost(FP8)
    ctx = np.array([4 * 8000.0])
    assert fp8.kv_e == bf16.kv_e == 2
    assert fp8._decode(4, ctx)[0] == pytest.approx(bf16._decode(4, ctx)[0], rel=1e-12)
    # an fp8 cache is read from the fp8-KV table: less time at a long, KV-bound context
    assert cost(FP8_KV)._decode(64, np.array([64 * 8000.0]))[0] < \
        0.8 * bf16._decode(64, np.array([64 * 8000.0]))[0]


def test_fp8_weights_are_priced_from_the_fp8_gemm_table():
    bf16, fp8 = cost(L70), cost(FP8)
    rows = np.array([4.0, 4096.0])
    for name in ("qkv", "o", "gate_up", "down"):  # measured fp8 times: faster, not 2x
        assert np.all(fp8._gemm(name, rows) < 0.9 * bf16._gemm(name, rows)), name
        assert fp8.gemms[name][3] is not bf16.gemms[name][3]  # another table's ratios
    # the LM head is never quantized: the same bf16 table and bytes
    assert fp8._gemm("lm_head", rows) == pytest.approx(bf16._gemm("lm_head", rows))
    step_bf16 = bf16.step_times(plan([1] * 4, [1536] * 4))[0]
    step_fp8 = fp8.step_times(plan([1] * 4, [1536] * 4))[0]
    assert 0.5 * step_bf16 < step_fp8 < 0.75 * step_bf16  # weight streaming halves


@pytest.mark.parametrize("model,what", [(FP8, "fp8 weight"), (L70.model_copy(
    update={"kv_dtype_bytes": 1}), "fp8 KV-cache"), (L70.model_copy(
        update={"dtype_bytes": 4}), "float32 weight")])
def test_a_dtype_without_tables_is_refused_in_one_line(model, what):
    with pytest.raises(InputError) as e:
        FittedCost(model, get_gpu("a100-80gb"), 4, FittedParams())
    msg = str(e.value)
    assert "\n" not in msg and "a100-80gb/vllm" in msg and what in msg, msg


def test_a_dtype_table_that_misses_the_bar_is_kept_and_warns(tmp_path):
    # aiconfigurator ships B200 vLLM fp8 GEMMs: a model of that dtype is priced from them
    # (not refused); fitted without the collector's spikes they meet the bar and price
    # silently, and a variant table whose held-out error misses it is kept, the run saying so
    path = shipped_profiles()["b200/vllm"]
    mf = load_model_file(path)
    assert "gemm.fp8" in mf.ops and not mf.ops["gemm.fp8"].heldout.over_bar()
    assert "fp8" in mf.dtype.split(",")
    fp8 = mf.ops["gemm.fp8"]
    worse = fp8.model_copy(update={"heldout": fp8.heldout.model_copy(
        update={"median_ape": 5.8, "p90_ape": 31.9})})
    over = mf.model_copy(update={"ops": {**mf.ops, "gemm.fp8": worse}})
    assert mark_variants_over_bar(over) == ["gemm.fp8"]
    assert any(n.startswith("gemm.fp8: held-out") and "kept" in n
               for n in over.provenance.notes)
    save_model_file(over, tmp_path / "over.yaml")
    with pytest.warns(UserWarning, match=r"gemm\.fp8 5\.8 / 31\.9 %"):
        cost = FittedCost(FP8, get_gpu("b200"), 2,
                          FittedParams(profile=str(tmp_path / "over.yaml")))
    assert cost.gemms  # priced


def test_a_table_within_the_bar_prices_without_a_warning(recwarn):
    FittedCost(FP8, H100, 2, FittedParams())
    assert not [w for w in recwarn if "misses" in str(w.message)]


def test_elementwise_kernels_add_bytes_and_floors(tmp_path):
    path = shipped_profiles()["h100-sxm/vllm"]
    bare = load_model_file(path).model_copy(update={"elementwise": None})
    save_model_file(bare, tmp_path / "bare.yaml")
    with_ew = FittedCost(L8, H100, 1, FittedParams(step_overhead_ms=0))
    without = FittedCost(L8, H100, 1, FittedParams(profile=str(tmp_path / "bare.yaml"),
                                                    step_overhead_ms=0))
    ew = load_model_file(path).elementwise
    # a decode step of 8: mostly the per-kernel floors (5 per block + embedding, norm, sampler)
    kernels = 32 * LAYER_KERNELS + 2 + SAMPLER_KERNELS
    d = with_ew.step_times(plan([1] * 8, [100] * 8))[0] - without.step_times(
        plan([1] * 8, [100] * 8))[0]
    assert kernels * ew.kernel_floor_s < d < kernels * ew.kernel_floor_s * 1.1
    # an 8k prefill: bandwidth-bound norms/activation/RoPE, about a tenth of the step
    p = with_ew.step_times(plan([8192], [0]))[0]
    share = 1 - without.step_times(plan([8192], [0]))[0] / p
    assert 0.04 < share < 0.15
    moved = ElementwiseWork.of(L8, 1).bytes_per_step(32, 8192, 1)
    assert moved / (H100.mem_bandwidth) < p * share  # never faster than the HBM roof


def test_host_overhead_by_layers_and_tp():
    h = load_model_file(shipped_profiles()["h100-sxm/vllm"]).host_overhead
    c8, c70 = cost(L8, tp=1), cost(L70, tp=4)
    assert c8.overhead == pytest.approx(1e-3 * (h.base_ms + 32 * h.per_layer_ms))
    assert c70.overhead == pytest.approx(
        1e-3 * (h.base_ms + 80 * h.per_layer_ms + 3 * h.per_tp_ms))
    assert c70.overhead > c8.overhead and 0 < c8.overhead < 2e-3


def test_fp8_kv_needs_both_attention_tables(tmp_path):
    mf = load_model_file(shipped_profiles()["h100-sxm/vllm"])
    ops = {k: v for k, v in mf.ops.items() if k != "prefill_attn.fp8_kv"}
    save_model_file(mf.model_copy(update={"ops": ops}), tmp_path / "no_pre.yaml")
    with pytest.raises(InputError, match="no fp8 KV-cache"):
        FittedCost(FP8_KV, H100, 2, FittedParams(profile=str(tmp_path / "no_pre.yaml")))
    FittedCost(FP8, H100, 2, FittedParams(profile=str(tmp_path / "no_pre.yaml")))  # bf16 KV
