"""What one engine step runs per GPU, by layer kind: the plan ``fitted`` prices.

A dense model: every block has the attention GEMMs (QKV, O) and the gated MLP (gate+up,
down). A mixture-of-experts model (ModelSpec ``num_experts`` > 0): every block has the
attention GEMMs; its first ``first_dense_layers`` blocks have the dense MLP, the others the
router GEMM (bf16: vLLM keeps the gate unquantized), the shared experts' GEMMs (if any) and
one fused-MoE layer (sim/cost/moe.py). Sliding-window layers (gpt-oss) attend to at most
``sliding_window`` tokens. Counts are per step: ``gemms`` maps a name to (n, k, blocks,
table) with table ``dense`` (the model's linear-weight format), ``bf16`` (LM head, router).

Weight formats (the profile's GEMM and MoE table variants, sim/cost/profile/model_file.py):
``dense_format`` / ``expert_format`` name them from the model's bits and quantization.
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.config.hardware import ModelSpec
from sim.cost.profile.gemms import model_gemms


@dataclass(frozen=True)
class LayerPlan:
    gemms: dict[str, tuple[int, int, int, str]]  # name -> (n, k, blocks, table)
    moe_layers: int = 0  # blocks with a fused-MoE layer
    moe_shape: tuple[int, int, int, int] = (0, 0, 0, 0)  # hidden, inter, experts, top-k
    full_attn_layers: int = 0  # blocks attending to the whole context
    sliding_layers: int = 0  # blocks attending to the last ``window`` tokens
    window: int = 0


def _quant(model: ModelSpec) -> str:
    q = (model.quantization or "").lower()
    # block-scaled fp8 (DeepSeek, Kimi-K2, MiniMax-M2: weight_block_size 128) is vLLM's
    # --quantization fp8 with the checkpoint's block size (ModelSpec.weight_block_size)
    return q + "_block" if q == "fp8" and model.weight_block_size else q


def dense_format(model: ModelSpec) -> str:
    """The GEMM table variant of the model's linear (non-expert) weights: ``bfloat16``,
    ``fp8`` (per-tensor), ``fp8_block`` (128x128 blocks), ``nvfp4``, or the bits when no
    table kind fits (``int4``...)."""
    bits = model.dtype_bits
    q = _quant(model)
    if bits == 32:
        return "float32"
    if bits == 16:
        return "bfloat16"
    if bits == 8:
        return "fp8_block" if "block" in q else "fp8"
    if bits == 4 and ("nvfp4" in q or "modelopt_fp4" in q):
        return "nvfp4"
    return f"int{bits}" if bits < 8 else f"{bits}-bit"


def expert_format(model: ModelSpec) -> str:
    """The MoE table format of the expert weights (aiconfigurator's ``moe_dtype``)."""
    bits = model.moe_bits
    q = _quant(model)
    if bits >= 16:
        return "bfloat16"
    if bits == 8:
        return "fp8_block" if "block" in q else "fp8"
    if "mxfp4" in q:
        return "w4a16_mxfp4"
    if "nvfp4" in q or "modelopt_fp4" in q:
        return "nvfp4"
    return "int4_wo"  # weight-only int4 (compressed-tensors / AWQ / GPTQ: Marlin kernels)


def plan_layers(model: ModelSpec, tp: int) -> LayerPlan:
    """The per-step layer plan of ``model`` on one GPU of a ``tp``-way group."""
    dense = model_gemms(model, tp)
    L = model.num_layers
    window = model.sliding_window
    slide = model.num_sliding_layers if window else 0
    head = {"lm_head": (*dense["lm_head"], 1, "bf16")}
    if not model.is_moe:
        g = {n: (*dense[n], L, "dense") for n in ("qkv", "o", "gate_up", "down")}
        return LayerPlan({**g, **head}, full_attn_layers=L - slide, sliding_layers=slide,
                         window=window)
    moe_l, dense_l = model.num_moe_layers, model.num_dense_layers
    g = {f"attn_{n}": (nn, k, L, "dense") for n, nn, k in model.attn_gemms(tp)}
    if dense_l:
        g.update({f"mlp_{n}": (nn, k, dense_l, "dense") for n, nn, k in
                  model.dense_mlp_gemms(tp)})
    g.update({f"shared_{n}": (nn, k, moe_l, "dense") for n, nn, k in
              model.shared_expert_gemms(tp)})
    hidden, inter, experts, topk = model.expert_shape
    g["router"] = (experts, hidden, moe_l, "bf16")
    return LayerPlan({**g, **head}, moe_layers=moe_l, moe_shape=(hidden, inter, experts, topk),
                     full_attn_layers=L - slide, sliding_layers=slide, window=window)
