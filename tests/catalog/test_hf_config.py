"""config.json round trips: each committed config imports to its model card's figures."""

from __future__ import annotations

import json

import pytest
import yaml

from sim.catalog import MODELS, PUBLISHED_PARAMS
from sim.catalog.hf_config import import_hf_config
from sim.catalog.models import CONFIGS, PUBLISHED_ACTIVE
from sim.config.load import load_scenario
from sim.config.model_spec import ModelSpec
from tests.capacity.helpers import cli
from traces.errors import InputError

SHAPE = {"name", "source"}


def test_every_config_entry_has_published_total_and_is_within_2pct():
    from sim.catalog.models import _FROM_CONFIGS

    for m in _FROM_CONFIGS:
        assert m.num_params == pytest.approx(PUBLISHED_PARAMS[m.name], rel=0.02), m.name
        assert "sim/catalog/configs/" in m.source and m.source.startswith("https://")


@pytest.mark.parametrize("key", sorted(PUBLISHED_ACTIVE))
def test_active_params_match_the_card(key):
    """Cards round active counts to whole billions and differ in which embedding they count
    (PUBLISHED_ACTIVE names it); 3 % covers the rounding."""
    m = MODELS[key]
    published, counts = PUBLISHED_ACTIVE[key]
    embed = m.vocab_size * m.hidden_size
    left_out = {"all": 0, "no_input_embedding": embed, "no_embeddings": 2 * embed}[counts]
    assert m.active_params - left_out == pytest.approx(published, rel=0.03)
    assert m.active_params < m.num_params


def test_published_figures_named_here():
    """The figures of the issue's closing note, as derived (billions)."""
    derived = {k: round(MODELS[k].num_params / 1e9, 1) for k in (
        "qwen3-30b-a3b", "qwen3-235b-a22b", "deepseek-v3", "gpt-oss-20b", "gpt-oss-120b",
        "mixtral-8x7b", "kimi-k2", "minimax-m2.5", "llama-3.1-405b")}
    assert derived == {"qwen3-30b-a3b": 30.5, "qwen3-235b-a22b": 235.1, "deepseek-v3": 671.0,
                       "gpt-oss-20b": 20.9, "gpt-oss-120b": 116.8, "mixtral-8x7b": 46.7,
                       "kimi-k2": 1026.4, "minimax-m2.5": 228.7, "llama-3.1-405b": 405.9}


@pytest.mark.parametrize("file, key", [
    ("meta-llama--Meta-Llama-3.1-8B_config.json", "llama-3.1-8b"),
    ("meta-llama--Meta-Llama-3.1-70B_config.json", "llama-3.1-70b"),
    ("Qwen--Qwen3-32B_config.json", "qwen3-32b"),
    ("Qwen--Qwen2.5-7B_config.json", "qwen2.5-7b"),
])
def test_dense_configs_import_to_the_hand_written_entries(file, key):
    got = import_hf_config(CONFIGS / file).model_dump(exclude=SHAPE)
    assert got == MODELS[key].model_dump(exclude=SHAPE)


def test_mistral_v01_imports_with_its_window_on_every_layer():
    m = import_hf_config(CONFIGS / "mistralai--Mistral-7B-v0.1_config.json")
    assert (m.sliding_window, m.num_sliding_layers) == (4096, 32)
    plain = MODELS["mistral-7b"]  # the catalog entry keeps full attention (unchanged)
    assert m.model_dump(exclude=SHAPE | {"sliding_window", "num_sliding_layers"}) == \
        plain.model_dump(exclude=SHAPE | {"sliding_window", "num_sliding_layers"})
    # every layer slides: blocks are accounted over all layers, a sequence holds the window
    assert m.kv_bytes_per_token(1) == plain.kv_bytes_per_token(1) == 131072
    assert m.kv_bytes_per_sequence(10_000, 1) == 131072 * 4096


@pytest.mark.parametrize("key, bits, moe_bits, method", [
    ("deepseek-v3", 8, 8, "fp8"), ("kimi-k2", 8, 8, "fp8"), ("minimax-m2.5", 8, 8, "fp8"),
    ("gpt-oss-120b", 16, 4, "mxfp4"), ("kimi-k2.5", 16, 4, "compressed-tensors"),
    ("qwen3-235b-a22b-nvfp4", 4, 4, "modelopt_fp4"), ("qwen3-235b-a22b", 16, 16, None),
    # NVIDIA's NVFP4 checkpoints leave the attention (and MiniMax's router) unquantized:
    # minimax's in its config.json's `ignore`, kimi's on the wrapper, not its text_config
    ("minimax-m2.5-nvfp4", 16, 4, "modelopt_fp4"), ("kimi-k2.5-nvfp4", 16, 4, "modelopt_fp4"),
])
def test_quantization_configs(key, bits, moe_bits, method):
    m = MODELS[key]
    assert (m.dtype_bits, m.moe_bits, m.quantization) == (bits, moe_bits, method)


