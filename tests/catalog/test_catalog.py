"""Catalog entries: they validate, match published figures, and look up tolerantly."""

from __future__ import annotations

import pytest

from sim.catalog import (
    GPUS,
    MODELS,
    PUBLISHED_PARAMS,
    CatalogError,
    get_gpu,
    get_model,
    normalize_name,
)
from sim.config.hardware import GpuSpec, ModelSpec

GiB = 2**30

REQUIRED_MODELS = {
    "llama-3-8b",
    "llama-3.1-8b",
    "llama-3-70b",
    "llama-3.1-70b",
    "mistral-7b",
    "qwen2.5-7b",
    "qwen2.5-72b",
    "tiny-2l",
}
REQUIRED_GPUS = {"a100-80gb", "h100-sxm", "h200-sxm", "l40s"}


# --- every entry validates -------------------------------------------------------------------


def test_required_entries_present():
    assert REQUIRED_MODELS <= set(MODELS)
    assert REQUIRED_GPUS <= set(GPUS)


@pytest.mark.parametrize("key", sorted(MODELS))
def test_model_entry_validates(key):
    m = MODELS[key]
    assert isinstance(m, ModelSpec)
    assert m.name == key == normalize_name(key)
    assert ModelSpec.model_validate(m.model_dump()) == m  # round-trips through validation
    assert m.num_attention_heads % m.num_kv_heads == 0  # GQA groups are whole
    # head_dim is hidden_size / heads unless the config sets it (Qwen3: 128, not 80;
    # gpt-oss 64, MiniMax 128) or the model is MLA (qk_nope + qk_rope head dims)
    if not (key.startswith(("qwen3", "gpt-oss", "minimax")) or m.is_mla):
        assert m.head_dim * m.num_attention_heads == m.hidden_size
    if key == "qwen3-32b":
        assert m.head_dim * m.num_attention_heads != m.hidden_size
    assert m.source
    if key != "tiny-2l":
        assert m.source.startswith("https://huggingface.co/")
        assert "/config.json" in m.source


@pytest.mark.parametrize("key", sorted(GPUS))
def test_gpu_entry_validates(key):
    g = GPUS[key]
    assert isinstance(g, GpuSpec)
    assert g.name == key == normalize_name(key)
    assert GpuSpec.model_validate(g.model_dump()) == g
    assert g.source
    assert 40 * GiB < g.hbm_bytes < 300 * GiB  # B300: 275040 MiB
    assert 0.5e12 < g.mem_bandwidth < 10e12
    assert 100e12 < g.bf16_flops < 5e15
    if g.fp8_flops is not None:
        # datasheets round independently (L40S: 362.05 bf16, 733 fp8)
        assert g.fp8_flops == pytest.approx(2 * g.bf16_flops, rel=0.02)
    assert g.host_bandwidth <= g.interconnect_bandwidth
    for eff in (g.gemm_efficiency, g.attention_efficiency, g.mem_efficiency):
        assert 0.3 <= eff <= 0.95
    assert 0.3 <= g.allreduce_efficiency <= 1
    assert 1e-6 <= g.allreduce_latency_s <= 100e-6
    assert 0 <= g.step_overhead_s <= 10e-3


# --- model figures ----------------------------------------------------------------------------


@pytest.mark.parametrize("key", sorted(PUBLISHED_PARAMS))
def test_param_count_within_2pct_of_published(key):
    assert MODELS[key].num_params == pytest.approx(PUBLISHED_PARAMS[key], rel=0.02)


def test_every_real_model_has_published_count():
    assert set(MODELS) - set(PUBLISHED_PARAMS) == {"tiny-2l"}


def test_exact_param_counts():
    # Element counts commonly quoted for the released checkpoints; pins the num_params formula.
    assert MODELS["llama-3-8b"].num_params == 8_030_261_248
    assert MODELS["llama-3-70b"].num_params == 70_553_706_496
    assert MODELS["mistral-7b"].num_params == 7_241_732_096


def test_kv_bytes_per_token():
    assert MODELS["llama-3-8b"].kv_bytes_per_token(1) == 2 * 32 * 8 * 128 * 2 == 131072
    l70 = MODELS["llama-3-70b"]
    assert l70.kv_bytes_per_token(1) == 2 * 80 * 8 * 128 * 2 == 327680
    assert l70.kv_bytes_per_token(8) == 40960
    # tp beyond the KV head count replicates heads: still one head per GPU
    assert l70.kv_bytes_per_token(16) == 40960
    assert MODELS["qwen2.5-7b"].kv_bytes_per_token(1) == 2 * 28 * 4 * 128 * 2


