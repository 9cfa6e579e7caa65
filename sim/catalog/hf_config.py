"""A Hugging Face ``config.json`` -> ``ModelSpec``: the one mapping from HF's keys to servesim's.

Architectures read (``architectures[0]``), with what each adds to the common keys
(num_hidden_layers, hidden_size, num_attention_heads, num_key_value_heads, head_dim,
intermediate_size, vocab_size, max_position_embeddings, tie_word_embeddings):

    LlamaForCausalLM, MistralForCausalLM     dense; attention_bias; Mistral's sliding_window
    Qwen2ForCausalLM                         dense, q/k/v bias; sliding only if use_sliding_window
    Qwen3ForCausalLM                         dense, q/k norm
    Qwen3MoeForCausalLM, Qwen2MoeForCausalLM num_experts, moe_intermediate_size (+ shared)
    MixtralForCausalLM                       num_local_experts of intermediate_size
    DeepseekV2/V3ForCausalLM (also Kimi-K2)  MLA, n_routed_experts, n_shared_experts,
                                             first_k_dense_replace
    GptOssForCausalLM                        num_local_experts, layer_types, sliding_window
    MiniMaxM2ForCausalLM                     num_local_experts, q/k norm across heads
    KimiK25ForConditionalGeneration          its text_config (a DeepseekV3 model; the
                                             vision tower is not counted)

Weight precision comes from ``quantization_config`` (or a sibling ``hf_quant_config.json``):
``sim.catalog.hf_quant``. An unknown architecture or a missing key raises ``InputError``,
one line naming the file and the key.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from pydantic import ValidationError

from sim.catalog.hf_quant import precision
from sim.config.model_spec import ModelSpec
from traces.errors import InputError
from traces.files import read_bytes

MAX_CONFIG_BYTES = 16 << 20  # a config.json is kilobytes; the largest shipped one is 3 MB
_DEEPSEEK = ("DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM")
_WRAPPERS = ("KimiK25ForConditionalGeneration",)


class _Keys:
    """Reads keys of one config, naming the file and key when one is missing or wrong."""

    def __init__(self, cfg: dict, where: str):
        self.cfg, self.where = cfg, where

    def req(self, key: str, *alts: str) -> int:
        for k in (key, *alts):
            v = self.cfg.get(k)
            if v is not None:
                if not isinstance(v, int) or isinstance(v, bool):
                    raise InputError(f"{self.where}: {k}: must be an integer (got {v!r})")
                return v
        raise InputError(f"{self.where}: {key}: missing (required for "
                         f"{self.cfg.get('architectures', ['?'])[0]})")

    def opt(self, key: str, default=0, *alts: str):
        return next((self.cfg[k] for k in (key, *alts) if self.cfg.get(k) is not None),
                    default)


def _common(k: _Keys) -> dict:
    heads = k.req("num_attention_heads")
    hidden = k.req("hidden_size")
    if heads <= 0:  # the default head_dim divides by it
        raise InputError(f"{k.where}: num_attention_heads: must be > 0 (got {heads})")
    head_dim = k.opt("head_dim", None)
    return dict(num_layers=k.req("num_hidden_layers"), hidden_size=hidden,
                num_attention_heads=heads, num_kv_heads=k.opt("num_key_value_heads", heads),
                head_dim=hidden // heads if head_dim is None else head_dim,
                vocab_size=k.req("vocab_size"),
                intermediate_size=k.req("intermediate_size"),
                max_position_embeddings=k.req("max_position_embeddings"),
                tie_word_embeddings=bool(k.opt("tie_word_embeddings", False)),
                mtp_layers=k.opt("num_nextn_predict_layers", 0, "num_mtp_modules"))


def _window(k: _Keys, layers: int) -> dict:
    """sliding_window over every layer (Mistral), or the layer_types' sliding ones (gpt-oss);
    Qwen2/Qwen3 configs carry a window that applies only with use_sliding_window."""
    window = k.opt("sliding_window", 0)
    if not window or k.cfg.get("use_sliding_window") is False:
        return {}
    types = k.cfg.get("layer_types")
    sliding = sum(t == "sliding_attention" for t in types) if types else layers
    return {"sliding_window": window, "num_sliding_layers": sliding} if sliding else {}


def _moe(k: _Keys, experts: str, inter: str) -> dict:
    return dict(num_experts=k.req(experts), moe_intermediate_size=k.req(inter),
                num_experts_per_tok=k.req("num_experts_per_tok", "experts_per_token"))


def _qwen_moe(k: _Keys) -> dict:
    if k.opt("decoder_sparse_step", 1) != 1:
        raise InputError(f"{k.where}: decoder_sparse_step: {k.cfg['decoder_sparse_step']} "
                         "(only 1, every layer MoE, is read)")
    dense = list(k.opt("mlp_only_layers", []))
    if dense != list(range(len(dense))):
        raise InputError(f"{k.where}: mlp_only_layers: only leading dense layers are read "
                         f"(got {dense[:8]})")
    return dict(**_moe(k, "num_experts", "moe_intermediate_size"), first_dense_layers=len(dense),
                shared_expert_intermediate_size=k.opt("shared_expert_intermediate_size", 0))


def _deepseek(k: _Keys) -> dict:
    if k.opt("moe_layer_freq", 1) != 1:
        raise InputError(f"{k.where}: moe_layer_freq: {k.cfg['moe_layer_freq']} (only 1 read)")
    mla = dict(kv_lora_rank=k.req("kv_lora_rank"), q_lora_rank=k.opt("q_lora_rank", 0),
               qk_rope_head_dim=k.req("qk_rope_head_dim"),
               qk_nope_head_dim=k.req("qk_nope_head_dim"), v_head_dim=k.req("v_head_dim"))
    return dict(**mla, **_moe(k, "n_routed_experts", "moe_intermediate_size"),
                num_shared_experts=k.opt("n_shared_experts", 0),
                first_dense_layers=k.opt("first_k_dense_replace", 0),
                head_dim=mla["qk_nope_head_dim"] + mla["qk_rope_head_dim"])


#: architecture -> the fields it adds to _common (a function of the keys)
ARCHITECTURES = {
    "LlamaForCausalLM": lambda k: dict(qkv_bias=bool(k.opt("attention_bias", False))),
    "MistralForCausalLM": lambda k: {},
    "Qwen2ForCausalLM": lambda k: dict(qkv_bias=True),
    "Qwen3ForCausalLM": lambda k: dict(qk_norm=True),
    "Qwen3MoeForCausalLM": lambda k: dict(qk_norm=True, **_qwen_moe(k)),
    "Qwen2MoeForCausalLM": lambda k: dict(qkv_bias=True, **_qwen_moe(k)),
    "MixtralForCausalLM": lambda k: _moe(k, "num_local_experts", "intermediate_size"),
    **{a: _deepseek for a in _DEEPSEEK},
    "GptOssForCausalLM": lambda k: dict(qkv_bias=bool(k.opt("attention_bias", False)),
                                        **_moe(k, "num_local_experts", "intermediate_size")),
    # the q/k norm spans all heads (qk_norm_type per_layer; vLLM 0.32's MiniMaxM2Attention
    # builds MiniMaxText01RMSNormTP whatever the config says)
    "MiniMaxM2ForCausalLM": lambda k: dict(
        qk_norm=bool(k.opt("use_qk_norm", False)),
        qk_norm_layerwise=bool(k.opt("use_qk_norm", False)),
        **_moe(k, "num_local_experts", "intermediate_size")),
}


def read_json(path: Path, what: str = "config.json") -> dict:
    """The JSON mapping in ``path``; InputError (one line) when it cannot be one."""
    raw = read_bytes(path, what, MAX_CONFIG_BYTES)  # a regular file only (a FIFO would block)
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InputError(f"{path.name}: not JSON ({str(e).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise InputError(f"{path.name}: a {what} is a JSON object")
    return data


def spec_fields(cfg: dict, where: str, hf_quant: dict | None = None) -> dict:
    """ModelSpec fields (all but name and source) of the config mapping ``cfg``."""
    arch = (cfg.get("architectures") or [None])[0]
    if arch in _WRAPPERS and isinstance(cfg.get("text_config"), dict):
        text = cfg["text_config"]
        if "quantization_config" not in text and "quantization_config" in cfg:
            # nvidia/Kimi-K2.5-NVFP4 quantizes the wrapper (its language model's layers)
            text = {**text, "quantization_config": cfg["quantization_config"]}
        return spec_fields(text, where, hf_quant)
    if arch not in ARCHITECTURES:
        raise InputError(f"{where}: architectures: {arch!r} is not one servesim reads "
                         f"({', '.join(sorted(ARCHITECTURES) + list(_WRAPPERS))})")
    k = _Keys(cfg, where)
    fields = {**_common(k), **ARCHITECTURES[arch](k)}
    return {**fields, **_window(k, fields["num_layers"]), **precision(cfg, where, hf_quant)}


def default_name(path: Path) -> str:
    """``moonshotai--Kimi-K2.5_config.json`` -> ``kimi-k2.5``; ``config.json`` -> its folder."""
    stem = path.stem.removesuffix("_config")
    if stem == "config":
        stem = path.resolve().parent.name
    return stem.split("--")[-1].lower()


def import_hf_config(path: str | Path, name: str | None = None, source: str = "") -> ModelSpec:
    """The ModelSpec of the Hugging Face config.json at ``path``."""
    p = Path(path)
    cfg = read_json(p)
    sibling = p.with_name(p.name.replace("config.json", "hf_quant_config.json"))
    # beside it (ModelOpt checkpoints); anything of that name that is not a regular file is
    # refused by read_json, not skipped
    hf_quant = read_json(sibling, "hf_quant_config.json").get("quantization") \
        if sibling != p and os.path.lexists(sibling) else None
    fields = spec_fields(cfg, p.name, hf_quant)
    try:
        return ModelSpec(name=name or default_name(p), source=source or str(p), **fields)
    except ValidationError as e:
        err = e.errors()[0]
        loc = ".".join(str(x) for x in err["loc"])
        key = _CONFIG_KEYS.get(loc, loc)  # the config.json key the user can find
        got = f" (got {err['input']!r})" if len(err["loc"]) == 1 and "input" in err else ""
        raise InputError(f"{p.name}: {key + ': ' if key else ''}"
                         f"{err['msg'].removeprefix('Value error, ')}{got}") from None


# ModelSpec fields read from a config.json key of another name (the error names the key)
_CONFIG_KEYS = {"num_layers": "num_hidden_layers", "num_kv_heads": "num_key_value_heads",
                "mtp_layers": "num_nextn_predict_layers"}
