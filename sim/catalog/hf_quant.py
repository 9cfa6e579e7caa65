"""Weight precision of a Hugging Face checkpoint: ``quantization_config`` -> ModelSpec fields.

Returns ``dtype_bits`` (attention, dense MLP, shared experts), ``moe_dtype_bits`` (routed
experts) and ``quantization`` (vLLM's --quantization method) for the formats vLLM serves
the 2026 models in:

    quant_method        example                        dense  experts  vLLM method
    (none)              torch_dtype bfloat16           16     16       None
    fp8                 DeepSeek-V3, Kimi-K2, M2.5     8      8        fp8
    mxfp4               gpt-oss (attention not         16     4        mxfp4
                        converted)
    compressed-tensors  Kimi-K2.5 int4 w4a16 experts   16*    4        compressed-tensors
    modelopt NVFP4      nvidia/*-NVFP4                 4*     4        modelopt_fp4
    modelopt FP8        nvidia/*-FP8                   8*     8        modelopt
    awq, gptq           int4 checkpoints               4      4        awq, gptq

fp8's ``weight_block_size`` (128 x 128 block scales) becomes ``weight_block_size``.

KV cache: a modelopt checkpoint that names an fp8 KV cache (``kv_cache_scheme`` of 8-bit
static floats, or ``kv_cache_quant_algo: FP8``) is served with an fp8 KV cache under
vLLM's default ``--kv-cache-dtype auto`` (vLLM 0.32 ``resolve_kv_cache_dtype_string``, from
PR 29980 of 2025-12): ``kv_dtype_bytes: 1``. Only modelopt configs are resolved so; other
methods keep the activation dtype under ``auto``.
(*) the dense weights keep the checkpoint's dtype when the ignore / exclude list names the
attention (``self_attn``). NVIDIA's modelopt checkpoints keep the settings in a sibling
``hf_quant_config.json`` (its ``quantization`` section), which ``hf_config`` passes here.
"""

from __future__ import annotations

from traces.errors import InputError

_BASE = {"bfloat16": 16, "float16": 16, "float32": 32, "half": 16, "float": 32}


def _base_bits(cfg: dict) -> int:
    return _BASE.get(str(cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16"), 16)


def _keeps_attention(names) -> bool:
    return any("self_attn" in str(n) for n in names or ())


def _compressed_tensors(q: dict, base: int, where: str) -> tuple[int, int]:
    groups = q.get("config_groups") or {}
    bits = [g.get("weights", {}).get("num_bits") for g in groups.values()
            if isinstance(g, dict) and isinstance(g.get("weights"), dict)]
    if not bits or bits[0] not in (4, 8):
        raise InputError(f"{where}: quantization_config.config_groups: no weights.num_bits "
                         "of 4 or 8 found (compressed-tensors)")
    return (base if _keeps_attention(q.get("ignore")) else bits[0]), bits[0]


def _modelopt_kv_bytes(q: dict, where: str) -> int | None:
    """1 when the modelopt config ``q`` names an fp8 KV cache (vLLM 0.32
    get_kv_cache_quant_algo_string: ``kv_cache_scheme`` first, then ``kv_cache_quant_algo``);
    None when it names none."""
    algo = q.get("kv_cache_scheme") or q.get("kv_cache_quant_algo")
    if algo is None:
        return None
    if isinstance(algo, dict):
        fp8 = (algo.get("dynamic") is False and algo.get("num_bits") == 8
               and algo.get("type") == "float")
        name = "fp8" if fp8 else f"{algo.get('num_bits')}-bit {algo.get('type')}"
    else:
        name = str(algo).lower()
    if name != "fp8":
        raise InputError(f"{where}: quantization kv cache {name!r}: servesim models an fp8 "
                         "KV cache or an unquantized one (kv_cache_quant_algo FP8)")
    return 1


def _modelopt(q: dict, base: int, where: str) -> tuple[int, int, str]:
    algo = str(q.get("quant_algo", "")).upper()
    if algo not in ("NVFP4", "FP8"):
        raise InputError(f"{where}: quantization.quant_algo: {algo or 'missing'!r} is not one "
                         "servesim reads (NVFP4, FP8)")
    bits = 4 if algo == "NVFP4" else 8
    # hf_quant_config.json names them exclude_modules, a config.json's modelopt section ignore
    kept = [*(q.get("exclude_modules") or ()), *(q.get("ignore") or ())]
    dense = base if _keeps_attention(kept) else bits
    return dense, bits, "modelopt_fp4" if bits == 4 else "modelopt"


def precision(cfg: dict, where: str, hf_quant: dict | None = None) -> dict:
    """``dtype_bits``, ``moe_dtype_bits`` and ``quantization`` of the config ``cfg``
    (``hf_quant``: the ``quantization`` section of a sibling hf_quant_config.json)."""
    base = _base_bits(cfg)
    q = cfg.get("quantization_config")
    if q is None and hf_quant is not None:
        q = {"quant_method": "modelopt", **hf_quant}
        where = f"hf_quant_config.json beside {where}"  # what is wrong is in that file
    if q is None:
        return {"dtype_bits": base, "moe_dtype_bits": None, "quantization": None,
                "weight_block_size": 0}
    if not isinstance(q, dict):
        raise InputError(f"{where}: quantization_config must be a mapping")
    method = str(q.get("quant_method", "")).lower()
    if method == "fp8":
        dense, moe, name = 8, 8, "fp8"
    elif method == "mxfp4":
        dense, moe, name = base, 4, "mxfp4"
    elif method == "compressed-tensors":
        (dense, moe), name = _compressed_tensors(q, base, where), "compressed-tensors"
    elif method == "modelopt":
        dense, moe, name = _modelopt(q, base, where)
    elif method in ("awq", "gptq"):
        bits = q.get("bits", q.get("w_bit", 4))
        if bits not in (4, 8):
            raise InputError(f"{where}: quantization_config.bits: {bits!r} (4 or 8 read)")
        dense, moe, name = bits, bits, method
    else:
        raise InputError(f"{where}: quantization_config.quant_method: {method or 'missing'!r} "
                         "is not one servesim reads (fp8, mxfp4, compressed-tensors, modelopt, "
                         "awq, gptq)")
    block = q.get("weight_block_size") if name == "fp8" else None
    out = {"dtype_bits": dense, "moe_dtype_bits": None if moe == dense else moe,
           "quantization": name, "weight_block_size": int(block[0]) if block else 0}
    kv = _modelopt_kv_bytes(q, where) if method == "modelopt" else None
    return out | ({"kv_dtype_bytes": kv, "checkpoint_kv_fp8": True} if kv else {})
