"""Built-in model catalog: architecture figures copied from each model's Hugging Face config.json.

Keys are lowercase, dashed names. Every real model's ``source`` names the config.json it was
copied from; ``sim/catalog/SOURCES.md`` lists, per figure, where it was cross-checked.
``head_dim`` is hidden_size / num_attention_heads for every entry but Qwen3 (whose config sets
``head_dim`` 128 explicitly). ``PUBLISHED_PARAMS`` holds the parameter counts the model cards
publish; the catalog tests assert the derived ``ModelSpec.num_params`` is within 2% of them.
"""

from __future__ import annotations

from pathlib import Path

from sim.catalog.hf_config import import_hf_config
from sim.config.hardware import ModelSpec

_HF = "https://huggingface.co/{}/blob/main/config.json"
CONFIGS = Path(__file__).parent / "configs"  # config.json copies, see configs/README.md
_AIC = " (copy: sim/catalog/configs/{}, from aiconfigurator-core 0.12.0 model_configs/)"


def _from_config(name: str, repo: str, file: str | None = None, note: str = "") -> ModelSpec:
    """The catalog entry ``name`` read from the committed copy of ``repo``'s config.json."""
    file = file or repo.replace("/", "--") + "_config.json"
    return import_hf_config(CONFIGS / file, name=name,
                            source=_HF.format(repo) + (note or _AIC.format(file)))

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

# The models of 2026 (issue 20), each read from its config.json by sim/catalog/hf_config.py.
_LLAMA33 = (" (Llama-3.3-70B-Instruct has Llama-3.1-70B's shapes; read from the copy of "
            "meta-llama/Meta-Llama-3.1-70B's config in sim/catalog/configs/)")
_FROM_CONFIGS: tuple[ModelSpec, ...] = (
    _from_config("llama-3.1-405b", "meta-llama/Meta-Llama-3.1-405B"),
    _from_config("llama-3.3-70b", "meta-llama/Llama-3.3-70B-Instruct",
                 "meta-llama--Meta-Llama-3.1-70B_config.json", _LLAMA33),
    _from_config("qwen3-8b", "Qwen/Qwen3-8B"),
    _from_config("qwen3-30b-a3b", "Qwen/Qwen3-30B-A3B"),
    _from_config("qwen3-235b-a22b", "Qwen/Qwen3-235B-A22B"),
    _from_config("qwen3-235b-a22b-nvfp4", "nvidia/Qwen3-235B-A22B-NVFP4"),
    _from_config("mixtral-8x7b", "mistralai/Mixtral-8x7B-v0.1"),
    _from_config("deepseek-v3", "deepseek-ai/DeepSeek-V3"),
    _from_config("kimi-k2", "moonshotai/Kimi-K2-Instruct"),
    _from_config("kimi-k2.5", "moonshotai/Kimi-K2.5"),
    _from_config("kimi-k2.5-nvfp4", "nvidia/Kimi-K2.5-NVFP4"),
    _from_config("gpt-oss-20b", "openai/gpt-oss-20b"),
    _from_config("gpt-oss-120b", "openai/gpt-oss-120b"),
    _from_config("minimax-m2.5", "MiniMaxAI/MiniMax-M2.5"),
    _from_config("minimax-m2.5-nvfp4", "nvidia/MiniMax-M2.5-NVFP4"),
)

MODELS: dict[str, ModelSpec] = {m.name: m for m in (*_ENTRIES, *_FROM_CONFIGS)}

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
    # issue 20: the figure each model card (or report) states, total parameters
    "llama-3.1-405b": 405e9,  # Llama 3.1 model card: 405B
    "llama-3.3-70b": 70.6e9,  # Llama 3.3 model card: 70B (the 3.1-70B checkpoint's 70.6B)
    "qwen3-8b": 8.2e9,  # model card: "Number of Parameters: 8.2B"
    "qwen3-30b-a3b": 30.5e9,  # model card: "30.5B in total and 3.3B activated"
    "qwen3-235b-a22b": 235e9,  # model card: "235B in total and 22B activated"
    "qwen3-235b-a22b-nvfp4": 235e9,  # the same model, quantized by NVIDIA ModelOpt
    "mixtral-8x7b": 46.7e9,  # Mistral AI, "Mixtral of experts": 46.7B total, 12.9B active
    "deepseek-v3": 671e9,  # DeepSeek-V3 report / card: 671B total, 37B activated (no MTP)
    "kimi-k2": 1.04e12,  # Kimi K2 tech report: 1.04T total, 32B activated
    "kimi-k2.5": 1.04e12,  # K2.5 keeps K2's language model (vision tower not counted)
    "kimi-k2.5-nvfp4": 1.04e12,  # the same model, quantized by NVIDIA ModelOpt
    "gpt-oss-20b": 20.91e9,  # OpenAI gpt-oss model card, table 1: 20.91B total, 3.61B active
    "gpt-oss-120b": 116.83e9,  # OpenAI gpt-oss model card, table 1: 116.83B, 5.13B active
    "minimax-m2.5": 230e9,  # MiniMax-M2 / M2.5 model cards: 230B total, 10B activated
    "minimax-m2.5-nvfp4": 230e9,  # the same model, quantized by NVIDIA ModelOpt
}

#: Active parameters per token as published, and which embeddings the figure leaves out
#: (cards differ: OpenAI and Moonshot count the LM head but not the input embedding,
#: MiniMax neither): ``all`` = ModelSpec.active_params as is, ``no_input_embedding`` =
#: minus vocab x hidden, ``no_embeddings`` = minus both matrices.
PUBLISHED_ACTIVE: dict[str, tuple[float, str]] = {
    "qwen3-30b-a3b": (3.3e9, "all"),
    "qwen3-235b-a22b": (22e9, "all"),
    "qwen3-235b-a22b-nvfp4": (22e9, "all"),
    "mixtral-8x7b": (12.9e9, "all"),
    "deepseek-v3": (37e9, "all"),
    "kimi-k2": (32e9, "no_input_embedding"),
    "kimi-k2.5": (32e9, "no_input_embedding"),
    "kimi-k2.5-nvfp4": (32e9, "no_input_embedding"),
    "gpt-oss-20b": (3.61e9, "no_input_embedding"),
    "gpt-oss-120b": (5.13e9, "no_input_embedding"),
    "minimax-m2.5": (10e9, "no_embeddings"),
    "minimax-m2.5-nvfp4": (10e9, "no_embeddings"),
}
