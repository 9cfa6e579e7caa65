"""Built-in model catalog: architecture figures copied from each model's Hugging Face config.json.

Keys are lowercase, dashed names. Every real model's ``source`` names the config.json it was
copied from; ``sim/catalog/SOURCES.md`` lists, per figure, where it was cross-checked.
``head_dim`` is hidden_size / num_attention_heads for every entry but Qwen3 (whose config sets
``head_dim`` 128 explicitly). ``PUBLISHED_PARAMS`` holds the parameter counts the model cards
publish; the catalog tests assert the derived ``ModelSpec.num_params`` is within 2% of them.
"""

from __future__ import annotations

from sim.config.hardware import ModelSpec

_HF = "https://huggingface.co/{}/blob/main/config.json"

_LLAMA_3_8B = dict(
    num_layers=32,
    hidden_size=4096,
    num_attention_heads=32,
    num_kv_heads=8,
    head_dim=128,
    intermediate_size=14336,
    vocab_size=128256,
    tie_word_embeddings=False,
)

_LLAMA_3_70B = dict(
    num_layers=80,
    hidden_size=8192,
    num_attention_heads=64,
    num_kv_heads=8,
    head_dim=128,
    intermediate_size=28672,
    vocab_size=128256,
    tie_word_embeddings=False,
)

_ENTRIES: tuple[ModelSpec, ...] = (
    ModelSpec(
        name="llama-3-8b",
        **_LLAMA_3_8B,
        max_position_embeddings=8192,
        source=_HF.format("meta-llama/Meta-Llama-3-8B"),
    ),
    ModelSpec(
        name="llama-3.1-8b",
        **_LLAMA_3_8B,
        # 128k context via rope_scaling (rope_type "llama3", factor 8, original 8192).
        max_position_embeddings=131072,
        source=_HF.format("meta-llama/Llama-3.1-8B")
        + " (rope_scaling llama3 factor 8 over original 8192)",
    ),
    ModelSpec(
        name="llama-3-70b",
        **_LLAMA_3_70B,
        max_position_embeddings=8192,
        source=_HF.format("meta-llama/Meta-Llama-3-70B"),
    ),
    ModelSpec(
        name="llama-3.1-70b",
        **_LLAMA_3_70B,
        max_position_embeddings=131072,
        source=_HF.format("meta-llama/Llama-3.1-70B")
        + " (rope_scaling llama3 factor 8 over original 8192)",
    ),
    ModelSpec(
        # Mistral-7B-v0.1 (not v0.3: v0.3 has vocab 32768 and no sliding window).
        name="mistral-7b",
        num_layers=32,
        hidden_size=4096,
        num_attention_heads=32,
        num_kv_heads=8,
        head_dim=128,
        intermediate_size=14336,
        vocab_size=32000,
        max_position_embeddings=32768,
        tie_word_embeddings=False,
        source=_HF.format("mistralai/Mistral-7B-v0.1")
        + " (v0.1; config sets sliding_window=4096, which servesim does NOT model: full"
        " attention is assumed, so KV per sequence is not capped at 4096 tokens)",
    ),
    ModelSpec(
        # Base model. Qwen2.5-7B-Instruct has the same shapes but max_position_embeddings 32768.
        name="qwen2.5-7b",
        num_layers=28,
        hidden_size=3584,
        num_attention_heads=28,
        num_kv_heads=4,
        head_dim=128,
        intermediate_size=18944,
        vocab_size=152064,
        max_position_embeddings=131072,
        qkv_bias=True,
        tie_word_embeddings=False,
        source=_HF.format("Qwen/Qwen2.5-7B")
        + " (base; the -Instruct config has max_position_embeddings 32768)",
    ),
    ModelSpec(
        name="qwen2.5-72b",
        num_layers=80,
        hidden_size=8192,
        num_attention_heads=64,
        num_kv_heads=8,
        head_dim=128,
        intermediate_size=29568,
        vocab_size=152064,
        max_position_embeddings=131072,
        qkv_bias=True,
        tie_word_embeddings=False,
        source=_HF.format("Qwen/Qwen2.5-72B")
        + " (base; the -Instruct config has max_position_embeddings 32768)",
    ),
    ModelSpec(
        # Small real model for CPU-side calibration runs; note the tied LM head.
        name="qwen2.5-0.5b",
        num_layers=24,
        hidden_size=896,
        num_attention_heads=14,
        num_kv_heads=2,
        head_dim=64,
        intermediate_size=4864,
        vocab_size=151936,
        max_position_embeddings=32768,
        qkv_bias=True,
        tie_word_embeddings=True,
        source=_HF.format("Qwen/Qwen2.5-0.5B"),
    ),
    ModelSpec(
        # head_dim 128 is set explicitly (hidden_size / heads would be 80)
        name="qwen3-32b",
        num_layers=64,
        hidden_size=5120,
        num_attention_heads=64,
        num_kv_heads=8,
        head_dim=128,
        intermediate_size=25600,
        vocab_size=151936,
        max_position_embeddings=40960,
        qk_norm=True,
        tie_word_embeddings=False,
        source=_HF.format("Qwen/Qwen3-32B")
        + " (also shipped in aiconfigurator-core 0.12.0 model_configs/)",
    ),
    ModelSpec(
        name="tiny-2l",
        num_layers=2,
        hidden_size=256,
        num_attention_heads=4,
        num_kv_heads=2,
        head_dim=64,
        intermediate_size=688,
        vocab_size=32000,
        max_position_embeddings=4096,
        source="synthetic test model",
    ),
)

MODELS: dict[str, ModelSpec] = {m.name: m for m in _ENTRIES}

# Parameter counts published on the model cards / release notes (elements).
PUBLISHED_PARAMS: dict[str, float] = {
    "llama-3-8b": 8.03e9,
    "llama-3.1-8b": 8.03e9,
    "llama-3-70b": 70.6e9,
    "llama-3.1-70b": 70.6e9,
    "mistral-7b": 7.24e9,
    "qwen2.5-7b": 7.61e9,
    "qwen2.5-72b": 72.7e9,
    "qwen2.5-0.5b": 0.49e9,
    "qwen3-32b": 32.8e9,  # model card: "Number of Parameters: 32.8B"
}