def test_context_lengths():
    assert MODELS["llama-3-8b"].max_position_embeddings == 8192
    assert MODELS["llama-3-70b"].max_position_embeddings == 8192
    assert MODELS["llama-3.1-8b"].max_position_embeddings == 131072
    assert MODELS["llama-3.1-70b"].max_position_embeddings == 131072
    assert MODELS["mistral-7b"].max_position_embeddings == 32768


def test_llama_31_differs_from_llama_3_only_in_context():
    for size in ("8b", "70b"):
        a = MODELS[f"llama-3-{size}"].model_dump(exclude={"name", "source"})
        b = MODELS[f"llama-3.1-{size}"].model_dump(exclude={"name", "source"})
        assert {k for k in a if a[k] != b[k]} == {"max_position_embeddings"}


def test_qwen_bias_and_tying():
    for key in ("qwen2.5-7b", "qwen2.5-72b"):
        assert MODELS[key].qkv_bias is True
        assert MODELS[key].tie_word_embeddings is False
    assert MODELS["qwen2.5-0.5b"].tie_word_embeddings is True
    # gpt-oss sets attention_bias (biased q/k/v and o projections)
    assert not any(MODELS[k].qkv_bias for k in MODELS if not k.startswith(("qwen", "gpt-oss")))


def test_mistral_notes_sliding_window():
    src = MODELS["mistral-7b"].source
    assert "v0.1" in src and "sliding_window" in src and "full" in src


def test_tiny_model_shape():
    t = MODELS["tiny-2l"]
    assert (t.num_layers, t.hidden_size, t.num_attention_heads, t.num_kv_heads) == (2, 256, 4, 2)
    assert (t.head_dim, t.intermediate_size, t.vocab_size) == (64, 688, 32000)
    assert t.max_position_embeddings == 4096
    assert t.source == "synthetic test model"


# --- GPU figures ------------------------------------------------------------------------------


def test_dense_datasheet_figures():
    assert GPUS["a100-80gb"].bf16_flops == pytest.approx(312e12)
    assert GPUS["a100-80gb"].fp8_flops is None
    assert GPUS["h100-sxm"].bf16_flops == pytest.approx(989.4e12)
    assert GPUS["h100-sxm"].fp8_flops == pytest.approx(1978.9e12)
    assert GPUS["h200-sxm"].bf16_flops == GPUS["h100-sxm"].bf16_flops
    assert GPUS["h200-sxm"].fp8_flops == GPUS["h100-sxm"].fp8_flops
    assert GPUS["l40s"].bf16_flops == pytest.approx(362.05e12)
    assert GPUS["l40s"].fp8_flops == pytest.approx(733e12)


def test_bandwidth_figures():
    assert GPUS["a100-80gb"].mem_bandwidth == pytest.approx(2.039e12)
    assert GPUS["h100-sxm"].mem_bandwidth == pytest.approx(3.35e12)
    assert GPUS["h200-sxm"].mem_bandwidth == pytest.approx(4.8e12)
    assert GPUS["l40s"].mem_bandwidth == pytest.approx(864e9)
    assert GPUS["a100-80gb"].interconnect_bandwidth == pytest.approx(300e9)
    for key in ("h100-sxm", "h200-sxm"):
        assert GPUS[key].interconnect_bandwidth == pytest.approx(450e9)
        assert GPUS[key].host_bandwidth == pytest.approx(64e9)
    assert GPUS["l40s"].interconnect_bandwidth == pytest.approx(32e9)  # PCIe, no NVLink
    assert GPUS["a100-80gb"].host_bandwidth == GPUS["l40s"].host_bandwidth == pytest.approx(32e9)


def test_memory_sizes_are_cuda_totals_below_marketing():
    # The marketed "80GB"/"141GB"/"48GB" are GiB-scale; CUDA reports a little less.
    assert 79 * GiB < GPUS["h100-sxm"].hbm_bytes < 80 * GiB
    assert 79 * GiB < GPUS["a100-80gb"].hbm_bytes < 80 * GiB
    assert 139 * GiB < GPUS["h200-sxm"].hbm_bytes < 141 * GiB
    assert 44 * GiB < GPUS["l40s"].hbm_bytes < 48 * GiB


def test_ridge_points():
    assert GPUS["h100-sxm"].ridge_flops_per_byte == pytest.approx(295.3, abs=0.5)
    assert GPUS["a100-80gb"].ridge_flops_per_byte == pytest.approx(153.0, abs=0.5)