@pytest.mark.parametrize("key, kv_bytes", [
    ("qwen3-235b-a22b-nvfp4", 1), ("minimax-m2.5-nvfp4", 1), ("kimi-k2.5-nvfp4", 1),
    ("minimax-m2.5", None), ("kimi-k2.5", None), ("deepseek-v3", None), ("gpt-oss-120b", None),
])
def test_a_modelopt_checkpoint_naming_fp8_kv_is_served_with_it(key, kv_bytes):
    """vLLM 0.32's --kv-cache-dtype auto takes a modelopt checkpoint's fp8 KV cache
    (resolve_kv_cache_dtype_string: kv_cache_scheme, else kv_cache_quant_algo); other
    checkpoints keep the activation dtype."""
    m = MODELS[key]
    assert m.kv_dtype_bytes == kv_bytes and m.checkpoint_kv_fp8 == (kv_bytes == 1)
    # MiniMax-M2.5: 62 layers x 2 (K, V) x 8 KV heads x 128 x 2 bytes in bf16; half in fp8
    if key.startswith("minimax"):
        assert m.kv_bytes_per_token(1) == 62 * 2 * 8 * 128 * (kv_bytes or 2)


def test_kv_cache_quantization_the_checkpoint_names(tmp_path):
    from sim.catalog.hf_quant import precision

    q = {"quant_method": "modelopt", "quant_algo": "NVFP4"}
    assert precision({"quantization_config": {**q, "kv_cache_quant_algo": "FP8"}},
                     "c")["kv_dtype_bytes"] == 1
    scheme = {"dynamic": False, "num_bits": 8, "type": "float"}
    assert precision({"quantization_config": {**q, "kv_cache_scheme": scheme}},
                     "c")["kv_dtype_bytes"] == 1
    assert "kv_dtype_bytes" not in precision({"quantization_config": q}, "c")
    with pytest.raises(InputError, match=r"^c: quantization kv cache 'nvfp4': servesim"):
        precision({"quantization_config": {**q, "kv_cache_quant_algo": "NVFP4"}}, "c")
    # compressed-tensors' kv_cache_scheme is not resolved by vLLM's auto
    ct = {"quant_method": "compressed-tensors", "kv_cache_scheme": scheme,
          "config_groups": {"g": {"weights": {"num_bits": 8}}}}
    assert "kv_dtype_bytes" not in precision({"quantization_config": ct}, "c")


def test_shapes_of_the_2026_families():
    ds, k2, oss, q3 = (MODELS[k] for k in ("deepseek-v3", "kimi-k2", "gpt-oss-120b",
                                           "qwen3-30b-a3b"))
    assert (ds.num_moe_layers, ds.num_dense_layers, ds.shared_expert_size) == (58, 3, 2048)
    assert ds.expert_shape == (7168, 2048, 256, 8) and ds.is_mla and ds.head_dim == 192
    assert (k2.num_experts, k2.num_attention_heads, k2.first_dense_layers) == (384, 64, 1)
    assert (oss.num_sliding_layers, oss.num_full_attention_layers) == (18, 18)
    assert oss.qkv_bias and not oss.is_mla and oss.expert_shape == (2880, 2880, 128, 4)
    assert q3.qk_norm and q3.num_dense_layers == 0 and q3.dense_mlp_gemms(1) == []


def test_kv_and_weight_bytes_of_imported_models():
    ds, oss = MODELS["deepseek-v3"], MODELS["gpt-oss-120b"]
    assert ds.kv_bytes_per_token(8) == 61 * (512 + 64) * 2  # bf16 latent, every rank
    # gpt-oss-120b: 18 full layers of 8 KV heads x 64 x 2 (K, V) x 2 bytes
    assert oss.kv_bytes_per_token(1) == 18 * 2 * 8 * 64 * 2 == 36864
    assert oss.kv_bytes_per_sequence(10_000, 1) == 2048 * (18 * 10_000 + 18 * 128)
    # gpt-oss-120b's checkpoint is ~65 GB (mxfp4 experts, bf16 rest): 4 bits per expert
    # element without the e8m0 scales (0.25 bit) -> a little under it
    assert 60e9 < oss.weight_bytes_per_gpu(1) < 65e9
    assert 640e9 < ds.weight_bytes_per_gpu(1) < 700e9  # fp8: ~1 byte per parameter


def _write(tmp_path, cfg: dict, name="x_config.json"):
    p = tmp_path / name
    p.write_text(json.dumps(cfg))
    return p


def test_unknown_architecture_and_missing_key_are_one_line(tmp_path):
    with pytest.raises(InputError, match=r"^x_config.json: architectures: 'Foo'"):
        import_hf_config(_write(tmp_path, {"architectures": ["Foo"]}))
    cfg = json.loads((CONFIGS / "Qwen--Qwen3-30B-A3B_config.json").read_text())
    del cfg["moe_intermediate_size"]
    with pytest.raises(InputError, match=r"^x_config.json: moe_intermediate_size: missing"):
        import_hf_config(_write(tmp_path, cfg))
    cfg["moe_intermediate_size"], cfg["quantization_config"] = 768, {"quant_method": "hqq"}
    with pytest.raises(InputError, match="quant_method: 'hqq'"):
        import_hf_config(_write(tmp_path, cfg))
    bad = tmp_path / "y.json"
    bad.write_text("{")
    with pytest.raises(InputError, match="^y.json: not JSON"):
        import_hf_config(bad)
    cfg = json.loads((CONFIGS / "Qwen--Qwen3-30B-A3B_config.json").read_text())
    cfg["num_hidden_layers"] = 10**9  # named by its config.json key, with the value
    with pytest.raises(InputError, match=r"^x_config.json: num_hidden_layers: Input should be "
                                         r"less than or equal to 1024 \(got 1000000000\)$"):
        import_hf_config(_write(tmp_path, cfg))