# --- model x GPU fits -------------------------------------------------------------------------


def test_llama_70b_needs_two_h100s():
    m, g = MODELS["llama-3-70b"], GPUS["h100-sxm"]
    assert m.weight_bytes_per_gpu(1) > g.hbm_bytes
    assert m.weight_bytes_per_gpu(2) < g.hbm_bytes
    assert m.weight_bytes_per_gpu(2) < 0.9 * GPUS["a100-80gb"].hbm_bytes


def test_llama_70b_weights_barely_fit_one_h200():
    m, g = MODELS["llama-3.1-70b"], GPUS["h200-sxm"]
    assert m.weight_bytes_per_gpu(1) < g.hbm_bytes < m.weight_bytes_per_gpu(1) + 10 * GiB


def test_8b_models_fit_one_l40s():
    for key in ("llama-3-8b", "mistral-7b", "qwen2.5-7b"):
        assert MODELS[key].weight_bytes_per_gpu(1) < 0.9 * GPUS["l40s"].hbm_bytes


def test_qwen_72b_needs_two_h100s():
    m = MODELS["qwen2.5-72b"]
    assert m.weight_bytes_per_gpu(1) > GPUS["h100-sxm"].hbm_bytes
    assert m.weight_bytes_per_gpu(2) < GPUS["h100-sxm"].hbm_bytes


# --- lookup -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name,key",
    [
        ("llama-3-8b", "llama-3-8b"),
        ("Llama-3-8B", "llama-3-8b"),
        ("LLAMA_3.1_70B", "llama-3.1-70b"),
        ("  qwen2.5_72b ", "qwen2.5-72b"),
        ("tiny 2l", "tiny-2l"),
    ],
)
def test_get_model_tolerant(name, key):
    assert get_model(name) is MODELS[key]


@pytest.mark.parametrize("name", ["h100-sxm", "h100_sxm", "H100_SXM", "H100-SXM", " h100 sxm"])
def test_get_gpu_tolerant(name):
    assert get_gpu(name) is GPUS["h100-sxm"]


def test_unknown_model_message_lists_names():
    with pytest.raises(CatalogError) as info:
        get_model("llama-9b")
    msg = str(info.value)
    assert msg.startswith("unknown model 'llama-9b' (`servesim catalog` lists every one); known: ")
    assert "\n" not in msg
    for key in MODELS:
        assert key in msg
    assert msg.endswith(", ".join(sorted(MODELS)))


def test_unknown_gpu_message_lists_names():
    with pytest.raises(CatalogError) as info:
        get_gpu("h300")
    msg = str(info.value)
    assert msg == ("unknown gpu 'h300' (`servesim catalog` lists every one); known: "
                   + ", ".join(sorted(GPUS)))


def test_catalog_error_is_key_and_value_error():
    assert issubclass(CatalogError, KeyError)
    assert issubclass(CatalogError, ValueError)
    with pytest.raises(KeyError):
        get_gpu("nope")
    with pytest.raises(ValueError):
        get_model("nope")


def test_non_string_name_rejected():
    with pytest.raises(CatalogError):
        get_model(None)  # type: ignore[arg-type]


def test_specs_are_frozen():
    with pytest.raises(Exception):  # noqa: B017 - pydantic ValidationError on frozen instance
        MODELS["llama-3-8b"].num_layers = 1  # type: ignore[misc]


def test_qwen3_qk_norm_adds_two_kernels_and_its_weights():
    from sim.cost.elementwise import LAYER_KERNELS, ElementwiseWork

    q = MODELS["qwen3-32b"]
    plain = q.model_copy(update={"qk_norm": False})
    assert q.qk_norm and q.head_dim == 128 and q.num_params - plain.num_params == 64 * 2 * 128
    assert q.weight_bytes_per_gpu(2) == plain.weight_bytes_per_gpu(2) + 64 * 2 * 128 * 2 // 2
    work, base = ElementwiseWork.of(q, 2), ElementwiseWork.of(plain, 2)
    assert len(base.layer_bytes) == LAYER_KERNELS and len(work.layer_bytes) == LAYER_KERNELS + 2
    # q_norm reads and writes 32 heads x 128 x 2 bytes per token on each of 2 GPUs; k_norm 4
    assert work.layer_bytes[-2:] == (2.0 * 32 * 128 * 2, 2.0 * 4 * 128 * 2)