def test_zero_heads_fifos_and_a_non_file_sibling_are_one_line(tmp_path):
    import os

    cfg = json.loads((CONFIGS / "meta-llama--Meta-Llama-3.1-8B_config.json").read_text())
    for head_dim in (None, 128):  # the default head_dim divided by it, given or not
        bad = {**cfg, "num_attention_heads": 0} | ({"head_dim": head_dim} if head_dim else {})
        with pytest.raises(InputError, match=r"^x_config.json: num_attention_heads: must be > 0"):
            import_hf_config(_write(tmp_path, bad))
    fifo = tmp_path / "f_config.json"
    os.mkfifo(fifo)  # read, it would block: refused without opening
    with pytest.raises(InputError, match="must be a regular file, not a FIFO"):
        import_hf_config(fifo)
    (tmp_path / "m").mkdir()
    good = _write(tmp_path / "m", cfg, "config.json")
    (tmp_path / "m" / "hf_quant_config.json").mkdir()  # not skipped as if absent
    with pytest.raises(InputError, match="hf_quant_config.json"):
        import_hf_config(good)
    (tmp_path / "m" / "hf_quant_config.json").rmdir()
    (tmp_path / "m" / "hf_quant_config.json").write_text(
        json.dumps({"quantization": {"quant_algo": "INT3"}}))
    with pytest.raises(InputError, match=r"^hf_quant_config.json beside config.json: "
                       r"quantization.quant_algo: 'INT3' is not one servesim reads"):
        import_hf_config(good)


def test_catalog_import_prints_a_loadable_spec(tmp_path, capsys):
    assert cli("catalog", "import", CONFIGS / "openai--gpt-oss-20b_config.json") == 0
    out = capsys.readouterr().out
    spec = ModelSpec.model_validate(yaml.safe_load(out)["model"])
    assert spec.model_dump(exclude=SHAPE) == MODELS["gpt-oss-20b"].model_dump(exclude=SHAPE)
    assert "20.91 B parameters" in out
    assert cli("catalog", "import", _write(tmp_path, {"architectures": ["Foo"]})) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "architectures" in err


def test_scenario_model_hf_config(tmp_path):
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "config.json").write_text(
        (CONFIGS / "Qwen--Qwen3-30B-A3B_config.json").read_text())
    sc = tmp_path / "s.yaml"
    sc.write_text(yaml.safe_dump({
        "model": {"hf_config": "cfg/config.json", "kv_dtype_bytes": 1}, "gpu": "h100-sxm",
        "workload": {"arrival": {"process": "poisson", "rate": 1},
                     "lengths": {"dist": "fixed", "prompt": 10, "output": 5},
                     "num_requests": 3}}))
    m = load_scenario(sc).scenario.model_spec
    assert m.name == "cfg" and m.kv_dtype_bytes == 1
    assert m.model_dump(exclude=SHAPE | {"kv_dtype_bytes"}) == \
        MODELS["qwen3-30b-a3b"].model_dump(exclude=SHAPE | {"kv_dtype_bytes"})
    # --set model.hf_config replaces a catalog model with the file's
    swap = load_scenario(None, (f"model.hf_config={sc.parent / 'cfg' / 'config.json'}",))
    assert swap.scenario.model_spec.num_experts == 128
    sc.write_text(sc.read_text().replace("cfg/config.json", "missing.json"))
    with pytest.raises(InputError, match=r"^s.yaml: model.hf_config: .*missing.json"):
        load_scenario(sc)


@pytest.mark.parametrize("key, dense, experts", [
    ("deepseek-v3", "fp8_block", "fp8_block"), ("minimax-m2.5", "fp8_block", "fp8_block"),
    ("gpt-oss-120b", "bfloat16", "w4a16_mxfp4"), ("kimi-k2.5", "bfloat16", "int4_wo"),
    ("qwen3-235b-a22b-nvfp4", "nvfp4", "nvfp4"), ("qwen3-30b-a3b", "bfloat16", "bfloat16"),
])
def test_weight_formats_the_fitted_tables_are_looked_up_by(key, dense, experts):
    """The seam to the cost side: sim/cost/layer_plan.py names the profile's tables from the
    spec's bits, quantization and fp8 block size."""
    from sim.cost.layer_plan import dense_format, expert_format

    m = MODELS[key]
    assert (dense_format(m), expert_format(m)) == (dense, experts)
